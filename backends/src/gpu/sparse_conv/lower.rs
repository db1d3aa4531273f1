//! 2-D Conv onto the sparse conv kernels (sparse_conv_*.cl): prepared once per node (weights transposed for the GEMM, a
//! table of input offsets per reduction index), then launched as any member: over the
//! positions of one granularity's DISTiles, or over every position (the dense member, and the
//! dense lowering of convs whose shape the GEMM covers).

use super::schedule::{launch_local_bytes, register_bound, SparseConvSchedule};
use super::select::SparseConvKind;
use crate::gpu::device::{GpuDevice, KernelDialect};
use crate::gpu::kernels::Src;
use crate::gpu::lower::ctx::{int, BufId, Ctx, LArg};
use crate::gpu::lower::elementwise::activation_code;
use crate::gpu::lower::geom::geom;
use crate::gpu::sparse::meta::MetaLayout;
use dynaspa_runtime::graph::Conv;
use dynaspa_runtime::sparsity::Granularity;
use dynaspa_runtime::{DType, Error, Result};

/// Work-items per group of the one-per-column kernels.
const COLUMN_WG: u32 = 64;
/// Output channels per work-group of the split-K finish (a work-item per output): 6400
/// work-groups of one channel each made it ~7 µs of a 40 µs conv3x3 on an H100.
const FINISH_CH: u32 = 4;

/// A conv ready to launch: its buffers and the scalar arguments every member shares.
#[derive(Clone, Debug)]
pub(crate) struct SparseConvOp {
    pub kind: SparseConvKind,
    pub images: usize,
    pub cout: usize,
    /// Reduction length (input channels x taps).
    pub k: usize,
    pub oh: usize,
    pub ow: usize,
    pub y: BufId,
    bufs: [BufId; 4],
    ktab: BufId,
    geometry: Vec<LArg>,
    epilogue: [LArg; 5],
}

/// `None` when the conv is not one this kernel family runs (not 2-D, grouped other than
/// depthwise, non-float, or GEMM weights not known at compile time).
pub(crate) fn prepare<D: GpuDevice>(cx: &mut Ctx<D>, p: &Conv) -> Result<Option<SparseConvOp>> {
    for i in 0..cx.node.inputs.len() {
        if cx.has_input(i) && cx.in_dtype(i)? != DType::F32 {
            return Ok(None);
        }
    }
    let (xs, ws, os) = (cx.in_shape(0)?, cx.in_shape(1)?, cx.out_shape(0));
    if xs.len() != 4 || ws.len() != 4 || os.len() != 4 || os[1] != ws[0] {
        return Ok(None);
    }
    let Ok(g) = geom("Conv", &p.window, xs, os, &ws[2..]) else { return Ok(None) };
    let (cin, cout) = (xs[1], os[1]);
    let kind = if p.group == 1 && ws[1] == cin {
        SparseConvKind::Gemm
    } else if p.group == cin && cout == cin && ws[1] == 1 {
        SparseConvKind::Depthwise
    } else {
        return Ok(None);
    };
    if cx.has_input(2) && cx.in_shape(2)?.iter().product::<usize>() != cout {
        return Ok(None);
    }
    if p.fused_add && cx.in_shape(3)? != os {
        return Ok(None);
    }
    let (kh, kw) = (g.kernel[1], g.kernel[2]);
    let taps = kh * kw;
    let k = if kind == SparseConvKind::Gemm { cin * taps } else { taps };
    let (w, ktab) = match kind {
        SparseConvKind::Gemm => {
            let Some(wc) = cx.constant(1) else { return Ok(None) };
            let wv = wc.as_f32()?;
            let mut wt = vec![0f32; wv.len()];
            for m in 0..cout {
                for kk in 0..k {
                    wt[kk * cout + m] = wv[m * k + kk];
                }
            }
            let wt = cx.float_data(&wt, "transposed weights")?;
            let (ih, iw) = (g.input[1], g.input[2]);
            let (dh, dw) = (g.dil[1], g.dil[2]);
            let mut tab = Vec::with_capacity(3 * k);
            for kk in 0..k {
                let (ci, r) = (kk / taps, kk % taps);
                let (ky, kx) = (r / kw, r % kw);
                tab.push(int(ci * ih * iw + ky * dh * iw + kx * dw, "input offset")?);
                tab.push(int(ky * dh, "dilation")?);
                tab.push(int(kx * dw, "dilation")?);
            }
            (wt, cx.meta(&tab)?)
        }
        SparseConvKind::Depthwise => (cx.x(1)?, cx.dummy()?),
    };
    let x = cx.x(0)?;
    let bias = cx.x_or_dummy(2)?;
    let res = if p.fused_add { cx.x(3)? } else { cx.dummy()? };
    let mut geometry = Vec::with_capacity(14);
    for v in [
        cin,
        cout,
        g.input[1],
        g.input[2],
        g.output[1],
        g.output[2],
        kh,
        kw,
        g.stride[1],
        g.stride[2],
        g.pad[1],
        g.pad[2],
        g.dil[1],
        g.dil[2],
    ] {
        geometry.push(LArg::I32(int(v, "conv geometry")?));
    }
    let (act, p0, p1) = activation_code(p.activation);
    Ok(Some(SparseConvOp {
        kind,
        images: xs[0],
        cout,
        k,
        oh: g.output[1],
        ow: g.output[2],
        y: cx.y(0)?,
        bufs: [x, w, bias, res],
        ktab,
        geometry,
        epilogue: [LArg::I32(cx.has_input(2) as i32), LArg::I32(p.fused_add as i32), LArg::I32(act), LArg::F32(p0), LArg::F32(p1)],
    }))
}

