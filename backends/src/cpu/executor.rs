//! Runs a graph node by node on the CPU, freeing each intermediate after its last reader;
//! sparse nodes go through `sparse_exec`, and their buffers return to the zero-fill pool.

use super::eval_op;
use super::sparse_exec::{build_steps, MaskMemo, SparseStep};
use super::zero_pool::{Dirty, ZeroPool};
use crate::SparseConfig;
use dynaspa_runtime::backend::{Backend, Executable, OpEvaluator, TensorSpec};
use dynaspa_runtime::graph::{Graph, Op};
use dynaspa_runtime::report::FrameReport;
use dynaspa_runtime::{Error, Result, Tensor};
use std::sync::Arc;
use std::time::Instant;

pub struct CpuBackend {
    pool: Arc<rayon::ThreadPool>,
    sparse: SparseConfig,
}

impl CpuBackend {
    /// `threads`: worker count; `None` uses every core.
    pub fn new(threads: Option<usize>) -> Result<CpuBackend> {
        let mut b = rayon::ThreadPoolBuilder::new().thread_name(|i| format!("dynaspa-cpu-{i}"));
        if let Some(n) = threads {
            b = b.num_threads(n.max(1));
        }
        let pool = b.build().map_err(|e| Error::Backend { backend: "cpu".into(), msg: e.to_string() })?;
        Ok(CpuBackend { pool: Arc::new(pool), sparse: SparseConfig::from_env() })
    }
    /// How sparse ops are calibrated, cached and (for tests) pinned to one member.
    pub fn with_sparse_config(mut self, cfg: SparseConfig) -> CpuBackend {
        self.sparse = cfg;
        self
    }
    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }
    /// A timer for every sparse node of `graph` (annotated by `detect_sparse_regions`), in
    /// node order, running on this backend's threads: what the tuner measures through.
    pub fn sparse_op_timers(&self, graph: Arc<Graph>) -> Result<Vec<super::SparseOpTimer>> {
        (0..graph.nodes.len())
            .filter(|&i| graph.nodes[i].sparse.is_some())
            .map(|i| {
                let n = &graph.nodes[i];
                super::SparseOpTimer::new(graph.clone(), i, self.pool.clone()).map_err(|e| Error::node(&n.name, n.op.name(), e.to_string()))
            })
            .collect()
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> &str {
        "cpu"
    }
    fn compile(&self, graph: Arc<Graph>) -> Result<Box<dyn Executable>> {
        let consumers = graph.consumers();
        // Index of the last node reading each value, so it can be dropped right after.
        let mut last_use = vec![None; graph.values.len()];
        for (v, c) in consumers.iter().enumerate() {
            last_use[v] = c.iter().copied().max();
        }
        let specs: Vec<Vec<TensorSpec>> = graph
            .nodes
            .iter()
            .map(|n| n.outputs.iter().map(|&o| TensorSpec { dtype: graph.values[o].dtype, shape: graph.values[o].shape.clone() }).collect())
            .collect();
        let prepared: Vec<Option<Prepared>> = graph.nodes.iter().map(|n| prepare(&graph, n)).collect();
        let dense = |ni: usize, ins: &[Option<&Tensor>]| -> Result<Tensor> {
            let mut outs = eval_node(&graph.nodes[ni].op, prepared[ni].as_ref(), ins, &specs[ni])?;
            Ok(outs.swap_remove(0))
        };
        let threads = self.threads();
        let steps = self.pool.install(|| build_steps(&graph, &self.sparse, threads, &dense))?;
        let values = graph.values.len();
        Ok(Box::new(CpuExecutable {
            graph,
            pool: self.pool.clone(),
            last_use,
            specs,
            prepared,
            steps,
            zero: ZeroPool::new(),
            memo: MaskMemo::new(values),
            report: None,
        }))
    }
}

struct CpuExecutable {
    graph: Arc<Graph>,
    pool: Arc<rayon::ThreadPool>,
    last_use: Vec<Option<usize>>,
    specs: Vec<Vec<TensorSpec>>,
    /// Per node: weights rearranged once for the kernel that will run them.
    prepared: Vec<Option<Prepared>>,
    /// Per node: how it runs sparsely, if it does.
    steps: Vec<Option<SparseStep>>,
    zero: ZeroPool,
    memo: MaskMemo,
    report: Option<FrameReport>,
}

