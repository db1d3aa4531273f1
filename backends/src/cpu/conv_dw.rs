//! Depthwise Conv (one input channel per output channel), computed directly: as a GEMM it
//! would have K = kernel size, all overhead.

use super::conv::{Dims, Epilogue};
use super::gemm_util::with_scratch;
use super::im2col::{phase_offset, split_rows, Geom, ValidTable};
use super::kernel_util::multiversion;
use rayon::prelude::*;

/// One input channel per output channel: accumulate each tap as a scaled, shifted input row,
/// which vectorises; strided windows read phase-split rows so that stays contiguous. Parallel
/// over (image, channel) planes.
pub(crate) fn depthwise(d: &Dims, x: &[f32], w: &[f32], ep: &Epilogue, y: &mut [f32]) {
    let g = &d.geom;
    let (img, p_n, klen) = (g.image_len(), g.out_len(), g.kernel_len());
    let (mult, sw, iw_n) = (d.m / d.groups, g.stride[2], g.image[2]);
    let vt = g.valid_table();
    let offs: Vec<usize> = (0..sw).map(|r| phase_offset(iw_n, sw, r)).collect();
    y.par_chunks_mut(p_n).enumerate().with_max_len(1).for_each(|(nm, plane)| {
        let (n, m) = (nm / d.m, nm % d.m);
        let xc = &x[(n * d.c + m / mult) * img..][..img];
        let wm = &w[m * klen..][..klen];
        if sw == 1 || iw_n == 0 {
            depthwise_plane(g, &vt, xc, &[0], wm, plane);
        } else {
            with_scratch(img, |xs| {
                split_rows(xc, iw_n, sw, xs);
                depthwise_plane(g, &vt, xs, &offs, wm, plane);
            });
        }
        for r in 0..p_n / g.out[2].max(1) {
            let at = r * g.out[2];
            ep.run(&mut plane[at..at + g.out[2]], m, nm * p_n + at);
        }
    });
}

multiversion! {
/// One output plane. `offs`: phase offsets when `xc`'s rows are phase-split, else `[0]`.
fn depthwise_plane(g: &Geom, vt: &ValidTable, xc: &[f32], offs: &[usize], wm: &[f32], plane: &mut [f32]) {
    let [_, ih_n, iw_n] = g.image;
    let [od_n, oh_n, ow_n] = g.out;
    let [_, kh_n, kw_n] = g.kernel;
    let sw = g.stride[2];
    for od in 0..od_n {
        for oh in 0..oh_n {
            let r0 = (od * oh_n + oh) * ow_n;
            let row = &mut plane[r0..r0 + ow_n];
            row.fill(0.0);
            for (kd, &(d_lo, d_hi, d_base)) in vt[0].iter().enumerate() {
                if od < d_lo || od >= d_hi {
                    continue;
                }
                let id = (d_base + (od * g.stride[0]) as isize) as usize;
                for (kh, &(h_lo, h_hi, h_base)) in vt[1].iter().enumerate() {
                    if oh < h_lo || oh >= h_hi {
                        continue;
                    }
                    let ih = (h_base + (oh * g.stride[1]) as isize) as usize;
                    let src = &xc[(id * ih_n + ih) * iw_n..][..iw_n];
                    for (kw, &(lo, hi, base)) in vt[2].iter().enumerate() {
                        if lo >= hi {
                            continue;
                        }
                        let wv = wm[(kd * kh_n + kh) * kw_n + kw];
                        let iw = (base + (lo * sw) as isize) as usize;
                        let start = offs[iw % offs.len()] + iw / offs.len();
                        for (o, &i) in row[lo..hi].iter_mut().zip(&src[start..]) {
                            *o += wv * i;
                        }
                    }
                }
            }
        }
    }
}
}
