//! Dense convs through cuDNN's backend (graph) API: the engines cuDNN's heuristics propose for
//! the conv (mode A, then the fallback list), less those that do not keep fp32 semantics
//! (tensor cores, inputs converted down, reduced-precision reductions), each built into an
//! execution plan and timed on the real buffers; the fastest is kept per geometry. This is how
//! frameworks autotune (PyTorch's `cudnn.benchmark`), and reaches engines the legacy
//! algorithm enum (`cudnn.rs`) does not name.

use super::buffer::CudaBuffer;
use super::cudnn_handle::CudnnHandle;
use super::cudnn_lib::{graph as g, Desc};
use super::cudnn_plan::{EngineOrigin, EnginePlan};
use crate::gpu::{Precision, VendorConvDesc};
use dynaspa_runtime::{Error, Result};
use std::ffi::c_void;
use std::time::Instant;

/// Unique ids of the conv's tensors in the graph and the variant pack.
const UID_X: i64 = 1;
const UID_W: i64 = 2;
const UID_Y: i64 = 3;
/// fp32 engine plans built and timed per geometry, at most.
const MAX_CANDIDATES: usize = 16;
/// Configurations read from one heuristics query, at most. The fp32 filter comes after: on the
/// H100 the first 16 of mode A were mostly TF32 engines, and reading only those left 4 fp32
/// ones (none faster than the legacy API's best at batch 1 and 2).
const MAX_CONFIGS: usize = 256;
/// Configurations of one engine timed, at most.
const CONFIGS_PER_ENGINE: usize = 4;
/// Largest workspace an engine may ask for.
const WORKSPACE_CAP: usize = 256 << 20;
/// Time the plans of one search may take to build: runtime-compiled engines compile when their
/// plan is finalized, which can take a second each; the heuristics' order puts the likely
/// winners first.
const BUILD_BUDGET: std::time::Duration = std::time::Duration::from_millis(1500);

/// A backend descriptor, destroyed with its owner.
pub(crate) struct BackendDesc<'h> {
    p: Desc,
    h: &'h CudnnHandle,
}

impl<'h> BackendDesc<'h> {
    pub(crate) fn new(h: &'h CudnnHandle, ty: std::ffi::c_int) -> Result<BackendDesc<'h>> {
        let mut p: Desc = std::ptr::null_mut();
        // SAFETY: writes the new descriptor.
        h.check(unsafe { (h.api().backend_create)(ty, &mut p) }, "cudnnBackendCreateDescriptor")?;
        Ok(BackendDesc { p, h })
    }

    fn set<T>(&self, name: std::ffi::c_int, ty: std::ffi::c_int, values: &[T]) -> Result<()> {
        // SAFETY: `values` holds `len` elements of the attribute's type; cuDNN copies them.
        let s = unsafe { (self.h.api().backend_set)(self.p, name, ty, values.len() as i64, values.as_ptr().cast()) };
        self.h.check(s, &format!("cudnnBackendSetAttribute({name})"))
    }

    fn finalize(&self, what: &str) -> Result<()> {
        // SAFETY: live descriptor with its attributes set.
        self.h.check(unsafe { (self.h.api().backend_finalize)(self.p) }, what)
    }

    /// Up to `out.len()` elements of an attribute; how many there were. An empty `out` asks
    /// for the count alone (cuDNN answers it only for a null array: a zero-length one reads as
    /// a request for none and says 0).
    fn get<T>(&self, name: std::ffi::c_int, ty: std::ffi::c_int, out: &mut [T]) -> Result<usize> {
        let mut n = 0i64;
        let ptr: *mut c_void = if out.is_empty() { std::ptr::null_mut() } else { out.as_mut_ptr().cast() };
        // SAFETY: `out` has room for `len` elements of the attribute's type (or is null).
        let s = unsafe { (self.h.api().backend_get)(self.p, name, ty, out.len() as i64, &mut n, ptr) };
        self.h.check(s, &format!("cudnnBackendGetAttribute({name})"))?;
        Ok(n.max(0) as usize)
    }
}

impl BackendDesc<'_> {
    /// The descriptor, no longer destroyed with this value (its new owner destroys it).
    pub(crate) fn into_raw(self) -> Desc {
        let p = self.p;
        std::mem::forget(self);
        p
    }
}

