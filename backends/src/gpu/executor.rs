//! `GpuExecutable`: a graph compiled for any `GpuDevice`. Compilation uploads the constants,
//! plans activation buffers by liveness (views share their input's buffer, freed buffers are
//! reused) and lowers every node to its kernel launches; `run` uploads the inputs, replays the
//! launches on the device's in-order queue (or the frame's recorded graph where the device
//! records them: `frame_graphs.rs`) and downloads the outputs.
//!
//! Annotated convs the sparse kernels cover run sparsely (`gpu/sparse_conv`, `gpu/sparse`): per frame a member of
//! their PolyKernel over the mask's DISTiles, inactive outputs per the fill policy (a buffer
//! zeroed on the second queue once its last earlier user is done, the residual, or the cached
//! activations of the last frame). Token ops over in-graph masks (A-ViT) run over their active
//! tokens (`token/lower.rs`) as ordinary launches: the device compacts the mask and the kernels
//! read the count, so they need no per-frame host work. Other annotations run in their dense
//! form.

use super::device::KernelDialect;
use super::device::{Arg, GpuDevice, VendorPolicy};
use super::dtype::{self, Precision};
use super::lower::ctx::replay_launches;
use super::lower::ctx::{BufId, Ctx, LArg, Launch, Resources};
use super::lower::{compile_time_outputs, lower};
use super::plan::{is_view, liveness};
use super::sparse::profile::profile_polys;
use super::sparse::split;
use super::sparse::step::{CountsSync, Frames};
use super::sparse::timer::SparseOpTimer;
use super::sparse_conv::build;
use super::sparse_conv::features::{SparseConvFeatures, SparseConvOverrides};
use super::sparse_conv::select::runs_sparse;
use super::sparse_conv::timer::SparseConvOpTimer;
use super::token::lower::{lower_token, TokenPlans};
use super::token::select::runs_token_projection;
use super::token::timer::TokenTimer;
use crate::{ForceMember, SparseConfig};
use dynaspa_runtime::backend::{Backend, Executable};
use dynaspa_runtime::graph::{FillPolicy, Graph, MaskKind, Op};
use dynaspa_runtime::report::{FrameReport, SparseOpRecord, StepTime};
use dynaspa_runtime::{DType, Error, Result, Tensor};
use std::sync::Arc;
use std::time::Instant;

/// Settings of a GPU backend.
#[derive(Clone, Debug, Default)]
pub struct GpuOptions {
    /// Fill every node's outputs with NaN before its kernels run, so an output a kernel fails to
    /// write shows up in the results (tests; costs one fill per node).
    pub poison: bool,
    /// Calibration cache and forced members of the sparse ops.
    pub sparse: SparseConfig,
    /// How sparse ops learn each frame's DISTile counts.
    pub counts: CountsSync,
    /// Report each step's time (`FrameReport::step_times`): where a frame's time goes, timed
    /// on the device where it takes queue timestamps, else at the price of a sync per step.
    pub step_times: bool,
    /// The sparse convs' device-dependent paths (fused finish, self-listing members, the
    /// gather, the stage pipeline); `None` fields: the device's defaults
    /// (`SparseConvFeatures::for_device`).
    pub sparse_conv: SparseConvOverrides,
    /// Repeated frames queued as one recorded graph where the device records them
    /// (`frame_graphs.rs`); `None`: on.
    pub frame_graphs: Option<bool>,
    /// ConvTranspose with unit dilations as a GEMM per output phase rather than a gather;
    /// `None`: on GPUs, off on CPU devices (`lower::conv::phased_transpose`).
    pub convt_gemm: Option<bool>,
    /// How dense convs use the device's vendor library (cuDNN on CUDA), where it has one that
    /// loads: `None` times it against our kernels per conv shape and keeps the faster
    /// (`VendorPolicy::Timed`); `Never` runs our kernels only; `Always` the vendor's wherever it
    /// runs the conv (checks and measurements).
    pub vendor_convs: Option<VendorPolicy>,
    /// How float tensors are stored and kernels compiled (`Precision::F16`: half storage, f32
    /// arithmetic; CUDA and OpenCL, not wgpu).
    pub precision: Precision,
}

