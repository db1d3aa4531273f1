//! `detect_sparse_regions`: finds `Mul(f(P), M)` with P a Conv/ConvTranspose (spatial) or a
//! MatMul/Gemm with constant weights (token rows), f position-local and M a provably binary map,
//! and annotates P so that it computes only where M is 1 (shared/DESIGN.md, "How masks are found
//! in a model"). Every check exists so that skipping P's inactive outputs cannot change a result;
//! a candidate that fails any of them stays dense, with the reason in a `debug` log line.

use super::mask_trace::{self, Links, MaskTrace, Origin};
use super::op::{BinaryKind, Op, UnaryKind};
use super::sparse::{FillPolicy, MaskKind, MaskSource, SparseSpec};
use super::{Graph, ValueId};
use crate::tensor::DType;
use serde::Serialize;

#[derive(Clone, Debug, Default)]
pub struct SparseOptions {
    /// Masks given as model inputs (SIGE's edit mask) keep the last frame's activations where the
    /// mask is 0 (`FillPolicy::Cached`). Off by default: the zeros the ONNX graph multiplies in.
    pub cached_model_input_masks: bool,
}

/// One sparse op as `inspect` lists it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SparseRegionInfo {
    pub node: String,
    pub op: String,
    pub kind: MaskKind,
    /// Name of the mask value.
    pub mask: String,
    pub source: MaskSource,
    pub dilation: [usize; 2],
    pub fill: FillPolicy,
    pub fused_mul: bool,
    pub output_shape: Vec<usize>,
}

/// Ops that do the work sparsity saves: what "N of M compute ops" counts.
pub fn is_compute_op(op: &Op) -> bool {
    matches!(op, Op::Conv(_) | Op::ConvTranspose(_) | Op::MatMul | Op::Gemm { .. } | Op::Attention(_))
}

/// Largest f (elementwise epilogue between P and the Mul) considered; GELU with its bias is 6.
const MAX_F_NODES: usize = 32;

/// Annotates every op it can prove sparse and returns all sparse ops of the graph afterwards.
/// Never panics; a graph it cannot analyse (dangling ids, nodes out of order) is left unchanged.
pub fn detect_sparse_regions(g: &mut Graph, opts: &SparseOptions) -> Vec<SparseRegionInfo> {
    let _span = tracing::debug_span!("detect_sparse_regions").entered();
    let Some(mut links) = Links::new(g) else {
        tracing::debug!("graph refers to missing values or is out of order: no sparse regions");
        return sparse_ops(g);
    };
    let mut changed = false;
    let mut i = 0;
    while i < g.nodes.len() {
        if g.nodes[i].op != Op::Binary(BinaryKind::Mul) {
            i += 1;
            continue;
        }
        match analyse(g, &links, i) {
            Err(why) => {
                tracing::debug!(mul = %g.nodes[i].name, "not sparse: {why}");
                i += 1;
            }
            Ok(region) => {
                let fused = region.f.is_empty();
                apply(g, &links, i, region, opts);
                changed = true;
                // A folded Mul is gone, so the next node now sits at i.
                if !fused {
                    i += 1;
                }
                match Links::new(g) {
                    Some(l) => links = l,
                    None => {
                        tracing::warn!("sparse rewrite left the graph inconsistent; stopping the pass");
                        break;
                    }
                }
            }
        }
    }
    if changed {
        g.compact();
    }
    let joins = super::sparse_residual::fuse_sparse_residuals(g);
    if joins > 0 {
        tracing::debug!(joins, "residual joins folded into sparse convs");
    }
    let attn = super::sparse_attention::annotate(g);
    if attn > 0 {
        tracing::debug!(attention = attn, "token-sparse attentions");
    }
    sparse_ops(g)
}