impl Drop for BackendDesc<'_> {
    fn drop(&mut self) {
        // SAFETY: created by cudnnBackendCreateDescriptor, destroyed once.
        unsafe { (self.h.api().backend_destroy)(self.p) };
    }
}

fn tensor<'h>(h: &'h CudnnHandle, uid: i64, dims: [usize; 4], data: std::ffi::c_int) -> Result<BackendDesc<'h>> {
    let t = BackendDesc::new(h, g::TENSOR_DESCRIPTOR)?;
    let d: [i64; 4] = dims.map(|v| v as i64);
    let strides = [d[1] * d[2] * d[3], d[2] * d[3], d[3], 1];
    t.set(g::TENSOR_DATA_TYPE, g::TYPE_DATA_TYPE, &[data])?;
    t.set(g::TENSOR_DIMENSIONS, g::TYPE_INT64, &d)?;
    t.set(g::TENSOR_STRIDES, g::TYPE_INT64, &strides)?;
    t.set(g::TENSOR_UNIQUE_ID, g::TYPE_INT64, &[uid])?;
    // Buffers are whole device allocations (256-byte aligned).
    t.set(g::TENSOR_BYTE_ALIGNMENT, g::TYPE_INT64, &[16i64])?;
    t.finalize("tensor descriptor")?;
    Ok(t)
}

/// The operation graph of `d`'s bare conv (the graph last, after what it refers to); `None`
/// where cuDNN refuses it.
fn op_graph<'h>(h: &'h CudnnHandle, d: &VendorConvDesc) -> Result<Option<Vec<BackendDesc<'h>>>> {
    let data = super::cudnn::data_type(d);
    let x = tensor(h, UID_X, [d.n, d.cin, d.h, d.w], data)?;
    let w = tensor(h, UID_W, [d.cout, d.cin / d.groups, d.kernel[0], d.kernel[1]], data)?;
    let y = tensor(h, UID_Y, [d.n, d.cout, d.oh, d.ow], data)?;
    let conv = BackendDesc::new(h, g::CONVOLUTION_DESCRIPTOR)?;
    let two = |v: [usize; 2]| [v[0] as i64, v[1] as i64];
    conv.set(g::CONVOLUTION_COMP_TYPE, g::TYPE_DATA_TYPE, &[super::cudnn_lib::DATA_FLOAT])?;
    conv.set(g::CONVOLUTION_CONV_MODE, g::TYPE_CONVOLUTION_MODE, &[super::cudnn_lib::CROSS_CORRELATION])?;
    conv.set(g::CONVOLUTION_SPATIAL_DIMS, g::TYPE_INT64, &[2i64])?;
    conv.set(g::CONVOLUTION_DILATIONS, g::TYPE_INT64, &two(d.dilation))?;
    conv.set(g::CONVOLUTION_FILTER_STRIDES, g::TYPE_INT64, &two(d.stride))?;
    conv.set(g::CONVOLUTION_PRE_PADDINGS, g::TYPE_INT64, &two(d.pad))?;
    conv.set(g::CONVOLUTION_POST_PADDINGS, g::TYPE_INT64, &two(d.pad))?;
    conv.finalize("convolution descriptor")?;
    let op = BackendDesc::new(h, g::OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR)?;
    op.set(g::OPERATION_CONVOLUTION_FORWARD_X, g::TYPE_BACKEND_DESCRIPTOR, &[x.p])?;
    op.set(g::OPERATION_CONVOLUTION_FORWARD_W, g::TYPE_BACKEND_DESCRIPTOR, &[w.p])?;
    op.set(g::OPERATION_CONVOLUTION_FORWARD_Y, g::TYPE_BACKEND_DESCRIPTOR, &[y.p])?;
    op.set(g::OPERATION_CONVOLUTION_FORWARD_CONV_DESC, g::TYPE_BACKEND_DESCRIPTOR, &[conv.p])?;
    op.set(g::OPERATION_CONVOLUTION_FORWARD_ALPHA, g::TYPE_FLOAT, &[1.0f32])?;
    op.set(g::OPERATION_CONVOLUTION_FORWARD_BETA, g::TYPE_FLOAT, &[0.0f32])?;
    // An output extent that does not follow from the window is refused here.
    if let Err(e) = op.finalize("conv forward operation") {
        h.note_engine(format!("the conv's operation is refused: {e}"));
        return Ok(None);
    }
    let graph = BackendDesc::new(h, g::OPERATIONGRAPH_DESCRIPTOR)?;
    let raw = h.raw_handle()?;
    graph.set(g::OPERATIONGRAPH_HANDLE, g::TYPE_HANDLE, &[raw])?;
    graph.set(g::OPERATIONGRAPH_OPS, g::TYPE_BACKEND_DESCRIPTOR, &[op.p])?;
    graph.finalize("operation graph")?;
    Ok(Some(vec![x, w, y, conv, op, graph]))
}