/// A `Backend` over one GPU device.
pub struct GpuBackend<D: GpuDevice> {
    dev: Arc<D>,
    name: String,
    opts: GpuOptions,
}

impl<D: GpuDevice> GpuBackend<D> {
    pub fn new(dev: Arc<D>, name: &str, opts: GpuOptions) -> GpuBackend<D> {
        GpuBackend { dev, name: name.to_string(), opts }
    }
    pub fn device(&self) -> &Arc<D> {
        &self.dev
    }
}

impl<D: GpuDevice + 'static> GpuBackend<D> {
    /// Every PolyKernel op of `graph` as `compile` would split it (sparse convs, and token
    /// projections with the token GEMM's timer), ready to time at any schedule: what `dynaspa
    /// tune` measures through. Sparse convs take the executor's path overrides
    /// (`GpuOptions::sparse_conv`), so the tuner times members as frames will run them.
    pub fn sparse_op_timers(&self, graph: &Graph) -> Result<Vec<Box<dyn SparseOpTimer>>> {
        let (g, acts) = split::split(graph, true);
        let g = Arc::new(g);
        let features = SparseConvFeatures::for_device(self.dev.info(), &self.opts.sparse_conv);
        let mut out: Vec<Box<dyn SparseOpTimer>> = Vec::new();
        for (i, n) in g.nodes.iter().enumerate() {
            let wrap = |e: Error| Error::node(&n.name, n.op.name(), e.to_string());
            if runs_sparse(&g, n) {
                let t = SparseConvOpTimer::new(self.dev.clone(), g.clone(), i, features, self.opts.precision).map_err(wrap)?;
                out.push(Box::new(t));
            } else if runs_token_projection(&g, n) {
                out.push(Box::new(TokenTimer::new(self.dev.clone(), g.clone(), &acts, i, self.opts.precision).map_err(wrap)?));
            }
        }
        Ok(out)
    }
}

impl<D: GpuDevice + 'static> Backend for GpuBackend<D> {
    fn name(&self) -> &str {
        &self.name
    }
    fn compile(&self, graph: Arc<Graph>) -> Result<Box<dyn Executable>> {
        let _span = tracing::debug_span!("gpu_compile", backend = %self.name).entered();
        Ok(Box::new(GpuExecutable::compile(self.dev.clone(), &self.name, &graph, &self.opts)?))
    }
}

/// The launches of one node, and the buffers it writes (for poisoning).
struct Step<K> {
    node: String,
    op: &'static str,
    launches: Vec<Launch<K>>,
    /// Buffer, elements, and whether they are 16-bit.
    writes: Vec<(BufId, usize, bool)>,
    /// Index of the node's sparse op in `Frames::ops`.
    sparse: Option<usize>,
}

enum Output {
    Device { buf: BufId, dtype: DType, shape: Vec<usize>, precision: Precision },
    Host(Arc<Tensor>),
}

pub struct GpuExecutable<D: GpuDevice> {
    dev: Arc<D>,
    bufs: Vec<D::Buffer>,
    /// Per graph input: its buffer and name (`None` when no node reads it).
    inputs: Vec<Option<(BufId, String)>>,
    steps: Vec<Step<D::Kernel>>,
    outputs: Vec<Output>,
    /// The fill kernels when poisoning: of 32-bit words, and of the 16-bit ones half tensors
    /// have (the same kernel at f32).
    poison: Option<[Arc<D::Kernel>; 2]>,
    frames: Frames<D>,
    /// Token-sparse ops: ordinary steps (no per-frame host work), listed for benchmarks.
    tokens: TokenPlans<D::Kernel>,
    report: Option<FrameReport>,
    step_times: bool,
    /// Why the profile given in the options was not used at all (another device or backend).
    profile_refused: Option<String>,
    /// How the sparse convs run (`GpuOptions::sparse_conv` resolved for the device).
    features: SparseConvFeatures,
    /// Per step, the masks whose bitmask launch on the second queue it must wait for first
    /// (`settle_points`).
    settle_before: Vec<Vec<usize>>,
    /// Whole frames recorded as graphs, per set of members picked (`frame_graphs.rs`).
    frame_graphs: frame_graphs::FrameGraphs<D::Graph>,
    /// The timestamps of the frame in flight, before its first step and after every step, where
    /// steps are timed on the device.
    stamps: Vec<D::Event>,
    precision: Precision,
}

