//! `SparseConv`: a 2-D NCHW Conv prepared once (weights packed), then run per image on the
//! output positions of a DISTile list, writing only the positions whose mask bit is set.

use super::columns::{self, with_columns, Columns};
use super::depthwise;
use super::gather::{with_plan, Geo2, PanelPlan};
use super::scratch::{self, Slot};
use super::{Clock, PhaseTimes};
use crate::cpu::conv_direct::{self, DirectConv, Image};
use crate::cpu::gemm_util::{sgemm, threads, Layout, SendPtr};
use crate::cpu::kernel_util::{epilogue, per_axis, split_pads};
use dynaspa_runtime::graph::{Activation, Conv};
use dynaspa_runtime::sparsity::{BitMask, TileSet};
use dynaspa_runtime::{Error, Result, Tensor};
use rayon::prelude::*;
use std::cell::RefCell;

const OP: &str = "SparseConv";
/// Output columns per panel (the register tile's width).
const NR: usize = 64;
/// Rows of weights per tile: output-channel splits happen at multiples of this.
const MR: usize = 6;
/// How many output rows ahead the write-back prefetches its cache lines.
const PF_ROWS: usize = 4;

fn bad<T>(msg: String) -> Result<T> {
    Err(Error::Other(format!("{OP}: {msg}")))
}

/// How a prepared conv computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvKind {
    /// Gathered im2col panels times packed weights (every conv with more than one input
    /// channel per group).
    Gemm,
    /// One input channel per group (depthwise, any channel multiplier): a direct kernel, since
    /// as a GEMM its K would be just the window size.
    Depthwise,
}

/// A Conv with 2 spatial axes, NCHW, prepared for sparse execution (see the module docs of
/// `cpu::sparse` for the write rule).
pub struct SparseConv {
    pub(super) c: usize,
    pub(super) m: usize,
    pub(super) groups: usize,
    pub(super) g: Geo2,
    pub(super) kind: ConvKind,
    /// AVX-512 path; for GEMM convs the weights are then packed into register-tile order
    /// (`micro::pack_rows`) per group, otherwise they are kept as given, `[M, C / group * kh * kw]`.
    pub(super) simd: bool,
    w: Vec<f32>,
    pub(super) bias: Option<Vec<f32>>,
    pub(super) act: Option<Activation>,
    pub(super) fused_add: bool,
    /// The direct kernel, for convs small enough that it beats gather + GEMM
    /// (`conv_direct::pays`); the positions schedule then runs it.
    direct: Option<DirectConv>,
}

impl std::fmt::Debug for SparseConv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let g = &self.g;
        write!(
            f,
            "SparseConv {{ {:?} {}x{}x{} -> {}x{}x{}, {}x{} s{}x{} d{}x{} p{}x{}, group {}, bias {}, {:?}, fused_add {}, avx512 {} }}",
            self.kind,
            self.c,
            g.h,
            g.w,
            self.m,
            g.ho,
            g.wo,
            g.kh,
            g.kw,
            g.sh,
            g.sw,
            g.dh,
            g.dw,
            g.ph,
            g.pw,
            self.groups,
            self.bias.is_some(),
            self.act,
            self.fused_add,
            self.simd
        )
    }
}

impl SparseConv {
    /// Prepares `p` for inputs of shape `input` (`[N, C, H, W]`, N ignored, or `[C, H, W]`) with
    /// weight `[M, C / group, kh, kw]` and an optional bias `[M]`. With `p.fused_add`, every run
    /// takes a residual (output-shaped); the epilogue is bias, then residual, then activation.
    pub fn new(p: &Conv, input: &[usize], weight: &Tensor, bias: Option<&Tensor>) -> Result<SparseConv> {
        SparseConv::build(p, input, weight, bias, simd_available())
    }