/// Engine configurations the heuristics propose in `mode` (finalized ENGINECFG descriptors).
fn configs<'h>(h: &'h CudnnHandle, graph: &BackendDesc<'h>, mode: std::ffi::c_int) -> Result<Vec<BackendDesc<'h>>> {
    let heur = BackendDesc::new(h, g::ENGINEHEUR_DESCRIPTOR)?;
    heur.set(g::ENGINEHEUR_OPERATION_GRAPH, g::TYPE_BACKEND_DESCRIPTOR, &[graph.p])?;
    heur.set(g::ENGINEHEUR_MODE, g::TYPE_HEUR_MODE, &[mode])?;
    heur.finalize("engine heuristics")?;
    let mut none: [Desc; 0] = [];
    let count = heur.get(g::ENGINEHEUR_RESULTS, g::TYPE_BACKEND_DESCRIPTOR, &mut none)?.min(MAX_CONFIGS);
    let cfgs: Vec<BackendDesc<'h>> = (0..count).map(|_| BackendDesc::new(h, g::ENGINECFG_DESCRIPTOR)).collect::<Result<_>>()?;
    let mut raw: Vec<Desc> = cfgs.iter().map(|c| c.p).collect();
    let got = heur.get(g::ENGINEHEUR_RESULTS, g::TYPE_BACKEND_DESCRIPTOR, &mut raw)?;
    Ok(cfgs.into_iter().take(got).collect())
}

/// The engine of `cfg`: its global index and whether its numerical notes keep the semantics of
/// `precision`: f32 allows no tensor cores, down-converted inputs or reduced-precision
/// reductions; half tensors allow tensor cores but still accumulate in f32.
fn engine_of(h: &CudnnHandle, cfg: &BackendDesc, precision: Precision) -> Result<(i64, bool)> {
    let engine = BackendDesc::new(h, g::ENGINE_DESCRIPTOR)?;
    let mut e = [engine.p];
    cfg.get(g::ENGINECFG_ENGINE, g::TYPE_BACKEND_DESCRIPTOR, &mut e)?;
    let mut index = [0i64];
    engine.get(g::ENGINE_GLOBAL_INDEX, g::TYPE_INT64, &mut index)?;
    let mut notes = [0 as std::ffi::c_int; 16];
    let n = engine.get(g::ENGINE_NUMERICAL_NOTE, g::TYPE_NUMERICAL_NOTE, &mut notes)?.min(notes.len());
    let refused: &[std::ffi::c_int] = match precision {
        Precision::F32 => &[g::NOTE_TENSOR_CORE, g::NOTE_DOWN_CONVERT_INPUTS, g::NOTE_REDUCED_PRECISION_REDUCTION],
        Precision::F16 => &[g::NOTE_REDUCED_PRECISION_REDUCTION],
    };
    let keeps = !notes[..n].iter().any(|v| refused.contains(v));
    Ok((index[0], keeps))
}

/// A variant pack for one execution: the tensors' pointers and the workspace.
pub(crate) fn variant_pack<'h>(h: &'h CudnnHandle, ptrs: [*mut c_void; 3], workspace: *mut c_void) -> Result<BackendDesc<'h>> {
    let vp = BackendDesc::new(h, g::VARIANT_PACK_DESCRIPTOR)?;
    vp.set(g::VARIANT_PACK_UNIQUE_IDS, g::TYPE_INT64, &[UID_X, UID_W, UID_Y])?;
    vp.set(g::VARIANT_PACK_DATA_POINTERS, g::TYPE_VOID_PTR, &ptrs)?;
    vp.set(g::VARIANT_PACK_WORKSPACE, g::TYPE_VOID_PTR, &[workspace])?;
    vp.finalize("variant pack")?;
    Ok(vp)
}

