//! The AVX-512 path of Conv: `Y[M x P] = W[M x K] * col[K x P]` computed in 6 x 64 register
//! tiles (6 output channels x 64 output positions, vectors along positions so stores land
//! straight in NCHW rows).
//!
//! Why not the `gemm` crate here: measured on the 2-core Xeon, it reaches ~140 GFLOP/s per core
//! on ResNet shapes and needs a separate im2col pass before its own packing. This path packs
//! im2col directly into the 64-wide panels the microkernel reads, streams the weights unpacked
//! (6 rows broadcast per k), starts the accumulators at the bias and finishes the fused add and
//! activation while the tile is still in L1.

use super::gemm_util::{threads, with_scratch, SendPtr};
use super::im2col::{im2col, Geom};
use super::kernel_util::epilogue;
use dynaspa_runtime::graph::Activation;
use rayon::prelude::*;
use std::arch::x86_64::*;

/// Output channels per register tile.
const MR: usize = 6;
/// Output positions per register tile and per packed panel (4 vectors of 16).
const NR: usize = 64;
/// Longest K block: 128 rows of a panel are 32 KiB, inside the 48 KiB L1.
const KC_MAX: usize = 128;
const ZEROS: [f32; MR] = [0.0; MR];

pub(crate) fn available() -> bool {
    is_x86_feature_detected!("avx512f")
}

/// One Conv call, already validated: shapes, and the operands of the fused epilogue.
pub(crate) struct Job<'a> {
    pub n: usize,
    pub c: usize,
    pub m: usize,
    pub groups: usize,
    pub geom: &'a Geom,
    pub x: &'a [f32],
    pub w: &'a [f32],
    pub bias: Option<&'a [f32]>,
    pub add: Option<&'a [f32]>,
    pub act: Option<Activation>,
}

/// Computes all of `y` (`n * m * out_len` elements, every one written).
///
/// # Safety
/// `y` must be valid for writes of that many elements and not accessed elsewhere meanwhile;
/// `available()` must be true.
pub(crate) unsafe fn conv(j: &Job, y: SendPtr) {
    let g = j.geom;
    let p_n = g.out_len();
    let mg = j.m / j.groups;
    let units = j.n * j.groups * p_n.div_ceil(NR);
    // Few panels (7x7 maps): split output channels too, each task packing its own panel copy.
    let m_blocks = threads().div_ceil(units).min(mg.div_ceil(4 * MR)).max(1);
    let mb = mg.div_ceil(m_blocks).next_multiple_of(MR);
    let m_blocks = mg.div_ceil(mb);
    (0..units * m_blocks).into_par_iter().for_each(|task| {
        let (unit, mi) = (task / m_blocks, task % m_blocks);
        // SAFETY: units and row blocks partition y; each task writes only its own.
        unsafe { panel(j, y, unit, mi * mb, ((mi + 1) * mb).min(mg)) };
    });
}