    /// `new` with the path chosen by the caller (`simd` is ignored where AVX-512 is missing).
    pub(crate) fn build(p: &Conv, input: &[usize], weight: &Tensor, bias: Option<&Tensor>, simd: bool) -> Result<SparseConv> {
        let chw = match input {
            [_, c, h, w] | [c, h, w] => [*c, *h, *w],
            _ => return bad(format!("input shape {input:?} must be [N, C, H, W] or [C, H, W]")),
        };
        let [c, h, w] = chw;
        let ws = weight.shape();
        let wd = weight.as_f32().map_err(|_| Error::Other(format!("{OP}: weight must be FLOAT, got {}", weight.dtype())))?;
        let &[m, cg, kh, kw] = ws else {
            return bad(format!("weight shape {ws:?} must be [M, C / group, kh, kw] (2 spatial axes)"));
        };
        let groups = p.group;
        if groups == 0 || cg * groups != c || m % groups != 0 {
            return bad(format!("group {groups} does not fit input channels {c} and weight {ws:?}"));
        }
        if !p.window.kernel_shape.is_empty() && p.window.kernel_shape != [kh, kw] {
            return bad(format!("kernel_shape {:?} disagrees with weight {ws:?}", p.window.kernel_shape));
        }
        let s = per_axis(OP, "strides", &p.window.strides, 2)?;
        let d = per_axis(OP, "dilations", &p.window.dilations, 2)?;
        let (pb, pe) = split_pads(OP, &p.window.pads, 2)?;
        let out_side = |i: usize, n: usize, k: usize| {
            let span = n.checked_add(pb[i])?.checked_add(pe[i])?;
            let eff = k.checked_sub(1)?.checked_mul(d[i])?.checked_add(1)?;
            (span >= eff).then(|| (span - eff) / s[i] + 1)
        };
        let (Some(ho), Some(wo)) = (out_side(0, h, kh), out_side(1, w, kw)) else {
            return bad(format!("kernel {kh}x{kw} (dilations {d:?}) does not fit a {h}x{w} input with pads {:?}", p.window.pads));
        };
        // Gather/scatter offsets are 32-bit lanes.
        let lim = i32::MAX as usize;
        if h.checked_mul(w).is_none_or(|v| v >= lim) || ho.checked_mul(wo).is_none_or(|v| v >= lim) {
            return bad(format!("planes of {h}x{w} in / {ho}x{wo} out are too large (2^31 positions at most)"));
        }
        if c.checked_mul(h * w).is_none() || m.checked_mul(ho * wo).is_none() {
            return bad(format!("{c}x{h}x{w} input / {m}x{ho}x{wo} output sizes overflow"));
        }
        let kdim = cg * kh * kw;
        if wd.len() != m * kdim {
            return bad(format!("weight holds {} values, shape {ws:?} needs {}", wd.len(), m * kdim));
        }
        let bias = match bias {
            Some(b) => {
                let bd = b.as_f32().map_err(|_| Error::Other(format!("{OP}: bias must be FLOAT, got {}", b.dtype())))?;
                if b.shape() != [m] {
                    return bad(format!("bias shape {:?} must be [{m}]", b.shape()));
                }
                Some(bd.to_vec())
            }
            None => None,
        };
        let g = Geo2 { h, w, ho, wo, kh, kw, sh: s[0], sw: s[1], dh: d[0], dw: d[1], ph: pb[0], pw: pb[1] };
        let kind = if cg == 1 { ConvKind::Depthwise } else { ConvKind::Gemm };
        let simd = simd && simd_available();
        let w = if simd && kind == ConvKind::Gemm { pack_weights(wd, groups, m / groups, kdim) } else { wd.to_vec() };
        let direct = (groups == 1 && kind == ConvKind::Gemm && conv_direct::pays(c, m, g.taps(), c * g.h * g.w))
            .then(|| DirectConv::new(g, c, m, wd, bias.as_deref(), p.activation, p.fused_add))
            .flatten();
        Ok(SparseConv { c, m, groups, g, kind, simd, w, bias, act: p.activation, fused_add: p.fused_add, direct })
    }

    pub fn kind(&self) -> ConvKind {
        self.kind
    }
    /// Output plane size `(Ho, Wo)`: the size masks and tile sets must have.
    pub fn output_hw(&self) -> (usize, usize) {
        (self.g.ho, self.g.wo)
    }
    /// Floats of one input image (`C * H * W`).
    pub fn input_len(&self) -> usize {
        self.c * self.g.plane()
    }
    /// Floats of one output image (`M * Ho * Wo`).
    pub fn output_len(&self) -> usize {
        self.m * self.g.out_plane()
    }