type StepRecords = (Vec<(usize, SparseOpRecord)>, Vec<StepTime>);

fn words(shape: &[usize]) -> usize {
    shape.iter().product()
}

impl<D: GpuDevice> GpuExecutable<D> {
    pub fn compile(dev: Arc<D>, backend: &str, graph: &Graph, opts: &GpuOptions) -> Result<GpuExecutable<D>> {
        if opts.precision == Precision::F16 && dev.info().dialect() == KernelDialect::Wgsl {
            return Err(Error::Unavailable {
                backend: backend.to_string(),
                reason: "fp16: the WGSL kernels compute and store f32 only; use f32, or the cuda or opencl backend".into(),
            });
        }
        let (split_graph, acts) = split::split(graph, opts.sparse.force != Some(ForceMember::Dense));
        let g = &split_graph;
        let mut frames = Frames::new(opts.counts);
        let tuned = profile_polys(dev.info(), backend, g, &opts.sparse, opts.precision);
        frames.grans = build::plan_granularities(g, &tuned.polys);
        let live = liveness(g);
        let mut tokens = TokenPlans::new(live.root.clone(), acts);
        let features = SparseConvFeatures::for_device(dev.info(), &opts.sparse_conv);
        let mut res = Resources::<D>::new(g.values.len(), features, opts.precision);
        res.convt_gemm = opts.convt_gemm.unwrap_or(dev.info().kind != "cpu");
        res.vendor_policy = match dev.vendor_policy() {
            VendorPolicy::Never => VendorPolicy::Never,
            offered => opts.vendor_convs.unwrap_or(offered),
        };
        res.memo_dir = opts.sparse.cache_dir.clone();
        // Buffers that came from (and may return to) the pool.
        let mut pooled: Vec<bool> = Vec::new();
        let mut problems: Vec<String> = Vec::new();
        let consumers = g.consumers();
        let mut inputs = Vec::with_capacity(g.inputs.len());
        for &v in &g.inputs {
            let val = &g.values[v];
            if dtype::word(val.dtype).is_none() {
                // Still given a buffer, so its readers go on to report what they cannot do.
                problems.push(format!("input '{}' on the {backend} backend: {} tensors are not supported", val.name, val.dtype));
            }
            if consumers[v].is_empty() && !g.is_graph_output(v) {
                inputs.push(None);
                continue;
            }
            let b = res.alloc(&*dev, words(&val.shape).max(1) * 4)?;
            mark(&mut pooled, b, true);
            res.slot[v] = Some(b);
            inputs.push(Some((b, val.name.clone())));
        }
        // At fp16 precision, the values that decide masks keep f32 storage (gpu/wide.rs).
        let wide = if opts.precision == Precision::F16 { super::wide::wide_values(g) } else { vec![false; g.values.len()] };
        if wide.iter().any(|&w| w) {
            let names: Vec<&str> = (0..wide.len()).filter(|&v| wide[v]).map(|v| g.values[v].name.as_str()).collect();
            tracing::debug!(values = names.len(), "kept in f32 at fp16 precision: {}", names.join(", "));
        }
        let mut steps = Vec::new();
        for (i, node) in g.nodes.iter().enumerate() {
            res.precision = opts.precision;
            let op = node.op.name();
            let wrap = |e: Error| Error::node(&node.name, op, e.to_string());
            if is_view(&node.op) {
                let (Some(Some(src)), Some(&dst)) = (node.inputs.first(), node.outputs.first()) else {
                    return Err(wrap(Error::Other("a view needs an input and an output".into())));
                };
                if res.slot[*src].is_none() {
                    let t = g.values[*src].constant.as_ref().ok_or_else(|| wrap(Error::Other("input has no buffer".into())))?;
                    let b = res.upload(&*dev, t, &g.values[*src].name).map_err(wrap)?;
                    mark(&mut pooled, b, false);
                    res.slot[*src] = Some(b);
                }
                res.slot[dst] = res.slot[*src];
            } else if let Some(outs) = compile_time_outputs(g, node) {
                for (&o, t) in node.outputs.iter().zip(outs.map_err(wrap)?) {
                    let p = if wide[o] { Precision::F32 } else { opts.precision };
                    let b = res.upload_at(&*dev, &t, &g.values[o].name, p).map_err(wrap)?;
                    mark(&mut pooled, b, false);
                    res.slot[o] = Some(b);
                }
            } else {
                let mut writes = Vec::new();
                let bad_output = node.outputs.iter().map(|&o| g.values[o].dtype).find(|&d| dtype::word(d).is_none());
                // Cached activations outlive the frame: a buffer of their own, never poisoned.
                let cached = node.sparse.as_ref().is_some_and(|s| matches!(s.fill, FillPolicy::Cached | FillPolicy::Held));
                for &o in &node.outputs {
                    let val = &g.values[o];
                    let bytes = words(&val.shape).max(1) * 4;
                    let b = if cached { res.alloc_own(&*dev, bytes) } else { res.alloc(&*dev, bytes) }.map_err(wrap)?;
                    mark(&mut pooled, b, !cached);
                    res.slot[o] = Some(b);
                    if !cached {
                        writes.push((b, words(&val.shape), opts.precision.narrow_words(val.dtype) && !wide[o]));
                    }
                }
                let before = res.bufs.len();
                if opts.precision == Precision::F16 && super::wide::node_is_wide(g, i, &wide) {
                    res.precision = Precision::F32;
                }
                let mut cx = Ctx { dev: &*dev, graph: g, node, res: &mut res, launches: Vec::new(), scratch: Vec::new() };
                let mut sparse = None;
                let ops_before = frames.ops.len();
                let restore = cx.convert_inputs(&wide).map_err(wrap)?;
                let lowered = match (&node.op, &node.sparse) {
                    (Op::Conv(p), Some(spec)) if runs_sparse(g, node) => {
                        build::lower_sparse_conv(&mut cx, &mut frames, spec, p, &opts.sparse, tuned.polys.get(&node.name))
                    }
                    (_, Some(spec)) if spec.kind == MaskKind::Token => {
                        lower_token(&mut cx, &mut tokens, &mut frames, spec, &opts.sparse, tuned.polys.get(&node.name))
                    }
                    (_, Some(spec)) if spec.fill == FillPolicy::Held => build::lower_held(&mut cx, &mut frames, spec, |cx| lower(cx)),
                    (_, Some(spec)) => build::lower_cached_dense(&mut cx, &mut frames, spec, |cx| lower(cx)),
                    _ => lower(&mut cx),
                };
                for (v, slot) in restore {
                    cx.res.slot[v] = slot;
                }
                // Sparse convs, cached ops and token projections run as PolyKernel ops.
                if lowered.is_ok() && frames.ops.len() > ops_before {
                    sparse = Some(frames.ops.len() - 1);
                    let op = &frames.ops[frames.ops.len() - 1];
                    tracing::debug!(node = %node.name, mask_prewait = op.mask_prewait, "sparse op built");
                }
                let (launches, scratch) = (std::mem::take(&mut cx.launches), std::mem::take(&mut cx.scratch));
                // Tables and uploads made while lowering are the node's own, never pooled.
                for b in before..res.bufs.len() {
                    if b >= pooled.len() {
                        mark(&mut pooled, b, scratch.contains(&b));
                    }
                }
                // One problem per node: the first thing it cannot do.
                let on = |m: &str| format!("node '{}' ({op}) on the {backend} backend: {m}", node.name);
                match (lowered, bad_output) {
                    (Err(Error::Unsupported(msgs)), _) => problems.extend(msgs.iter().take(1).map(|m| on(m))),
                    (Err(e), _) => return Err(wrap(e)),
                    (Ok(()), Some(d)) => problems.push(on(&format!("{d} outputs are not supported"))),
                    (Ok(()), None) => {}
                }
                for b in scratch {
                    let cap = res.caps[b];
                    res.pool.give(b, cap);
                }
                // What a self-listing GEMM of the next nodes must not read before its PDL wait.
                let outs = node.outputs.iter().filter_map(|&o| res.slot[o]);
                if launches.is_empty() && sparse.is_none() {
                    res.written_last.extend(outs);
                } else {
                    res.written_last = outs.collect();
                }
                steps.push(Step { node: node.name.clone(), op, launches, writes, sparse });
            }
            // Buffers whose last reader (or, for unread outputs, producer) was this node.
            let mut done: Vec<usize> = Vec::new();
            for &v in node.inputs.iter().flatten().chain(node.outputs.iter()) {
                let r = live.root[v];
                let last = live.last_use[r].unwrap_or(i);
                if last <= i && !live.pinned[r] && !done.contains(&r) {
                    done.push(r);
                    if let Some(b) = res.slot[r] {
                        if pooled.get(b).copied().unwrap_or(false) {
                            let cap = res.caps[b];
                            res.pool.give(b, cap);
                        }
                    }
                }
            }
        }
        let mut outputs = Vec::with_capacity(g.outputs.len());
        for &o in &g.outputs {
            let val = &g.values[o];
            match (&val.constant, res.slot[o]) {
                (Some(c), _) => outputs.push(Output::Host(c.clone())),
                (None, Some(buf)) => {
                    let precision = if wide[o] { Precision::F32 } else { opts.precision };
                    outputs.push(Output::Device { buf, dtype: val.dtype, shape: val.shape.clone(), precision })
                }
                (None, None) => problems.push(format!("output '{}' is computed by no node", val.name)),
            }
        }
        if !problems.is_empty() {
            return Err(Error::Unsupported(problems));
        }
        let poison = if opts.poison {
            let fill = |res: &mut Resources<D>, defines: &[(&str, i64)]| {
                res.kernel(&*dev, super::kernels::spec(super::kernels::Src::Elementwise, "fill_words", defines))
            };
            let words = fill(&mut res, &[])?;
            let halves = if opts.precision == Precision::F16 { fill(&mut res, &[("MOVE16", 1)])? } else { words.clone() };
            Some([words, halves])
        } else {
            None
        };
        res.fit_workspace(&*dev)?;
        schedule_zero_fills(&steps, &mut frames);
        let settle_before = settle_points(&steps, &frames);
        tracing::debug!(buffers = res.bufs.len(), steps = steps.len(), sparse_ops = frames.ops.len(), "gpu graph compiled");
        Ok(GpuExecutable {
            dev,
            bufs: res.bufs,
            inputs,
            steps,
            outputs,
            poison,
            frames,
            tokens,
            report: None,
            step_times: opts.step_times,
            profile_refused: tuned.refused,
            features: res.features,
            settle_before,
            frame_graphs: frame_graphs::FrameGraphs::new(opts.frame_graphs.unwrap_or(true)),
            stamps: Vec::new(),
            precision: opts.precision,
        })
    }

