//! The AVX-512 path of Conv: `Y[M x P] = W[M x K] * col[K x P]` computed in 6 x 64 register
//! tiles (6 output channels x 64 output positions, vectors along positions so stores land
//! straight in NCHW rows).
//!
//! Each task lowers one 64-column panel of im2col straight into the layout the tile reads
//! (masked AVX-512 loads, `conv_pack`), streams the weights unpacked (6 rows broadcast per k,
//! the next tile's rows prefetched: in a network run they come cold from memory), starts the
//! accumulators at the bias and applies the fused add and activation before the tile leaves L1.
//! On ResNet-18's 56x56 and 28x28 layers this beats im2col + the `gemm` crate by 5-15% (no
//! separate im2col pass and second packing); `conv::prefer_simd` decides where it runs.

use super::conv_pack::{pack, PanelPlan};
use super::gemm_util::{with_scratch, with_scratch2, SendPtr};
use super::im2col::{im2col, split_rows, Geom};
use super::kernel_util::epilogue;
use dynaspa_runtime::graph::Activation;
use rayon::prelude::*;
use std::arch::x86_64::*;

/// Output channels per register tile.
pub(crate) const MR: usize = 6;
/// Output positions per register tile and per packed panel (4 vectors of 16).
pub(crate) const NR: usize = 64;
/// Longest K block: 128 rows of a panel are 32 KiB, inside the 48 KiB L1.
pub(crate) const KC_MAX: usize = 128;
const ZEROS: [f32; MR] = [0.0; MR];

pub(crate) fn available() -> bool {
    is_x86_feature_detected!("avx512f")
}

/// One Conv call, already validated: shapes, and the operands of the fused epilogue.
#[derive(Clone, Copy)]
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
    /// `x` with rows phase-split for a strided window (set by `conv`).
    pub split: Option<&'a [f32]>,
}

impl Job<'_> {
    fn cg(&self) -> usize {
        self.c / self.groups
    }
    fn mg(&self) -> usize {
        self.m / self.groups
    }
    fn kdim(&self) -> usize {
        self.cg() * self.geom.kernel_len()
    }
    fn panels(&self) -> usize {
        self.geom.out_len().div_ceil(NR)
    }
    /// The input channels of one (image, group) job, phase-split or not.
    fn xg(&self, job: usize, split: bool) -> &[f32] {
        let img = self.geom.image_len();
        let (n, gi) = (job / self.groups, job % self.groups);
        let x = if split { self.split.unwrap_or(self.x) } else { self.x };
        &x[(n * self.c + gi * self.cg()) * img..][..self.cg() * img]
    }
    /// Packs panel `pi` of `job` into `buf` (`kdim` rows of NR): im2col at row stride NR.
    fn pack(&self, job: usize, pi: usize, buf: &mut [f32]) {
        let g = self.geom;
        let (p_n, img, nch) = (g.out_len(), g.image_len(), self.cg());
        let split = self.split.is_some();
        let (p0, p1) = (pi * NR, ((pi + 1) * NR).min(p_n));
        let x = self.xg(job, split);
        // The masked-load plan costs about as much as lowering a few channels with it, so
        // inputs with few channels (RGB stems) keep the run-copying lowering.
        if nch >= 8 && (split || g.stride[2] == 1) {
            let plan = PanelPlan::new(g, p0, p1, split);
            // SAFETY: AVX-512 is present on this path; the plan was built for this geometry.
            unsafe { pack(x, img, nch, &plan, buf) };
        } else {
            im2col(x, nch, g, p0, p1, buf, NR, split);
        }
    }
}

/// Computes all of `y` (`n * m * out_len` elements, every one written).
///
/// # Safety
/// `y` must be valid for writes of that many elements and not accessed elsewhere meanwhile;
/// `available()` must be true.
pub(crate) unsafe fn conv(j: &Job, y: SendPtr) {
    let (g, w) = (j.geom, j.geom.image[2]);
    if g.stride[2] == 1 || g.kernel[2] == 1 || w == 0 {
        return run(j, y);
    }
    // Strided windows wider than 1 (stems, downsampling 3x3): split each input row into its
    // column phases once, so lowering copies contiguous runs instead of gathering every s-th
    // value kw times. A 1-wide window reads each value at most once; gathering is cheaper.
    with_scratch2(j.x.len(), |xs| {
        xs.par_chunks_mut(w * 64).zip(j.x.par_chunks(w * 64)).for_each(|(d, s)| split_rows(s, w, g.stride[2], d));
        run(&Job { split: Some(xs), ..*j }, y)
    })
}

