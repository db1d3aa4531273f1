//! Spatial geometry of conv-like ops and the im2col / col2im lowering onto GEMM.
//!
//! Every geometry is padded to 3-D by prepending unit axes, so 1-D, 2-D and 3-D share one code
//! path; the extra loops over unit axes cost nothing measurable.

use super::kernel_util::multiversion;
use rayon::prelude::*;

/// Forward-conv geometry: `image` is the padded side read by the window, `out` the positions the
/// window visits. For ConvTranspose the roles swap (its output is `image`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Geom {
    pub image: [usize; 3],
    pub out: [usize; 3],
    pub kernel: [usize; 3],
    pub stride: [usize; 3],
    pub dilation: [usize; 3],
    /// Padding before each axis; padding after only shows in `out`.
    pub pad: [usize; 3],
}

/// Per axis and kernel offset: the output range whose input is inside the image, and the input
/// index of output 0 (see `Geom::valid`).
pub(crate) type ValidTable = [Vec<(usize, usize, isize)>; 3];

fn to3(v: &[usize], fill: usize) -> [usize; 3] {
    let mut a = [fill; 3];
    a[3 - v.len()..].copy_from_slice(v);
    a
}

impl Geom {
    /// All slices have the same length, 1 to 3.
    pub fn new(image: &[usize], out: &[usize], kernel: &[usize], stride: &[usize], dilation: &[usize], pad: &[usize]) -> Geom {
        Geom {
            image: to3(image, 1),
            out: to3(out, 1),
            kernel: to3(kernel, 1),
            stride: to3(stride, 1),
            dilation: to3(dilation, 1),
            pad: to3(pad, 0),
        }
    }
    pub fn image_len(&self) -> usize {
        self.image.iter().product()
    }
    pub fn out_len(&self) -> usize {
        self.out.iter().product()
    }
    pub fn kernel_len(&self) -> usize {
        self.kernel.iter().product()
    }
    /// A 1x1 window that visits every pixel once: the image already is the column matrix.
    pub fn is_identity(&self) -> bool {
        self.kernel == [1; 3] && self.stride == [1; 3] && self.pad == [0; 3] && self.out == self.image
    }

    /// For kernel offset `kk` on `axis`, the output range `[lo, hi)` whose input falls inside the
    /// image, and the input index of output 0 (may be negative).
    #[inline]
    pub fn valid(&self, axis: usize, kk: usize) -> (usize, usize, isize) {
        let s = self.stride[axis] as isize;
        let base = (kk * self.dilation[axis]) as isize - self.pad[axis] as isize;
        let n = self.image[axis] as isize;
        let o = self.out[axis] as isize;
        // smallest o with base + o*s >= 0, and first o with base + o*s >= n
        let lo = if base >= 0 { 0 } else { (-base + s - 1) / s };
        let hi = if base >= n { 0 } else { (n - base + s - 1) / s };
        let lo = lo.clamp(0, o) as usize;
        let hi = hi.clamp(0, o) as usize;
        (lo, hi.max(lo), base)
    }

    /// `valid(axis, k)` for every axis and kernel offset, so per-row loops do not divide.
    pub fn valid_table(&self) -> ValidTable {
        std::array::from_fn(|a| (0..self.kernel[a]).map(|k| self.valid(a, k)).collect())
    }

    /// The runs of output positions in `[p0, p1)` that lie on one output row, as
    /// `(od, oh, ow0, ow1)`: the only place im2col divides, once per tile.
    pub fn rows(&self, p0: usize, p1: usize) -> Vec<[usize; 4]> {
        let [_, oh_n, ow_n] = self.out;
        let mut v = Vec::with_capacity((p1 - p0) / ow_n.max(1) + 2);
        let mut p = p0;
        while p < p1 {
            let ow0 = p % ow_n;
            let r = p / ow_n;
            let len = (ow_n - ow0).min(p1 - p);
            v.push([r / oh_n, r % oh_n, ow0, ow0 + len]);
            p += len;
        }
        v
    }

