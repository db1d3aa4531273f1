//! A-ViT's token projections as PolyKernel ops: a dense member (every row, in token order) and
//! token GEMM tiles over the active tokens, picked per frame from the active count the way a
//! sparse conv picks from DISTile counts. The mask's compaction plays the bitmask kernel's part
//! in `step.rs`: the op's step launches it, and its counts reach the host behind the frame
//! (lagged selection). Members come from a profile, else from calibration (first use per
//! signature and device, cached on disk).

use super::knobs as token_knobs;
use super::launches::{compaction_launch, TokenGemm};
use crate::cpu::sparse_exec::calibrate::{self, blob_mask, random_tensor, Subject};
use crate::gpu::device::GpuDevice;
use crate::gpu::lower::ctx::{replay_launches, Ctx, Launch};
use crate::gpu::sparse::bitmask::MaskLoader;
use crate::gpu::sparse::meta::MetaLayout;
use crate::gpu::sparse::step::{Frames, MaskPlan, SparseOp};
use crate::gpu::sparse_conv::knobs::{schedule_name, GemmKnobs, GpuLimits};
use crate::SparseConfig;
use dynaspa_runtime::dispatch::{DispatchTable, Member, PolyKernel, Schedule};
use dynaspa_runtime::graph::SparseSpec;
use dynaspa_runtime::sparsity::{BitMask, Granularity};
use dynaspa_runtime::{DType, Error, Result};

/// Bumped whenever the token kernels change what a member costs: old cached tables go stale.
const CALIBRATION_VERSION: &str = "gpu-token-v1";
/// Launches queued per timed call: one sync shared by several runs.
const RUNS_PER_CALL: usize = 4;

/// The knobs of each member of `poly` for this op, or why one cannot run here.
pub(crate) fn member_knobs(poly: &PolyKernel, t: usize, n: usize, limits: &GpuLimits) -> std::result::Result<Vec<GemmKnobs>, String> {
    poly.members().iter().map(|m| token_knobs::member_knobs(&m.schedule, t, n, limits)).collect()
}

/// The mask plan of compaction buffer `g.meta`, made on first use.
fn mask_plan<D: GpuDevice>(
    cx: &Ctx<D>,
    frames: &mut Frames<D>,
    spec: &SparseSpec,
    g: &TokenGemm,
    compaction: Launch<D::Kernel>,
) -> Result<usize> {
    if let Some(i) = frames.masks.iter().position(|m| m.meta == g.meta) {
        return Ok(i);
    }
    let name = cx.graph.values[spec.mask].name.clone();
    let mask_buf = cx.res.slot[spec.mask].ok_or_else(|| Error::Other(format!("token mask '{name}' has no buffer")))?;
    let layout = MetaLayout::tokens(g.images, g.t);
    frames.masks.push(MaskPlan {
        name,
        value: spec.mask,
        mask_buf,
        mask_stride: g.t,
        meta: g.meta,
        layout,
        bitmask: compaction,
        report: None,
        precision: cx.res.precision,
    });
    Ok(frames.masks.len() - 1)
}

/// Lowers the token projection `g` into `frames` as a PolyKernel op: `tuned` (a profile's)
/// when its members run here, else calibrated.
pub(crate) fn lower_token_linear<D: GpuDevice>(
    cx: &mut Ctx<D>,
    frames: &mut Frames<D>,
    spec: &SparseSpec,
    compaction: Launch<D::Kernel>,
    g: &TokenGemm,
    cfg: &SparseConfig,
    tuned: Option<&PolyKernel>,
) -> Result<()> {
    let m = mask_plan(cx, frames, spec, g, compaction)?;
    let limits = GpuLimits::of(cx.dev.info());
    let lower_members = |cx: &mut Ctx<D>, poly: &PolyKernel, knobs: &[GemmKnobs]| -> Result<Vec<Vec<Launch<D::Kernel>>>> {
        let mut out = Vec::with_capacity(knobs.len());
        for (mb, k) in poly.members().iter().zip(knobs) {
            g.launch(cx, k, mb.schedule.is_dense())?;
            out.push(std::mem::take(&mut cx.launches));
        }
        Ok(out)
    };
    let mut from_profile = None;
    if let Some(poly) = tuned {
        match member_knobs(poly, g.t, g.n, &limits).map_err(Error::Other).and_then(|k| lower_members(cx, poly, &k)) {
            Ok(members) => from_profile = Some((poly.clone(), members)),
            Err(e) => {
                cx.launches.clear();
                tracing::warn!(node = %cx.node.name, "profile's PolyKernel cannot be built here ({e}); calibrating");
            }
        }
    }
    let used_profile = from_profile.is_some();
    let (poly, members) = match from_profile {
        Some(p) => p,
        None => {
            let poly = calibrated(cx, g, cfg)?;
            let knobs = member_knobs(&poly, g.t, g.n, &limits).map_err(Error::Other)?;
            let members = lower_members(cx, &poly, &knobs)?;
            (poly, members)
        }
    };
    // Every member writes every row (inactive ones 0): no zero fill.
    frames.ops.push(SparseOp { from_profile: used_profile, force: cfg.force, ..SparseOp::new(cx.node, m, spec.fill, poly, members) });
    Ok(())
}