/// One task per 64-column panel, each packing its panel while it is hot. `conv::prefer_simd`
/// only routes convs here that have enough panels to keep both cores busy; with few panels the
/// `gemm` crate path (weights packed once, rows split) measured faster than any split of ours.
unsafe fn run(j: &Job, y: SendPtr) {
    let panels = j.panels();
    // Every task is its own rayon job (`with_max_len(1)`): on a shared 2-core box a worker can
    // be preempted mid-region, and the other must be able to take all it has not started.
    (0..j.n * j.groups * panels).into_par_iter().with_max_len(1).for_each(|u| {
        // SAFETY: panels partition y; each task writes only its own.
        with_scratch(j.kdim() * NR, |buf| unsafe { own_panel(j, y, u / panels, u % panels, buf) });
    });
}

unsafe fn own_panel(j: &Job, y: SendPtr, job: usize, pi: usize, buf: &mut [f32]) {
    if j.geom.is_identity() {
        rows(j, y, job, pi, 0, j.mg(), None);
    } else {
        j.pack(job, pi, buf);
        rows(j, y, job, pi, 0, j.mg(), Some(buf));
    }
}

/// Output channels `m0..m1` (within the group) of panel `pi` of `job`, reading the packed
/// panel `b` (`None`: a 1x1 stride-1 conv, whose input rows already are the panel).
unsafe fn rows(j: &Job, y: SendPtr, job: usize, pi: usize, m0: usize, m1: usize, b: Option<&[f32]>) {
    let g = j.geom;
    let p_n = g.out_len();
    let (n, gi, mg, kdim) = (job / j.groups, job % j.groups, j.mg(), j.kdim());
    let (p0, p1) = (pi * NR, ((pi + 1) * NR).min(p_n));
    let (b, ldb) = match b {
        Some(b) => (b, NR),
        None => (&j.xg(job, false)[p0..], g.image_len()),
    };
    let fin = Finish::new(j.act);
    // K in blocks whose slice of the panel (KC x 64 floats) stays in L1 across all row tiles.
    let kc = kdim.div_ceil(kdim.div_ceil(KC_MAX).max(1)).max(1);
    for k0 in (0..kdim.max(1)).step_by(kc) {
        let k1 = (k0 + kc).min(kdim);
        let last = k1 == kdim;
        for mt in (m0..m1).step_by(MR) {
            let rows = MR.min(m1 - mt);
            let m = gi * mg + mt;
            let at = (n * j.m + m) * p_n + p0;
            let bias = (k0 == 0).then(|| j.bias.map_or(&ZEROS[..rows], |b| &b[m..m + rows]));
            let next = if mt + MR < m1 { (m + MR) * kdim + k0 } else { (gi * mg + m0) * kdim + k1 % kdim.max(1) };
            let add = match (last, j.add) {
                (true, Some(a)) => Some(&a[at..]),
                _ => None,
            };
            let t = Tile {
                rows,
                cols: p1 - p0,
                k: k1 - k0,
                w: &j.w[m * kdim + k0..],
                ldw: kdim,
                b: &b[k0 * ldb..],
                ldb,
                bias,
                add,
                fin: if last { fin } else { Finish::None },
                y: y.get().add(at),
                ldy: p_n,
                prefetch: j.w.as_ptr().wrapping_add(next),
            };
            t.run();
            if last && fin == Finish::Scalar {
                for r in 0..rows {
                    let row = std::slice::from_raw_parts_mut(y.get().add(at + r * p_n), p1 - p0);
                    epilogue(row, 0.0, None, j.act);
                }
            }
        }
    }
}

/// What the register tile does after the last K block, before its store.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum Finish {
    None,
    Relu,
    Leaky(f32),
    Clip(f32, f32),
    HardSigmoid(f32, f32),
    HardSwish,
    /// Activations with exp/tanh: stored first, then finished by the scalar epilogue.
    Scalar,
}

impl Finish {
    fn new(act: Option<Activation>) -> Finish {
        match act {
            None => Finish::None,
            Some(Activation::Relu) => Finish::Relu,
            Some(Activation::LeakyRelu(a)) => Finish::Leaky(a),
            Some(Activation::Clip(lo, hi)) => Finish::Clip(lo, hi),
            Some(Activation::HardSigmoid(a, b)) => Finish::HardSigmoid(a, b),
            Some(Activation::HardSwish) => Finish::HardSwish,
            Some(Activation::Sigmoid | Activation::Tanh) => Finish::Scalar,
        }
    }
}