    /// Computes the conv of one image `x` (`C x H x W`) at the positions of `tiles` and writes
    /// `out` (`M x Ho x Wo`) where `mask` is set. `residual` (output-shaped) is required exactly
    /// when the conv was prepared with `fused_add`.
    pub fn run(&self, x: &[f32], out: &mut [f32], tiles: &TileSet, mask: &BitMask, residual: Option<&[f32]>) -> Result<()> {
        self.run_timed(x, out, tiles, mask, residual, None)
    }

    /// The positions schedule: computes exactly the set positions of `mask` (the same as `run`
    /// with 1x1 tiles, without making them). On CPU this is the fastest schedule at every density
    /// measured (see `examples/sparse_ops_bench.rs`): the gather reads any position list at the
    /// same cost, so larger tiles only add work.
    pub fn run_positions(&self, x: &[f32], out: &mut [f32], mask: &BitMask, residual: Option<&[f32]>) -> Result<()> {
        self.run_impl(x, out, None, mask, residual, None)
    }

    /// `run`, adding the time of each phase to `times`.
    pub fn run_timed(
        &self,
        x: &[f32],
        out: &mut [f32],
        tiles: &TileSet,
        mask: &BitMask,
        residual: Option<&[f32]>,
        times: Option<&PhaseTimes>,
    ) -> Result<()> {
        self.run_impl(x, out, Some(tiles), mask, residual, times)
    }

    /// `tiles: None` is the positions schedule.
    fn run_impl(
        &self,
        x: &[f32],
        out: &mut [f32],
        tiles: Option<&TileSet>,
        mask: &BitMask,
        residual: Option<&[f32]>,
        times: Option<&PhaseTimes>,
    ) -> Result<()> {
        if x.len() != self.input_len() {
            return bad(format!("input has {} values, expected C*H*W = {}", x.len(), self.input_len()));
        }
        if out.len() != self.output_len() {
            return bad(format!("output has {} values, expected M*Ho*Wo = {}", out.len(), self.output_len()));
        }
        match (self.fused_add, residual) {
            (true, None) => return bad("prepared with a fused add, but no residual was given".into()),
            (false, Some(_)) => return bad("a residual was given, but the conv was prepared without fused_add".into()),
            (_, Some(r)) if r.len() != out.len() => {
                return bad(format!("residual has {} values, the output {}", r.len(), out.len()));
            }
            _ => {}
        }
        match tiles {
            Some(t) => columns::check(OP, t, mask, self.g.ho, self.g.wo)?,
            None if (mask.height(), mask.width()) != (self.g.ho, self.g.wo) => {
                return bad(format!("mask is {}x{}, the output is {}x{}", mask.height(), mask.width(), self.g.ho, self.g.wo));
            }
            None => {}
        }
        if let (None, Some(d)) = (tiles, &self.direct) {
            let positions = {
                let _t = Clock::start(times, |t| &t.plan);
                mask_positions(mask)
            };
            let _t = Clock::start(times, |t| &t.gemm);
            d.run(Image { x, out, residual }, &positions);
            return Ok(());
        }
        with_columns(|cols| {
            {
                let _t = Clock::start(times, |t| &t.plan);
                match tiles {
                    Some(t) => cols.build(t, mask),
                    None => cols.build_from_mask(mask),
                }
            }
            if !cols.active.contains(&true) {
                return;
            }
            match self.kind {
                ConvKind::Gemm => self.gemm(x, out, residual, cols, times),
                ConvKind::Depthwise => {
                    let _t = Clock::start(times, |t| &t.gemm);
                    let d = depthwise::Job {
                        g: &self.g,
                        mult: self.m / self.groups,
                        w: &self.w,
                        bias: self.bias.as_deref(),
                        act: self.act,
                        residual,
                    };
                    d.run(x, out, cols, self.simd);
                }
            }
        });
        Ok(())
    }

    fn mg(&self) -> usize {
        self.m / self.groups
    }
    fn cg(&self) -> usize {
        self.c / self.groups
    }
    fn kdim(&self) -> usize {
        self.cg() * self.g.taps()
    }