    /// How one kernel offset maps the tile `[p0, p1)` onto a channel plane: per output-row run,
    /// the span read from the plane and the zeros around it. The same for every channel, so
    /// built once per (tile, kernel offset) and replayed per channel.
    /// With `split`, rows of the image are phase-split (see `split_row`) and every run reads
    /// contiguously.
    pub fn plan(&self, p0: usize, p1: usize, split: bool) -> Vec<Run> {
        let sw = self.stride[2];
        let offs: Vec<usize> = (0..sw).map(|r| phase_offset(self.image[2], sw, r)).collect();
        let runs = self.rows(p0, p1);
        let [kd_n, kh_n, kw_n] = self.kernel;
        let [_, ih_n, iw_n] = self.image;
        let mut plan = Vec::with_capacity(kd_n * kh_n * kw_n * runs.len());
        for kd in 0..kd_n {
            let (d_lo, d_hi, d_base) = self.valid(0, kd);
            for kh in 0..kh_n {
                let (h_lo, h_hi, h_base) = self.valid(1, kh);
                for kw in 0..kw_n {
                    let (w_lo, w_hi, w_base) = self.valid(2, kw);
                    let mut dst = 0;
                    for &[od, oh, ow0, ow1] in &runs {
                        let len = ow1 - ow0;
                        let (a, b) = (w_lo.clamp(ow0, ow1), w_hi.clamp(ow0, ow1));
                        let run = if od < d_lo || od >= d_hi || oh < h_lo || oh >= h_hi || a >= b {
                            Run { dst, zl: len, n: 0, zr: 0, src: 0 }
                        } else {
                            let id = (d_base + (od * self.stride[0]) as isize) as usize;
                            let ih = (h_base + (oh * self.stride[1]) as isize) as usize;
                            let iw = (w_base + (a * self.stride[2]) as isize) as usize;
                            let col = if split { offs[iw % sw] + iw / sw } else { iw };
                            Run { dst, zl: a - ow0, n: b - a, zr: ow1 - b, src: (id * ih_n + ih) * iw_n + col }
                        };
                        plan.push(run);
                        dst += len;
                    }
                }
            }
        }
        plan
    }
}

/// One output-row run of a tile row: `zl` zeros at `dst`, then `n` values read from the plane at
/// `src` (step = stride along W), then `zr` zeros.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Run {
    dst: usize,
    zl: usize,
    n: usize,
    zr: usize,
    src: usize,
}

/// Writes rows `(c, kd, kh, kw)` x columns `[p0, p1)` of the im2col matrix of `x`
/// (`channels` x image) into `col`, row-major with row stride `ld >= p1 - p0` (columns past
/// `p1 - p0` are left alone). Padding reads as 0. `split`: the rows of `x` are phase-split
/// (`split_row`), which turns strided gathers into copies.
#[allow(clippy::too_many_arguments)]
pub(crate) fn im2col(x: &[f32], channels: usize, g: &Geom, p0: usize, p1: usize, col: &mut [f32], ld: usize, split: bool) {
    let (pt, img, klen) = (p1 - p0, g.image_len(), g.kernel_len());
    if pt == 0 || img == 0 || klen == 0 {
        return;
    }
    let plan = g.plan(p0, p1, split);
    let step = if split { 1 } else { g.stride[2] };
    for (xc, rows) in x.chunks_exact(img).zip(col.chunks_mut(klen * ld)).take(channels) {
        lower_channel(xc, g.kernel_len(), step, &plan, ld, rows);
    }
}

/// Start of phase `r` (columns r, r + s, ...) in a phase-split row of `w` columns.
pub(crate) fn phase_offset(w: usize, s: usize, r: usize) -> usize {
    (0..r).map(|q| (w + s - 1 - q) / s).sum()
}

/// Splits one image row into its `s` column phases, phase r at `offs[r]`
/// (= `phase_offset(.., r)`).
#[inline(always)]
pub(crate) fn split_row(src: &[f32], s: usize, offs: &[usize], dst: &mut [f32]) {
    if s == 2 {
        let (even, odd) = dst.split_at_mut(src.len().div_ceil(2));
        deinterleave2(src, even, odd);
    } else {
        for (i, &v) in src.iter().enumerate() {
            dst[offs[i % s] + i / s] = v;
        }
    }
}

