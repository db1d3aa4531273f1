//! Depthwise conv (one input channel per group) over the runs of a column list, computed
//! directly: per channel and run, each tap adds a scaled, shifted input row segment.

use super::columns::Columns;
use super::gather::Geo2;
use super::scratch::{self, Slot};
use crate::cpu::gemm_util::threads;
use crate::cpu::kernel_util::{epilogue, multiversion};
use dynaspa_runtime::graph::Activation;
use rayon::prelude::*;

pub(crate) struct Job<'a> {
    pub g: &'a Geo2,
    /// Output channels per input channel.
    pub mult: usize,
    /// `[M, kh * kw]`.
    pub w: &'a [f32],
    pub bias: Option<&'a [f32]>,
    pub act: Option<Activation>,
    pub residual: Option<&'a [f32]>,
}

impl Job<'_> {
    /// Parallel over blocks of output channels: each owns whole planes of `out`.
    pub fn run(&self, x: &[f32], out: &mut [f32], cols: &Columns) {
        let (plane, op) = (self.g.plane(), self.g.out_plane());
        let m_n = out.len() / op.max(1);
        let per = m_n.div_ceil(4 * threads()).max(1);
        let longest = cols.runs.iter().map(|r| r.len as usize).max().unwrap_or(0);
        out.par_chunks_mut(per * op).enumerate().with_max_len(1).for_each(|(bi, planes)| {
            scratch::with(Slot::Acc, longest, |acc| {
                for (i, yp) in planes.chunks_exact_mut(op).enumerate() {
                    let m = bi * per + i;
                    let xc = &x[(m / self.mult) * plane..][..plane];
                    let wm = &self.w[m * self.g.taps()..][..self.g.taps()];
                    for r in &cols.runs {
                        let (y, x0, len) = (r.y as usize, r.x0 as usize, r.len as usize);
                        let a = &mut acc[..len];
                        run_taps(self.g, xc, wm, y, x0, a);
                        let at = y * self.g.wo + x0;
                        let res = self.residual.map(|rs| &rs[m * op + at..][..len]);
                        epilogue(a, self.bias.map_or(0.0, |b| b[m]), res, self.act);
                        let flags = &cols.active[r.col as usize..][..len];
                        let dst = &mut yp[at..at + len];
                        if flags.iter().all(|&f| f) {
                            dst.copy_from_slice(a);
                        } else {
                            for ((d, &v), &f) in dst.iter_mut().zip(a.iter()).zip(flags) {
                                if f {
                                    *d = v;
                                }
                            }
                        }
                    }
                }
            });
        });
    }
}

multiversion! {
/// `acc[j]` = the window sum at output `(y, x0 + j)` of one channel plane `xc`.
fn run_taps(g: &Geo2, xc: &[f32], wm: &[f32], y: usize, x0: usize, acc: &mut [f32]) {
    acc.fill(0.0);
    let len = acc.len();
    for a in 0..g.kh {
        let iy = (y * g.sh + a * g.dh) as isize - g.ph as isize;
        if iy < 0 || iy >= g.h as isize {
            continue;
        }
        let row = &xc[iy as usize * g.w..][..g.w];
        for b in 0..g.kw {
            let wv = wm[a * g.kw + b];
            // Input column of output x0 + j is x0 * sw + b * dw - pw + j * sw; keep j where it
            // lands inside the row.
            let base = (x0 * g.sw + b * g.dw) as isize - g.pw as isize;
            let lo = if base >= 0 { 0 } else { ((-base) as usize).div_ceil(g.sw) };
            let hi = if base >= g.w as isize { 0 } else { ((g.w as isize - base) as usize).div_ceil(g.sw) };
            let (lo, hi) = (lo.min(len), hi.min(len));
            if lo >= hi {
                continue;
            }
            let start = (base + (lo * g.sw) as isize) as usize;
            if g.sw == 1 {
                for (o, &v) in acc[lo..hi].iter_mut().zip(&row[start..start + hi - lo]) {
                    *o += wv * v;
                }
            } else {
                for (o, &v) in acc[lo..hi].iter_mut().zip(row[start..].iter().step_by(g.sw)) {
                    *o += wv * v;
                }
            }
        }
    }
}
}