    /// Many panels: one task per panel gathers it, multiplies and writes back while the panel
    /// and results are in cache. Few panels (sparse masks): not enough tasks for the threads,
    /// so the panels are gathered first (split over input channels) into a shared buffer, then
    /// multiplied in (panel, group, block of output channels) tasks.
    fn gemm(&self, x: &[f32], out: &mut [f32], residual: Option<&[f32]>, cols: &Columns, times: Option<&PhaseTimes>) {
        let p_n = cols.len();
        let panels = p_n.div_ceil(NR);
        let want = 2 * threads();
        let y = SendPtr::new(out);
        if panels * self.groups < want {
            return self.gemm_shared(x, y, residual, cols, want, times);
        }
        let mtiles = self.mg().div_ceil(MR);
        (0..panels).into_par_iter().with_max_len(1).for_each(|pi| {
            let (j0, j1) = columns::panel(pi, p_n);
            with_plan(|plan| {
                {
                    let _t = Clock::start(times, |t| &t.plan);
                    plan.build(&self.g, cols, j0, j1 - j0);
                }
                scratch::with(Slot::Panel, self.kdim() * NR, |panel| {
                    scratch::with(Slot::Acc, mtiles * MR * NR, |acc| {
                        for gi in 0..self.groups {
                            self.gather_group(x, plan, gi, 0, self.cg(), panel, times);
                            // SAFETY: tasks own disjoint position sets of `out`.
                            unsafe { self.finish(y, residual, plan, gi, 0, mtiles, panel, acc, times) };
                        }
                    })
                })
            })
        });
    }

    fn gemm_shared(&self, x: &[f32], y: SendPtr, residual: Option<&[f32]>, cols: &Columns, want: usize, times: Option<&PhaseTimes>) {
        let p_n = cols.len();
        let panels = p_n.div_ceil(NR);
        let (cg, taps) = (self.cg(), self.g.taps());
        with_plans(panels, |plans| {
            {
                // A handful of plans of a few microseconds each: not worth waking the pool for.
                let _t = Clock::start(times, |t| &t.plan);
                for (pi, plan) in plans[..panels].iter_mut().enumerate() {
                    let (j0, j1) = columns::panel(pi, p_n);
                    plan.build(&self.g, cols, j0, j1 - j0);
                }
            }
            let plans = &plans[..panels];
            // Per panel: every input channel's rows, `C * taps` rows of 64, groups one after another.
            let pan = self.c * taps * NR;
            scratch::with(Slot::Shared, panels * pan, |buf| {
                let per = cg.div_ceil(want.div_ceil(panels * self.groups)).max(1);
                buf.par_chunks_mut(pan.max(1)).enumerate().for_each(|(pi, pb)| {
                    pb.par_chunks_mut((cg * taps * NR).max(1)).enumerate().for_each(|(gi, gb)| {
                        gb.par_chunks_mut((per * taps * NR).max(1)).enumerate().with_max_len(1).for_each(|(ci, cb)| {
                            let c0 = ci * per;
                            self.gather_group(x, &plans[pi], gi, c0, (c0 + per).min(cg), cb, times);
                        });
                    });
                });
                let buf: &[f32] = buf;
                let mtiles = self.mg().div_ceil(MR);
                let mper = mtiles.div_ceil(want.div_ceil(panels * self.groups).min(mtiles));
                let mchunks = mtiles.div_ceil(mper);
                (0..panels * self.groups * mchunks).into_par_iter().with_max_len(1).for_each(|task| {
                    let (pg, mc) = (task / mchunks, task % mchunks);
                    let (pi, gi) = (pg / self.groups, pg % self.groups);
                    let (t0, t1) = (mc * mper, ((mc + 1) * mper).min(mtiles));
                    let panel = &buf[pi * pan + gi * cg * taps * NR..][..cg * taps * NR];
                    scratch::with(Slot::Acc, (t1 - t0) * MR * NR, |acc| {
                        // SAFETY: tasks own disjoint (channel block, positions) sets of `out`.
                        unsafe { self.finish(y, residual, &plans[pi], gi, t0, t1, panel, acc, times) };
                    });
                });
            });
        });
    }

