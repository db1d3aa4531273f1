//! Compile time of a sparse op: its mask plan (shared with every op reading the same mask), the
//! launches of each PolyKernel member, its fill, and its PolyKernel, calibrated on first use
//! per op signature and device the way the CPU backend does (cpu/sparse_exec/calibrate.rs:
//! blob masks of a few densities, tables cached on disk keyed by the device fingerprint).

use super::features::SparseConvFeatures;
use super::knobs::GpuLimits;
use super::lower::{launch_blend_cached, prepare, MaskColumns, SparseConvOp, SplitBufs};
use super::schedule::{member_schedule, SparseConvSchedule, GRANULARITIES};
use super::select::{runs_sparse, SparseConvKind};
use crate::cpu::sparse_exec::calibrate::{self, blob_mask, random_tensor, Subject};
use crate::gpu::device::GpuDevice;
use crate::gpu::lower::ctx::{replay_launches, BufId, Ctx, Launch};
use crate::gpu::lower::vendor_conv::lower_dense;
use crate::gpu::sparse::bitmask::{bitmask_launch, MaskLoader};
use crate::gpu::sparse::meta::MetaLayout;
use crate::gpu::sparse::step::{Frames, MaskPlan, SparseOp};
use crate::SparseConfig;
use dynaspa_runtime::dispatch::{DispatchTable, Member, PolyKernel, Schedule};
use dynaspa_runtime::graph::{Conv, FillPolicy, Graph, SparseSpec};
use dynaspa_runtime::sparsity::{BitMask, Granularity};
use dynaspa_runtime::{DType, Error, Result, Tensor, TensorData};
use std::collections::HashMap;

/// Bumped whenever kernels or schedules change what a member costs: old cached tables go stale.
const CALIBRATION_VERSION: &str = "gpu-sparse-conv-v3";
/// Launches queued per timed call: one sync shared by several runs.
const RUNS_PER_CALL: usize = 4;

/// The mask plan for `spec`'s mask read as images x h x w, made on first use, with tile lists
/// for the granularities `frames.grans` planned for it (else the calibrated members').
fn mask_plan<D: GpuDevice>(
    cx: &mut Ctx<D>,
    frames: &mut Frames<D>,
    spec: &SparseSpec,
    (images, h, w): (usize, usize, usize),
) -> Result<usize> {
    let value = spec.mask;
    if let Some(i) = frames.masks.iter().position(|m| m.value == value && (m.layout.images, m.layout.h, m.layout.w) == (images, h, w)) {
        return Ok(i);
    }
    let name = cx.graph.values[value].name.clone();
    let mshape = &cx.graph.values[value].shape;
    let mask_stride = if mshape[0] == 1 { 0 } else { h * w };
    let mask_buf = cx.res.slot[value].ok_or_else(|| Error::Other(format!("mask '{name}' has no buffer")))?;
    let grans = frames.grans.iter().find(|(k, _)| *k == (value, images, h, w)).map_or_else(|| GRANULARITIES.to_vec(), |(_, g)| g.clone());
    let layout = MetaLayout::new(images, h, w, &grans)?;
    let meta = cx.res.upload(cx.dev, &Tensor::new(vec![layout.total()], TensorData::I32(vec![0; layout.total()]))?, "mask metadata")?;
    let grans = cx.meta(&layout.grans_table())?;
    // The host reads the counts where the kernel stores them, with no copy per frame, where
    // the device maps host memory (what dispatch adds to conv3x3 at density 0.3 fell to
    // 0.8-1.1 µs on an H200: RESULTS.md, "what lagged dispatch adds to the member").
    let (host, staging) = match cx.dev.host_mapped(layout.data0 * 4)? {
        Some((buf, st)) => (Some(cx.res.adopt(buf, layout.data0 * 4)), Some(st)),
        None => (None, None),
    };
    let bitmask = bitmask_launch(cx, mask_buf, mask_stride, meta, grans, &layout, host)?;
    // Self-listing members store the counts of a mask planned with 1x1 tiles alone, and a frame
    // whose readers all do makes no bitmask launch (SELF_COUNT; on an H200 the fastest member
    // with dispatch: stride 2 at density 0.1 18.7 -> 15.3 µs, conv1x1 12.9 -> 9.5).
    let report = (layout.grans == [Granularity::new(1, 1)]).then_some((host.unwrap_or(meta), layout.cstride));
    let precision = cx.res.precision;
    frames.masks.push(MaskPlan { name, value, mask_buf, mask_stride, meta, layout, bitmask, report, precision });
    let m = frames.masks.len() - 1;
    if let Some(st) = staging {
        frames.map_counts(m, st);
    }
    Ok(m)
}