/// `even[i] = src[2i]`, `odd[i] = src[2i + 1]` for every such index of `src`; `even` needs
/// `ceil(n / 2)` slots and `odd` `floor(n / 2)`. The compiler leaves the stride-2 loop scalar;
/// on AVX-512 two permutes turn 32 values into 16 evens and 16 odds.
#[inline]
pub(crate) fn deinterleave2(src: &[f32], even: &mut [f32], odd: &mut [f32]) {
    let n = src.len();
    assert!(even.len() >= n.div_ceil(2) && odd.len() >= n / 2, "deinterleave2: {n} values into {} + {}", even.len(), odd.len());
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if n >= 8 && super::kernel_util::has_avx512() {
        // SAFETY: AVX-512F detected; the lengths were checked above.
        done = unsafe { deinterleave2_avx512(src, even, odd) };
    }
    for i in done / 2..n / 2 {
        even[i] = src[2 * i];
        odd[i] = src[2 * i + 1];
    }
    if n % 2 == 1 {
        even[n / 2] = src[n - 1];
    }
}

/// Splits all of `src`; returns how many values it split.
///
/// # Safety
/// AVX-512F available; `even` holds at least `ceil(n / 2)` values and `odd` `n / 2`.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn deinterleave2_avx512(src: &[f32], even: &mut [f32], odd: &mut [f32]) -> usize {
    use std::arch::x86_64::*;
    let blocks = src.len() / 32;
    let ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    let (s, e, o) = (src.as_ptr(), even.as_mut_ptr(), odd.as_mut_ptr());
    for b in 0..blocks {
        let lo = _mm512_loadu_ps(s.add(32 * b));
        let hi = _mm512_loadu_ps(s.add(32 * b + 16));
        _mm512_storeu_ps(e.add(16 * b), _mm512_permutex2var_ps(lo, ie, hi));
        _mm512_storeu_ps(o.add(16 * b), _mm512_permutex2var_ps(lo, io, hi));
    }
    // The ragged end (rows of 24-50 values are common) with masked loads and stores.
    let r = src.len() - 32 * blocks;
    if r > 0 {
        let mask = |n: usize| if n >= 16 { 0xffffu16 } else { (1u16 << n) - 1 };
        let at = 32 * blocks;
        let lo = _mm512_maskz_loadu_ps(mask(r), s.add(at));
        let hi = _mm512_maskz_loadu_ps(mask(r.saturating_sub(16)), s.add(at + 16));
        _mm512_mask_storeu_ps(e.add(at / 2), mask(r.div_ceil(2)), _mm512_permutex2var_ps(lo, ie, hi));
        _mm512_mask_storeu_ps(o.add(at / 2), mask(r / 2), _mm512_permutex2var_ps(lo, io, hi));
    }
    src.len()
}

multiversion! {
/// Phase-splits every row (of length `w`) of `x` into `out`, for a stride of `s` along rows.
pub(crate) fn split_rows(x: &[f32], w: usize, s: usize, out: &mut [f32]) {
    let offs: Vec<usize> = (0..s).map(|r| phase_offset(w, s, r)).collect();
    for (src, dst) in x.chunks_exact(w).zip(out.chunks_exact_mut(w)) {
        split_row(src, s, &offs, dst);
    }
}
}

/// `im2col` of the whole map, parallel over channels with one shared plan.
pub(crate) fn par_im2col(x: &[f32], channels: usize, g: &Geom, col: &mut [f32]) {
    let (pt, img, klen) = (g.out_len(), g.image_len(), g.kernel_len());
    if pt == 0 || img == 0 || klen == 0 {
        return;
    }
    let plan = g.plan(0, pt, false);
    let x = &x[..channels * img];
    x.par_chunks_exact(img).zip(col.par_chunks_exact_mut(klen * pt)).for_each(|(xc, rows)| {
        lower_channel(xc, klen, g.stride[2], &plan, pt, rows);
    });
}

