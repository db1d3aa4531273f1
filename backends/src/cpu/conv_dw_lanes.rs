//! Depthwise 2-D Conv with channels in the AVX-512 lanes: blocks of `LANES` channels are
//! interleaved into a zero-padded [row][column][lane] buffer, every output position is one
//! multiply-add per tap across the block, and the result goes back to NCHW planes for the
//! epilogue. Row-wise accumulation (`conv_dw`, which keeps channel multipliers and 1-D/3-D
//! depthwise convs) leaves lanes idle on the short rows of small maps (7, 14 and 28 wide in
//! MobileNets) and spends a task per plane; here every lane works whatever the width, and a
//! task is a block of channels.

use super::conv::{Dims, Epilogue};
use super::gemm_util::{with_scratch, with_scratch2, SendPtr};
use rayon::prelude::*;

/// Channels per block: one AVX-512 vector of f32.
const LANES: usize = 16;
/// Largest padded plane (positions) a block interleaves: 16 MiB of scratch per thread.
const MAX_PLANE: usize = 1 << 18;
/// Whether the lanes kernel runs `d`: 2-D, one input channel per output channel. Measured
/// against `conv_dw` on MobileNetV2's depthwise shapes (2-core Xeon, AVX-512) it won at every
/// width: 3.5x at 14x14, 2.4x at 28x28, 1.4x at 56x56 and 112x112.
/// Elsewhere (no AVX-512) `conv_dw` runs them.
pub(crate) fn fits(d: &Dims) -> bool {
    let g = &d.geom;
    let planar = g.image[0] == 1 && g.kernel[0] == 1 && g.out[0] == 1 && g.image[1] > 0 && g.image[2] > 0 && g.out_len() > 0;
    let small = || {
        let hp = padded(g.out[1], g.stride[1], g.kernel[1], g.dilation[1], g.pad[1], g.image[1]);
        hp * padded(g.out[2], g.stride[2], g.kernel[2], g.dilation[2], g.pad[2], g.image[2]) <= MAX_PLANE
    };
    d.c == d.groups && d.m == d.c && planar && small() && super::kernel_util::has_avx512()
}

/// The padded input plane's extent along one axis: every position a window reads.
fn padded(out: usize, stride: usize, kernel: usize, dil: usize, pad: usize, image: usize) -> usize {
    ((out - 1) * stride + (kernel - 1) * dil + 1).max(pad + image)
}

/// `y` (N x C x OH x OW) from `x` and depthwise weights `w` (C x KH x KW), epilogue applied.
pub(crate) fn depthwise_lanes(d: &Dims, x: &[f32], w: &[f32], ep: &Epilogue, y: &mut [f32]) {
    let g = &d.geom;
    let (img, p_n, klen) = (g.image_len(), g.out_len(), g.kernel_len());
    let blocks = d.c.div_ceil(LANES);
    let hp = padded(g.out[1], g.stride[1], g.kernel[1], g.dilation[1], g.pad[1], g.image[1]);
    let wp = padded(g.out[2], g.stride[2], g.kernel[2], g.dilation[2], g.pad[2], g.image[2]);
    let yp = SendPtr::new(y);
    (0..d.n * blocks).into_par_iter().for_each(|task| {
        let (n, b) = (task / blocks, task % blocks);
        let (c0, c1) = (b * LANES, ((b + 1) * LANES).min(d.c));
        let xs = &x[(n * d.c + c0) * img..(n * d.c + c1) * img];
        with_scratch(hp * wp * LANES + klen * LANES, |buf| {
            let (xp, wl) = buf.split_at_mut(hp * wp * LANES);
            pack(g, wp, xs, &w[c0 * klen..c1 * klen], xp, wl);
            with_scratch2(p_n * LANES, |acc| {
                block(g, wp, xp, wl, acc);
                let at = (n * d.m + c0) * p_n;
                // SAFETY: channels c0..c1 of image n are this task's alone, inside y (N x C x OH x OW).
                let out = unsafe { std::slice::from_raw_parts_mut(yp.get().add(at), (c1 - c0) * p_n) };
                unpack(acc, out);
                for (i, plane) in out.chunks_exact_mut(p_n).enumerate() {
                    ep.run(plane, c0 + i, at + i * p_n);
                }
            });
        });
    });
}

/// Channel planes `xs` into the zero-padded interleaved buffer `xp`, their weights into `wl`
/// (lanes past the last channel stay zero).
fn pack(g: &super::im2col::Geom, wp: usize, xs: &[f32], w: &[f32], xp: &mut [f32], wl: &mut [f32]) {
    let (ih_n, iw_n, klen) = (g.image[1], g.image[2], g.kernel_len());
    let lanes = xs.len() / (ih_n * iw_n);
    assert!(lanes <= LANES && w.len() == lanes * klen, "depthwise lanes: block of {lanes} channels");
    assert!(((ih_n - 1 + g.pad[1]) * wp + g.pad[2] + iw_n) * LANES <= xp.len(), "depthwise lanes: padded input too small");
    xp.fill(0.0);
    wl.fill(0.0);
    for (l, wc) in w.chunks_exact(klen).enumerate() {
        for (t, &v) in wc.iter().enumerate() {
            wl[t * LANES + l] = v;
        }
    }
    // SAFETY: `fits` checked AVX-512; reads stay inside `xs` (lanes x ih_n x iw_n) and writes
    // inside `xp` (checked above).
    unsafe { pack_avx512(g, wp, xs, lanes, xp) }
}

