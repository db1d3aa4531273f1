//! The layout alternative, measured: a sparse conv on NHWC activations (`H x W x C` per image).
//!
//! With channels innermost, one output position's im2col column is `taps` contiguous runs of
//! `C` floats already in the input, so there is no gather at all: the register tile broadcasts
//! straight from 6 positions' pixel runs (zero rows stand in for padding) against 64-channel
//! weight panels, and each active position's 64 results are one contiguous store. Same register
//! tile and K blocking as the NCHW kernel, so the difference between the two is the layout.
//! One group, AVX-512 only, no fused add: enough to decide the layout (see the bench).

use super::columns::{self, with_columns, Columns};
use super::conv::{ConvKind, SparseConv};
use super::gather::Geo2;
use super::micro::{tile_rows_dyn, MR, NR};
use super::scratch::{self, Slot};
use super::{Clock, PhaseTimes};
use crate::cpu::gemm_util::{threads, SendPtr};
use crate::cpu::kernel_util::epilogue;
use dynaspa_runtime::graph::{Activation, Conv};
use dynaspa_runtime::sparsity::{BitMask, TileSet};
use dynaspa_runtime::{Error, Result, Tensor};
use rayon::prelude::*;
use std::cell::RefCell;

const OP: &str = "NhwcConv";
/// Channels per K block: 128 rows of a weight panel are 32 KiB, inside L1.
const CB: usize = 128;
/// Position tiles per task: the accumulators (48 x 64 floats) stay in L1 too.
const TILES_PER_TASK: usize = 8;

/// The NHWC counterpart of [`SparseConv`] used to measure the layout choice.
pub struct NhwcConv {
    c: usize,
    m: usize,
    g: Geo2,
    /// `[M / 64][taps * C][64]`, K ordered (tap, channel) like an NHWC column.
    w: Vec<f32>,
    bias: Option<Vec<f32>>,
    act: Option<Activation>,
    zeros: Vec<f32>,
}

impl NhwcConv {
    /// As [`SparseConv::new`] (input shape given NCHW), for one group and no fused add.
    pub fn new(p: &Conv, input: &[usize], weight: &Tensor, bias: Option<&Tensor>) -> Result<NhwcConv> {
        if !super::micro::available() {
            return Err(Error::Other(format!("{OP}: needs AVX-512")));
        }
        let sc = SparseConv::build(p, input, weight, bias, false)?;
        if sc.groups != 1 || sc.kind != ConvKind::Gemm || sc.fused_add {
            return Err(Error::Other(format!("{OP}: only one group, more than one input channel, no fused add")));
        }
        let (c, m, g) = (sc.c, sc.m, sc.g);
        let wd = weight.as_f32()?;
        let (taps, kdim) = (g.taps(), c * g.taps());
        let panels = m.div_ceil(NR);
        let mut w = vec![0.0f32; panels * kdim * NR];
        for o in 0..m {
            for ci in 0..c {
                for t in 0..taps {
                    w[(o / NR * kdim + t * c + ci) * NR + o % NR] = wd[(o * c + ci) * taps + t];
                }
            }
        }
        Ok(NhwcConv { c, m, g, w, bias: sc.bias, act: sc.act, zeros: vec![0.0; c] })
    }

    /// `x` is one image `H x W x C`, `out` `Ho x Wo x M`; writes where `mask` is set.
    pub fn run_timed(&self, x: &[f32], out: &mut [f32], tiles: &TileSet, mask: &BitMask, times: Option<&PhaseTimes>) -> Result<()> {
        let g = &self.g;
        if x.len() != self.c * g.plane() || out.len() != self.m * g.out_plane() {
            return Err(Error::Other(format!("{OP}: input {} / output {} values do not fit the prepared shapes", x.len(), out.len())));
        }
        columns::check(OP, tiles, mask, g.ho, g.wo)?;
        with_columns(|cols| {
            with_offsets(|offs| {
                {
                    let _t = Clock::start(times, |t| &t.plan);
                    cols.build(tiles, mask);
                    self.offsets(cols, offs);
                }
                self.multiply(x, out, cols, offs, times);
            })
        });
        Ok(())
    }

