//! Measuring the layout decision (DESIGN.md: "internal activation layout is a decision to make
//! once, measured"): the gather phase of a sparse conv from the NCHW input the runtime uses
//! today versus from the same input in NHWC, over the same positions and panels.
//!
//! NCHW: every im2col row `(channel, tap)` of a panel is assembled from the 64 positions'
//! scattered reads (masked loads or hardware gathers) of one channel plane. NHWC: every
//! position's column is `taps` contiguous copies of `C` floats, written position-major (the
//! layout a GEMM with vectors along output channels would read).

use super::columns::{self, with_columns};
use super::conv::{simd_gather, ConvKind, SparseConv};
use super::gather::with_plan;
use super::scratch::{self, Slot};
use dynaspa_runtime::sparsity::{BitMask, TileSet};
use dynaspa_runtime::{Error, Result};
use rayon::prelude::*;

const NR: usize = 64;

/// Gather-only runs of a prepared `SparseConv` (groups = 1, GEMM kind) in both layouts.
pub struct NhwcGatherProbe<'a> {
    conv: &'a SparseConv,
}

impl<'a> NhwcGatherProbe<'a> {
    pub fn new(conv: &'a SparseConv) -> Result<NhwcGatherProbe<'a>> {
        if conv.groups != 1 || conv.kind != ConvKind::Gemm {
            return Err(Error::Other("NhwcGatherProbe: only for GEMM convs with one group".into()));
        }
        Ok(NhwcGatherProbe { conv })
    }

    /// Gathers every panel of the positions of `tiles` from the NCHW image `x`, as
    /// `SparseConv::run` does (plans included); returns the number of floats written.
    pub fn nchw(&self, x: &[f32], tiles: &TileSet, mask: &BitMask) -> Result<usize> {
        let (cv, g) = (self.conv, &self.conv.g);
        self.check(x, tiles, mask)?;
        let kdim = cv.c * g.taps();
        Ok(with_columns(|cols| {
            cols.build(tiles, mask);
            let panels = cols.len().div_ceil(NR);
            (0..panels).into_par_iter().with_max_len(1).for_each(|pi| {
                with_plan(|plan| {
                    let (j0, j1) = columns::panel(pi, cols.len());
                    plan.build(g, cols, j0, j1 - j0);
                    scratch::with(Slot::Panel, kdim * NR, |panel| {
                        if cv.simd {
                            simd_gather(plan, x, g.plane(), cv.c, panel);
                        } else {
                            plan.gather(x, g.plane(), cv.c, panel);
                        }
                        std::hint::black_box(&panel[0]);
                    })
                })
            });
            panels * kdim * NR
        }))
    }

    /// The same panels from `x` in NHWC (`H x W x C`), position-major: row `j` of a panel is
    /// position `j`'s column, `taps` runs of `C` floats.
    pub fn nhwc(&self, x: &[f32], tiles: &TileSet, mask: &BitMask) -> Result<usize> {
        let (cv, g) = (self.conv, &self.conv.g);
        self.check(x, tiles, mask)?;
        let (c, kdim) = (cv.c, cv.c * g.taps());
        Ok(with_columns(|cols| {
            cols.build(tiles, mask);
            let panels = cols.len().div_ceil(NR);
            (0..panels).into_par_iter().with_max_len(1).for_each(|pi| {
                scratch::with(Slot::Panel, kdim * NR, |panel| {
                    let (j0, j1) = columns::panel(pi, cols.len());
                    for (j, dst) in panel.chunks_exact_mut(kdim).take(j1 - j0).enumerate() {
                        let (oy, ox) = (cols.ys[j0 + j] as usize, cols.xs[j0 + j] as usize);
                        for a in 0..g.kh {
                            let iy = (oy * g.sh + a * g.dh) as isize - g.ph as isize;
                            for b in 0..g.kw {
                                let ix = (ox * g.sw + b * g.dw) as isize - g.pw as isize;
                                let d = &mut dst[(a * g.kw + b) * c..][..c];
                                if iy >= 0 && iy < g.h as isize && ix >= 0 && ix < g.w as isize {
                                    let at = (iy as usize * g.w + ix as usize) * c;
                                    d.copy_from_slice(&x[at..at + c]);
                                } else {
                                    d.fill(0.0);
                                }
                            }
                        }
                    }
                    std::hint::black_box(&panel[0]);
                })
            });
            panels * kdim * NR
        }))
    }

    fn check(&self, x: &[f32], tiles: &TileSet, mask: &BitMask) -> Result<()> {
        let g = &self.conv.g;
        if x.len() != self.conv.input_len() {
            return Err(Error::Other(format!("NhwcGatherProbe: input has {} values, expected {}", x.len(), self.conv.input_len())));
        }
        columns::check("NhwcGatherProbe", tiles, mask, g.ho, g.wo)
    }
}