    /// Queues one frame's work; returns each sparse op's record with its index, and the steps'
    /// times when they are timed: on the device where it takes queue timestamps (read once the
    /// frame is done, `time_steps_on_device`), else on the host with a sync after every step.
    fn replay(&mut self) -> Result<StepRecords> {
        let max = self.dev.info().max_work_group_size;
        let lw = if max > 0 { super::kernels::LINEAR_WG.min(max) } else { super::kernels::LINEAR_WG };
        let mut records = Vec::new();
        let mut step_times = Vec::new();
        self.stamps.clear();
        self.frames.begin_frame();
        self.frames.issue_zero_fills(&*self.dev, &self.bufs, None)?;
        if self.step_times {
            self.stamps.extend(self.dev.timestamp()?);
        }
        for (si, step) in self.steps.iter().enumerate() {
            let t_step = Instant::now();
            let wrap = |e: Error| Error::node(&step.node, step.op, e.to_string());
            for &m in &self.settle_before[si] {
                self.frames.settle(&*self.dev, m).map_err(wrap)?;
            }
            if let Some([words, halves]) = &self.poison {
                for &(b, n, narrow) in step.writes.iter().filter(|w| w.1 > 0) {
                    let (fill, bits) = match narrow {
                        true => (halves, self.precision.float_bits(f32::NAN)),
                        false => (words, f32::NAN.to_bits() as i32),
                    };
                    let args = [Arg::Buf(&self.bufs[b]), Arg::I32(0), Arg::I32(n as i32), Arg::I32(bits)];
                    self.dev.launch(fill, [(n as u32).div_ceil(lw), 1, 1], [lw, 1, 1], &args).map_err(wrap)?;
                }
            }
            match step.sparse {
                Some(op) => records.push((op, self.frames.run_op(&*self.dev, &self.bufs, op, self.poison.is_some()).map_err(wrap)?)),
                None => replay_launches(&*self.dev, &self.bufs, &step.launches).map_err(wrap)?,
            }
            self.frames.issue_zero_fills(&*self.dev, &self.bufs, Some(si)).map_err(wrap)?;
            if self.step_times {
                if self.stamps.is_empty() {
                    self.dev.finish().map_err(wrap)?;
                } else {
                    self.stamps.extend(self.dev.timestamp().map_err(wrap)?);
                }
                step_times.push(StepTime { node: step.node.clone(), op: step.op.to_string(), gpu: None, host: t_step.elapsed() });
            }
        }
        Ok((records, step_times))
    }