/// Kernel-specific forms of constant weights, made when the graph is compiled rather than on
/// every frame.
pub(crate) enum Prepared {
    #[cfg(target_arch = "x86_64")]
    Winograd(super::conv_winograd::WinoWeights),
    Direct(super::conv_direct::DirectConv),
    Rows(super::conv_rows::RowsConv),
}

pub(crate) fn prepare(g: &Graph, n: &dynaspa_runtime::graph::Node) -> Option<Prepared> {
    match &n.op {
        Op::Conv(p) => {
            let constant = |i: usize| n.inputs.get(i).copied().flatten().and_then(|v| g.values[v].constant.as_deref());
            let w = constant(1)?;
            let x = &g.values[(*n.inputs.first()?)?];
            // The direct kernel wants a constant bias (or none) and an f32 input.
            let bias_ok = n.inputs.get(2).copied().flatten().is_none() || constant(2).is_some();
            if bias_ok && x.dtype == dynaspa_runtime::DType::F32 && x.shape.len() == 4 {
                let sc = super::sparse::SparseConv::new(p, &x.shape, w, constant(2)).ok();
                let rows = sc.as_ref().and_then(|sc| sc.ungrouped_shape()).and_then(|(geo, c, m)| {
                    let bias = constant(2).and_then(|b| b.as_f32().ok());
                    let wd = w.as_f32().ok()?;
                    super::conv_rows::pays(c, m, geo.kh, geo.kw, c * geo.plane())
                        .then(|| super::conv_rows::RowsConv::new(geo, c, m, wd, bias, p.activation, p.fused_add))
                        .flatten()
                });
                if let Some(r) = rows {
                    return Some(Prepared::Rows(r));
                }
                if let Some(d) = sc.and_then(|c| c.into_direct()) {
                    return Some(Prepared::Direct(d));
                }
            }
            #[cfg(target_arch = "x86_64")]
            return super::conv::prepare_winograd(p, w).map(Prepared::Winograd);
            #[cfg(not(target_arch = "x86_64"))]
            None
        }
        _ => None,
    }
}

pub(crate) fn eval_node(op: &Op, prepared: Option<&Prepared>, ins: &[Option<&Tensor>], specs: &[TensorSpec]) -> Result<Vec<Tensor>> {
    match (op, prepared) {
        #[cfg(target_arch = "x86_64")]
        (Op::Conv(p), Some(Prepared::Winograd(wt))) => Ok(vec![super::conv::conv_winograd(p, ins, &specs[0], wt)?]),
        (Op::Conv(p), Some(Prepared::Direct(d))) => Ok(vec![super::conv::conv_direct(p, d, ins, &specs[0])?]),
        (Op::Conv(p), Some(Prepared::Rows(r))) => Ok(vec![super::conv::conv_rows(p, r, ins, &specs[0])?]),
        _ => eval_op(op, ins, specs),
    }
}