    /// Per (position tile, tap, row): where that position's pixel run starts in `x`, or -1.
    fn offsets(&self, cols: &Columns, offs: &mut Vec<isize>) {
        let (g, taps) = (&self.g, self.g.taps());
        offs.clear();
        offs.resize(cols.len().div_ceil(MR) * taps * MR, -1);
        for j in 0..cols.len() {
            let (oy, ox) = (cols.ys[j] as usize, cols.xs[j] as usize);
            for a in 0..g.kh {
                let iy = (oy * g.sh + a * g.dh) as isize - g.ph as isize;
                for b in 0..g.kw {
                    let ix = (ox * g.sw + b * g.dw) as isize - g.pw as isize;
                    if iy >= 0 && iy < g.h as isize && ix >= 0 && ix < g.w as isize {
                        offs[(j / MR * taps + a * g.kw + b) * MR + j % MR] = (iy * g.w as isize + ix) * self.c as isize;
                    }
                }
            }
        }
    }

    fn multiply(&self, x: &[f32], out: &mut [f32], cols: &Columns, offs: &[isize], times: Option<&PhaseTimes>) {
        let (c, m, taps) = (self.c, self.m, self.g.taps());
        let p = cols.len();
        let ptiles = p.div_ceil(MR);
        let panels = m.div_ceil(NR);
        let per = TILES_PER_TASK.min(ptiles.div_ceil((2 * threads()).div_ceil(panels)).max(1));
        let blocks = ptiles.div_ceil(per);
        let y = SendPtr::new(out);
        (0..panels * blocks).into_par_iter().with_max_len(1).for_each(|task| {
            let (pi, bi) = (task % panels, task / panels);
            let (t0, t1) = (bi * per, ((bi + 1) * per).min(ptiles));
            let (n0, ncols) = (pi * NR, NR.min(m - pi * NR));
            let wp = &self.w[pi * c * taps * NR..(pi + 1) * c * taps * NR];
            scratch::with(Slot::Acc, (t1 - t0) * MR * NR, |acc| {
                {
                    let _t = Clock::start(times, |t| &t.gemm);
                    for t in 0..taps {
                        for c0 in (0..c).step_by(CB) {
                            let c1 = (c0 + CB).min(c);
                            for pt in t0..t1 {
                                let rows = MR.min(p - pt * MR);
                                let mut a = [self.zeros.as_ptr(); MR];
                                for (r, ar) in a.iter_mut().enumerate().take(rows) {
                                    let o = offs[(pt * taps + t) * MR + r];
                                    *ar = if o >= 0 { x[o as usize..].as_ptr() } else { self.zeros.as_ptr() };
                                    *ar = ar.wrapping_add(c0);
                                }
                                // SAFETY: AVX-512 was checked at preparation; every row pointer has
                                // c - c0 >= c1 - c0 floats (pixel runs and `zeros` are C long), the
                                // panel rows (t * c + c0..) exist, `acc` holds this tile.
                                unsafe {
                                    tile_rows_dyn(
                                        rows,
                                        ncols.div_ceil(16),
                                        c1 - c0,
                                        &a,
                                        wp[(t * c + c0) * NR..].as_ptr(),
                                        acc[(pt - t0) * MR * NR..].as_mut_ptr(),
                                        t > 0 || c0 > 0,
                                    )
                                };
                            }
                        }
                    }
                }
                let _t = Clock::start(times, |t| &t.scatter);
                let bias = self.bias.as_ref().map(|b| &b[n0..n0 + ncols]);
                for j in t0 * MR..(t1 * MR).min(p) {
                    if !cols.active[j] {
                        continue;
                    }
                    let row = &mut acc[(j - t0 * MR) * NR..][..ncols];
                    if bias.is_some() || self.act.is_some() {
                        epilogue(row, 0.0, bias, self.act);
                    }
                    let at = (cols.ys[j] as usize * self.g.wo + cols.xs[j] as usize) * m + n0;
                    // SAFETY: positions are distinct; this task alone owns channels n0..n0 + ncols.
                    unsafe { std::ptr::copy_nonoverlapping(row.as_ptr(), y.get().add(at), ncols) };
                }
            });
        });
    }
}