/// One register tile: `rows` (1..=6) weight rows of length `k` at stride `ldw`, `k` panel rows
/// of at least `cols` (1..=64) values at stride `ldb`, output rows at stride `ldy`. Starts from
/// `bias` (one per row) or, when `None`, adds to what `y` holds; `add` (same layout as `y`) is
/// added before `fin`. `prefetch` points at the weight rows the next tile will read.
pub(crate) struct Tile<'a> {
    pub rows: usize,
    pub cols: usize,
    pub k: usize,
    pub w: &'a [f32],
    pub ldw: usize,
    pub b: &'a [f32],
    pub ldb: usize,
    pub bias: Option<&'a [f32]>,
    pub add: Option<&'a [f32]>,
    pub fin: Finish,
    pub y: *mut f32,
    pub ldy: usize,
    pub prefetch: *const f32,
}

impl Tile<'_> {
    /// # Safety
    /// `y` must be writable for the tile; AVX-512 must be available.
    pub unsafe fn run(&self) {
        let (rows, cols, k) = (self.rows, self.cols, self.k);
        debug_assert!((1..=MR).contains(&rows) && (1..=NR).contains(&cols));
        // The kernel reads through raw pointers; these bounds are what keeps that sound.
        assert!(
            k == 0 || ((rows - 1) * self.ldw + k <= self.w.len() && (k - 1) * self.ldb + cols <= self.b.len()),
            "conv tile out of bounds"
        );
        assert!(self.add.is_none_or(|a| (rows - 1) * self.ldy + cols <= a.len()), "conv tile addend out of bounds");
        let mut bias = [0.0f32; MR];
        if let Some(b) = self.bias {
            bias[..rows].copy_from_slice(&b[..rows]);
        }
        let vecs = cols.div_ceil(16);
        let tail = cols - 16 * (vecs - 1);
        let mask: __mmask16 = if tail == 16 { 0xffff } else { (1u16 << tail) - 1 };
        let args = Args {
            k,
            w: self.w.as_ptr(),
            ldw: self.ldw,
            b: self.b.as_ptr(),
            ldb: self.ldb,
            mask,
            init: self.bias.is_some(),
            bias,
            add: self.add.map_or(std::ptr::null(), |a| a.as_ptr()),
            fin: self.fin,
            y: self.y,
            ldy: self.ldy,
            pf: self.prefetch,
        };
        macro_rules! go {
            ($($r:literal)*) => {
                match (rows, vecs) {
                    $(
                        ($r, 1) => kernel::<$r, 1>(&args),
                        ($r, 2) => kernel::<$r, 2>(&args),
                        ($r, 3) => kernel::<$r, 3>(&args),
                        ($r, 4) => kernel::<$r, 4>(&args),
                    )*
                    _ => unreachable!(),
                }
            };
        }
        go!(1 2 3 4 5 6);
    }
}

/// The checked `Tile`, as raw pointers for the kernel.
struct Args {
    k: usize,
    w: *const f32,
    ldw: usize,
    b: *const f32,
    ldb: usize,
    mask: __mmask16,
    init: bool,
    bias: [f32; MR],
    add: *const f32,
    fin: Finish,
    y: *mut f32,
    ldy: usize,
    pf: *const f32,
}

/// `y[r][..] = fin((init ? bias[r] : y[r][..]) + sum_k w[r][k] * b[k][..] (+ add[r][..]))` for
/// an `R` x `16 V` tile; the last vector of each row is loaded and stored under `mask`.
#[target_feature(enable = "avx512f")]
#[allow(clippy::needless_range_loop)] // constant indices are what keep the tile in registers
unsafe fn kernel<const R: usize, const V: usize>(a: &Args) {
    // Plain locals: the accumulators only stay in registers when nothing in the loop reads
    // through `a`.
    let (k, ldw, ldb, mask, pf) = (a.k, a.ldw, a.ldb, a.mask, a.pf);
    let mut acc = [[_mm512_setzero_ps(); V]; R];
    for r in 0..R {
        let bv = _mm512_set1_ps(a.bias[r]);
        let yr = a.y.add(r * a.ldy);
        for v in 0..V {
            acc[r][v] = if a.init {
                bv
            } else if v + 1 == V {
                _mm512_maskz_loadu_ps(mask, yr.add(16 * v))
            } else {
                _mm512_loadu_ps(yr.add(16 * v))
            };
        }
    }
    let mut wr = [a.w; R];
    for (r, p) in wr.iter_mut().enumerate() {
        *p = a.w.add(r * ldw);
    }
    let mut bp = a.b;
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
                let w = _mm512_set1_ps(*wr[r].add(kk));
                for v in 0..V {
                    acc[r][v] = _mm512_fmadd_ps(w, x[v], acc[r][v]);
                }
            }
            bp = bp.add(ldb);
        }
        k0 = k1;
    }
    for r in 0..R {
        let yr = a.y.add(r * a.ldy);
        for v in 0..V {
            if v + 1 == V {
                _mm512_mask_storeu_ps(yr.add(16 * v), mask, acc[r][v]);
            } else {
                _mm512_storeu_ps(yr.add(16 * v), acc[r][v]);
            }
        }
    }
    if !a.add.is_null() || a.fin != Finish::None {
        finish::<R, V>(a);
    }
}