/// One gather per input position: the block's channels at that position, into its lanes.
#[target_feature(enable = "avx512f")]
unsafe fn pack_avx512(g: &super::im2col::Geom, wp: usize, xs: &[f32], lanes: usize, xp: &mut [f32]) {
    use std::arch::x86_64::*;
    let (ih_n, iw_n) = (g.image[1], g.image[2]);
    let (idx, mask) = lane_index(ih_n * iw_n, lanes);
    let (src, dst) = (xs.as_ptr(), xp.as_mut_ptr());
    for ih in 0..ih_n {
        let d = dst.add(((ih + g.pad[1]) * wp + g.pad[2]) * LANES);
        for iw in 0..iw_n {
            let v = _mm512_mask_i32gather_ps::<4>(_mm512_setzero_ps(), mask, idx, src.add(ih * iw_n + iw));
            _mm512_storeu_ps(d.add(iw * LANES), v);
        }
    }
}

/// Lane l's offset, l x `plane` elements, and the mask of the block's `lanes` channels.
#[target_feature(enable = "avx512f")]
unsafe fn lane_index(plane: usize, lanes: usize) -> (std::arch::x86_64::__m512i, u16) {
    let offs: [i32; LANES] = std::array::from_fn(|l| (l * plane) as i32);
    (std::arch::x86_64::_mm512_loadu_si512(offs.as_ptr().cast()), ((1u32 << lanes) - 1) as u16)
}

/// Interleaved results `acc[p][lane]` back into channel planes.
fn unpack(acc: &[f32], out: &mut [f32]) {
    let p_n = acc.len() / LANES;
    let lanes = out.len() / p_n.max(1);
    assert!(lanes <= LANES && out.len() == lanes * p_n, "depthwise lanes: unpack of {lanes} channels");
    // SAFETY: `fits` checked AVX-512; one scatter per position writes lane l to
    // out[l * p_n + p], inside `out` for the `lanes` channels it holds.
    unsafe { unpack_avx512(acc, p_n, lanes, out) }
}

#[target_feature(enable = "avx512f")]
unsafe fn unpack_avx512(acc: &[f32], p_n: usize, lanes: usize, out: &mut [f32]) {
    use std::arch::x86_64::*;
    let (idx, mask) = lane_index(p_n, lanes);
    let (src, dst) = (acc.as_ptr(), out.as_mut_ptr());
    for p in 0..p_n {
        _mm512_mask_i32scatter_ps::<4>(dst.add(p), mask, idx, _mm512_loadu_ps(src.add(p * LANES)));
    }
}

/// Every output position of one channel block, `acc[p][lane]`, summed over the taps in
/// registers.
pub(crate) fn block(g: &super::im2col::Geom, wp: usize, xp: &[f32], wl: &[f32], acc: &mut [f32]) {
    assert!(acc.len() == g.out_len() * LANES && wl.len() >= g.kernel_len() * LANES, "depthwise lanes: block buffers");
    let last = ((g.out[1] - 1) * g.stride[1] + (g.kernel[1] - 1) * g.dilation[1]) * wp
        + (g.out[2] - 1) * g.stride[2]
        + (g.kernel[2] - 1) * g.dilation[2];
    assert!((last + 1) * LANES <= xp.len(), "depthwise lanes: padded input too small");
    // SAFETY: `fits` checked AVX-512; every read index is at most `last` (checked above) and
    // every write inside `acc`.
    unsafe { block_avx512(g, wp, xp, wl, acc) }
}

/// Four positions of a row at a time, each its own accumulator, so the taps' multiply-adds
/// overlap instead of waiting on one another.
#[target_feature(enable = "avx512f")]
unsafe fn block_avx512(g: &super::im2col::Geom, wp: usize, xp: &[f32], wl: &[f32], acc: &mut [f32]) {
    use std::arch::x86_64::*;
    let (kh_n, kw_n, oh_n, ow_n) = (g.kernel[1], g.kernel[2], g.out[1], g.out[2]);
    let (sh, sw, dh, dw) = (g.stride[1], g.stride[2], g.dilation[1], g.dilation[2]);
    let taps: Vec<usize> = (0..kh_n * kw_n).map(|t| ((t / kw_n) * dh * wp + (t % kw_n) * dw) * LANES).collect();
    let (x, w, y) = (xp.as_ptr(), wl.as_ptr(), acc.as_mut_ptr());
    let step = sw * LANES;
    for oh in 0..oh_n {
        let row = oh * sh * wp * LANES;
        let out = y.add(oh * ow_n * LANES);
        let mut ow = 0;
        while ow + 4 <= ow_n {
            let b = x.add(row + ow * step);
            let (mut s0, mut s1, mut s2, mut s3) = (_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps());
            for (t, &o) in taps.iter().enumerate() {
                let wv = _mm512_loadu_ps(w.add(t * LANES));
                s0 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(b.add(o)), s0);
                s1 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(b.add(o + step)), s1);
                s2 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(b.add(o + 2 * step)), s2);
                s3 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(b.add(o + 3 * step)), s3);
            }
            let o = out.add(ow * LANES);
            _mm512_storeu_ps(o, s0);
            _mm512_storeu_ps(o.add(LANES), s1);
            _mm512_storeu_ps(o.add(2 * LANES), s2);
            _mm512_storeu_ps(o.add(3 * LANES), s3);
            ow += 4;
        }
        while ow < ow_n {
            let b = x.add(row + ow * step);
            let mut s = _mm512_setzero_ps();
            for (t, &o) in taps.iter().enumerate() {
                s = _mm512_fmadd_ps(_mm512_loadu_ps(w.add(t * LANES)), _mm512_loadu_ps(b.add(o)), s);
            }
            _mm512_storeu_ps(out.add(ow * LANES), s);
            ow += 1;
        }
    }
}