    /// Fills in the device's time of every step from the frame's timestamps, the frame done.
    fn time_steps_on_device(&mut self, steps: &mut [StepTime]) -> Result<()> {
        if self.stamps.len() != steps.len() + 1 {
            return Ok(());
        }
        for (st, pair) in steps.iter_mut().zip(self.stamps.windows(2)) {
            st.gpu = Some(self.dev.time_between(&pair[0], &pair[1])?);
        }
        self.stamps.clear();
        Ok(())
    }
}

/// For every `Zero` sparse op, the last earlier step touching its output buffer: its zero fill
/// may start on the second queue once that step is done (pooled buffers serve other values
/// before), overlapping the steps in between.
fn schedule_zero_fills<D: GpuDevice>(steps: &[Step<D::Kernel>], frames: &mut Frames<D>) {
    let touches = |st: &Step<D::Kernel>, b: BufId| -> bool {
        let in_launches = |ls: &[Launch<D::Kernel>]| ls.iter().any(|l| l.args.contains(&LArg::Buf(b)));
        in_launches(&st.launches)
            || st.writes.iter().any(|w| w.0 == b)
            || st.sparse.is_some_and(|i| {
                let op = &frames.ops[i];
                op.members.iter().any(|l| in_launches(l))
                    || in_launches(&op.residual_fill)
                    || in_launches(&op.cached_first)
                    || in_launches(std::slice::from_ref(&frames.masks[op.mask].bitmask))
            })
    };
    let mut after = Vec::new();
    for (si, st) in steps.iter().enumerate() {
        if let Some(i) = st.sparse {
            if let Some((b, _)) = frames.ops[i].zero {
                after.push((i, steps[..si].iter().rposition(|p| touches(p, b))));
            }
        }
    }
    for (i, a) in after {
        frames.ops[i].zero_after = a;
    }
}