/// The `Cached` blend of an op without sparse kernels: `fresh` (its dense result, shaped like
/// `y`) into `y` where the mask bit is 1, or everywhere without `masked`.
pub(crate) fn launch_blend_cached<D: GpuDevice>(
    cx: &mut Ctx<D>,
    fresh: BufId,
    y: BufId,
    meta: BufId,
    layout: &MetaLayout,
    masked: bool,
) -> Result<()> {
    let os = cx.out_shape(0);
    let (n, c, oh, ow) = (os[0], os[1], os[2], os[3]);
    let dummy = cx.dummy()?;
    let mut a = vec![
        LArg::Buf(fresh),
        LArg::Buf(dummy),
        LArg::Buf(dummy),
        LArg::Buf(dummy),
        LArg::Buf(y),
        LArg::Buf(meta),
        LArg::Buf(dummy),
        LArg::Buf(dummy),
    ];
    for v in [0, c, 0, 0, oh, ow, 0, 0, 0, 0, 0, 0, 0, 0, layout.cstride, 0, layout.data0, layout.img_stride, 0, 0] {
        a.push(LArg::I32(int(v, "blend geometry")?));
    }
    a.extend([LArg::I32(masked as i32), LArg::I32(0), LArg::I32(0), LArg::I32(-1), LArg::F32(0.0), LArg::F32(0.0)]);
    let kern = cx.kernel(Src::SparseConvFill, "sparse_conv_blend_cached_f32", &[])?;
    cx.launch(kern, [(oh * ow).div_ceil(COLUMN_WG as usize), c, n], [COLUMN_WG, 1, 1], a)
}

/// The mask metadata buffer and its layout: where sparse members find their tiles, and masked
/// stores the mask words. `None` for a plain dense conv.
pub(crate) type Meta<'a> = Option<(BufId, &'a MetaLayout)>;

/// Where in a list buffer sparse_conv_gemm.cl finds image n's count (`n * cstride + gi`) and its
/// list (`data0 + n * img_stride + tiles_at`).
#[derive(Clone, Copy, Debug)]
struct ListAt {
    cstride: usize,
    gi: usize,
    data0: usize,
    img_stride: usize,
    tiles_at: usize,
}

