//! cuDNN's dense 2-D convs on a device's handle (`cudnn_handle`): dense 2-D convs
//! (fp32 NCHW, FMA math only: no TF32, so results keep fp32 semantics as our kernels do) planned
//! once: descriptors, and the algorithm cuDNN's own search (`cudnnFindConvolutionForwardAlgorithmEx`,
//! on the real buffers) finds fastest, remembered per geometry for the device. A plan is the
//! body of a `CudaKernel`, so the executor replays it like any launch (`CudaDevice::launch`).
//!
//! Arguments of a launch: `[x, w, bias, z, y, workspace]`. The bare conv reads x and w and
//! writes y; the fused one (`cudnnConvolutionBiasActivationForward`) computes
//! y = act(conv(x) + z + bias) with act ReLU or the identity (which cuDNN runs only with
//! IMPLICIT_PRECOMP_GEMM) and z the residual, or y with weight 0 when there is none.

use super::buffer::CudaBuffer;
use super::cudnn_graph;
use super::cudnn_handle::{CudnnHandle, Found};
use super::cudnn_lib::{self as lib, Desc, FwdAlgoPerf, Status};
use super::cudnn_plan::EnginePlan;
use super::error::err;
use crate::gpu::{Precision, VendorConvDesc};
use cudarc::driver::sys::CUstream;
use dynaspa_runtime::Result;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Largest workspace an algorithm search may try (FFT algorithms can ask for gigabytes).
const SEARCH_WORKSPACE_CAP: usize = 256 << 20;

static PLANS: AtomicUsize = AtomicUsize::new(0);
static ENGINE_PLANS: AtomicUsize = AtomicUsize::new(0);
static SEARCHES: AtomicUsize = AtomicUsize::new(0);
static LAUNCHES: AtomicUsize = AtomicUsize::new(0);

/// Counts of this process's cuDNN use, for self-checks and reports: convs planned (of them on
/// backend-API engines), searches run (one per geometry, API and device), conv calls made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CudnnStats {
    pub plans: usize,
    pub engine_plans: usize,
    pub searches: usize,
    pub launches: usize,
}

pub fn stats() -> CudnnStats {
    CudnnStats {
        plans: PLANS.load(Ordering::Relaxed),
        engine_plans: ENGINE_PLANS.load(Ordering::Relaxed),
        searches: SEARCHES.load(Ordering::Relaxed),
        launches: LAUNCHES.load(Ordering::Relaxed),
    }
}

/// Legacy algorithms offered per geometry: cuDNN's own timing of near-equal ones is noisy (it
/// ranked IMPLICIT_GEMM first on one run and IMPLICIT_PRECOMP_GEMM on the next), so the
/// lowering times the best few again on the whole launch.
const LEGACY_ALGOS: usize = 2;

/// A descriptor, destroyed with its owner.
struct Owned {
    p: Desc,
    destroy: unsafe extern "C" fn(Desc) -> Status,
}

impl Owned {
    fn new(
        h: &CudnnHandle,
        (create, destroy): (unsafe extern "C" fn(*mut Desc) -> Status, unsafe extern "C" fn(Desc) -> Status),
        what: &str,
    ) -> Result<Owned> {
        let mut p: Desc = std::ptr::null_mut();
        // SAFETY: writes the new descriptor.
        h.check(unsafe { create(&mut p) }, what)?;
        Ok(Owned { p, destroy })
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        // SAFETY: created by the matching create function, destroyed once.
        unsafe { (self.destroy)(self.p) };
    }
}

/// A planned conv: through the legacy API (descriptors and an algorithm, bare or with bias,
/// residual and activation fused) or an execution plan of the backend API (bare).
pub(crate) struct CudnnConv {
    h: Arc<CudnnHandle>,
    kind: Kind,
    workspace: usize,
    /// Bytes x, w, y and bias must have at least.
    bytes: [usize; 4],
    pub(crate) label: String,
}

enum Kind {
    Legacy {
        x: Owned,
        w: Owned,
        y: Owned,
        conv: Owned,
        /// The fused form: bias descriptor, activation, whether z is the residual.
        fused: Option<(Owned, Owned, bool)>,
        algo: c_int,
    },
    Engine {
        plan: Arc<EnginePlan>,
        /// The variant pack of the last launch's pointers (x, w, y, workspace): replays reuse it.
        pack: Mutex<Option<([u64; 4], RawDesc)>>,
    },
}

