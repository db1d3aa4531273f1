//! One sparse op's members run outside a frame, on random operands of the op's shapes:
//! calibration times them for the default PolyKernel, and the tuner measures them through
//! the public [`SparseOpTimer`] (`CpuBackend::sparse_op_timers`).

use super::calibrate::random_tensor;
use super::{apply_mask, residual_of, Kernel};
use crate::cpu::executor::{eval_node, prepare, Prepared};
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::graph::{Graph, MaskKind, Node};
use dynaspa_runtime::profile::OpSignature;
use dynaspa_runtime::sparsity::{BitMask, Granularity};
use dynaspa_runtime::{DType, Error, Result, Tensor};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The op's non-constant inputs drawn at random (timing on zeros could take shortcuts real
/// frames do not); constants are read from the graph.
pub(crate) struct Operands {
    owned: Vec<Option<Tensor>>,
}

impl Operands {
    pub fn new(g: &Graph, n: &Node) -> Operands {
        let owned = n
            .inputs
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let val = &g.values[(*v)?];
                val.constant.is_none().then(|| random_tensor(val.dtype, &val.shape, 0x51ed + i as u64))
            })
            .collect();
        Operands { owned }
    }

    pub fn ins<'a>(&'a self, g: &'a Graph, n: &Node) -> Vec<Option<&'a Tensor>> {
        n.inputs.iter().zip(&self.owned).map(|(v, o)| o.as_ref().or_else(|| v.and_then(|v| g.values[v].constant.as_deref()))).collect()
    }
}

/// Runs the sparse kernel at granularity `gr` on mask `m` (the same mask for every image),
/// as a frame would, into `out`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_sparse_member(
    kernel: &Kernel,
    g: &Graph,
    n: &Node,
    ins: &[Option<&Tensor>],
    out: &mut [f32],
    m: &BitMask,
    gr: Granularity,
    (images, _h, w): (usize, usize, usize),
) -> Result<()> {
    let out_len = out.len();
    let x = ins.first().copied().flatten().ok_or_else(|| Error::Other("no input".into()))?.as_f32()?;
    match kernel {
        Kernel::Conv(c) => {
            let res = residual_of(ins)?;
            let (xi, oi) = (x.len() / images, out_len / images);
            let ts = (gr != Granularity::new(1, 1)).then(|| m.aligned_tiles(gr));
            for img in 0..images {
                let (xs, os, rs) = (&x[img * xi..][..xi], &mut out[img * oi..][..oi], res.map(|r| &r[img * oi..][..oi]));
                match &ts {
                    None => c.run_positions(xs, os, m, rs)?,
                    Some(ts) => c.run(xs, os, ts, m, rs)?,
                }
            }
        }
        Kernel::Linear(l) => {
            let (k, nn) = l.dims();
            let rows: Vec<u32> = (0..w).filter(|&t| m.get(0, t)).map(|t| t as u32).collect();
            for img in 0..images {
                l.run(&x[img * w * k..][..w * k], w, &mut out[img * w * nn..][..w * nn], &rows)?;
            }
        }
        Kernel::Attention(a) => {
            let mt = Tensor::from_f32(vec![images, w], (0..images * w).map(|i| m.get(0, i % w) as u8 as f32).collect())?;
            let c = a.key_mask.map_or(1e4, |k| k.c);
            let bias = Tensor::from_f32(vec![images, 1, 1, w], mt.as_f32()?.iter().map(|&v| (v - 1.0) * c).collect())?;
            let mut ai = ins.to_vec();
            ai.resize(5, None);
            ai[3] = Some(&bias);
            ai[4] = Some(&mt);
            let spec = TensorSpec { dtype: DType::F32, shape: g.values[n.outputs[0]].shape.clone() };
            crate::cpu::attention_node_active(a, &ai, &spec)?;
        }
        Kernel::DenseOnly | Kernel::Elementwise => {}
    }
    Ok(())
}

/// Whether the sparse kernel of this op gives the dense op's results at granularity `g`.
/// Convs compute whole tiles and write only active positions, so any size works; token rows
/// are written as computed, so token ops take single tokens only.
pub(crate) fn kernel_supports(kernel: &Kernel, g: Granularity) -> bool {
    match kernel {
        Kernel::Conv(_) => g.h >= 1 && g.w >= 1,
        Kernel::Linear(_) | Kernel::Attention(_) => g == Granularity::new(1, 1),
        Kernel::Elementwise => g == Granularity::new(1, 1),
        Kernel::DenseOnly => false,
    }
}