/// Adds `add` to the stored tile and applies `fin`, while the tile is in L1. Out of line and
/// after the store: fused into the kernel, its constants were hoisted above the k loop and
/// pushed the 24 accumulators out of registers.
#[inline(never)]
#[target_feature(enable = "avx512f")]
unsafe fn finish<const R: usize, const V: usize>(a: &Args) {
    let load = |p: *const f32, v: usize| if v + 1 == V { _mm512_maskz_loadu_ps(a.mask, p) } else { _mm512_loadu_ps(p) };
    let zero = _mm512_setzero_ps();
    for r in 0..R {
        let yr = a.y.add(r * a.ldy);
        for v in 0..V {
            let mut s = load(yr.add(16 * v), v);
            if !a.add.is_null() {
                s = _mm512_add_ps(s, load(a.add.add(r * a.ldy + 16 * v), v));
            }
            s = match a.fin {
                Finish::None | Finish::Scalar => s,
                Finish::Relu => _mm512_max_ps(s, zero),
                Finish::Leaky(al) => {
                    let neg = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(s, zero);
                    _mm512_mask_mul_ps(s, neg, s, _mm512_set1_ps(al))
                }
                Finish::Clip(lo, hi) => _mm512_min_ps(_mm512_max_ps(s, _mm512_set1_ps(lo)), _mm512_set1_ps(hi)),
                Finish::HardSigmoid(al, be) => {
                    let t = _mm512_fmadd_ps(s, _mm512_set1_ps(al), _mm512_set1_ps(be));
                    _mm512_min_ps(_mm512_max_ps(t, zero), _mm512_set1_ps(1.0))
                }
                Finish::HardSwish => {
                    let t = _mm512_fmadd_ps(s, _mm512_set1_ps(1.0 / 6.0), _mm512_set1_ps(0.5));
                    _mm512_mul_ps(s, _mm512_min_ps(_mm512_max_ps(t, zero), _mm512_set1_ps(1.0)))
                }
            };
            if v + 1 == V {
                _mm512_mask_storeu_ps(yr.add(16 * v), a.mask, s);
            } else {
                _mm512_storeu_ps(yr.add(16 * v), s);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::test_util::*;

    #[allow(clippy::too_many_arguments)]
    fn tile(rows: usize, cols: usize, k: usize, w: &[f32], ldw: usize, b: &[f32], bias: Option<&[f32]>, y: &mut [f32]) {
        let t = Tile {
            rows,
            cols,
            k,
            w,
            ldw,
            b,
            ldb: NR,
            bias,
            add: None,
            fin: Finish::None,
            y: y.as_mut_ptr(),
            ldy: NR,
            prefetch: w.as_ptr(),
        };
        unsafe { t.run() };
    }

    /// Register-tile throughput on cache-resident operands (the ceiling for the conv path).
    #[test]
    #[ignore]
    fn bench_tile() {
        if !available() {
            return;
        }
        let mut rng = Rng::new(1);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        for k in [64usize, 128, 256, 576] {
            let w = rng.vec(MR * k);
            let b = rng.vec(k * NR);
            let mut y = vec![0.0f32; MR * NR];
            let reps = 2000;
            let dt = pool.install(|| {
                time_it(5, || {
                    for _ in 0..reps {
                        tile(MR, NR, k, &w, k, &b, Some(&ZEROS), &mut y);
                    }
                })
            });
            println!("tile 6x64 k={k}: {:.1} GFLOP/s", 2.0 * (MR * NR * k * reps) as f64 / dt / 1e9);
        }
        // A 126-row sweep over one 128-deep panel block with weights at a conv's row stride.
        let (m, kd) = (126usize, 1152usize);
        let w = rng.vec(m * kd);
        let b = rng.vec(128 * NR);
        let mut y = vec![0.0f32; m * NR];
        let reps = 200;
        let dt = pool.install(|| {
            time_it(5, || {
                for rep in 0..reps {
                    let k0 = (rep % 9) * 128;
                    for mt in (0..m).step_by(MR) {
                        tile(MR, NR, 128, &w[mt * kd + k0..], kd, &b, None, &mut y[mt * NR..]);
                    }
                }
            })
        });
        println!("sweep 126 rows, k-block 128 of 1152: {:.1} GFLOP/s", 2.0 * (m * NR * 128 * reps) as f64 / dt / 1e9);
    }
}