/// The granularities each mask reading of `g` needs: the union over the sparse convs reading
/// it of their PolyKernels' (a profile's, else calibration's candidates), with 1x1 always (the
/// frame's density is read from its count).
pub(crate) fn plan_granularities(g: &Graph, polys: &HashMap<String, PolyKernel>) -> Vec<((usize, usize, usize, usize), Vec<Granularity>)> {
    let mut out: Vec<((usize, usize, usize, usize), Vec<Granularity>)> = Vec::new();
    for n in g.nodes.iter().filter(|n| runs_sparse(g, n)) {
        let (Some(sp), Some(&y)) = (n.sparse.as_ref(), n.outputs.first()) else { continue };
        let os = &g.values[y].shape;
        let key = (sp.mask, os[0], os[2], os[3]);
        let mut want: Vec<Granularity> = match polys.get(&n.name) {
            Some(p) => p.granularities().to_vec(),
            None => GRANULARITIES.to_vec(),
        };
        want.push(Granularity::new(1, 1));
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.extend(want),
            None => out.push((key, want)),
        }
    }
    for (_, v) in &mut out {
        v.sort_unstable();
        v.dedup();
    }
    out
}

/// Lowers the sparse conv `cx.node` into `frames` (its launches live there, not in `cx`), with
/// the PolyKernel `tuned` (from a profile) or, without one, calibrated.
pub(crate) fn lower_sparse_conv<D: GpuDevice>(
    cx: &mut Ctx<D>,
    frames: &mut Frames<D>,
    spec: &SparseSpec,
    p: &Conv,
    cfg: &SparseConfig,
    tuned: Option<&PolyKernel>,
) -> Result<()> {
    let op = prepare(cx, p)?.ok_or_else(|| Error::Other("the sparse conv kernels do not cover this conv".into()))?;
    let m = mask_plan(cx, frames, spec, (op.images, op.oh, op.ow))?;
    let (meta, layout) = (frames.masks[m].meta, frames.masks[m].layout.clone());
    let dense = op.dense_schedule(cx);
    let limits = GpuLimits { self_list: cx.res.features.self_list, ..GpuLimits::of(cx.dev.info()) };
    let schedules_of = |poly: &PolyKernel| -> Result<Vec<SparseConvSchedule>> {
        poly.members()
            .iter()
            .map(|mb| member_schedule(op.kind, op.cout, op.k, dense, &mb.schedule, &limits).map_err(Error::Other))
            .collect()
    };
    // Calibration's candidates: the dense member and each granularity with the default tile
    // (also the fallback when a profile's members cannot be built here).
    let candidates: Vec<SparseConvSchedule> = std::iter::once(dense)
        .chain(GRANULARITIES.iter().map(|&g| SparseConvSchedule::for_op(op.cout, op.k, Some(g)).with_self_list(op.kind, &limits)))
        .collect();
    let tuned_scheds = tuned.map(schedules_of).transpose()?;
    let mut splitk = op.split_bufs(cx, candidates.iter().chain(tuned_scheds.iter().flatten()), Some(&layout))?;
    // Calibration's masks go to a scratch buffer of one image (the real one holds nothing yet):
    // self-listing candidates read that one, the members the frames run read the real one.
    let scratch_mask = cx.scratch(layout.h * layout.w)?;
    let mut calib_split = splitk;
    if candidates.iter().chain(tuned_scheds.iter().flatten()).any(|s| s.self_list) {
        let list = cx.scratch(MaskColumns::list_len(op.images, op.oh * op.ow))?;
        let mp = &frames.masks[m];
        let prewait = !cx.res.written_last.contains(&mp.mask_buf);
        splitk.columns = Some(MaskColumns { mask: mp.mask_buf, stride: mp.mask_stride, list, report: mp.report, prewait });
        // Calibration's mask arrives by copy, never from a kernel.
        calib_split.columns = Some(MaskColumns { mask: scratch_mask, stride: 0, list, report: None, prewait: true });
    }
    // The dense member may be the vendor's conv followed by the masked store; returns what it
    // runs when it is the vendor's.
    let launch_member = |cx: &mut Ctx<D>, s: &SparseConvSchedule, split: SplitBufs| -> Result<Option<String>> {
        if s.gran.is_none() {
            let ours = &mut |cx: &mut Ctx<D>| op.launch(cx, s, Some((meta, &layout)), split, true);
            lower_dense(cx, p, Some((meta, &layout)), ours)
        } else {
            op.launch(cx, s, Some((meta, &layout)), split, true).map(|_| None)
        }
    };
    let mut residual_fill = Vec::new();
    if spec.fill == FillPolicy::Residual {
        op.launch_residual_fill(cx, meta, &layout)?;
        residual_fill = std::mem::take(&mut cx.launches);
    }
    // Each member's launches, and what the dense one runs when it is the vendor's.
    let lower_members = |cx: &mut Ctx<D>, scheds: &[SparseConvSchedule]| -> Result<(Vec<Vec<Launch<D::Kernel>>>, Option<String>)> {
        let mut members = Vec::with_capacity(scheds.len());
        let mut dense_vendor = None;
        for s in scheds {
            if let Some(v) = launch_member(cx, s, splitk)? {
                dense_vendor = Some(v);
            }
            members.push(std::mem::take(&mut cx.launches));
        }
        Ok((members, dense_vendor))
    };
    let mut from_profile = None;
    if let (Some(poly), Some(scheds)) = (tuned, tuned_scheds) {
        match lower_members(cx, &scheds) {
            Ok(lowered) => from_profile = Some((poly.clone(), scheds, lowered)),
            Err(e) => {
                cx.launches.clear();
                tracing::warn!(node = %cx.node.name, "profile's PolyKernel cannot be built here ({e}); calibrating");
            }
        }
    }
    let used_profile = from_profile.is_some();
    let (poly, scheds, (members, dense_vendor)) = match from_profile {
        Some(p) => p,
        None => {
            let mut cands = Vec::new();
            // The mask plan was made for the profile's granularities when it had one (1x1 is
            // always there): a fallback calibrates among those.
            for s in candidates.iter().filter(|s| s.gran.is_none_or(|g| layout.index(g).is_some())) {
                launch_member(cx, s, calib_split)?;
                cands.push((s.gran, std::mem::take(&mut cx.launches)));
            }
            let poly = poly_kernel(cx, &frames.masks[m], &op, &cands, &residual_fill, (scratch_mask, calib_split.columns.is_some()), cfg)?;
            let scheds = schedules_of(&poly)?;
            let lowered = lower_members(cx, &scheds)?;
            (poly, scheds, lowered)
        }
    };
    let mut cached_first = Vec::new();
    if spec.fill == FillPolicy::Cached {
        op.launch(cx, &dense, None, splitk, false)?;
        cached_first = std::mem::take(&mut cx.launches);
    }
    let zero = (spec.fill == FillPolicy::Zero).then(|| (op.y, cx.out_len(0) * cx.res.precision.elem_bytes(DType::F32)));
    frames.ops.push(SparseOp {
        from_profile: used_profile,
        residual_fill,
        cached_first,
        zero,
        force: cfg.force,
        dense_vendor,
        meta_free: scheds.iter().map(|s| s.self_list).collect(),
        reports_counts: scheds.iter().map(|s| s.self_list && frames.masks[m].report.is_some()).collect(),
        mask_prewait: splitk.columns.is_some_and(|c| c.prewait),
        ..SparseOp::new(cx.node, m, spec.fill, poly, members)
    });
    Ok(())
}