multiversion! {
/// The `klen` rows (stride `ld`) of one channel plane `xc`, read with column step `sw`.
fn lower_channel(xc: &[f32], klen: usize, sw: usize, plan: &[Run], ld: usize, rows: &mut [f32]) {
    let per_k = plan.len() / klen;
    for (row, runs) in rows.chunks_mut(ld).zip(plan.chunks_exact(per_k.max(1))) {
        for run in runs {
            let span = &mut row[run.dst..][..run.zl + run.n + run.zr];
            let (zl, rest) = span.split_at_mut(run.zl);
            let (dst, zr) = rest.split_at_mut(run.n);
            zero(zl);
            zero(zr);
            if run.n > 0 {
                gather(dst, &xc[run.src..run.src + (run.n - 1) * sw + 1], sw);
            }
        }
    }
}
}

/// Padding spans are mostly 0 or 1 long; a memset call each would cost more than the stores.
#[inline(always)]
fn zero(d: &mut [f32]) {
    match d.len() {
        0 => {}
        1 => d[0] = 0.0,
        _ => d.fill(0.0),
    }
}

/// `dst[i] = src[i * step]`, with `src` exactly long enough. Stride 1 and 2 (every stem and
/// downsampling conv) get loops the compiler vectorises; a generic stepped iterator does not.
#[inline(always)]
fn gather(dst: &mut [f32], src: &[f32], step: usize) {
    let n = dst.len();
    match step {
        // Rows of a 7x7 map are 28 bytes: a memcpy call per row would cost more than the copy.
        1 if n < 32 => dst.iter_mut().zip(src).for_each(|(d, &s)| *d = s),
        1 => dst.copy_from_slice(src),
        2 => {
            dst[..n - 1].iter_mut().zip(src.chunks_exact(2)).for_each(|(d, c)| *d = c[0]);
            dst[n - 1] = src[2 * (n - 1)];
        }
        _ => dst.iter_mut().enumerate().for_each(|(i, d)| *d = src[i * step]),
    }
}