/// One sparse op of a compiled model, ready to time its dense member and its sparse kernel at
/// any granularity it supports, on the backend's thread pool. Each call is one run (no
/// warm-up, no repetition): the caller decides how to aggregate.
pub struct SparseOpTimer {
    graph: Arc<Graph>,
    node: usize,
    kernel: Kernel,
    geom: (usize, usize, usize),
    kind: MaskKind,
    masked: bool,
    operands: Operands,
    prepared: Option<Prepared>,
    specs: Vec<TensorSpec>,
    buf: Vec<f32>,
    pool: Arc<rayon::ThreadPool>,
    signature: OpSignature,
}

impl SparseOpTimer {
    pub(crate) fn new(graph: Arc<Graph>, node: usize, pool: Arc<rayon::ThreadPool>) -> Result<SparseOpTimer> {
        let n = &graph.nodes[node];
        let spec = n.sparse.clone().ok_or_else(|| Error::Other(format!("node '{}' is not sparse", n.name)))?;
        let (kernel, geom) = super::step_build::kernel_for(&graph, n, spec.kind)?;
        let specs: Vec<TensorSpec> =
            n.outputs.iter().map(|&o| TensorSpec { dtype: graph.values[o].dtype, shape: graph.values[o].shape.clone() }).collect();
        let out_len: usize = specs[0].shape.iter().product();
        Ok(SparseOpTimer {
            signature: OpSignature::of(&graph, n),
            operands: Operands::new(&graph, n),
            prepared: prepare(&graph, n),
            kind: spec.kind,
            masked: spec.fused_mul,
            kernel,
            geom,
            specs,
            buf: vec![0.0; out_len],
            pool,
            graph,
            node,
        })
    }

    pub fn node_name(&self) -> &str {
        &self.graph.nodes[self.node].name
    }
    pub fn node(&self) -> &Node {
        &self.graph.nodes[self.node]
    }
    pub fn graph(&self) -> &Graph {
        &self.graph
    }
    pub fn signature(&self) -> &OpSignature {
        &self.signature
    }
    /// Mask plane `(h, w)`: output positions for convs, `(1, tokens)` for token ops.
    pub fn mask_size(&self) -> (usize, usize) {
        (self.geom.1, self.geom.2)
    }
    pub fn images(&self) -> usize {
        self.geom.0
    }
    pub fn is_token_op(&self) -> bool {
        self.kind == MaskKind::Token
    }
    /// `false` when the op has no sparse kernel (it runs dense, masked): nothing to tune.
    pub fn has_sparse_kernel(&self) -> bool {
        !matches!(self.kernel, Kernel::DenseOnly | Kernel::Elementwise)
    }
    pub fn supports(&self, g: Granularity) -> bool {
        kernel_supports(&self.kernel, g)
    }

    fn check_mask(&self, m: &BitMask) -> Result<()> {
        let (h, w) = self.mask_size();
        if (m.height(), m.width()) != (h, w) {
            return Err(Error::Other(format!(
                "node '{}': mask is {}x{}, the op's mask plane is {h}x{w}",
                self.node_name(),
                m.height(),
                m.width()
            )));
        }
        Ok(())
    }

    /// One run of the dense member as a frame runs it: the kernel, then the mask folded in.
    pub fn time_dense(&mut self, m: &BitMask) -> Result<Duration> {
        self.check_mask(m)?;
        let SparseOpTimer { graph, node, prepared, specs, operands, pool, masked, kind, geom, .. } = self;
        let n = &graph.nodes[*node];
        let ins = operands.ins(graph, n);
        let masks = vec![m.clone(); geom.0];
        pool.install(|| {
            let t = Instant::now();
            let mut out = eval_node(&n.op, prepared.as_ref(), &ins, specs)?.swap_remove(0);
            if *masked {
                apply_mask(&mut out, &masks, *kind, None)?;
            }
            Ok(t.elapsed())
        })
    }

    /// One run of the sparse kernel at granularity `g` on mask `m`; an error when the kernel
    /// cannot run `g` (see [`SparseOpTimer::supports`]).
    pub fn time_sparse(&mut self, m: &BitMask, g: Granularity) -> Result<Duration> {
        self.check_mask(m)?;
        if !self.supports(g) {
            return Err(Error::Other(format!("node '{}': the CPU sparse kernel cannot run granularity {g}", self.node_name())));
        }
        let SparseOpTimer { graph, node, kernel, operands, pool, buf, geom, .. } = self;
        let n = &graph.nodes[*node];
        let ins = operands.ins(graph, n);
        pool.install(|| {
            let t = Instant::now();
            run_sparse_member(kernel, graph, n, &ins, buf, m, g, *geom)?;
            Ok(t.elapsed())
        })
    }
}