/// What SELF_LIST members (`SparseConvSchedule::self_list`) read their columns from: the mask
/// tensor, `stride` floats per image (0: one mask for the batch), and the op's list buffer
/// (`MaskColumns::list_len` ints) where a split GEMM leaves them for its finish.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MaskColumns {
    pub mask: BufId,
    pub stride: usize,
    pub list: BufId,
    /// Where the members also store the mask's counts as its bitmask launch would (SELF_COUNT
    /// in sparse_conv_gemm.cl): the buffer and its ints per image. Only for a mask planned with 1x1
    /// tiles alone, and never for calibration's scratch mask.
    pub report: Option<(BufId, usize)>,
    /// Whether the members may read the mask before their PDL wait (SL_PREWAIT in
    /// sparse_conv_gemm.cl, where `SparseConvFeatures::overlaps_launches`): the launch queued just
    /// ahead of them never writes it (`Resources::written_last`).
    pub prewait: bool,
}

impl MaskColumns {
    /// Ints of the list buffer for `images` maps of `positions`: a count per image, then
    /// each image's list.
    pub(crate) fn list_len(images: usize, positions: usize) -> usize {
        images + images * positions
    }
}

/// What members that split the reduction (KS > 1) work in: the partial sums (scratch, since
/// every launch rewrites what it reads) and, where the GEMM finishes its own splits, the
/// arrival counter of each output tile. The counters are the op's own and outlive the frame:
/// zeroed once when built, each launch leaves them zero. Members of one op share both (one
/// runs per frame), sized for the largest.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SplitBufs {
    pub part: Option<BufId>,
    /// `Some`: split members launch the fused GEMM alone; `None`: the GEMM, then
    /// sparse_conv_finish_f32.
    pub counters: Option<BufId>,
    /// For SELF_LIST members (`None`: the op has none).
    pub columns: Option<MaskColumns>,
}

impl SparseConvOp {
    /// Buffers and scalars in the order every sparse conv kernel takes them.
    fn args<D: GpuDevice>(
        &self,
        cx: &mut Ctx<D>,
        meta: Meta,
        gi: usize,
        part: Option<BufId>,
        cap: usize,
        masked: bool,
    ) -> Result<Vec<LArg>> {
        let lists =
            meta.map(|(b, m)| (b, ListAt { cstride: m.cstride, gi, data0: m.data0, img_stride: m.img_stride, tiles_at: m.tiles_at[gi] }));
        self.args_at(cx, lists, part, cap, masked)
    }

    /// `args` with the list buffer and where its counts and lists lie given explicitly.
    fn args_at<D: GpuDevice>(
        &self,
        cx: &mut Ctx<D>,
        lists: Option<(BufId, ListAt)>,
        part: Option<BufId>,
        cap: usize,
        masked: bool,
    ) -> Result<Vec<LArg>> {
        let dummy = cx.dummy()?;
        let [x, w, bias, res] = self.bufs;
        let meta = lists.map_or(dummy, |t| t.0);
        let mut a = vec![
            LArg::Buf(x),
            LArg::Buf(w),
            LArg::Buf(bias),
            LArg::Buf(res),
            LArg::Buf(self.y),
            LArg::Buf(meta),
            LArg::Buf(part.unwrap_or(dummy)),
            LArg::Buf(self.ktab),
        ];
        a.extend(self.geometry.iter().copied());
        let at = lists.map_or(ListAt { cstride: 0, gi: 0, data0: 0, img_stride: 0, tiles_at: 0 }, |t| t.1);
        for v in [at.cstride, at.gi, at.data0, at.img_stride, at.tiles_at, cap] {
            a.push(LArg::I32(int(v, "mask metadata offset")?));
        }
        a.push(LArg::I32(masked as i32));
        a.extend(self.epilogue);
        Ok(a)
    }