/// The adjoint of `im2col`: adds `col` (rows `(c, kd, kh, kw)` x columns `[p0, p1)`, row length
/// `p1 - p0`) into the image planes `x` (`channels` x image) it would have been gathered from.
/// Parallel over channels, which own disjoint planes.
pub(crate) fn col2im(col: &[f32], g: &Geom, p0: usize, p1: usize, x: &mut [f32]) {
    let (pt, img, klen) = (p1 - p0, g.image_len(), g.kernel_len());
    if pt == 0 || img == 0 || klen == 0 {
        return;
    }
    let plan = g.plan(p0, p1, false);
    let per_k = plan.len() / klen;
    let sw = g.stride[2];
    x.par_chunks_mut(img).zip(col.par_chunks(klen * pt)).for_each(|(xc, cc)| {
        for (r, row) in cc.chunks_exact(pt).enumerate() {
            for run in plan[r * per_k..][..per_k].iter().filter(|r| r.n > 0) {
                let src = &row[run.dst + run.zl..][..run.n];
                if sw == 1 {
                    for (d, &s) in xc[run.src..run.src + run.n].iter_mut().zip(src) {
                        *d += s;
                    }
                } else {
                    for (d, &s) in xc[run.src..].iter_mut().step_by(sw).zip(src) {
                        *d += s;
                    }
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::test_util::Rng;

    fn naive_im2col(x: &[f32], c_n: usize, g: &Geom) -> Vec<f32> {
        let p_n = g.out_len();
        let mut col = vec![0.0; c_n * g.kernel_len() * p_n];
        let mut r = 0;
        for c in 0..c_n {
            for kd in 0..g.kernel[0] {
                for kh in 0..g.kernel[1] {
                    for kw in 0..g.kernel[2] {
                        let mut p = 0;
                        for od in 0..g.out[0] {
                            for oh in 0..g.out[1] {
                                for ow in 0..g.out[2] {
                                    let i = [od, oh, ow];
                                    let k = [kd, kh, kw];
                                    let pos: Vec<isize> =
                                        (0..3).map(|a| (i[a] * g.stride[a] + k[a] * g.dilation[a]) as isize - g.pad[a] as isize).collect();
                                    if (0..3).all(|a| pos[a] >= 0 && pos[a] < g.image[a] as isize) {
                                        let idx = ((pos[0] as usize * g.image[1]) + pos[1] as usize) * g.image[2] + pos[2] as usize;
                                        col[r * p_n + p] = x[c * g.image_len() + idx];
                                    }
                                    p += 1;
                                }
                            }
                        }
                        r += 1;
                    }
                }
            }
        }
        col
    }

    #[test]
    fn im2col_tiles_match_naive_and_col2im_is_adjoint() {
        let mut rng = Rng::new(7);
        for case in 0..60 {
            let k = [1 + rng.below(3), 1 + rng.below(3), 1 + rng.below(4)];
            let s = [1 + rng.below(2), 1 + rng.below(3), 1 + rng.below(3)];
            let d = [1 + rng.below(2), 1 + rng.below(2), 1 + rng.below(3)];
            let pad = [rng.below(3), rng.below(3), rng.below(4)];
            let image = [1 + rng.below(4), 1 + rng.below(6), 1 + rng.below(9)];
            let out: Vec<usize> = (0..3)
                .map(|a| {
                    let span = image[a] + 2 * pad[a];
                    let eff = (k[a] - 1) * d[a] + 1;
                    if span >= eff {
                        (span - eff) / s[a] + 1
                    } else {
                        0
                    }
                })
                .collect();
            if out.contains(&0) {
                continue;
            }
            let g = Geom { image, out: [out[0], out[1], out[2]], kernel: k, stride: s, dilation: d, pad };
            let c_n = 1 + rng.below(3);
            let x = rng.vec(c_n * g.image_len());
            let want = naive_im2col(&x, c_n, &g);
            let p_n = g.out_len();
            let rows = c_n * g.kernel_len();
            let tile = 1 + rng.below(p_n);
            let mut p0 = 0;
            while p0 < p_n {
                let p1 = (p0 + tile).min(p_n);
                let mut col = vec![f32::NAN; rows * (p1 - p0)];
                im2col(&x, c_n, &g, p0, p1, &mut col, p1 - p0, false);
                let mut xs = vec![0.0; x.len()];
                split_rows(&x, g.image[2], g.stride[2], &mut xs);
                let mut col2 = vec![f32::NAN; rows * (p1 - p0)];
                im2col(&xs, c_n, &g, p0, p1, &mut col2, p1 - p0, true);
                assert_eq!(col, col2, "split case {case}");
                for r in 0..rows {
                    assert_eq!(&col[r * (p1 - p0)..(r + 1) * (p1 - p0)], &want[r * p_n + p0..r * p_n + p1], "case {case} {g:?}");
                }
                p0 = p1;
            }
            let mut full = vec![f32::NAN; rows * p_n];
            par_im2col(&x, c_n, &g, &mut full);
            assert_eq!(full, want, "par_im2col case {case}");
            // <im2col(x), y> == <x, col2im(y)> for random y, in two tiles to exercise p0 > 0
            let y = rng.vec(rows * p_n);
            let lhs: f64 = want.iter().zip(&y).map(|(a, b)| (*a as f64) * (*b as f64)).sum();
            let mut back = vec![0.0f32; c_n * g.image_len()];
            let split = 3.min(p_n);
            for (a, b) in [(split, p_n), (0, split)] {
                let mut colt = vec![0.0; rows * (b - a)];
                for r in 0..rows {
                    colt[r * (b - a)..(r + 1) * (b - a)].copy_from_slice(&y[r * p_n + a..r * p_n + b]);
                }
                col2im(&colt, &g, a, b, &mut back);
            }
            let rhs: f64 = back.iter().zip(&x).map(|(a, b)| (*a as f64) * (*b as f64)).sum();
            assert!((lhs - rhs).abs() < 1e-3 * (1.0 + lhs.abs()), "adjoint {lhs} vs {rhs}");
        }
    }
}