/// The sparse ops of a graph, in execution order.
pub fn sparse_ops(g: &Graph) -> Vec<SparseRegionInfo> {
    g.nodes
        .iter()
        .filter_map(|n| {
            let s = n.sparse.as_ref()?;
            let out = n.outputs.first().and_then(|&o| g.values.get(o));
            Some(SparseRegionInfo {
                node: n.name.clone(),
                op: n.op.name().to_string(),
                kind: s.kind,
                mask: g.values.get(s.mask).map_or_else(String::new, |v| v.name.clone()),
                source: s.source.clone(),
                dilation: s.dilation,
                fill: s.fill,
                fused_mul: s.fused_mul,
                output_shape: out.map_or_else(Vec::new, |v| v.shape.clone()),
            })
        })
        .collect()
}

struct Region {
    /// The producer (Conv, ConvTranspose, MatMul, Gemm).
    p: usize,
    /// The elementwise nodes between P and the Mul, in graph order.
    f: Vec<usize>,
    mask: ValueId,
    kind: MaskKind,
    trace: MaskTrace,
}

fn analyse(g: &Graph, links: &Links, m: usize) -> Result<Region, String> {
    let node = &g.nodes[m];
    let (&[Some(x0), Some(x1)], Some(&y)) = (node.inputs.as_slice(), node.outputs.first()) else {
        return Err("Mul without two inputs and an output".into());
    };
    let as_second = region(g, links, m, x0, x1, y).map_err(|e| format!("with the second operand as mask: {e}"));
    as_second.or_else(|e0| region(g, links, m, x1, x0, y).map_err(|e1| format!("{e0}; with the first operand as mask: {e1}")))
}

/// Checks `y = Mul(a, mk)` with `a = f(P)` and `mk` the mask.
fn region(g: &Graph, links: &Links, m: usize, a: ValueId, mk: ValueId, y: ValueId) -> Result<Region, String> {
    let (p, kind, f) = producer_dag(g, links, a)?;
    let pn = &g.nodes[p];
    if pn.sparse.is_some() {
        return Err(format!("{} '{}' is already sparse", pn.op.name(), pn.name));
    }
    let &[pout] = pn.outputs.as_slice() else {
        return Err(format!("{} '{}' has more than one output", pn.op.name(), pn.name));
    };
    let out = &g.values[pout];
    if out.dtype != DType::F32 || g.values[mk].dtype != DType::F32 {
        return Err("only float32 results and masks are handled".into());
    }
    if g.values[y].shape != out.shape {
        return Err(format!("the Mul broadcasts {:?} to {:?}", out.shape, g.values[y].shape));
    }
    mask_shape_fits(kind, &out.shape, &g.values[mk].shape)?;
    if mk == pout || f.iter().any(|&n| g.nodes[n].outputs.contains(&mk)) {
        return Err("the mask is computed from the producer's own result".into());
    }
    epilogue_is_local(g, links, m, p, &f, kind)?;
    let trace = mask_trace::trace_mask(g, links, mk)?;
    Ok(Region { p, f, mask: mk, kind, trace })
}

/// Walks back from `a` through elementwise ops to the single producer P.
fn producer_dag(g: &Graph, links: &Links, a: ValueId) -> Result<(usize, MaskKind, Vec<usize>), String> {
    let mut stack = vec![a];
    let mut seen = Vec::new();
    let mut producer: Option<(usize, MaskKind)> = None;
    let mut f = Vec::new();
    while let Some(v) = stack.pop() {
        if seen.contains(&v) || g.values[v].constant.is_some() {
            continue;
        }
        seen.push(v);
        let Some(n) = links.prod[v] else {
            return Err(format!("'{}' is a model input, not a Conv/MatMul result", g.values[v].name));
        };
        let node = &g.nodes[n];
        if let Some(kind) = producer_kind(g, node)? {
            match producer {
                Some((q, _)) if q != n => {
                    return Err(format!("two producers reach the Mul ('{}' and '{}')", g.nodes[q].name, node.name))
                }
                _ => producer = Some((n, kind)),
            }
            continue;
        }
        if !pointwise(&node.op) {
            return Err(format!("{} '{}' between the producer and the Mul is not elementwise", node.op.name(), node.name));
        }
        f.push(n);
        if f.len() > MAX_F_NODES {
            return Err(format!("more than {MAX_F_NODES} elementwise ops between the producer and the Mul"));
        }
        stack.extend(node.inputs.iter().flatten());
    }
    let (p, kind) = producer.ok_or("no Conv, ConvTranspose or MatMul/Gemm with constant weights feeds the Mul")?;
    f.sort_unstable();
    Ok((p, kind, f))
}