/// Queues `plan` with `pack` on the handle's stream.
pub(crate) fn execute(h: &CudnnHandle, plan: Desc, pack: &BackendDesc) -> Result<()> {
    // SAFETY: a finalized plan and variant pack of this handle.
    let s = h.with(|raw| unsafe { (h.api().backend_execute)(raw, plan, pack.p) })?;
    h.check(s, "cudnnBackendExecute")
}

/// The fastest fp32 engine for `d`'s bare conv, timed on `x`, `w` and `y` (overwritten);
/// `None` where cuDNN's heuristics offer none.
pub(crate) fn search(h: &CudnnHandle, d: &VendorConvDesc, x: &CudaBuffer, w: &CudaBuffer, y: &CudaBuffer) -> Result<Option<EnginePlan>> {
    let Some(mut parts) = op_graph(h, d)? else { return Ok(None) };
    let graph = parts.pop().ok_or_else(|| Error::Other("cuDNN operation graph: no graph descriptor".into()))?;
    // What each stage kept or why it dropped a candidate: logged, and the reason when none is left.
    let mut notes: Vec<String> = Vec::new();
    let mut cfgs = Vec::new();
    // Per configuration: the heuristics mode and its position in that mode's answer.
    let mut origins: Vec<(std::ffi::c_int, usize)> = Vec::new();
    for (mode, name) in [(g::HEUR_MODE_A, "A"), (g::HEUR_MODE_FALLBACK, "fallback")] {
        match configs(h, &graph, mode) {
            Ok(c) => {
                notes.push(format!("{} configs from heuristics {name}", c.len()));
                origins.extend((0..c.len()).map(|i| (mode, i)));
                cfgs.extend(c);
            }
            Err(e) => notes.push(format!("heuristics {name}: {e}")),
        }
    }
    let raw = h.raw_handle()?;
    let mut plans: Vec<(BackendDesc, i64, usize)> = Vec::new();
    // Index into `cfgs` of each plan's configuration.
    let mut plans_cfg: Vec<usize> = Vec::new();
    let mut seen = Vec::new();
    let mut not_fp32 = 0usize;
    let t0 = Instant::now();
    for (ci, cfg) in cfgs.iter().enumerate() {
        if t0.elapsed() > BUILD_BUDGET || plans.len() >= MAX_CANDIDATES {
            notes.push(format!("{} configs left untried ({} plans, {:?})", cfgs.len() - ci, plans.len(), t0.elapsed()));
            break;
        }
        let (index, fp32) = match engine_of(h, cfg, d.precision) {
            Ok(e) => e,
            Err(e) => {
                notes.push(format!("config {ci}: {e}"));
                continue;
            }
        };
        if !fp32 {
            not_fp32 += 1;
            continue;
        }
        // Configurations of one engine differ in their knobs (tile sizes, split-K): a few
        // of each are timed, not only the first.
        if seen.iter().filter(|&&i| i == index).count() >= CONFIGS_PER_ENGINE {
            continue;
        }
        seen.push(index);
        match build_plan(h, cfg, raw)? {
            Ok((plan, ws)) => {
                plans.push((plan, index, ws));
                plans_cfg.push(ci);
            }
            Err(why) => notes.push(format!("engine {index}: {why}")),
        }
    }
    notes.push(format!("{not_fp32} configs not fp32 (tensor cores, down-converted inputs or reduced-precision reductions)"));
    if plans.is_empty() {
        let why = format!("no fp32 engine plan: {}", notes.join("; "));
        tracing::info!(?d, "cuDNN engines: {why}");
        h.note_engine(why);
        return Ok(None);
    }
    // Never a null workspace (some engines check it even when they use none).
    let wsb = h.alloc(plans.iter().map(|p| p.2).max().unwrap_or(0).max(256))?;
    let p = |b: &CudaBuffer| b.device_ptr() as usize as *mut c_void;
    let pack = variant_pack(h, [p(x), p(w), p(y)], p(&wsb))?;
    let mut best: Option<(f64, usize)> = None;
    let mut report = Vec::new();
    for (i, (plan, index, ws)) in plans.iter().enumerate() {
        // A plan that fails to run is left out.
        if let Err(e) = execute(h, plan.p, &pack).and_then(|_| h.synchronize()) {
            report.push(format!("engine {index} fails: {e}"));
            continue;
        }
        let mut samples = Vec::new();
        for _ in 0..5 {
            let t0 = Instant::now();
            for _ in 0..3 {
                execute(h, plan.p, &pack)?;
            }
            h.synchronize()?;
            samples.push(t0.elapsed().as_secs_f64() * 1e6 / 3.0);
        }
        samples.sort_by(f64::total_cmp);
        let us = samples[samples.len() / 2];
        report.push(format!("engine {index} {us:.1} us ws {ws}"));
        if best.is_none_or(|(b, _)| us < b) {
            best = Some((us, i));
        }
    }
    tracing::info!(?d, "cuDNN engines timed: {} ({})", report.join(", "), notes.join("; "));
    let Some((_, i)) = best else {
        h.note_engine(format!("no engine ran: {}", report.join(", ")));
        return Ok(None);
    };
    let (plan, index, workspace) = plans.swap_remove(i);
    let (mode, position) = origins[plans_cfg[i]];
    let cfg = cfgs.swap_remove(plans_cfg[i]);
    drop(pack);
    Ok(Some(keep(parts, graph, cfg, plan, workspace, EngineOrigin { mode, position, engine: index })))
}