/// Output channels `m0..m1` (within the group) of one 64-column panel of one (image, group).
unsafe fn panel(j: &Job, y: SendPtr, unit: usize, m0: usize, m1: usize) {
    let g = j.geom;
    let (p_n, img) = (g.out_len(), g.image_len());
    let panels = p_n.div_ceil(NR);
    let (job, pi) = (unit / panels, unit % panels);
    let (n, gi) = (job / j.groups, job % j.groups);
    let (cg, mg) = (j.c / j.groups, j.m / j.groups);
    let kdim = cg * g.kernel_len();
    let (p0, p1) = (pi * NR, ((pi + 1) * NR).min(p_n));
    let xg = &j.x[(n * j.c + gi * cg) * img..][..cg * img];
    // K in blocks whose slice of the panel (KC x 64 floats) stays in L1 across all row tiles.
    let kc = kdim.div_ceil(kdim.div_ceil(KC_MAX).max(1)).max(1);
    let run = |b: &[f32], ldb: usize| {
        for k0 in (0..kdim.max(1)).step_by(kc) {
            let k1 = (k0 + kc).min(kdim);
            for mt in (m0..m1).step_by(MR) {
                let rows = MR.min(m1 - mt);
                let m = gi * mg + mt;
                let at = (n * j.m + m) * p_n + p0;
                let bias = if k0 == 0 { Some(j.bias.map_or(&ZEROS[..rows], |b| &b[m..m + rows])) } else { None };
                // Weights are read once per panel and come cold from memory in a network run;
                // the tile ahead pulls in the next tile's (or the next K block's) rows.
                let next = if mt + MR < m1 { (m + MR) * kdim + k0 } else { (gi * mg + m0) * kdim + k1 % kdim.max(1) };
                let pf = j.w.as_ptr().wrapping_add(next);
                // SAFETY: bounds follow from the validated shapes; rows m..m+rows, columns
                // p0..p1 of image n belong to this task.
                unsafe {
                    tile(rows, p1 - p0, k1 - k0, &j.w[m * kdim + k0..], kdim, &b[k0 * ldb..], ldb, bias, y.get().add(at), p_n, pf)
                };
                if k1 == kdim && (j.add.is_some() || j.act.is_some()) {
                    for r in 0..rows {
                        let at = at + r * p_n;
                        let row = unsafe { std::slice::from_raw_parts_mut(y.get().add(at), p1 - p0) };
                        epilogue(row, 0.0, j.add.map(|a| &a[at..at + row.len()]), j.act);
                    }
                }
            }
        }
    };
    if g.is_identity() {
        run(&xg[p0..], img);
    } else {
        with_scratch(kdim * NR, |panel| {
            im2col(xg, cg, g, p0, p1, panel, NR);
            run(panel, NR);
        });
    }
}

/// Dispatches the register tile for `rows` (1..=6) x `cols` (1..=64).
///
/// `w` holds `rows` weight rows of length `k` at stride `ldw`; `b` holds `k` rows of at least
/// `cols` values at stride `ldb`; `y` receives `rows` rows of `cols` at stride `ldy`, starting
/// from `bias` (one per row) or, when that is `None`, adding to what `y` holds.
#[allow(clippy::too_many_arguments)]
unsafe fn tile(
    rows: usize,
    cols: usize,
    k: usize,
    w: &[f32],
    ldw: usize,
    b: &[f32],
    ldb: usize,
    bias: Option<&[f32]>,
    y: *mut f32,
    ldy: usize,
    pf: *const f32,
) {
    debug_assert!((1..=MR).contains(&rows) && (1..=NR).contains(&cols));
    assert!(k == 0 || ((rows - 1) * ldw + k <= w.len() && (k - 1) * ldb + cols <= b.len()), "conv tile out of bounds");
    let mut bv = [0.0f32; MR];
    let init = bias.is_some();
    if let Some(bias) = bias {
        bv[..rows].copy_from_slice(&bias[..rows]);
    }
    let vecs = cols.div_ceil(16);
    let tail = cols - 16 * (vecs - 1);
    let mask: __mmask16 = if tail == 16 { 0xffff } else { (1u16 << tail) - 1 };
    let (w, b) = (w.as_ptr(), b.as_ptr());
    macro_rules! go {
        ($($r:literal)*) => {
            match (rows, vecs) {
                $(
                    ($r, 1) => kernel::<$r, 1>(k, w, ldw, b, ldb, mask, init, &bv, y, ldy, pf),
                    ($r, 2) => kernel::<$r, 2>(k, w, ldw, b, ldb, mask, init, &bv, y, ldy, pf),
                    ($r, 3) => kernel::<$r, 3>(k, w, ldw, b, ldb, mask, init, &bv, y, ldy, pf),
                    ($r, 4) => kernel::<$r, 4>(k, w, ldw, b, ldb, mask, init, &bv, y, ldy, pf),
                )*
                _ => unreachable!(),
            }
        };
    }
    go!(1 2 3 4 5 6);
}

