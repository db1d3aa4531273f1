//! 2-D MaxPool / AveragePool with unit dilation (every pool of the reduced model families:
//! 3x3 s2 after a stem, 3x3 s1 mask dilation, 2x2 s2, 4x4 s4), one output row at a time:
//! the `kh` input rows of the window are folded into one row (contiguous, full vectors), then
//! the `kw` taps along that row. A horizontal stride first splits the folded row into its
//! column phases, so every tap again reads contiguously. The general N-D loop in `pool.rs`
//! re-derived the valid window per tap and folded 1-2 vector slices at a time, which cost
//! 35-57 µs on a 16x36x48 map where this takes a few.

use super::im2col::Geom;

/// Whether `g` (3-D padded, see `Geom`) is a 2-D window with unit dilation, which
/// [`pool_plane_2d`] computes.
pub(crate) fn applies(g: &Geom) -> bool {
    g.image[0] == 1 && g.out[0] == 1 && g.kernel[0] == 1 && g.dilation[1] == 1 && g.dilation[2] == 1
}

/// Floats of scratch [`pool_plane_2d`] needs for `g`.
pub(crate) fn scratch_len(g: &Geom) -> usize {
    let row = folded_len(g);
    // The folded row, then its phases (each at most `row / sw + 1` long).
    row + row + g.stride[2] + 16
}

/// Length of the folded row: every column a window reads, padding included.
fn folded_len(g: &Geom) -> usize {
    let [_, _, ow] = g.out;
    (ow.max(1) - 1) * g.stride[2] + g.kernel[2]
}

/// One `H x W` plane `x` into its `Ho x Wo` plane `y`. `avg`: average (dividing by
/// `counts[1][oh] * counts[2][ow]`, see `pool::axis_counts`) instead of max. `scratch` has
/// [`scratch_len`] floats. Max ignores NaN taps as `f32::max` does: every fold starts from
/// -inf and keeps the accumulator where a tap is NaN.
pub(crate) fn pool_plane_2d(g: &Geom, avg: bool, counts: &[Vec<f32>], x: &[f32], y: &mut [f32], scratch: &mut [f32]) {
    assert!(x.len() == g.image_len() && y.len() == g.out_len() && scratch.len() >= scratch_len(g), "pool_plane_2d: slice sizes");
    #[cfg(target_arch = "x86_64")]
    if super::kernel_util::has_avx512() {
        // SAFETY: AVX-512F detected; slice sizes checked above.
        unsafe {
            match avg {
                true => avx512::plane::<true>(g, x, y, scratch, counts),
                false => avx512::plane::<false>(g, x, y, scratch, counts),
            }
        }
        return;
    }
    match avg {
        true => plane(&Portable::<true>, g, x, y, scratch, counts),
        false => plane(&Portable::<false>, g, x, y, scratch, counts),
    }
}

/// Rows sources at most per `reduce` call (longer windows take several calls).
const MAX_SRC: usize = 8;

/// The row operations the plane loop needs, per instruction set: `reduce` sets
/// `dst[i] = fold(srcs[..][i])` (max or sum), folding into `dst`'s values unless `first`.
trait RowOps {
    const AVG: bool;
    fn reduce(&self, dst: &mut [f32], srcs: &[&[f32]], first: bool);
    /// `im2col::deinterleave2`.
    fn split2(&self, src: &[f32], even: &mut [f32], odd: &mut [f32]) {
        super::im2col::deinterleave2(src, even, odd);
    }
}

struct Portable<const AVG: bool>;

impl<const AVG: bool> RowOps for Portable<AVG> {
    const AVG: bool = AVG;
    #[inline(always)]
    fn reduce(&self, dst: &mut [f32], srcs: &[&[f32]], first: bool) {
        if first {
            dst.fill(if AVG { 0.0 } else { f32::NEG_INFINITY });
        }
        for s in srcs {
            for (d, &v) in dst.iter_mut().zip(*s) {
                *d = if AVG { *d + v } else { d.max(v) };
            }
        }
    }
}

