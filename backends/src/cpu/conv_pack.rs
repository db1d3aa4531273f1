//! Lowering a 64-column panel of a conv's im2col matrix with AVX-512 masked loads: per 16
//! columns, one masked load per output row they touch, instead of a copy loop per row run.
//! Strided windows read rows that `im2col::split_rows` split into column phases, where the
//! columns one tap reads are contiguous too.

use super::im2col::{phase_offset, Geom};
use std::arch::x86_64::*;

/// One masked load: lanes in `mask` of vector `v` of tap row `t` come from `plane + off + lane`.
#[derive(Clone, Copy, Debug)]
struct Seg {
    mask: u16,
    off: isize,
}

/// The loads that lower columns `[p0, p1)` (at most 64), for every tap of the window.
pub(crate) struct PanelPlan {
    segs: Vec<Seg>,
    /// `segs[start[t * 4 + v]..start[t * 4 + v + 1]]` build vector `v` of tap row `t`.
    start: Vec<u32>,
    taps: usize,
}

impl PanelPlan {
    /// `split`: the image rows are phase-split (required when the W stride is above 1).
    pub fn new(g: &Geom, p0: usize, p1: usize, split: bool) -> PanelPlan {
        debug_assert!(p1 - p0 <= 64 && (split || g.stride[2] == 1));
        let runs = g.rows(p0, p1);
        let [_, ih_n, iw_n] = g.image;
        let sw = g.stride[2];
        let offs: Vec<usize> = (0..sw).map(|r| phase_offset(iw_n, sw, r)).collect();
        let col = |iw: usize| if split { offs[iw % sw] + iw / sw } else { iw };
        let vt = g.valid_table();
        let taps = g.kernel_len();
        let mut segs = Vec::with_capacity(taps * 4 * 2);
        let mut start = Vec::with_capacity(taps * 4 + 1);
        for &(d_lo, d_hi, d_base) in &vt[0] {
            for &(h_lo, h_hi, h_base) in &vt[1] {
                for &(w_lo, w_hi, w_base) in &vt[2] {
                    for v in 0..4 {
                        start.push(segs.len() as u32);
                        let (l0, l1) = (16 * v, (16 * v + 16).min(p1 - p0));
                        let mut lane = 0;
                        for &[od, oh, ow0, ow1] in &runs {
                            // This run covers lanes [lane, lane + ow1 - ow0) of the panel.
                            let (ra, rb) = (lane, lane + ow1 - ow0);
                            lane = rb;
                            let (a, b) = (ra.max(l0), rb.min(l1));
                            if a >= b || od < d_lo || od >= d_hi || oh < h_lo || oh >= h_hi {
                                continue;
                            }
                            // Output columns of lanes a..b, clipped to those reading inside the row.
                            let (oa, ob) = ((ow0 + a - ra).max(w_lo), (ow0 + b - ra).min(w_hi));
                            if oa >= ob {
                                continue;
                            }
                            let (la, lb) = (oa + ra - ow0 - l0, ob + ra - ow0 - l0);
                            let id = (d_base + (od * g.stride[0]) as isize) as usize;
                            let ih = (h_base + (oh * g.stride[1]) as isize) as usize;
                            let iw = (w_base + (oa * sw) as isize) as usize;
                            let at = (id * ih_n + ih) * iw_n + col(iw);
                            let mask = (((1u32 << lb) - 1) & !((1u32 << la) - 1)) as u16;
                            segs.push(Seg { mask, off: at as isize - la as isize });
                        }
                    }
                }
            }
        }
        start.push(segs.len() as u32);
        PanelPlan { segs, start, taps }
    }
}

/// Lowers `channels` planes of `x` (each `img` long) into `out`: rows `(c, tap)` of 64 floats.
///
/// # Safety
/// AVX-512 must be available; `plan` must have been built for the geometry of `x`'s planes
/// (its unmasked loads then stay inside each plane); `out` holds `channels * taps` rows.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn pack(x: &[f32], img: usize, channels: usize, plan: &PanelPlan, out: &mut [f32]) {
    assert!(x.len() >= channels * img && out.len() >= channels * plan.taps * 64, "panel pack out of bounds");
    let mut row = out.as_mut_ptr();
    for c in 0..channels {
        let base = x.as_ptr().add(c * img);
        for t in 0..plan.taps {
            for v in 0..4 {
                let s = &plan.segs[plan.start[t * 4 + v] as usize..plan.start[t * 4 + v + 1] as usize];
                let mut acc = _mm512_setzero_ps();
                for seg in s {
                    // Masked-off lanes are neither read nor faulted on, wherever they point.
                    acc = _mm512_mask_loadu_ps(acc, seg.mask, base.wrapping_offset(seg.off));
                }
                _mm512_storeu_ps(row.add(16 * v), acc);
            }
            row = row.add(64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::im2col::{im2col, split_rows};
    use crate::cpu::test_util::Rng;

    #[test]
    fn masked_pack_matches_im2col() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            return;
        }
        let mut rng = Rng::new(17);
        for case in 0..300 {
            let k = [1 + rng.below(2), 1 + rng.below(4), 1 + rng.below(5)];
            let s = [1 + rng.below(2), 1 + rng.below(3), 1 + rng.below(3)];
            let d = [1 + rng.below(2), 1 + rng.below(2), 1 + rng.below(2)];
            let pad = [rng.below(2), rng.below(3), rng.below(4)];
            let image = [1 + rng.below(3), 1 + rng.below(9), 1 + rng.below(40)];
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
            let mut xs = vec![0.0; x.len()];
            split_rows(&x, image[2], s[2], &mut xs);
            let p_n = g.out_len();
            let p0 = rng.below(p_n);
            let p1 = (p0 + 1 + rng.below(64)).min(p_n);
            let rows = c_n * g.kernel_len();
            let mut want = vec![0.0; rows * 64];
            im2col(&x, c_n, &g, p0, p1, &mut want, 64, false);
            let mut got = vec![f32::NAN; rows * 64];
            let split = s[2] > 1;
            let plan = PanelPlan::new(&g, p0, p1, split);
            unsafe { pack(if split { &xs } else { &x }, g.image_len(), c_n, &plan, &mut got) };
            for r in 0..rows {
                assert_eq!(&got[r * 64..r * 64 + p1 - p0], &want[r * 64..r * 64 + p1 - p0], "case {case} {g:?} p {p0}..{p1} row {r}");
            }
        }
    }
}
