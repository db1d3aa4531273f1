//! The AVX-512 register tile every sparse GEMM here runs on: `C[R x 16V] (+)= A[R x k] * B[k x 16V]`
//! with R <= 6 rows of A broadcast per k and B a 64-wide panel row per k (4 vectors), so 24
//! accumulators plus 4 panel vectors fill 28 of the 32 vector registers.
//!
//! A is packed once (weights at preparation; gathered token rows per call) into 6-row tiles,
//! k-major, so the broadcasts walk memory sequentially. K runs in blocks whose slice of B
//! (128 x 64 floats, 32 KiB) stays in L1 while every row tile of A passes over it; partial sums
//! go through C, which the caller finishes (epilogue, masked writes) after the last block.

use std::arch::x86_64::*;

/// Rows of A per register tile.
pub(crate) const MR: usize = 6;
/// Columns per panel (4 vectors of 16).
pub(crate) const NR: usize = 64;
/// Longest K block: 128 panel rows are 32 KiB, inside the 48 KiB L1.
const KC_MAX: usize = 128;

pub(crate) fn available() -> bool {
    is_x86_feature_detected!("avx512f")
}

/// Length of `rows` x `kdim` packed into 6-row tiles.
pub(crate) fn packed_len(rows: usize, kdim: usize) -> usize {
    rows.div_ceil(MR) * MR * kdim
}

/// Packs `rows` rows of length `kdim` (row `i` at `src[i * ld..]`) into 6-row tiles: tile `t` at
/// `t * MR * kdim`, element (r, k) at `k * MR + r`; rows past `rows` are zero.
pub(crate) fn pack_rows(src: &[f32], rows: usize, kdim: usize, ld: usize, dst: &mut [f32]) {
    for (t, tile) in dst.chunks_exact_mut(MR * kdim.max(1)).take(rows.div_ceil(MR)).enumerate() {
        for r in 0..MR {
            let i = t * MR + r;
            if i < rows {
                let row = &src[i * ld..i * ld + kdim];
                for (k, &v) in row.iter().enumerate() {
                    tile[k * MR + r] = v;
                }
            } else {
                for k in 0..kdim {
                    tile[k * MR + r] = 0.0;
                }
            }
        }
    }
}

/// Packs a row-major `kdim` x `n` matrix into 64-wide column panels (`[panel][k][64]`, zero padded).
pub(crate) fn pack_panels(src: &[f32], kdim: usize, n: usize, dst: &mut [f32]) {
    if kdim == 0 {
        return;
    }
    for (p, panel) in dst.chunks_exact_mut(kdim * NR).enumerate().take(n.div_ceil(NR)) {
        let (n0, n1) = (p * NR, ((p + 1) * NR).min(n));
        for k in 0..kdim {
            let row = &mut panel[k * NR..(k + 1) * NR];
            row[..n1 - n0].copy_from_slice(&src[k * n + n0..k * n + n1]);
            row[n1 - n0..].fill(0.0);
        }
    }
}

/// One panel product: row tiles `t0..t1` of the packed A (`rows` rows in all) times the
/// `kdim` x 64 panel `b`, first `cols` columns, into `c` (`(t1 - t0) * MR` rows of 64; columns
/// past `cols` up to the next multiple of 16 get values nobody reads).
pub(crate) struct PanelGemm<'a> {
    pub a: &'a [f32],
    pub kdim: usize,
    pub rows: usize,
    pub t0: usize,
    pub t1: usize,
    pub b: &'a [f32],
    pub cols: usize,
    /// Start each row at its bias (indexed like A's rows) instead of 0.
    pub bias: Option<&'a [f32]>,
}