    /// The schedule of the dense member (every position): split when the grid is small for the
    /// device (`SparseConvSchedule::with_dense_split`); depthwise ops never split.
    pub(crate) fn dense_schedule<D: GpuDevice>(&self, cx: &Ctx<D>) -> SparseConvSchedule {
        let s = SparseConvSchedule::for_op(self.cout, self.k, None);
        if self.kind != SparseConvKind::Gemm {
            return s;
        }
        let t = s.tile;
        let base = (self.oh * self.ow).div_ceil(t.tn as usize) * self.cout.div_ceil(t.tm as usize) * self.images;
        s.with_dense_split(self.k, base, cx.dev.info().compute_units)
    }

    /// Columns per image `sched`'s grid covers: every tile the map can have, or every position.
    fn columns_cap(&self, sched: &SparseConvSchedule, layout: Option<&MetaLayout>) -> usize {
        match (sched.gran, layout) {
            (Some(g), Some(m)) => m.columns_cap(m.index(g)),
            _ => self.oh * self.ow,
        }
    }

    /// Whether `sched` splits this op's reduction (depthwise convs never do).
    fn splits(&self, sched: &SparseConvSchedule) -> bool {
        self.kind == SparseConvKind::Gemm && sched.ks > 1
    }

    /// `sched` with only the splits of this op's reduction that get a stage (see
    /// `SparseConvSchedule::working_splits`; depthwise convs never split).
    pub(crate) fn working_splits(&self, sched: &SparseConvSchedule) -> SparseConvSchedule {
        if self.splits(sched) {
            sched.working_splits(self.k)
        } else {
            *sched
        }
    }

    /// Floats of split-K partial sums `sched` needs (0 without a split).
    pub(crate) fn part_len(&self, sched: &SparseConvSchedule, layout: Option<&MetaLayout>) -> usize {
        let sched = &self.working_splits(sched);
        if self.splits(sched) {
            self.images * sched.ks as usize * self.cout * self.columns_cap(sched, layout)
        } else {
            0
        }
    }

    /// Tile counters the fused finish of `sched` needs (0 without a split): one per work-group
    /// of its grid without the splits, this frame's columns or not.
    pub(crate) fn counters_len(&self, sched: &SparseConvSchedule, layout: Option<&MetaLayout>) -> usize {
        if self.splits(&self.working_splits(sched)) {
            let t = sched.tile;
            self.columns_cap(sched, layout).div_ceil(t.tn as usize) * self.cout.div_ceil(t.tm as usize) * self.images
        } else {
            0
        }
    }