impl Executable for CpuExecutable {
    fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        self.run_owned(inputs.to_vec())
    }
    fn run_owned(&mut self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        let t_frame = Instant::now();
        let CpuExecutable { graph, pool, last_use, specs, prepared, steps, zero, memo, report } = self;
        memo.clear();
        let g = &**graph;
        let mut vals: Vec<Option<Arc<Tensor>>> = g.values.iter().map(|v| v.constant.clone()).collect();
        // How each sparse output's buffer may be recycled once its last reader is done.
        let mut dirty: Vec<Option<Dirty>> = (0..g.values.len()).map(|_| None).collect();
        for (&id, t) in g.inputs.iter().zip(inputs) {
            vals[id] = Some(Arc::new(t));
        }
        let mut frame = FrameReport { node_times: Vec::with_capacity(g.nodes.len()), ..Default::default() };
        pool.install(|| -> Result<()> {
            for (ni, node) in g.nodes.iter().enumerate() {
                let _span = tracing::trace_span!("node", name = %node.name, op = node.op.name()).entered();
                let t_node = Instant::now();
                let ins: Vec<Option<&Tensor>> = node.inputs.iter().map(|i| i.and_then(|i| vals[i].as_deref())).collect();
                let wrap = |e: Error| Error::node(&node.name, node.op.name(), e.to_string());
                let outs = match steps[ni].as_mut() {
                    Some(step) => {
                        let mask = vals[step.spec.mask]
                            .as_deref()
                            .ok_or_else(|| wrap(Error::Other(format!("mask '{}' was not computed before the op", step.mask_name))))?;
                        let dense = |ins: &[Option<&Tensor>], spec: Option<&TensorSpec>| -> Result<Tensor> {
                            let mut o = match spec {
                                Some(s) => eval_node(&node.op, prepared[ni].as_ref(), ins, std::slice::from_ref(s))?,
                                None => eval_node(&node.op, prepared[ni].as_ref(), ins, &specs[ni])?,
                            };
                            Ok(o.swap_remove(0))
                        };
                        let out = step.run(&node.name, &node.op, &ins, mask, &specs[ni][0], zero, memo, &dense).map_err(wrap)?;
                        dirty[node.outputs[0]] = out.dirty;
                        frame.sparse_ops.push(out.record);
                        vec![out.tensor]
                    }
                    None => eval_node(&node.op, prepared[ni].as_ref(), &ins, &specs[ni]).map_err(wrap)?,
                };
                check_outputs(&node.name, &node.op, &outs, &specs[ni])?;
                frame.node_times.push(t_node.elapsed());
                for (&o, t) in node.outputs.iter().zip(outs) {
                    let t = Arc::new(t);
                    if let Some(step) = steps[ni].as_mut() {
                        step.keep(&t);
                    }
                    vals[o] = Some(t);
                }
                let reads = node.inputs.iter().flatten().chain(steps[ni].as_ref().map(|s| &s.spec.mask));
                for &i in reads {
                    if last_use[i] == Some(ni) && g.values[i].constant.is_none() && !g.is_graph_output(i) {
                        let v = vals[i].take();
                        if let (Some(d), Some(t)) = (dirty[i].take(), v) {
                            if let Ok(t) = Arc::try_unwrap(t) {
                                if let Ok(buf) = t.into_data().into_f32() {
                                    zero.give_back(buf, d);
                                }
                            }
                        }
                    }
                }
            }
            Ok(())
        })?;
        frame.total = t_frame.elapsed();
        *report = Some(frame);
        g.outputs
            .iter()
            .map(|&o| {
                let t = vals[o].take().ok_or_else(|| Error::Other(format!("graph output '{}' was not computed", g.values[o].name)))?;
                Ok(Arc::try_unwrap(t).unwrap_or_else(|a| (*a).clone()))
            })
            .collect()
    }
    fn last_report(&self) -> Option<&FrameReport> {
        self.report.as_ref()
    }
}

/// A kernel that returns the wrong shape or type is a bug; catch it where it happens.
fn check_outputs(node: &str, op: &Op, outs: &[Tensor], specs: &[TensorSpec]) -> Result<()> {
    if outs.len() != specs.len() {
        return Err(Error::node(node, op.name(), format!("kernel returned {} outputs, expected {}", outs.len(), specs.len())));
    }
    for (t, s) in outs.iter().zip(specs) {
        if t.shape() != s.shape.as_slice() || t.dtype() != s.dtype {
            return Err(Error::node(
                node,
                op.name(),
                format!("kernel produced {} {:?}, shape inference said {} {:?}", t.dtype(), t.shape(), s.dtype, s.shape),
            ));
        }
    }
    Ok(())
}

/// Constant folding at load time runs ops through the CPU kernels.
pub struct CpuEvaluator;

impl OpEvaluator for CpuEvaluator {
    fn eval(&self, op: &Op, inputs: &[Option<&Tensor>], outputs: &[TensorSpec]) -> Result<Vec<Tensor>> {
        eval_op(op, inputs, outputs)
    }
}