/// The execution plan of `cfg`, finalized, and its workspace bytes; `Err(why)` where it does
/// not build or wants more workspace than the cap.
fn build_plan<'h>(
    h: &'h CudnnHandle,
    cfg: &BackendDesc<'h>,
    raw: super::cudnn_lib::Handle,
) -> Result<std::result::Result<(BackendDesc<'h>, usize), String>> {
    let plan = BackendDesc::new(h, g::EXECUTION_PLAN_DESCRIPTOR)?;
    plan.set(g::EXECUTION_PLAN_HANDLE, g::TYPE_HANDLE, &[raw])?;
    plan.set(g::EXECUTION_PLAN_ENGINE_CONFIG, g::TYPE_BACKEND_DESCRIPTOR, &[cfg.p])?;
    if let Err(e) = plan.finalize("execution plan") {
        return Ok(Err(e.to_string()));
    }
    let mut ws = [0i64];
    plan.get(g::EXECUTION_PLAN_WORKSPACE_SIZE, g::TYPE_INT64, &mut ws)?;
    let ws = ws[0].max(0) as usize;
    Ok(if ws <= WORKSPACE_CAP { Ok((plan, ws)) } else { Err(format!("workspace {ws} B")) })
}

/// The plan and every descriptor it refers to, handed to an `EnginePlan` that destroys them.
fn keep(
    parts: Vec<BackendDesc>,
    graph: BackendDesc,
    cfg: BackendDesc,
    plan: BackendDesc,
    workspace: usize,
    origin: EngineOrigin,
) -> EnginePlan {
    let mut kept: Vec<Desc> = parts.into_iter().map(BackendDesc::into_raw).collect();
    kept.push(graph.into_raw());
    kept.push(cfg.into_raw());
    EnginePlan { plan: plan.into_raw(), parts: kept, workspace, label: format!("cudnn engine {}", origin.engine), origin }
}

/// The plan a search chose in an earlier process, rebuilt from where its configuration came
/// from without timing anything; `None` where this cuDNN's heuristics no longer answer with
/// that engine there, or it no longer builds (the caller then searches).
pub(crate) fn rebuild(h: &CudnnHandle, d: &VendorConvDesc, origin: EngineOrigin) -> Result<Option<EnginePlan>> {
    let Some(mut parts) = op_graph(h, d)? else { return Ok(None) };
    let graph = parts.pop().ok_or_else(|| Error::Other("cuDNN operation graph: no graph descriptor".into()))?;
    let mut cfgs = configs(h, &graph, origin.mode)?;
    if origin.position >= cfgs.len() {
        return Ok(None);
    }
    let cfg = cfgs.swap_remove(origin.position);
    drop(cfgs);
    let (index, keeps) = engine_of(h, &cfg, d.precision)?;
    if index != origin.engine || !keeps {
        return Ok(None);
    }
    let Ok((plan, workspace)) = build_plan(h, &cfg, h.raw_handle()?)? else { return Ok(None) };
    Ok(Some(keep(parts, graph, cfg, plan, workspace, origin)))
}