/// Per step, the masks whose buffer or metadata its launches use, which it must `settle` before
/// running: a bitmask launch beside an earlier member may still read the mask or write the
/// metadata on the second queue. A sparse op's own mask is left to `run_op`.
fn settle_points<D: GpuDevice>(steps: &[Step<D::Kernel>], frames: &Frames<D>) -> Vec<Vec<usize>> {
    steps
        .iter()
        .map(|st| {
            let mut used = frames.masks_used_by(st.launches.iter());
            if let Some(i) = st.sparse {
                let op = &frames.ops[i];
                let own = op.members.iter().flatten().chain(&op.residual_fill).chain(&op.cached_first);
                used.extend(frames.masks_used_by(own).into_iter().filter(|&m| m != op.mask));
            }
            used.sort_unstable();
            used.dedup();
            used
        })
        .collect()
}

fn mark(pooled: &mut Vec<bool>, b: BufId, value: bool) {
    if pooled.len() <= b {
        pooled.resize(b + 1, false);
    }
    pooled[b] = value;
}

impl<D: GpuDevice> GpuExecutable<D> {
    /// Graph output `i` as the device holds it now (a download waits for the queue): after a
    /// `run`, that frame's; after `time_member`, what the member wrote over the frame's fill,
    /// so a bench can check every member it times.
    pub fn read_output(&self, i: usize) -> Result<Tensor> {
        match self.outputs.get(i) {
            None => Err(Error::Other(format!("output {i}: the graph has {}", self.outputs.len()))),
            Some(Output::Host(t)) => Ok((**t).clone()),
            Some(Output::Device { buf, dtype, shape, precision }) => {
                let mut bytes = vec![0u8; words(shape) * precision.elem_bytes(*dtype)];
                self.dev.download(&self.bufs[*buf], 0, &mut bytes)?;
                dtype::from_words(&bytes, *dtype, shape.clone(), *precision)
            }
        }
    }
}