    /// Input channels `c0..c1` (within group `gi`) of the panel's im2col rows into `panel`.
    #[allow(clippy::too_many_arguments)]
    fn gather_group(&self, x: &[f32], plan: &PanelPlan, gi: usize, c0: usize, c1: usize, panel: &mut [f32], times: Option<&PhaseTimes>) {
        let (cg, plane) = (self.cg(), self.g.plane());
        let xg = &x[(gi * cg + c0) * plane..(gi * cg + c1) * plane];
        let _t = Clock::start(times, |t| &t.gather);
        if self.simd {
            simd_gather(plan, xg, plane, c1 - c0, panel);
        } else {
            plan.gather(xg, plane, c1 - c0, panel);
        }
    }

    /// Output channels of tiles `t0..t1` of group `gi` at the panel's positions: multiply the
    /// gathered `panel`, then epilogue and masked write-back.
    ///
    /// # Safety
    /// No other thread writes those outputs meanwhile.
    #[allow(clippy::too_many_arguments)]
    unsafe fn finish(
        &self,
        y: SendPtr,
        residual: Option<&[f32]>,
        plan: &PanelPlan,
        gi: usize,
        t0: usize,
        t1: usize,
        panel: &[f32],
        acc: &mut [f32],
        times: Option<&PhaseTimes>,
    ) {
        let (mg, kdim) = (self.mg(), self.kdim());
        let (r0, r1) = (t0 * MR, (t1 * MR).min(mg));
        let m0 = gi * mg;
        {
            let _t = Clock::start(times, |t| &t.gemm);
            if self.simd {
                simd_gemm(&self.w, gi, mg, kdim, t0, t1, panel, plan.cols, self.bias.as_deref().map(|b| &b[m0..m0 + mg]), acc);
            } else {
                let wg = &self.w[(m0 + r0) * kdim..(m0 + r1) * kdim];
                sgemm(
                    r1 - r0,
                    plan.cols,
                    kdim,
                    1.0,
                    wg,
                    Layout::row_major(kdim),
                    panel,
                    Layout::row_major(NR),
                    acc.as_mut_ptr(),
                    NR,
                    false,
                );
            }
        }
        let _t = Clock::start(times, |t| &t.scatter);
        let op = self.g.out_plane();
        let mut tmp = [0.0f32; NR];
        for r in r0..r1 {
            let m = m0 + r;
            #[cfg(target_arch = "x86_64")]
            if self.simd && r + PF_ROWS < r1 {
                super::gather::simd::prefetch_out(plan, y.get().add((m + PF_ROWS) * op));
            }
            let row = &mut acc[(r - r0) * NR..(r - r0 + 1) * NR];
            // The AVX-512 tile started from the bias already.
            let b = if self.simd { 0.0 } else { self.bias.as_ref().map_or(0.0, |b| b[m]) };
            let res = residual.map(|res| &res[m * op..(m + 1) * op]);
            if let Some(rp) = res {
                read_out(self.simd, plan, rp, &mut tmp);
            }
            if b != 0.0 || res.is_some() || self.act.is_some() {
                let n = 16 * plan.vecs;
                epilogue(&mut row[..n], b, res.map(|_| &tmp[..n]), self.act);
            }
            write_out(self.simd, plan, row, y.get().add(m * op));
        }
    }
}