/// `y[r][..] = (init ? bias[r] : y[r][..]) + sum_k w[r][k] * b[k][..]` for an `R` x `16 V`
/// tile; the last vector of each row is loaded and stored under `mask`. Meanwhile the 6 rows
/// at `pf` (stride `ldw`, `k` long) are prefetched, one cache line per 16 steps.
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel<const R: usize, const V: usize>(
    k: usize,
    w: *const f32,
    ldw: usize,
    b: *const f32,
    ldb: usize,
    mask: __mmask16,
    init: bool,
    bias: &[f32; MR],
    y: *mut f32,
    ldy: usize,
    pf: *const f32,
) {
    let mut acc = [[_mm512_setzero_ps(); V]; R];
    for r in 0..R {
        let bv = _mm512_set1_ps(bias[r]);
        let yr = y.add(r * ldy);
        for v in 0..V {
            acc[r][v] = match (init, v + 1 == V) {
                (true, _) => bv,
                (false, false) => _mm512_loadu_ps(yr.add(16 * v)),
                (false, true) => _mm512_maskz_loadu_ps(mask, yr.add(16 * v)),
            };
        }
    }
    let mut wr = [w; R];
    for (r, p) in wr.iter_mut().enumerate() {
        *p = w.add(r * ldw);
    }
    let mut bp = b;
    let mut k0 = 0;
    while k0 < k {
        for r in 0..MR {
            // Prefetches never fault, so addresses past the weights are harmless.
            _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(r * ldw + k0) as *const i8);
        }
        let k1 = (k0 + 16).min(k);
        for kk in k0..k1 {
            let mut x = [_mm512_setzero_ps(); V];
            for v in 0..V {
                x[v] = if v + 1 == V { _mm512_maskz_loadu_ps(mask, bp.add(16 * v)) } else { _mm512_loadu_ps(bp.add(16 * v)) };
            }
            for r in 0..R {
                let a = _mm512_set1_ps(*wr[r].add(kk));
                for v in 0..V {
                    acc[r][v] = _mm512_fmadd_ps(a, x[v], acc[r][v]);
                }
            }
            bp = bp.add(ldb);
        }
        k0 = k1;
    }
    for r in 0..R {
        let yr = y.add(r * ldy);
        for v in 0..V {
            if v + 1 == V {
                _mm512_mask_storeu_ps(yr.add(16 * v), mask, acc[r][v]);
            } else {
                _mm512_storeu_ps(yr.add(16 * v), acc[r][v]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::test_util::*;

    /// Register-tile throughput on cache-resident operands (the ceiling for the conv path).
    #[test]
    #[ignore]
    fn bench_tile() {
        if !available() {
            return;
        }
        let mut rng = Rng::new(1);
        for k in [64usize, 128, 256, 576] {
            let w = rng.vec(MR * k);
            let b = rng.vec(k * NR);
            let mut y = vec![0.0f32; MR * NR];
            let reps = 2000;
            let dt = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap().install(|| {
                time_it(5, || {
                    for _ in 0..reps {
                        unsafe { tile(MR, NR, k, &w, k, &b, NR, Some(&ZEROS), y.as_mut_ptr(), NR, w.as_ptr()) };
                    }
                })
            });
            println!("tile 6x64 k={k}: {:.1} GFLOP/s", 2.0 * (MR * NR * k * reps) as f64 / dt / 1e9);
        }
        // A 128-row sweep over one 128-deep panel block with weights at a conv's row stride.
        let (m, kd) = (126usize, 1152usize);
        let w = rng.vec(m * kd);
        let b = rng.vec(128 * NR);
        let mut y = vec![0.0f32; m * NR];
        let reps = 200;
        let dt = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap().install(|| {
            time_it(5, || {
                for rep in 0..reps {
                    let k0 = (rep % 9) * 128;
                    for mt in (0..m).step_by(MR) {
                        unsafe { tile(MR, NR, 128, &w[mt * kd + k0..], kd, &b, NR, None, y.as_mut_ptr().add(mt * NR), NR, w.as_ptr()) };
                    }
                }
            })
        });
        println!("sweep 126 rows, k-block 128 of 1152: {:.1} GFLOP/s", 2.0 * (m * NR * 128 * reps) as f64 / dt / 1e9);
    }
}
