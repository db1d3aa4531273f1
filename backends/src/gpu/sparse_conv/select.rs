//! Which spatially annotated nodes the GPU runs with the sparse conv kernels, and which run
//! densely with the last frame's activations kept where the mask is 0 (`Cached` fill); and the
//! kind, output channels and reduction length of a conv it runs, read from the graph.

use dynaspa_runtime::graph::delta::region_elementwise;
use dynaspa_runtime::graph::{FillPolicy, Graph, MaskKind, Node, Op};
use dynaspa_runtime::DType;

/// Whether the GPU sparse conv kernels run `n` (see the module docs); mirrors what
/// `sparse_conv::lower::prepare` accepts.
pub(crate) fn runs_sparse(g: &Graph, n: &Node) -> bool {
    let (Op::Conv(p), Some(sp)) = (&n.op, &n.sparse) else { return false };
    if sp.kind != MaskKind::Spatial || n.outputs.len() != 1 {
        return false;
    }
    let val = |i: usize| n.inputs.get(i).copied().flatten().map(|v| &g.values[v]);
    let (Some(x), Some(w)) = (val(0), val(1)) else { return false };
    let y = &g.values[n.outputs[0]];
    let m = &g.values[sp.mask];
    let floats = n.inputs.iter().flatten().all(|&v| g.values[v].dtype == DType::F32) && y.dtype == DType::F32;
    if !floats || x.shape.len() != 4 || w.shape.len() != 4 || y.shape.len() != 4 || m.dtype != DType::F32 {
        return false;
    }
    let (cin, cout) = (x.shape[1], y.shape[1]);
    let gemm = p.group == 1 && w.shape[1] == cin && w.constant.is_some();
    let depthwise = p.group == cin && cout == cin && w.shape[1] == 1;
    let mask_ok = m.shape.len() == 4 && (m.shape[0] == 1 || m.shape[0] == y.shape[0]) && m.shape[1] == 1 && m.shape[2..] == y.shape[2..];
    (gemm || depthwise) && mask_ok && w.shape[0] == cout && y.shape.iter().product::<usize>() > 0
}

/// Whether `n` is a `Cached` op without sparse kernels over a spatial mask: it runs densely and
/// a blend keeps the last frame's activations where the mask is 0 (lowering it to dense ops
/// would put zeros there). Elementwise ops delta mode marks are not: computed whole, they give
/// what the blend would keep (`graph::delta::region_elementwise`).
pub(crate) fn runs_cached_dense(g: &Graph, n: &Node) -> bool {
    let Some(sp) = &n.sparse else { return false };
    if region_elementwise(&n.op) || sp.kind != MaskKind::Spatial || sp.fill != FillPolicy::Cached || n.outputs.len() != 1 || runs_sparse(g, n) {
        return false;
    }
    let (y, m) = (&g.values[n.outputs[0]], &g.values[sp.mask]);
    y.dtype == DType::F32
        && m.dtype == DType::F32
        && y.shape.len() == 4
        && m.shape.len() == 4
        && (m.shape[0] == 1 || m.shape[0] == y.shape[0])
        && m.shape[1] == 1
        && m.shape[2..] == y.shape[2..]
        && y.shape.iter().product::<usize>() > 0
}

/// The two forms the sparse conv kernels take a conv in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SparseConvKind {
    Gemm,
    /// One input and one output channel per group.
    Depthwise,
}

/// Kind, output channels and reduction length (input channels x taps for the GEMM, taps for
/// depthwise) of a conv `runs_sparse` accepts, read from the graph (before lowering).
pub(crate) fn sparse_conv_dims(g: &Graph, n: &Node) -> Option<(SparseConvKind, usize, usize)> {
    let Op::Conv(p) = &n.op else { return None };
    let shape = |i: usize| n.inputs.get(i).copied().flatten().map(|v| &g.values[v].shape);
    let (x, w) = (shape(0)?, shape(1)?);
    if x.len() != 4 || w.len() != 4 {
        return None;
    }
    let taps = w[2] * w[3];
    if p.group == 1 && w[1] == x[1] {
        Some((SparseConvKind::Gemm, w[0], x[1] * taps))
    } else if p.group == x[1] && w[1] == 1 {
        Some((SparseConvKind::Depthwise, w[0], taps))
    } else {
        None
    }
}