    /// The split-K buffers for members `scheds` (see `SplitBufs`): partial sums in pooled
    /// scratch, counters (when this executable fuses the finish) in a zeroed buffer of the op's.
    pub(crate) fn split_bufs<'s, D: GpuDevice>(
        &self,
        cx: &mut Ctx<D>,
        scheds: impl IntoIterator<Item = &'s SparseConvSchedule>,
        layout: Option<&MetaLayout>,
    ) -> Result<SplitBufs> {
        let (mut part, mut counters) = (0, 0);
        for s in scheds {
            part = part.max(self.part_len(s, layout));
            counters = counters.max(self.counters_len(s, layout));
        }
        Ok(SplitBufs {
            part: if part > 0 { Some(cx.scratch(part)?) } else { None },
            counters: if counters > 0 && cx.res.features.fused_finish {
                Some(cx.zeroed_ints(counters, "split-K tile counters")?)
            } else {
                None
            },
            columns: None,
        })
    }

    /// Appends the launches of one member to `cx.launches`. With `masked`, positions whose mask
    /// bit is 0 are not written (tiles need the metadata for that even when dense).
    pub(crate) fn launch<D: GpuDevice>(
        &self,
        cx: &mut Ctx<D>,
        sched: &SparseConvSchedule,
        meta: Meta,
        split: SplitBufs,
        masked: bool,
    ) -> Result<()> {
        // The dense member reads no tile list, but a masked store still needs the mask words.
        let gi = match (sched.gran, meta) {
            (None, _) => None,
            (Some(g), Some((_, m))) => Some(m.index(g).ok_or_else(|| Error::Other(format!("no {g} tiles in the mask metadata")))?),
            (Some(g), None) => return Err(Error::Other(format!("a {g} member without mask metadata"))),
        };
        if masked && meta.is_none() {
            return Err(Error::Other("a masked store without mask metadata".into()));
        }
        let sched = &self.working_splits(sched);
        let layout = meta.map(|m| m.1);
        let cap = self.columns_cap(sched, layout);
        // Buffers sized for other members than this one would be overrun: refused here, where
        // the op can still fall back, rather than left to corrupt memory at run time.
        let fits = |b: Option<BufId>, words: usize| words == 0 || b.is_some_and(|b| cx.res.caps[b] >= words * 4);
        let features = cx.res.features;
        let fused = self.kind == SparseConvKind::Gemm && split.counters.is_some() && sched.fuses_finish(features.fused_finish);
        let part = self.part_len(sched, layout);
        if !fits(split.part, part) || (fused && !fits(split.counters, self.counters_len(sched, layout))) {
            return Err(Error::Other(format!("split-K buffers too small for member {sched:?}")));
        }
        // The kernels index partial sums and outputs with 32-bit ints.
        let words = part.max(self.images * self.cout * self.oh * self.ow);
        if words > i32::MAX as usize {
            return Err(Error::Other(format!("member {sched:?} needs {words} floats of one buffer: beyond 32-bit indices")));
        }
        let (cout, images) = (self.cout, self.images);
        let columns = match (sched.self_list, split.columns) {
            (false, _) => None,
            (true, Some(c)) if self.kind == SparseConvKind::Gemm && sched.gran == Some(Granularity::new(1, 1)) => Some(c),
            (true, c) => {
                return Err(Error::Other(format!(
                    "member {sched:?} lists its own columns: a 1x1 GEMM member with the mask at hand ({c:?})"
                )))
            }
        };
        let args = match columns {
            None => self.args(cx, meta, gi.unwrap_or(0), split.part, cap, masked)?,
            Some(c) => {
                let positions = self.oh * self.ow;
                if cx.res.caps[c.list] < MaskColumns::list_len(images, positions) * 4 {
                    return Err(Error::Other(format!("the column list buffer is too small for member {sched:?}")));
                }
                // Every column is a set position: nothing for `masked` to skip.
                let at = ListAt { cstride: 1, gi: 0, data0: images, img_stride: positions, tiles_at: 0 };
                self.args_at(cx, Some((c.list, at)), split.part, cap, false)?
            }
        };
        match self.kind {
            SparseConvKind::Gemm => {
                let t = sched.tile;
                let mut defines = sched.gemm_defines(fused);
                let info = cx.dev.info();
                let opencl_c = features.dialect != KernelDialect::Wgsl;
                if let Some(bytes) = launch_local_bytes(sched, columns.is_some(), info) {
                    defines.push(("DSP_DYN_SMEM", int(bytes as usize, "the weights' stage")? as i64));
                }
                // PoCL 3.1 (CI's) computed sliced 3x3 members with the hoisted gather wrong
                // (relative L2 ~0.2, tests/gpu_sliced.rs; right without it, and 1x1 convs
                // right either way): sliced members on OpenCL work their gather out per stage.
                if opencl_c && (!features.hoisted_gather || (sched.wk > 1 && features.dialect == KernelDialect::OpenCl)) {
                    defines.push(("SPARSE_CONV_HOIST", 0));
                }
                if sched.one_stage(self.k) {
                    defines.push(("SPARSE_CONV_ONE_STAGE", 1));
                    if sched.et && features.overlaps_launches() {
                        defines.push(("SPARSE_CONV_EARLY_TRIGGER", 1));
                    }
                }
                if features.two_stages_in_flight {
                    defines.push(("SPARSE_CONV_DEPTH", 2));
                }
                let [tx, ty, tz] = sched.local();
                if let Some(groups) = register_bound(tx * ty * tz).filter(|_| features.register_bound()) {
                    defines.push(("SPARSE_CONV_MIN_BLOCKS", groups as i64));
                }
                // Sparse members run column tiles slowest where the kernel has it (SPARSE_CONV_CSLOW,
                // sparse_conv_knobs.h), as does SELF_LIST.
                let slow = sched.gran.is_some() && features.columns_slowest();
                if columns.is_some_and(|c| c.report.is_some()) {
                    defines.push(("SELF_COUNT", 1));
                }
                if columns.is_some() && features.self_list_early() {
                    defines.push(("SL_EARLY", 1));
                }
                if columns.is_some_and(|c| c.prewait) && features.overlaps_launches() {
                    defines.push(("SL_PREWAIT", 1));
                }
                let kern = cx.kernel(Src::SparseConvGemm, "sparse_conv_gemm_f32", &defines)?;
                let (ctiles, mtiles) = (cap.div_ceil(t.tn as usize), cout.div_ceil(t.tm as usize));
                let splits = images * sched.ks as usize;
                let grid = if slow || columns.is_some() { [mtiles, splits, ctiles] } else { [ctiles, mtiles, splits] };
                let mut gemm_args = args.clone();
                gemm_args.extend(split.counters.filter(|_| fused).map(LArg::Buf));
                if let Some(c) = columns {
                    gemm_args.extend([LArg::Buf(c.mask), LArg::I32(int(c.stride, "mask stride")?)]);
                    if let Some((rep, stride)) = c.report {
                        gemm_args.extend([LArg::Buf(rep), LArg::I32(int(stride, "mask counts stride")?)]);
                    }
                }
                cx.launch(kern, grid, sched.local(), gemm_args)?;
                if columns.is_some() {
                    // Its work-groups take window after window of columns (sparse_conv_gemm.cl).
                    cx.narrowable(2, t.tn);
                }
                if sched.ks > 1 && !fused {
                    let mut defines = sched.finish_defines(features.finish_speculates());
                    if features.overlaps_launches() {
                        defines.push(("FIN_TRIGGER", 1));
                    }
                    let kern = cx.kernel(Src::SparseConvGemm, "sparse_conv_finish_f32", &defines)?;
                    let (ctiles, chans) = (cap.div_ceil(COLUMN_WG as usize), cout.div_ceil(FINISH_CH as usize));
                    let grid = if slow { [chans, images, ctiles] } else { [ctiles, chans, images] };
                    cx.launch(kern, grid, [COLUMN_WG, FINISH_CH, 1], args)?;
                    if columns.is_some() {
                        // Every finish strides over the columns; a self-listing member's grids
                        // are the ones a frame narrows.
                        cx.narrowable(if slow { 2 } else { 0 }, COLUMN_WG);
                    }
                }
            }
            SparseConvKind::Depthwise => {
                let kern = cx.kernel(Src::SparseConvDw, "sparse_conv_dw_f32", &SparseConvSchedule::dw_defines(sched.gran))?;
                cx.launch(kern, [cap.div_ceil(COLUMN_WG as usize), cout, images], [COLUMN_WG, 1, 1], args)?;
            }
        }
        Ok(())
    }

    /// `Residual` fill: act(residual) wherever the mask bit is 0.
    pub(crate) fn launch_residual_fill<D: GpuDevice>(&self, cx: &mut Ctx<D>, meta: BufId, layout: &MetaLayout) -> Result<()> {
        let args = self.args(cx, Some((meta, layout)), 0, None, 0, true)?;
        let kern = cx.kernel(Src::SparseConvFill, "sparse_conv_fill_residual_f32", &[])?;
        cx.launch(kern, [(self.oh * self.ow).div_ceil(COLUMN_WG as usize), self.cout, self.images], [COLUMN_WG, 1, 1], args)
    }
}