/// Lowers a `Cached` op without sparse kernels: `dense` lowers it into a scratch buffer, then
/// a blend copies the mask's positions (all of them on the first frame) into the output, whose
/// buffer persists across frames.
pub(crate) fn lower_cached_dense<D: GpuDevice>(
    cx: &mut Ctx<D>,
    frames: &mut Frames<D>,
    spec: &SparseSpec,
    dense: impl Fn(&mut Ctx<D>) -> Result<()>,
) -> Result<()> {
    let os = cx.out_shape(0).to_vec();
    let y = cx.y(0)?;
    let m = mask_plan(cx, frames, spec, (os[0], os[2], os[3]))?;
    let (meta, layout) = (frames.masks[m].meta, frames.masks[m].layout.clone());
    let fresh = cx.scratch(os.iter().product())?;
    let out = cx.node.outputs[0];
    cx.res.slot[out] = Some(fresh);
    let lowered = dense(cx);
    cx.res.slot[out] = Some(y);
    lowered?;
    let compute = std::mem::take(&mut cx.launches);
    let mut blended = Vec::new();
    for masked in [true, false] {
        launch_blend_cached(cx, fresh, y, meta, &layout, masked)?;
        let mut l = compute.clone();
        l.extend(std::mem::take(&mut cx.launches));
        blended.push(l);
    }
    let cached_first = blended.pop().expect("two");
    let members = vec![blended.pop().expect("one")];
    let poly = PolyKernel::new(vec![Member { schedule: Schedule::dense("dense"), table: DispatchTable::constant(1.0)? }])?;
    frames.ops.push(SparseOp { cached_first, ..SparseOp::new(cx.node, m, FillPolicy::Cached, poly, members) });
    Ok(())
}