thread_local! {
    static PLANS: RefCell<Vec<PanelPlan>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on at least `n` reusable plans of this thread.
/// The set positions of `mask`, flat, in raster order.
fn mask_positions(mask: &BitMask) -> Vec<u32> {
    let n = mask.len();
    let mut v = Vec::with_capacity(mask.count_ones());
    for (wi, &word) in mask.words().iter().enumerate() {
        let mut bits = word;
        while bits != 0 {
            let p = wi * 64 + bits.trailing_zeros() as usize;
            if p >= n {
                break;
            }
            v.push(p as u32);
            bits &= bits - 1;
        }
    }
    v
}

/// The direct kernel of this conv, if it has one (the executor's dense path uses it too).
impl SparseConv {
    pub(crate) fn into_direct(self) -> Option<DirectConv> {
        self.direct
    }
    /// Geometry, input and output channels of an ungrouped conv (what the dense row kernel
    /// is built from); `None` for grouped and depthwise convs.
    pub(crate) fn ungrouped_shape(&self) -> Option<(Geo2, usize, usize)> {
        (self.groups == 1 && self.kind == ConvKind::Gemm).then_some((self.g, self.c, self.m))
    }
    #[cfg(test)]
    pub(crate) fn has_direct(&self) -> bool {
        self.direct.is_some()
    }
}

fn with_plans<R>(n: usize, f: impl FnOnce(&mut Vec<PanelPlan>) -> R) -> R {
    let grow = |v: &mut Vec<PanelPlan>| {
        if v.len() < n {
            v.resize_with(n, PanelPlan::default);
        }
    };
    PLANS.with(|p| match p.try_borrow_mut() {
        Ok(mut p) => {
            grow(&mut p);
            f(&mut p)
        }
        Err(_) => {
            let mut v = Vec::new();
            grow(&mut v);
            f(&mut v)
        }
    })
}

fn simd_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        super::micro::available()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
fn pack_weights(w: &[f32], groups: usize, mg: usize, kdim: usize) -> Vec<f32> {
    use super::micro::{pack_rows, packed_len};
    let per = packed_len(mg, kdim);
    let mut out = vec![0.0; groups * per];
    for gi in 0..groups {
        pack_rows(&w[gi * mg * kdim..], mg, kdim, kdim, &mut out[gi * per..(gi + 1) * per]);
    }
    out
}
#[cfg(not(target_arch = "x86_64"))]
fn pack_weights(w: &[f32], _: usize, _: usize, _: usize) -> Vec<f32> {
    w.to_vec()
}

#[cfg(target_arch = "x86_64")]
pub(super) fn simd_gather(plan: &PanelPlan, x: &[f32], plane: usize, channels: usize, panel: &mut [f32]) {
    // SAFETY: only reached on the AVX-512 path; the plan was built for this geometry.
    unsafe { super::gather::simd::gather(plan, x, plane, channels, panel) }
}
#[cfg(not(target_arch = "x86_64"))]
pub(super) fn simd_gather(plan: &PanelPlan, x: &[f32], plane: usize, channels: usize, panel: &mut [f32]) {
    plan.gather(x, plane, channels, panel)
}

#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
fn simd_gemm(
    w: &[f32],
    gi: usize,
    mg: usize,
    kdim: usize,
    t0: usize,
    t1: usize,
    panel: &[f32],
    cols: usize,
    bias: Option<&[f32]>,
    acc: &mut [f32],
) {
    let per = super::micro::packed_len(mg, kdim);
    let g = super::micro::PanelGemm { a: &w[gi * per..(gi + 1) * per], kdim, rows: mg, t0, t1, b: panel, cols, bias };
    // SAFETY: only reached on the AVX-512 path.
    unsafe { g.run(acc) }
}
#[cfg(not(target_arch = "x86_64"))]
#[allow(clippy::too_many_arguments)]
fn simd_gemm(_: &[f32], _: usize, _: usize, _: usize, _: usize, _: usize, _: &[f32], _: usize, _: Option<&[f32]>, _: &mut [f32]) {
    unreachable!("the AVX-512 path is never chosen off x86-64")
}

fn read_out(simd: bool, plan: &PanelPlan, plane: &[f32], dst: &mut [f32; NR]) {
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: `simd` is only set where AVX-512 is present; `plane` is a whole output plane.
        return unsafe { super::gather::simd::read_out(plan, plane, dst) };
    }
    let _ = simd;
    dst.fill(0.0);
    for v in 0..plan.vecs {
        plan.each_run(plan.writes[v], |l, at, n| dst[16 * v + l..16 * v + l + n].copy_from_slice(&plane[at..at + n]));
    }
}

/// # Safety
/// `plane` points at a whole output plane no other thread writes at these positions.
unsafe fn write_out(simd: bool, plan: &PanelPlan, row: &[f32], plane: *mut f32) {
    #[cfg(target_arch = "x86_64")]
    if simd {
        return super::gather::simd::write_out(plan, row, plane);
    }
    let _ = simd;
    for v in 0..plan.vecs {
        plan.each_run(plan.writes[v], |l, at, n| {
            let src = &row[16 * v + l..16 * v + l + n];
            std::ptr::copy_nonoverlapping(src.as_ptr(), plane.add(at), n)
        });
    }
}