impl PanelGemm<'_> {
    /// # Safety
    /// AVX-512F must be available.
    pub unsafe fn run(&self, c: &mut [f32]) {
        let (kdim, t0, t1) = (self.kdim, self.t0, self.t1);
        if t0 >= t1 || self.cols == 0 {
            return;
        }
        // The tile reads and writes through raw pointers; these bounds keep that sound.
        assert!(self.cols <= NR && self.rows > (t1 - 1) * MR, "panel gemm shape");
        assert!(self.a.len() >= t1 * MR * kdim && self.b.len() >= kdim * NR, "panel gemm operands out of bounds");
        assert!(c.len() >= (t1 - t0) * MR * NR, "panel gemm output out of bounds");
        assert!(self.bias.is_none_or(|b| b.len() >= self.rows), "panel gemm bias out of bounds");
        let vecs = self.cols.div_ceil(16);
        let nkb = kdim.div_ceil(KC_MAX).max(1);
        let kc = kdim.div_ceil(nkb);
        for kb in 0..nkb {
            let (k0, k1) = (kb * kc, ((kb + 1) * kc).min(kdim));
            let b = self.b.as_ptr().add(k0 * NR);
            for t in t0..t1 {
                let rows = MR.min(self.rows - t * MR);
                let mut bias = [0.0f32; MR];
                if let Some(bs) = self.bias {
                    bias[..rows].copy_from_slice(&bs[t * MR..t * MR + rows]);
                }
                let a = self.a.as_ptr().add(t * MR * kdim + k0 * MR);
                // The next tile's A block, or the first tile's next block: prefetched while this
                // one computes, since packed weights of a whole layer come from L3 or memory.
                let next = if t + 1 < t1 { (t + 1) * MR * kdim + k0 * MR } else { t0 * MR * kdim + k1 * MR };
                let args = Args {
                    k: k1 - k0,
                    a,
                    b,
                    c: c.as_mut_ptr().add((t - t0) * MR * NR),
                    load: kb > 0,
                    bias,
                    pf: self.a.as_ptr().wrapping_add(next),
                    // The next K block of B, a quarter per tile: for token linears B is the
                    // weights, coming from L3 once per call.
                    pf_b: self.b.as_ptr().wrapping_add(k1 * NR + ((t - t0) % 4) * (kc * NR / 4)),
                };
                macro_rules! go {
                    ($($r:literal)*) => {
                        match (rows, vecs) {
                            $(
                                ($r, 1) => tile::<$r, 1>(&args),
                                ($r, 2) => tile::<$r, 2>(&args),
                                ($r, 3) => tile::<$r, 3>(&args),
                                ($r, 4) => tile::<$r, 4>(&args),
                            )*
                            _ => unreachable!(),
                        }
                    };
                }
                go!(1 2 3 4 5 6);
            }
        }
    }
}

struct Args {
    k: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    load: bool,
    bias: [f32; MR],
    pf: *const f32,
    pf_b: *const f32,
}

#[target_feature(enable = "avx512f")]
#[allow(clippy::needless_range_loop)] // constant trip counts are what keep the tile in registers
unsafe fn tile<const R: usize, const V: usize>(g: &Args) {
    // Copied out of `g` so nothing in the loop reads through a pointer the stores could alias.
    let (k, mut ap, mut bp, c, pf, mut pfb) = (g.k, g.a, g.b, g.c, g.pf, g.pf_b);
    let mut acc = [[_mm512_setzero_ps(); V]; R];
    for r in 0..R {
        for v in 0..V {
            acc[r][v] = if g.load { _mm512_loadu_ps(c.add(r * NR + 16 * v)) } else { _mm512_set1_ps(g.bias[r]) };
        }
    }
    let mut k0 = 0;
    while k0 < k {
        // 16 k steps read 16 * 6 floats of A: six cache lines of the next tile fetched per step.
        for l in 0..MR {
            _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(k0 * MR + 16 * l) as *const i8);
        }
        let k1 = (k0 + 16).min(k);
        for _ in k0..k1 {
            let mut x = [_mm512_setzero_ps(); V];
            for v in 0..V {
                x[v] = _mm512_loadu_ps(bp.add(16 * v));
            }
            for r in 0..R {
                let w = _mm512_set1_ps(*ap.add(r));
                for v in 0..V {
                    acc[r][v] = _mm512_fmadd_ps(w, x[v], acc[r][v]);
                }
            }
            _mm_prefetch::<_MM_HINT_T0>(pfb as *const i8);
            pfb = pfb.wrapping_add(16);
            ap = ap.add(MR);
            bp = bp.add(NR);
        }
        k0 = k1;
    }
    for r in 0..R {
        for v in 0..V {
            _mm512_storeu_ps(c.add(r * NR + 16 * v), acc[r][v]);
        }
    }
}

/// `C[R x 16V] (+)= A * B[k x 64]` where row `r` of A is `k` contiguous floats at `a[r]` (for the
/// NHWC conv, whose rows are runs of one input pixel's channels, read in place).
///
/// # Safety
/// AVX-512F; `a[r]` readable for `k` floats (`r < R`), `b` for `k` rows of 64, `c` for R rows
/// of 64.
#[target_feature(enable = "avx512f")]
#[allow(clippy::needless_range_loop)]
pub(crate) unsafe fn tile_rows<const R: usize, const V: usize>(k: usize, a: &[*const f32; MR], b: *const f32, c: *mut f32, load: bool) {
    let mut acc = [[_mm512_setzero_ps(); V]; R];
    if load {
        for r in 0..R {
            for v in 0..V {
                acc[r][v] = _mm512_loadu_ps(c.add(r * NR + 16 * v));
            }
        }
    }
    let mut ap = [std::ptr::null::<f32>(); R];
    ap.copy_from_slice(&a[..R]);
    let mut bp = b;
    for kk in 0..k {
        let mut x = [_mm512_setzero_ps(); V];
        for v in 0..V {
            x[v] = _mm512_loadu_ps(bp.add(16 * v));
        }
        for r in 0..R {
            let w = _mm512_set1_ps(*ap[r].add(kk));
            for v in 0..V {
                acc[r][v] = _mm512_fmadd_ps(w, x[v], acc[r][v]);
            }
        }
        bp = bp.add(NR);
    }
    for r in 0..R {
        for v in 0..V {
            _mm512_storeu_ps(c.add(r * NR + 16 * v), acc[r][v]);
        }
    }
}