/// A node whose result is computed on whole frames only and kept on the others
/// (`FillPolicy::Held`: a norm's statistics), over the mask of its input's plane.
pub(crate) fn lower_held<D: GpuDevice>(cx: &mut Ctx<D>, frames: &mut Frames<D>, spec: &SparseSpec, dense: impl Fn(&mut Ctx<D>) -> Result<()>) -> Result<()> {
    let xs = cx.in_shape(0)?.to_vec();
    let [n, _, h, w] = xs[..] else {
        return Err(Error::Other(format!("held statistics of an input of shape {xs:?}, not [N, C, H, W]")));
    };
    let m = mask_plan(cx, frames, spec, (n, h, w))?;
    dense(cx)?;
    let compute = std::mem::take(&mut cx.launches);
    let poly = PolyKernel::new(vec![Member { schedule: Schedule::dense("dense"), table: DispatchTable::constant(1.0)? }])?;
    frames.ops.push(SparseOp::new(cx.node, m, FillPolicy::Held, poly, vec![compute]));
    Ok(())
}

fn member_name(g: Option<Granularity>) -> String {
    g.map_or_else(|| "dense".to_string(), |g| format!("tiles{g}"))
}

/// The op's PolyKernel: placeholder tables when a member is forced (never read), else
/// calibrated or read from the cache.
fn poly_kernel<D: GpuDevice>(
    cx: &mut Ctx<D>,
    mp: &MaskPlan<D::Kernel>,
    op: &SparseConvOp,
    members: &[(Option<Granularity>, Vec<Launch<D::Kernel>>)],
    residual_fill: &[Launch<D::Kernel>],
    (scratch_mask, self_list): (BufId, bool),
    cfg: &SparseConfig,
) -> Result<PolyKernel> {
    if cfg.force.is_some() {
        let ms = members
            .iter()
            .map(|(g, _)| {
                let schedule = match g {
                    None => Schedule::dense("dense"),
                    Some(g) => Schedule::sparse(member_name(Some(*g)), *g),
                };
                Ok(Member { schedule, table: DispatchTable::constant(1.0)? })
            })
            .collect::<Result<Vec<_>>>()?;
        return PolyKernel::new(ms);
    }
    let (images, h, w) = (mp.layout.images, mp.layout.h, mp.layout.w);
    // Operands: random inputs (the buffers hold nothing yet at compile time), a scratch mask.
    for i in [0usize, 3] {
        if cx.has_input(i) && cx.constant(i).is_none() {
            let b = cx.x(i)?;
            let v = cx.in_value(i)?;
            let shape = cx.graph.values[v].shape.clone();
            let t = random_tensor(DType::F32, &shape, 0x51ed + i as u64);
            cx.res.overwrite(cx.dev, b, &t, "random operand")?;
        }
    }
    let grans = cx.meta(&mp.layout.grans_table())?;
    let bitmask = bitmask_launch(cx, scratch_mask, 0, mp.meta, grans, &mp.layout, None)?;
    let dev = cx.dev;
    let bufs = &cx.res.bufs;
    let run = |launches: &[Launch<D::Kernel>]| -> Result<()> {
        for _ in 0..RUNS_PER_CALL {
            replay_launches(dev, bufs, residual_fill)?;
            replay_launches(dev, bufs, launches)?;
        }
        dev.finish()
    };
    let by_gran = |g: Option<Granularity>| members.iter().find(|(h, _)| *h == g).map(|(_, l)| l.as_slice()).unwrap_or(&[]);
    // The dense member is timed on a half-full mask: its masked store skips the rest.
    let loader = MaskLoader::new(dev, bufs, scratch_mask, &bitmask, cx.res.precision);
    let half = blob_mask(h, w, 0.5, 11);
    let time_dense = || -> Result<()> {
        loader.load(&half)?;
        run(by_gran(None))
    };
    let time_sparse = |mask: &BitMask, g: Granularity| -> Result<()> {
        loader.load(mask)?;
        run(by_gran(Some(g)))
    };
    let shapes: Vec<String> = cx.node.inputs.iter().map(|i| i.map_or("-".into(), |v| format!("{:?}", cx.graph.values[v].shape))).collect();
    let kind = if op.kind == SparseConvKind::Depthwise { "dw" } else { "gemm" };
    // Split members cost less with the fused finish: tables timed one way do not serve the other.
    let features = cx.res.features;
    let finish = if features.fused_finish { "fused" } else { "split" };
    // So do 1x1 members that list their own columns: the list is part of their time.
    let lists = if self_list { "|1x1 lists its columns" } else { "" };
    // And the gather's and the stage pipeline's paths, where the options moved them off the
    // device's default (the default's tables keep their old key).
    let defaults = SparseConvFeatures::defaults(dev.info());
    let mut paths = String::new();
    if features.hoisted_gather != defaults.hoisted_gather {
        paths.push_str(if features.hoisted_gather { "|hoisted gather" } else { "|gather per element" });
    }
    if features.two_stages_in_flight != defaults.two_stages_in_flight {
        paths.push_str(if features.two_stages_in_flight { "|two stages in flight" } else { "|one stage in flight" });
    }
    let signature =
        format!("{CALIBRATION_VERSION}|{kind}|{:?}|{}|images {images}|finish {finish}{lists}{paths}", cx.node.op, shapes.join(","));
    let subject = Subject {
        signature,
        height: h,
        width: w,
        granularities: members.iter().filter_map(|(g, _)| *g).collect(),
        time_dense: &time_dense,
        time_sparse: &time_sparse,
        runs_per_call: RUNS_PER_CALL,
    };
    let t0 = std::time::Instant::now();
    let key = crate::gpu::dtype::fingerprint_at(dev.info(), cx.res.precision);
    let poly = calibrate::poly_kernel_on(&subject, &key, "gpu", cfg.cache_dir.as_deref())?;
    tracing::debug!(node = %cx.node.name, ms = t0.elapsed().as_secs_f64() * 1e3, "gpu sparse PolyKernel ready");
    Ok(poly)
}