/// The default PolyKernel (the dense member and the default tile over the active tokens), its
/// tables measured on blob masks of several densities, or placeholders when a member is forced.
fn calibrated<D: GpuDevice>(cx: &mut Ctx<D>, g: &TokenGemm, cfg: &SparseConfig) -> Result<PolyKernel> {
    let one = Granularity::new(1, 1);
    if cfg.force.is_some() {
        let members = vec![
            Member { schedule: Schedule::dense("dense"), table: DispatchTable::constant(1.0)? },
            Member { schedule: Schedule::sparse(format!("tiles{one}"), one), table: DispatchTable::constant(1.0)? },
        ];
        return PolyKernel::new(members);
    }
    let info = cx.dev.info();
    let dense_knobs = token_knobs::default_knobs(g.t, g.n);
    let tile = token_knobs::calibration_knobs(g.t, g.n, info.kind == "cpu", &GpuLimits::of(info));
    let mut lowered = Vec::new();
    for (k, dense) in [(dense_knobs, true), (tile, false)] {
        g.launch(cx, &k, dense)?;
        lowered.push(std::mem::take(&mut cx.launches));
    }
    // The input holds nothing yet at compile time: random rows (zeros could take shortcuts).
    let x = random_tensor(DType::F32, &[g.images * g.t * g.k], 0x70c5);
    cx.res.overwrite(cx.dev, g.x, &x, "random rows")?;
    // One scratch mask for every image, compacted into the op's own order buffer.
    let scratch = cx.scratch(g.t)?;
    let compact = compaction_launch(cx, scratch, g.meta, g.t, 0, g.images)?;
    let (dev, bufs) = (cx.dev, &cx.res.bufs);
    let run = |launches: &[Launch<D::Kernel>]| -> Result<()> {
        for _ in 0..RUNS_PER_CALL {
            replay_launches(dev, bufs, launches)?;
        }
        dev.finish()
    };
    let loader = MaskLoader::new(dev, bufs, scratch, &compact, cx.res.precision);
    let half = blob_mask(1, g.t, 0.5, 11);
    let time_dense = || -> Result<()> {
        loader.load(&half)?;
        run(&lowered[0])
    };
    let time_sparse = |mask: &BitMask, _: Granularity| -> Result<()> {
        loader.load(mask)?;
        run(&lowered[1])
    };
    let signature =
        format!("{CALIBRATION_VERSION}|images {}|T {}|K {}|N {}|bias {}|act {}|tile {tile}", g.images, g.t, g.k, g.n, g.has_bias, g.act);
    let subject = Subject {
        signature,
        height: 1,
        width: g.t,
        granularities: vec![one],
        time_dense: &time_dense,
        time_sparse: &time_sparse,
        runs_per_call: RUNS_PER_CALL,
    };
    let key = crate::gpu::dtype::fingerprint_at(dev.info(), cx.res.precision);
    let poly = calibrate::poly_kernel_on(&subject, &key, "gpu", cfg.cache_dir.as_deref())?;
    tracing::debug!(node = %cx.node.name, "gpu token PolyKernel ready");
    // Calibration names its sparse member by granularity alone; it ran `tile`.
    let members = poly
        .members()
        .iter()
        .map(|m| match m.schedule.granularity {
            None => m.clone(),
            Some(g) => Member { schedule: tile.apply(Schedule::sparse(schedule_name(Some(g), Some(&tile)), g)), table: m.table.clone() },
        })
        .collect();
    PolyKernel::new(members)
}