impl<D: GpuDevice> Executable for GpuExecutable<D> {
    fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let t0 = Instant::now();
        if inputs.len() != self.inputs.len() {
            return Err(Error::Other(format!("{} inputs given, the graph takes {}", inputs.len(), self.inputs.len())));
        }
        // A mask may be an input: its last bitmask launch must be done reading it.
        self.frames.settle_all(&*self.dev)?;
        let start = self.dev.timestamp()?;
        for (t, slot) in inputs.iter().zip(&self.inputs) {
            if let Some((b, name)) = slot {
                let what = format!("input '{name}'");
                let p = self.precision;
                self.dev
                    .upload_staged(&self.bufs[*b], 0, t.len() * p.elem_bytes(t.dtype()), &mut |out| dtype::write_words(t, &what, out, p))?;
            }
        }
        if self.step_times {
            self.dev.finish()?;
        }
        let replayed_before = self.frame_graphs.stats.replayed;
        let (mut sparse_ops, mut step_times) = self.queue_frame()?;
        let replayed = self.frame_graphs.stats.replayed > replayed_before;
        let end = if start.is_some() { self.dev.timestamp()? } else { None };
        let queued = t0.elapsed();
        let outs = (0..self.outputs.len()).map(|i| self.read_output(i)).collect::<Result<Vec<_>>>()?;
        // The outputs were read, so the queue has drained: the counts copied behind the frame
        // are on the host.
        self.frames.end_frame(&*self.dev, &self.bufs, &mut sparse_ops)?;
        self.time_steps_on_device(&mut step_times)?;
        let device = match (&start, &end) {
            (Some(a), Some(b)) => Some(self.dev.time_between(a, b)?),
            _ => None,
        };
        let sparse_ops = sparse_ops.into_iter().map(|(_, r)| r).collect();
        // Per-node times would need a queue sync per node; the GPU report holds the frame total.
        self.report = Some(FrameReport {
            total: t0.elapsed(),
            sparse_ops,
            step_times,
            phases_queued: true,
            replayed,
            queued,
            device,
            ..Default::default()
        });
        Ok(outs)
    }
    fn last_report(&self) -> Option<&FrameReport> {
        self.report.as_ref()
    }
}

#[path = "executor_bench.rs"]
mod bench;
#[path = "frame_graphs.rs"]
mod frame_graphs;
pub use bench::{NodePart, SparseOpInfo, TokenOpInfo};
pub use frame_graphs::FrameGraphStats;

fn replay_launches_refs<D: GpuDevice>(dev: &D, bufs: &[D::Buffer], launches: &[&Launch<D::Kernel>]) -> Result<()> {
    for l in launches {
        replay_launches(dev, bufs, std::slice::from_ref(*l))?;
    }
    Ok(())
}

#[cfg(all(test, feature = "opencl"))]
#[path = "executor_tests.rs"]
mod tests;

#[cfg(all(test, feature = "opencl"))]
#[path = "self_list_tests.rs"]
mod self_list_tests;