/// The NHWC counterpart of the depthwise [`SparseConv`] (channel multiplier 1): per active
/// position, each tap is one multiply-add over a contiguous run of `C` channels, so only the
/// active positions' pixels (and their halo) are touched, not whole 16-position cache lines.
pub struct NhwcDepthwise {
    c: usize,
    g: Geo2,
    /// `[taps][C]`.
    w: Vec<f32>,
    bias: Option<Vec<f32>>,
    act: Option<Activation>,
}

impl NhwcDepthwise {
    /// As [`SparseConv::new`] (input shape given NCHW) for a depthwise conv, multiplier 1.
    pub fn new(p: &Conv, input: &[usize], weight: &Tensor, bias: Option<&Tensor>) -> Result<NhwcDepthwise> {
        let sc = SparseConv::build(p, input, weight, bias, false)?;
        if sc.kind != ConvKind::Depthwise || sc.m != sc.c || sc.fused_add {
            return Err(Error::Other("NhwcDepthwise: only depthwise, multiplier 1, no fused add".into()));
        }
        let (c, g) = (sc.c, sc.g);
        let wd = weight.as_f32()?;
        let taps = g.taps();
        let w = (0..taps * c).map(|i| wd[(i % c) * taps + i / c]).collect();
        Ok(NhwcDepthwise { c, g, w, bias: sc.bias, act: sc.act })
    }

    /// `x` is one image `H x W x C`, `out` `Ho x Wo x C`; writes the active positions of `tiles`.
    pub fn run_timed(&self, x: &[f32], out: &mut [f32], tiles: &TileSet, mask: &BitMask, times: Option<&PhaseTimes>) -> Result<()> {
        let (g, c) = (&self.g, self.c);
        if x.len() != c * g.plane() || out.len() != c * g.out_plane() {
            return Err(Error::Other(format!("NhwcDepthwise: input {} / output {} values do not fit", x.len(), out.len())));
        }
        columns::check("NhwcDepthwise", tiles, mask, g.ho, g.wo)?;
        with_columns(|cols| {
            {
                let _t = Clock::start(times, |t| &t.plan);
                cols.build(tiles, mask);
            }
            let _t = Clock::start(times, |t| &t.gemm);
            let y = SendPtr::new(out);
            let per = cols.len().div_ceil(4 * threads()).max(1);
            (0..cols.len().div_ceil(per)).into_par_iter().with_max_len(1).for_each(|ci| {
                scratch::with(Slot::Acc, c, |acc| {
                    for j in ci * per..((ci + 1) * per).min(cols.len()) {
                        if !cols.active[j] {
                            continue;
                        }
                        let (oy, ox) = (cols.ys[j] as usize, cols.xs[j] as usize);
                        acc.fill(0.0);
                        for a in 0..g.kh {
                            let iy = (oy * g.sh + a * g.dh) as isize - g.ph as isize;
                            for b in 0..g.kw {
                                let ix = (ox * g.sw + b * g.dw) as isize - g.pw as isize;
                                if iy >= 0 && iy < g.h as isize && ix >= 0 && ix < g.w as isize {
                                    let at = (iy as usize * g.w + ix as usize) * c;
                                    let t = a * g.kw + b;
                                    madd(acc, &self.w[t * c..(t + 1) * c], &x[at..at + c]);
                                }
                            }
                        }
                        epilogue(acc, 0.0, self.bias.as_deref(), self.act);
                        // SAFETY: positions are distinct; this task alone owns position j.
                        unsafe { std::ptr::copy_nonoverlapping(acc.as_ptr(), y.get().add((oy * g.wo + ox) * c), c) };
                    }
                })
            });
        });
        Ok(())
    }
}

crate::cpu::kernel_util::multiversion! {
/// `acc += w * x`, elementwise.
fn madd(acc: &mut [f32], w: &[f32], x: &[f32]) {
    for (o, (&wv, &xv)) in acc.iter_mut().zip(w.iter().zip(x)) {
        *o += wv * xv;
    }
}
}

thread_local! {
    static OFFS: RefCell<Vec<isize>> = const { RefCell::new(Vec::new()) };
}