#[inline(always)]
fn plane<O: RowOps>(ops: &O, g: &Geom, x: &[f32], y: &mut [f32], scratch: &mut [f32], counts: &[Vec<f32>]) {
    let [_, h, w] = g.image;
    let [_, oh_n, ow_n] = g.out;
    let [_, kh, kw] = g.kernel;
    let [_, sh, sw] = g.stride;
    let [_, ph, pw] = g.pad;
    let len = folded_len(g);
    let (row, rest) = scratch.split_at_mut(len);
    // Columns of the folded row: `pw` of padding, the input's, then padding to `len`. Column
    // c0 is input column 0 (when any input column is read at all).
    let (c0, c1) = (pw.min(len), (pw + w).min(len));
    ops.reduce(&mut row[..c0], &[], true);
    ops.reduce(&mut row[c1..], &[], true);
    let plen = len.div_ceil(sw);
    let mut srcs: [&[f32]; MAX_SRC] = [&[]; MAX_SRC];
    for oh in 0..oh_n {
        let mut taps_at: [&[f32]; MAX_SRC] = [&[]; MAX_SRC];
        // Input rows of this output row's window that exist (padding rows add nothing).
        let top = (oh * sh) as isize - ph as isize;
        let (r0, r1) = (top.max(0) as usize, ((top + kh as isize).max(0) as usize).min(h));
        let mut r = r0;
        loop {
            let n = r1.saturating_sub(r).min(MAX_SRC);
            for (k, s) in srcs[..n].iter_mut().enumerate() {
                *s = &x[(r + k) * w..][..c1 - c0];
            }
            ops.reduce(&mut row[c0..c1], &srcs[..n], r == r0);
            r += n;
            if r >= r1 {
                break;
            }
        }
        // Tap b of output ow reads folded column ow * sw + b: with a stride, phase b % sw at
        // ow + b / sw (phase q holds columns q, q + sw, ...).
        let (taps, at): (&[f32], fn(usize, usize, usize) -> usize) = if sw == 1 {
            (&row[..], |b, _, _| b)
        } else {
            split_phases(ops, row, sw, plen, &mut rest[..plen * sw]);
            (&rest[..plen * sw], |b, sw, plen| (b % sw) * plen + b / sw)
        };
        let out = &mut y[oh * ow_n..][..ow_n];
        let mut b = 0;
        loop {
            let n = (kw - b).min(MAX_SRC);
            for (k, s) in taps_at[..n].iter_mut().enumerate() {
                *s = &taps[at(b + k, sw, plen)..][..ow_n];
            }
            ops.reduce(out, &taps_at[..n], b == 0);
            b += n;
            if b >= kw {
                break;
            }
        }
        if O::AVG {
            let ch = counts[1][oh];
            for (v, &cw) in out.iter_mut().zip(&counts[2]) {
                *v /= ch * cw;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{Geom, RowOps};
    use std::arch::x86_64::*;

    /// Rows are 6-50 values in the reduced models: the compiler's vector loop (64 values per
    /// iteration) left them to its scalar remainder. Here every row is whole 16-lane vectors
    /// with a masked tail.
    struct Avx512<const AVG: bool>;

    #[inline(always)]
    fn tail(n: usize) -> __mmask16 {
        if n >= 16 {
            0xffff
        } else {
            (1u16 << n) - 1
        }
    }

    impl<const AVG: bool> RowOps for Avx512<AVG> {
        const AVG: bool = AVG;
        #[inline(always)]
        fn reduce(&self, dst: &mut [f32], srcs: &[&[f32]], first: bool) {
            let n = srcs.iter().fold(dst.len(), |n, s| n.min(s.len()));
            // SAFETY: only reached from `plane` below, which runs with AVX-512F; loads and
            // stores are masked to the first `n` values of every slice.
            unsafe {
                let id = _mm512_set1_ps(if AVG { 0.0 } else { f32::NEG_INFINITY });
                let d = dst.as_mut_ptr();
                let mut i = 0;
                while i < n {
                    let k = tail(n - i);
                    let mut acc = if first { id } else { _mm512_maskz_loadu_ps(k, d.add(i)) };
                    for s in srcs {
                        let v = _mm512_maskz_loadu_ps(k, s.as_ptr().add(i));
                        // max(v, acc) returns acc (never NaN: it started at -inf) where v is NaN.
                        acc = if AVG { _mm512_add_ps(acc, v) } else { _mm512_max_ps(v, acc) };
                    }
                    _mm512_mask_storeu_ps(d.add(i), k, acc);
                    i += 16;
                }
            }
        }
        #[inline(always)]
        fn split2(&self, src: &[f32], even: &mut [f32], odd: &mut [f32]) {
            // Phases of `plen = ceil(len / 2)` slots each: room for both halves.
            debug_assert!(even.len() >= src.len().div_ceil(2) && odd.len() >= src.len() / 2);
            // SAFETY: as `reduce`; `split_phases` gives each phase ceil(len / 2) slots.
            unsafe { crate::cpu::im2col::deinterleave2_avx512(src, even, odd) };
        }
    }

    /// # Safety
    /// AVX-512F available; slices sized as `pool_plane_2d` checks.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn plane<const AVG: bool>(g: &Geom, x: &[f32], y: &mut [f32], scratch: &mut [f32], counts: &[Vec<f32>]) {
        super::plane(&Avx512::<AVG>, g, x, y, scratch, counts)
    }
}

/// `src` into `s` phases of `plen` values each (phase r at `r * plen`: columns r, r + s, ...);
/// slots past the end of `src` are left as they were (no tap reads them).
#[inline(always)]
fn split_phases<O: RowOps>(ops: &O, src: &[f32], s: usize, plen: usize, dst: &mut [f32]) {
    if s == 2 {
        let (even, odd) = dst.split_at_mut(plen);
        ops.split2(src, even, odd);
        return;
    }
    for (i, &v) in src.iter().enumerate() {
        dst[(i % s) * plen + i / s] = v;
    }
}