/// [`tile_rows`] for run-time `rows` (1..=6) and `vecs` (1..=4).
///
/// # Safety
/// As for [`tile_rows`].
pub(crate) unsafe fn tile_rows_dyn(rows: usize, vecs: usize, k: usize, a: &[*const f32; MR], b: *const f32, c: *mut f32, load: bool) {
    macro_rules! go {
        ($($r:literal)*) => {
            match (rows, vecs) {
                $(
                    ($r, 1) => tile_rows::<$r, 1>(k, a, b, c, load),
                    ($r, 2) => tile_rows::<$r, 2>(k, a, b, c, load),
                    ($r, 3) => tile_rows::<$r, 3>(k, a, b, c, load),
                    ($r, 4) => tile_rows::<$r, 4>(k, a, b, c, load),
                )*
                _ => unreachable!(),
            }
        };
    }
    go!(1 2 3 4 5 6)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::test_util::{assert_close, Rng};

    #[test]
    fn panel_gemm_matches_naive() {
        if !available() {
            return;
        }
        let mut rng = Rng::new(41);
        for &(rows, kdim, cols) in &[(1, 1, 1), (6, 128, 64), (13, 300, 37), (7, 0, 16), (40, 129, 50), (5, 17, 3)] {
            let a = rng.vec(rows * kdim);
            let bias = rng.vec(rows);
            let mut b = rng.vec(kdim * NR);
            let mut pa = vec![f32::NAN; packed_len(rows, kdim)];
            pack_rows(&a, rows, kdim, kdim, &mut pa);
            // Columns past `cols` hold junk the result must not depend on.
            for k in 0..kdim {
                b[k * NR + cols..(k + 1) * NR].fill(1e30);
            }
            let tiles = rows.div_ceil(MR);
            for (t0, with_bias) in [(0, true), (tiles / 2, false)] {
                let mut c = vec![f32::NAN; tiles * MR * NR];
                let g = PanelGemm { a: &pa, kdim, rows, t0, t1: tiles, b: &b, cols, bias: with_bias.then_some(&bias[..]) };
                unsafe { g.run(&mut c) };
                for i in t0 * MR..rows {
                    let want: Vec<f32> = (0..cols)
                        .map(|j| {
                            let s: f64 = (0..kdim).map(|k| a[i * kdim + k] as f64 * b[k * NR + j] as f64).sum();
                            s as f32 + if with_bias { bias[i] } else { 0.0 }
                        })
                        .collect();
                    let got = &c[(i - t0 * MR) * NR..][..cols];
                    assert_close(got, &want, 1e-4, &format!("rows {rows} k {kdim} cols {cols} row {i}"));
                }
            }
        }
    }

    #[test]
    fn packing_layouts() {
        let src: Vec<f32> = (0..7 * 3).map(|v| v as f32).collect();
        let mut dst = vec![f32::NAN; packed_len(7, 3)];
        pack_rows(&src, 7, 3, 3, &mut dst);
        assert_eq!(dst.len(), 12 * 3);
        assert_eq!(dst[MR + 2], src[2 * 3 + 1]); // (r 2, k 1) of tile 0
        assert_eq!(dst[MR * 3 + 2 * MR], src[6 * 3 + 2]); // (r 0, k 2) of tile 1
        assert_eq!(dst[MR * 3 + 2 * MR + 1], 0.0); // row 7 is padding
        let m: Vec<f32> = (0..2 * 70).map(|v| v as f32).collect();
        let mut p = vec![f32::NAN; 2 * 2 * NR];
        pack_panels(&m, 2, 70, &mut p);
        assert_eq!(p[NR + 5], m[70 + 5]);
        assert_eq!(p[2 * NR + NR + 3], m[70 + 64 + 3]);
        assert_eq!(p[2 * NR + NR + 6], 0.0);
    }
}