/// `Some` for an op that can run sparsely and what its mask ranges over; `Err` for a Conv or
/// MatMul that cannot (so the log says why instead of "not elementwise").
fn producer_kind(g: &Graph, node: &super::Node) -> Result<Option<MaskKind>, String> {
    let rank = node.outputs.first().map_or(0, |&o| g.values[o].shape.len());
    let konst = |i: usize| node.inputs.get(i).copied().flatten().and_then(|v| g.values[v].constant.as_ref());
    match &node.op {
        Op::Conv(_) | Op::ConvTranspose(_) if rank == 4 => Ok(Some(MaskKind::Spatial)),
        Op::Conv(_) | Op::ConvTranspose(_) => Err(format!("{} '{}' is not 2-D", node.op.name(), node.name)),
        // Output rows are input rows only for a constant 2-D right-hand side.
        Op::MatMul if konst(0).is_none() && konst(1).is_some_and(|w| w.rank() == 2) && (rank == 2 || rank == 3) => {
            Ok(Some(MaskKind::Token))
        }
        Op::Gemm { trans_a: false, .. } if konst(0).is_none() && konst(1).is_some() && rank == 2 => Ok(Some(MaskKind::Token)),
        Op::MatMul | Op::Gemm { .. } => {
            Err(format!("{} '{}' has no constant 2-D weight, so its rows are not tokens", node.op.name(), node.name))
        }
        _ => Ok(None),
    }
}

/// Ops whose result at a position depends only on their operands at that position.
fn pointwise(op: &Op) -> bool {
    match op {
        Op::Unary(u) => *u != UnaryKind::Not,
        Op::Binary(b) => matches!(b, BinaryKind::Add | BinaryKind::Sub | BinaryKind::Mul | BinaryKind::Div | BinaryKind::Pow),
        Op::Clip | Op::Identity | Op::BatchNormalization { .. } => true,
        _ => false,
    }
}

fn mask_shape_fits(kind: MaskKind, out: &[usize], mk: &[usize]) -> Result<(), String> {
    let r = out.len();
    let batch_ok = |i: usize| mk[i] == 1 || mk[i] == out[i];
    let fits = mk.len() == r
        && match kind {
            MaskKind::Spatial => r == 4 && batch_ok(0) && mk[1] == 1 && mk[2..] == out[2..],
            MaskKind::Token => (r == 2 || r == 3) && mk[r - 1] == 1 && mk[r - 2] == out[r - 2] && (r == 2 || batch_ok(0)),
        };
    if fits {
        Ok(())
    } else {
        Err(format!("mask {mk:?} is not one value per position broadcast over the channels of {out:?}"))
    }
}