fn with_offsets<R>(f: impl FnOnce(&mut Vec<isize>) -> R) -> R {
    OFFS.with(|o| match o.try_borrow_mut() {
        Ok(mut o) => f(&mut o),
        Err(_) => f(&mut Vec::new()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::eval_op;
    use crate::cpu::sparse::testkit::{blob_mask, check_masked};
    use crate::cpu::test_util::{spec, Rng};
    use dynaspa_runtime::graph::{AutoPad, Op, Window};
    use dynaspa_runtime::sparsity::tiles::aligned_tiles_naive;
    use dynaspa_runtime::sparsity::Granularity;

    #[test]
    fn nhwc_depthwise_matches_dense() {
        let mut rng = Rng::new(78);
        for &(c, h, s) in &[(32, 17, 1), (20, 12, 2)] {
            let p = Conv {
                window: Window {
                    kernel_shape: vec![3, 3],
                    strides: vec![s, s],
                    pads: vec![1; 4],
                    dilations: vec![],
                    auto_pad: AutoPad::NotSet,
                },
                group: c,
                fused_add: false,
                activation: Some(Activation::Relu),
            };
            let ho = (h - 1) / s + 1;
            let (x, w, b) = (rng.tensor(&[1, c, h, h]), rng.tensor(&[c, 1, 3, 3]), rng.tensor(&[c]));
            let dense = eval_op(&Op::Conv(p.clone()), &[Some(&x), Some(&w), Some(&b)], &[spec(&[1, c, ho, ho])]).unwrap().remove(0);
            let nd = NhwcDepthwise::new(&p, x.shape(), &w, Some(&b)).unwrap();
            let xd = x.as_f32().unwrap();
            let xh: Vec<f32> = (0..c * h * h).map(|i| xd[(i % c) * h * h + i / c]).collect();
            for d in [0.05, 0.4, 1.0] {
                let mask = blob_mask(&mut rng, ho, ho, d);
                let mut out = vec![f32::NAN; c * ho * ho];
                nd.run_timed(&xh, &mut out, &aligned_tiles_naive(&mask, Granularity::new(4, 4)), &mask, None).unwrap();
                let planes: Vec<f32> = (0..c * ho * ho).map(|i| out[(i % (ho * ho)) * c + i / (ho * ho)]).collect();
                check_masked(&planes, dense.as_f32().unwrap(), &mask, f32::NAN, 1e-5, &format!("nhwc dw c {c} s {s} d {d}"));
            }
        }
    }

    #[test]
    fn nhwc_conv_matches_dense() {
        if !super::super::micro::available() {
            return;
        }
        let mut rng = Rng::new(77);
        for &(c, h, m, k, s) in &[(20, 17, 70, 3, 1), (130, 12, 64, 3, 2), (16, 9, 5, 1, 1), (3, 15, 8, 7, 2)] {
            let p = Conv {
                window: Window {
                    kernel_shape: vec![k, k],
                    strides: vec![s, s],
                    pads: vec![k / 2; 4],
                    dilations: vec![],
                    auto_pad: AutoPad::NotSet,
                },
                group: 1,
                fused_add: false,
                activation: Some(Activation::Relu),
            };
            let ho = (h + 2 * (k / 2) - k) / s + 1;
            let (x, w, b) = (rng.tensor(&[1, c, h, h]), rng.tensor(&[m, c, k, k]), rng.tensor(&[m]));
            let dense = eval_op(&Op::Conv(p.clone()), &[Some(&x), Some(&w), Some(&b)], &[spec(&[1, m, ho, ho])]).unwrap().remove(0);
            let nc = NhwcConv::new(&p, x.shape(), &w, Some(&b)).unwrap();
            let xd = x.as_f32().unwrap();
            let xh: Vec<f32> = (0..c * h * h).map(|i| xd[(i % c) * h * h + i / c]).collect();
            for d in [0.05, 0.4, 1.0] {
                let mask = blob_mask(&mut rng, ho, ho, d);
                let mut out = vec![f32::NAN; m * ho * ho];
                nc.run_timed(&xh, &mut out, &aligned_tiles_naive(&mask, Granularity::new(1, 1)), &mask, None).unwrap();
                // Back to planes for the check.
                let planes: Vec<f32> = (0..m * ho * ho).map(|i| out[(i % (ho * ho)) * m + i / (ho * ho)]).collect();
                check_masked(&planes, dense.as_f32().unwrap(), &mask, f32::NAN, 1e-5, &format!("nhwc c {c} k {k} s {s} d {d}"));
            }
        }
    }
}