/// A variant pack kept between launches.
struct RawDesc(Desc);
// SAFETY: a finalized descriptor, used under the pack's mutex.
unsafe impl Send for RawDesc {}

impl Drop for CudnnConv {
    fn drop(&mut self) {
        if let Kind::Engine { pack, .. } = &self.kind {
            if let Some((_, d)) = pack.lock().ok().and_then(|mut p| p.take()) {
                // SAFETY: made by variant_pack() for this conv, destroyed once.
                unsafe { (self.h.api().backend_destroy)(d.0) };
            }
        }
    }
}

// SAFETY: descriptors are plain host objects never changed after planning; calls that use
// them go through the handle's mutex.
unsafe impl Send for CudnnConv {}
unsafe impl Sync for CudnnConv {}

impl CudnnConv {
    pub(crate) fn workspace(&self) -> usize {
        self.workspace
    }

    /// Queues the conv on the device's main stream, or on `stream` (a graph's recording):
    /// `bufs` = [x, w, bias, z, y, workspace].
    pub(crate) fn run(&self, bufs: &[&CudaBuffer], stream: Option<CUstream>) -> Result<()> {
        let [x, w, bias, z, y, ws] = bufs else {
            return Err(err(format!("{}: {} buffers given, a cuDNN conv takes 6 (x, w, bias, z, y, workspace)", self.label, bufs.len())));
        };
        let short = |b: &CudaBuffer, need: usize, what: &str| -> Result<()> {
            if b.len() < need {
                Err(err(format!("{}: {what} buffer of {} bytes, the conv needs {need}", self.label, b.len())))
            } else {
                Ok(())
            }
        };
        short(x, self.bytes[0], "input")?;
        short(w, self.bytes[1], "weight")?;
        short(y, self.bytes[2], "output")?;
        short(ws, self.workspace, "workspace")?;
        let (x, w, bias, z, y, ws) = (*x, *w, *bias, *z, *y, *ws);
        let p = |b: &CudaBuffer| b.device_ptr() as usize as *mut c_void;
        let (one, zero) = (1.0f32, 0.0f32);
        let api = self.h.api();
        let (fused, x_d, w_d, y_d, conv_d, algo) = match &self.kind {
            Kind::Engine { plan, pack } => {
                let key = [x.device_ptr(), w.device_ptr(), y.device_ptr(), ws.device_ptr()];
                let mut cached = pack.lock().map_err(|_| err("cuDNN variant pack lock poisoned"))?;
                if cached.as_ref().is_none_or(|(k, _)| *k != key) {
                    let vp = cudnn_graph::variant_pack(&self.h, [p(x), p(w), p(y)], p(ws))?;
                    if let Some((_, old)) = cached.replace((key, RawDesc(vp.into_raw()))) {
                        // SAFETY: the previous pointers' pack, made here, destroyed once.
                        unsafe { (api.backend_destroy)(old.0) };
                    }
                }
                let vp = cached.as_ref().map(|(_, d)| d.0).ok_or_else(|| err("no variant pack"))?;
                // SAFETY: a finalized plan and pack of this handle; the buffers were checked.
                let s = self.h.with_on(stream, |h| unsafe { (api.backend_execute)(h, plan.plan, vp) })?;
                self.h.check(s, &self.label)?;
                LAUNCHES.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            Kind::Legacy { x, w, y, conv, fused, algo } => (fused, x.p, w.p, y.p, conv.p, *algo),
        };
        if let Some((_, _, residual)) = fused {
            short(bias, self.bytes[3], "bias")?;
            short(z, if *residual { self.bytes[2] } else { 0 }, "residual")?;
        }
        let s = self.h.with_on(stream, |h| match fused {
            // SAFETY: descriptors of this plan; buffers checked above to hold the tensors the
            // descriptors describe; alpha/beta are host floats, as cuDNN reads them for float
            // data; the call only queues work on the handle's stream.
            None => unsafe {
                (api.conv_fwd)(
                    h,
                    (&one as *const f32).cast(),
                    x_d,
                    p(x),
                    w_d,
                    p(w),
                    conv_d,
                    algo,
                    p(ws),
                    self.workspace,
                    (&zero as *const f32).cast(),
                    y_d,
                    p(y),
                )
            },
            Some((bias_d, act, residual)) => {
                let alpha2: f32 = if *residual { 1.0 } else { 0.0 };
                let z = if *residual { p(z) } else { p(y) };
                // SAFETY: as above; z is y itself (weight 0) when there is no residual.
                unsafe {
                    (api.conv_bias_act_fwd)(
                        h,
                        (&one as *const f32).cast(),
                        x_d,
                        p(x),
                        w_d,
                        p(w),
                        conv_d,
                        algo,
                        p(ws),
                        self.workspace,
                        (&alpha2 as *const f32).cast(),
                        y_d,
                        z,
                        bias_d.p,
                        p(bias),
                        act.p,
                        y_d,
                        p(y),
                    )
                }
            }
        })?;
        self.h.check(s, &self.label)?;
        LAUNCHES.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

fn int(v: usize) -> Option<c_int> {
    c_int::try_from(v).ok()
}

/// The legacy API's descriptors of `d`: x, w, y and the conv (FMA math); `None` where cuDNN
/// does not compute the conv as ONNX does (its output extent differs: asymmetric pads) or a
/// size does not fit its ints.
fn descriptors(h: &CudnnHandle, d: &VendorConvDesc) -> Result<Option<[Owned; 4]>> {
    let dims: Option<Vec<c_int>> = [
        d.n,
        d.cin,
        d.h,
        d.w,
        d.cout,
        d.cin / d.groups.max(1),
        d.kernel[0],
        d.kernel[1],
        d.pad[0],
        d.pad[1],
        d.stride[0],
        d.stride[1],
        d.dilation[0],
        d.dilation[1],
        d.groups,
        d.oh,
        d.ow,
    ]
    .iter()
    .map(|&v| int(v))
    .collect();
    let Some(v) = dims else { return Ok(None) };
    let [n, cin, ih, iw, cout, cin_g, kh, kw, ph, pw, sh, sw, dh, dw, groups, oh, ow] = v[..] else { return Ok(None) };
    let api = &h.lib.api;
    let xd = Owned::new(h, api.tensor_fns(), "cudnnCreateTensorDescriptor")?;
    // SAFETY: live descriptor; plain values.
    let data = data_type(d);
    h.check(unsafe { (api.set_tensor_4d)(xd.p, lib::TENSOR_NCHW, data, n, cin, ih, iw) }, "cudnnSetTensor4dDescriptor (x)")?;
    let wd = Owned::new(h, api.filter_fns(), "cudnnCreateFilterDescriptor")?;
    // SAFETY: as above (the filter takes the data type before the format).
    h.check(unsafe { (api.set_filter_4d)(wd.p, data, lib::TENSOR_NCHW, cout, cin_g, kh, kw) }, "cudnnSetFilter4dDescriptor")?;
    let cd = Owned::new(h, api.conv_fns(), "cudnnCreateConvolutionDescriptor")?;
    // SAFETY: as above.
    unsafe {
        h.check(
            (api.set_conv_2d)(cd.p, ph, pw, sh, sw, dh, dw, lib::CROSS_CORRELATION, lib::DATA_FLOAT),
            "cudnnSetConvolution2dDescriptor",
        )?;
        h.check((api.set_conv_groups)(cd.p, groups), "cudnnSetConvolutionGroupCount")?;
        h.check((api.set_conv_math)(cd.p, math_type(d)), "cudnnSetConvolutionMathType")?;
    }
    let mut out = [0 as c_int; 4];
    // SAFETY: live descriptors; writes four ints.
    let s = unsafe { (api.conv_output_dim)(cd.p, xd.p, wd.p, &mut out[0], &mut out[1], &mut out[2], &mut out[3]) };
    if s != lib::SUCCESS || out != [n, cout, oh, ow] {
        tracing::debug!(?d, cudnn_output = ?out, "cuDNN's output extent differs from the op's (asymmetric pads): not used");
        return Ok(None);
    }
    let yd = Owned::new(h, api.tensor_fns(), "cudnnCreateTensorDescriptor")?;
    // SAFETY: as above.
    h.check(unsafe { (api.set_tensor_4d)(yd.p, lib::TENSOR_NCHW, data, n, cout, oh, ow) }, "cudnnSetTensor4dDescriptor (y)")?;
    Ok(Some([xd, wd, yd, cd]))
}

/// The data type of `d`'s tensors: FLOAT, or HALF (with f32 accumulation: the conv's compute
/// type stays FLOAT, cuDNN's "pseudo half" configuration).
pub(crate) fn data_type(d: &VendorConvDesc) -> c_int {
    match d.precision {
        Precision::F32 => lib::DATA_FLOAT,
        Precision::F16 => lib::DATA_HALF,
    }
}

/// The math `d` allows: FMA only in f32 (no TF32, the semantics of our kernels); tensor cores
/// for half tensors.
fn math_type(d: &VendorConvDesc) -> c_int {
    match d.precision {
        Precision::F32 => lib::FMA_MATH,
        Precision::F16 => lib::TENSOR_OP_MATH,
    }
}

/// Whether a searched algorithm's math keeps `d`'s semantics.
fn math_allowed(d: &VendorConvDesc, math: c_int) -> bool {
    match d.precision {
        Precision::F32 => math == lib::FMA_MATH,
        Precision::F16 => math == lib::TENSOR_OP_MATH || math == lib::DEFAULT_MATH,
    }
}

/// Bytes x, w, y and the bias of `d` take.
fn tensor_bytes(d: &VendorConvDesc) -> [usize; 4] {
    let e = d.precision.elem_bytes(dynaspa_runtime::DType::F32);
    [
        e * d.n * d.cin * d.h * d.w,
        e * d.cout * (d.cin / d.groups.max(1)) * d.kernel[0] * d.kernel[1],
        e * d.n * d.cout * d.oh * d.ow,
        e * d.cout,
    ]
}

/// Plans `d` on the legacy API's fastest FMA algorithms (up to `LEGACY_ALGOS`), searching them
/// on `x`, `w` and `y` (overwritten) the first time this geometry is seen. None where cuDNN
/// does not compute this conv as ONNX does or has no FMA algorithm for it.
pub(crate) fn plan(
    h: &Arc<CudnnHandle>,
    d: &VendorConvDesc,
    x: &CudaBuffer,
    w: &CudaBuffer,
    y: &CudaBuffer,
    device_mem_bytes: u64,
) -> Result<Vec<CudnnConv>> {
    let Some(first) = descriptors(h, d)? else { return Ok(Vec::new()) };
    let bytes = tensor_bytes(d);
    for (b, need, what) in [(x, bytes[0], "input"), (w, bytes[1], "weight"), (y, bytes[2], "output")] {
        if b.len() < need {
            return Err(err(format!("cuDNN conv plan: {what} buffer of {} bytes, {need} needed", b.len())));
        }
    }
    let geometry = format!("{:?}", VendorConvDesc { fused: None, ..d.clone() });
    let known = h.found.lock().ok().and_then(|f| f.get(&geometry).cloned());
    let found = match known {
        Some(f) => f,
        None => {
            let f = match h.recall(MEMO_LEGACY, &geometry).and_then(|a| parse_found(&a)) {
                Some(f) => f,
                None => {
                    let [xd, wd, yd, cd] = &first;
                    let f = search(h, d, (xd, wd, cd, yd), (x, w, y), device_mem_bytes)?;
                    h.keep(MEMO_LEGACY, &geometry, &show_found(&f));
                    f
                }
            };
            if let Ok(mut m) = h.found.lock() {
                m.insert(geometry, f.clone());
            }
            f
        }
    };
    let mut first = Some(first);
    let mut out = Vec::new();
    for (i, &(algo, workspace)) in found.iter().enumerate() {
        // The fused identity runs on one algorithm only.
        if i > 0 && d.fused.is_some_and(|f| !f.relu) {
            break;
        }
        let descs = match first.take() {
            Some(f) => f,
            None => match descriptors(h, d)? {
                Some(f) => f,
                None => break,
            },
        };
        out.extend(legacy_plan(h, d, descs, algo, workspace)?);
    }
    Ok(out)
}

/// The disk memo's kinds: the legacy API's search, the backend API's engine choice.
const MEMO_LEGACY: &str = "cudnn-legacy";
const MEMO_ENGINE: &str = "cudnn-engine";

/// A search's result as the disk memo keeps it: `algo:workspace` pairs, or `none`.
fn show_found(f: &Found) -> String {
    if f.is_empty() {
        "none".into()
    } else {
        f.iter().map(|(a, w)| format!("{a}:{w}")).collect::<Vec<_>>().join(",")
    }
}

/// `show_found`'s text read back; `None` for text it does not write (then the search runs).
fn parse_found(s: &str) -> Option<Found> {
    if s == "none" {
        return Some(Vec::new());
    }
    s.split(',')
        .map(|p| {
            let (a, w) = p.split_once(':')?;
            let a: c_int = a.parse().ok()?;
            (0..lib::ALGO_COUNT).contains(&a).then_some(())?;
            Some((a, w.parse().ok()?))
        })
        .collect()
}

/// One legacy plan: the bare conv on `algo`, or the fused form (the identity moves it to
/// IMPLICIT_PRECOMP_GEMM, the one algorithm it runs).
fn legacy_plan(
    h: &Arc<CudnnHandle>,
    d: &VendorConvDesc,
    [xd, wd, yd, cd]: [Owned; 4],
    mut algo: c_int,
    mut workspace: usize,
) -> Result<Option<CudnnConv>> {
    let api = &h.lib.api;
    let mut fused = None;
    let mut what = String::new();
    if let Some(f) = d.fused {
        let cout = int(d.cout).ok_or_else(|| err("cuDNN conv plan: channels past a C int"))?;
        let bd = Owned::new(h, api.tensor_fns(), "cudnnCreateTensorDescriptor")?;
        let ad = Owned::new(h, api.activation_fns(), "cudnnCreateActivationDescriptor")?;
        let mode = if f.relu { lib::ACTIVATION_RELU } else { lib::ACTIVATION_IDENTITY };
        // SAFETY: live descriptors; plain values.
        unsafe {
            h.check((api.set_tensor_4d)(bd.p, lib::TENSOR_NCHW, data_type(d), 1, cout, 1, 1), "cudnnSetTensor4dDescriptor (bias)")?;
            h.check((api.set_activation)(ad.p, mode, lib::NOT_PROPAGATE_NAN, 0.0), "cudnnSetActivationDescriptor")?;
        }
        if !f.relu && algo != lib::ALGO_IMPLICIT_PRECOMP_GEMM {
            algo = lib::ALGO_IMPLICIT_PRECOMP_GEMM;
            let mut size = 0usize;
            // SAFETY: live handle and descriptors; writes one size.
            let s = h.with(|hh| unsafe { (api.fwd_workspace)(hh, xd.p, wd.p, cd.p, yd.p, algo, &mut size) })?;
            if s != lib::SUCCESS {
                return Ok(None);
            }
            workspace = size;
        }
        what = format!(" fused bias{}{}", if f.residual { "+residual" } else { "" }, if f.relu { "+relu" } else { "" });
        fused = Some((bd, ad, f.residual));
    }
    let name = lib::ALGO_NAMES.get(algo as usize).copied().unwrap_or("algorithm ?");
    PLANS.fetch_add(1, Ordering::Relaxed);
    Ok(Some(CudnnConv {
        h: h.clone(),
        kind: Kind::Legacy { x: xd, w: wd, y: yd, conv: cd, fused, algo },
        workspace,
        bytes: tensor_bytes(d),
        label: format!("cudnn {name}{what}"),
    }))
}

/// Plans `d`'s bare conv on the backend API's fastest fp32 engine, searching the engines on
/// `x`, `w` and `y` (overwritten) the first time this geometry is seen; `Ok(None)` where none
/// runs it.
pub(crate) fn plan_engine(
    h: &Arc<CudnnHandle>,
    d: &VendorConvDesc,
    x: &CudaBuffer,
    w: &CudaBuffer,
    y: &CudaBuffer,
) -> Result<Option<CudnnConv>> {
    if d.fused.is_some() {
        return Ok(None);
    }
    let bytes = tensor_bytes(d);
    for (b, need, what) in [(x, bytes[0], "input"), (w, bytes[1], "weight"), (y, bytes[2], "output")] {
        if b.len() < need {
            return Err(err(format!("cuDNN engine plan: {what} buffer of {} bytes, {need} needed", b.len())));
        }
    }
    let geometry = format!("{d:?}");
    let known = h.engines.lock().ok().and_then(|e| e.get(&geometry).cloned());
    let plan = match known {
        Some(p) => p,
        None => {
            let p = match recall_engine(h, d, &geometry)? {
                Some(p) => p,
                None => {
                    SEARCHES.fetch_add(1, Ordering::Relaxed);
                    let p = match cudnn_graph::search(h, d, x, w, y) {
                        Ok(p) => p,
                        Err(e) => {
                            h.note_engine(format!("engine search failed: {e}"));
                            return Err(e);
                        }
                    };
                    let answer = p.as_ref().map_or_else(|| "none".to_string(), |p| p.origin.to_string());
                    h.keep(MEMO_ENGINE, &geometry, &answer);
                    p.map(Arc::new)
                }
            };
            if let Ok(mut e) = h.engines.lock() {
                e.insert(geometry, p.clone());
            }
            p
        }
    };
    let Some(plan) = plan else { return Ok(None) };
    PLANS.fetch_add(1, Ordering::Relaxed);
    ENGINE_PLANS.fetch_add(1, Ordering::Relaxed);
    let (workspace, label) = (plan.workspace, plan.label.clone());
    Ok(Some(CudnnConv { h: h.clone(), kind: Kind::Engine { plan, pack: Mutex::new(None) }, workspace, bytes, label }))
}

/// The engine an earlier process's search chose for `geometry`, rebuilt without a search:
/// `Some(None)` where it found none, `None` where nothing was kept or the choice no longer
/// builds (another cuDNN's heuristics), so the search runs.
fn recall_engine(h: &Arc<CudnnHandle>, d: &VendorConvDesc, geometry: &str) -> Result<Option<Option<Arc<EnginePlan>>>> {
    let Some(answer) = h.recall(MEMO_ENGINE, geometry) else { return Ok(None) };
    if answer == "none" {
        return Ok(Some(None));
    }
    let Some(origin) = answer.parse().ok() else { return Ok(None) };
    Ok(cudnn_graph::rebuild(h, d, origin)?.map(|p| Some(Arc::new(p))))
}

/// cuDNN's timed search over its algorithms on the real buffers, with a workspace as large as
/// the hungriest algorithm wants (up to the cap); the fastest FMA algorithm that succeeded.
fn search(
    h: &CudnnHandle,
    d: &VendorConvDesc,
    (xd, wd, cd, yd): (&Owned, &Owned, &Owned, &Owned),
    (x, w, y): (&CudaBuffer, &CudaBuffer, &CudaBuffer),
    device_mem_bytes: u64,
) -> Result<Found> {
    let api = &h.lib.api;
    let mut want = 0usize;
    for algo in 0..lib::ALGO_COUNT {
        let mut size = 0usize;
        // SAFETY: live handle and descriptors; writes one size. Unsupported algorithms fail.
        let s = h.with(|hh| unsafe { (api.fwd_workspace)(hh, xd.p, wd.p, cd.p, yd.p, algo, &mut size) })?;
        if s == lib::SUCCESS {
            want = want.max(size);
        }
    }
    let cap = SEARCH_WORKSPACE_CAP.min((device_mem_bytes / 8) as usize);
    let ws_bytes = want.min(cap);
    let ws = h.alloc(ws_bytes)?;
    let mut perf = [FwdAlgoPerf::default(); lib::ALGO_COUNT as usize];
    let mut returned: c_int = 0;
    let p = |b: &CudaBuffer| b.device_ptr() as usize as *mut c_void;
    // SAFETY: descriptors describe the buffers (sizes checked by the caller); the workspace is
    // `ws_bytes` long; cuDNN writes at most ALGO_COUNT results and the count. The search runs
    // on the handle's stream and returns when done.
    let s = h.with(|hh| unsafe {
        (api.find_fwd_ex)(hh, xd.p, p(x), wd.p, p(w), cd.p, yd.p, p(y), lib::ALGO_COUNT, &mut returned, perf.as_mut_ptr(), p(&ws), ws_bytes)
    })?;
    h.check(s, "cudnnFindConvolutionForwardAlgorithmEx")?;
    h.synchronize()?;
    SEARCHES.fetch_add(1, Ordering::Relaxed);
    let results = &perf[..(returned.max(0) as usize).min(perf.len())];
    let text: Vec<String> = results
        .iter()
        .map(|r| {
            format!(
                "{}: status {} math {} {:.1} us {} B",
                lib::ALGO_NAMES.get(r.algo as usize).unwrap_or(&"?"),
                r.status,
                r.math_type,
                r.time * 1e3,
                r.memory
            )
        })
        .collect();
    tracing::debug!(workspace = ws_bytes, "cuDNN algorithm search: {}", text.join(", "));
    // Results come fastest first; in f32 only FMA math keeps fp32 semantics.
    let best: Found = results
        .iter()
        .filter(|r| {
            r.status == lib::SUCCESS && math_allowed(d, r.math_type) && r.memory <= ws_bytes && (0..lib::ALGO_COUNT).contains(&r.algo)
        })
        .map(|r| (r.algo, r.memory))
        .take(LEGACY_ALGOS)
        .collect();
    if best.is_empty() {
        tracing::warn!(precision = ?d.precision, "cuDNN offers no algorithm of the allowed math for this conv: {}", text.join(", "));
    }
    Ok(best)
}