/// P's result and every value of f are read only inside f and the Mul, and f mixes them only with
/// constants that are scalars or per-channel: then f at a position sees P at that position only,
/// so whatever P leaves at an inactive position is multiplied away.
fn epilogue_is_local(g: &Graph, links: &Links, m: usize, p: usize, f: &[usize], kind: MaskKind) -> Result<(), String> {
    let pout = g.nodes[p].outputs[0];
    let out_shape = &g.values[pout].shape;
    for v in std::iter::once(pout).chain(f.iter().flat_map(|&n| g.nodes[n].outputs.iter().copied())) {
        let val = &g.values[v];
        if g.is_graph_output(v) {
            return Err(format!("'{}' between the producer and the Mul is a graph output", val.name));
        }
        if let Some(&n) = links.cons[v].iter().find(|&&n| n != m && !f.contains(&n)) {
            let r = &g.nodes[n];
            return Err(format!("'{}' is also read by {} '{}'", val.name, r.op.name(), r.name));
        }
    }
    for &n in f {
        let node = &g.nodes[n];
        let op = node.op.name();
        let same = node.outputs.len() == 1 && g.values[node.outputs[0]].shape == *out_shape;
        if !same || g.values[node.outputs[0]].dtype != DType::F32 {
            return Err(format!("{op} '{}' changes the shape or type of the producer's result", node.name));
        }
        for (k, v) in node.inputs.iter().enumerate() {
            let Some(v) = *v else { continue };
            let val = &g.values[v];
            if val.constant.is_none() {
                continue;
            }
            // BatchNormalization's parameters are per channel by definition (axis 1).
            let ok = match node.op {
                Op::BatchNormalization { .. } => k == 0 || kind == MaskKind::Spatial,
                _ => per_channel(&val.shape, out_shape, kind),
            };
            if !ok {
                return Err(format!("constant '{}' {:?} of {op} '{}' varies over positions", val.name, val.shape, node.name));
            }
        }
        if matches!(node.op, Op::BatchNormalization { .. }) && (kind != MaskKind::Spatial || !inputs_const(g, node, 1..5)) {
            return Err(format!("BatchNormalization '{}' is not a per-channel affine here", node.name));
        }
    }
    Ok(())
}

fn inputs_const(g: &Graph, node: &super::Node, range: std::ops::Range<usize>) -> bool {
    range.into_iter().all(|i| node.inputs.get(i).copied().flatten().is_some_and(|v| g.values[v].constant.is_some()))
}

/// A constant broadcast against `out` that is the same at every position: a scalar or one value
/// per channel (axis 1 of `[N, C, H, W]`, the last axis of token rows).
fn per_channel(c: &[usize], out: &[usize], kind: MaskKind) -> bool {
    let r = out.len();
    if c.len() > r || r == 0 {
        return false;
    }
    let channel = match kind {
        MaskKind::Spatial => 1,
        MaskKind::Token => r - 1,
    };
    c.iter().enumerate().all(|(i, &d)| {
        let ax = r - c.len() + i;
        d == 1 || (ax == channel && d == out[ax])
    })
}

fn apply(g: &mut Graph, links: &Links, m: usize, region: Region, opts: &SparseOptions) {
    let Region { mut p, f, mask, kind, trace } = region;
    let source = mask_trace::source_of(g, links, trace.origin);
    let fill = match (trace.origin, opts.cached_model_input_masks) {
        (Origin::Input(_), true) => FillPolicy::Cached,
        _ => FillPolicy::Zero,
    };
    let fused_mul = f.is_empty();
    // The executor needs the mask before P runs. P and f only feed each other and the Mul, so
    // they can move down to just before the Mul, past the nodes that compute the mask.
    if links.prod[mask].is_some_and(|q| q > p) {
        let moved: Vec<usize> = std::iter::once(p).chain(f.iter().copied()).collect();
        let mut nodes: Vec<Option<super::Node>> = std::mem::take(&mut g.nodes).into_iter().map(Some).collect();
        let mut order = Vec::with_capacity(nodes.len());
        order.extend((0..m).filter(|i| !moved.contains(i)));
        p = order.len();
        order.extend(moved.iter().copied());
        order.extend(m..nodes.len());
        g.nodes = order.into_iter().filter_map(|i| nodes[i].take()).collect();
    }
    if fused_mul {
        let y = g.nodes[m].outputs[0];
        g.nodes[p].outputs[0] = y;
        g.nodes.remove(m);
    }
    let name = g.nodes[p].name.clone();
    tracing::debug!(node = %name, ?kind, ?source, fused_mul, "sparse");
    g.nodes[p].sparse = Some(SparseSpec { mask, kind, source, dilation: trace.halo, fill, fused_mul });
}

#[cfg(test)]
#[path = "sparse_detect_tests.rs"]
mod tests;
