//! `detect_sparse_regions`: every Conv/ConvTranspose (spatial) and MatMul/Gemm with constant
//! weights (token rows) whose result is needed only on a region (graph/needed.rs), or is zero
//! outside one (graph/zero_support.rs), is annotated to compute only there, with a mask built for
//! that region (graph/needed_mask.rs); see shared/DESIGN.md, "How masks are found in a model". A
//! result read only by a multiplication with a map folds the multiplication in. Every compute op
//! left dense gets its reason.

use super::mask_trace::{self, Links, Origin};
use super::needed::{self, Need, Region};
use super::needed_mask::{self, MaskBuilder};
use super::op::{BinaryKind, Op};
use super::order;
use super::sparse::{FillPolicy, MaskKind, MaskSource, SparseSpec};
use super::zero_support;
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

/// A compute op that stays dense, and why, as `inspect` lists it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DenseOpInfo {
    pub node: String,
    pub op: String,
    pub reason: String,
}

/// What `detect` found: the sparse ops and, for every other compute op, why it stays dense.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Detection {
    pub sparse: Vec<SparseRegionInfo>,
    pub dense: Vec<DenseOpInfo>,
}

/// Annotates every op it can prove sparse and returns all sparse ops of the graph afterwards.
/// Never panics; a graph it cannot analyse (dangling ids, nodes out of order) is left unchanged.
pub fn detect_sparse_regions(g: &mut Graph, opts: &SparseOptions) -> Vec<SparseRegionInfo> {
    detect(g, opts).sparse
}

/// `detect_sparse_regions`, also saying why each remaining compute op stays dense.
pub fn detect(g: &mut Graph, opts: &SparseOptions) -> Detection {
    let _span = tracing::debug_span!("detect_sparse_regions").entered();
    let Some(links) = Links::new(g) else {
        tracing::debug!("graph refers to missing values or is out of order: no sparse regions");
        let why = "the graph refers to missing values or is out of order".to_string();
        return Detection { sparse: sparse_ops(g), dense: dense_ops(g, &[], &why) };
    };
    let needs = needed::analyse(g, &links);
    let zeros = zero_support::analyse(g, &links);
    let before = g.clone();
    let mut why: Vec<(usize, String)> = Vec::new();
    let annotated = annotate(g, &links, &needs, &zeros, opts, &mut why);
    if annotated > 0 {
        if let Err(e) = order::restore_order(g) {
            tracing::warn!("sparse rewrite left no valid order ({e}); keeping the graph dense");
            *g = before;
            let why = format!("the sparse rewrite left no valid order: {e}");
            return Detection { sparse: sparse_ops(g), dense: dense_ops(g, &[], &why) };
        }
        // A folded multiplication may leave the Expand that broadcast its map unread.
        super::fuse::remove_dead(g);
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
    let names: Vec<(String, String)> = why.into_iter().map(|(i, w)| (before.nodes[i].name.clone(), w)).collect();
    Detection { sparse: sparse_ops(g), dense: dense_ops(g, &names, "no binary mask reaches it") }
}

/// The compute ops of `g` left dense, with the reason recorded for them (by node name) or `default`.
fn dense_ops(g: &Graph, why: &[(String, String)], default: &str) -> Vec<DenseOpInfo> {
    g.nodes
        .iter()
        .filter(|n| n.sparse.is_none() && is_compute_op(&n.op) && !needed_mask::is_built(&n.name))
        .map(|n| DenseOpInfo {
            node: n.name.clone(),
            op: n.op.name().to_string(),
            reason: why.iter().find(|(name, _)| *name == n.name).map_or_else(|| default.to_string(), |(_, w)| w.clone()),
        })
        .collect()
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

/// Annotates every compute op whose result is needed on a region; records why the others are
/// not (node index into the graph as `links` saw it). Returns how many it annotated.
fn annotate(
    g: &mut Graph,
    links: &Links,
    needs: &[Need],
    zeros: &[Option<Region>],
    opts: &SparseOptions,
    why: &mut Vec<(usize, String)>,
) -> usize {
    let original = g.nodes.len();
    let mut builder = MaskBuilder::default();
    let mut folded: Vec<usize> = Vec::new();
    let mut count = 0;
    for p in 0..original {
        let kind = match producer_kind(g, &g.nodes[p]) {
            Ok(Some(kind)) => kind,
            Ok(None) => continue,
            Err(e) => {
                why.push((p, e));
                continue;
            }
        };
        if g.nodes[p].sparse.is_some() {
            continue;
        }
        match plan(g, links, needs, zeros, p, kind) {
            Err(e) => why.push((p, e)),
            Ok(plan) => {
                let mark = builder.mark(g);
                match place(g, links, &mut builder, p, kind, plan, opts, &folded) {
                    Ok(fold) => {
                        folded.extend(fold);
                        count += 1;
                    }
                    Err(e) => {
                        builder.undo(g, mark);
                        why.push((p, e));
                    }
                }
            }
        }
    }
    if !folded.is_empty() {
        let mut i = 0;
        g.nodes.retain(|_| {
            i += 1;
            !folded.contains(&(i - 1))
        });
    }
    count
}

/// The region a compute op runs on, and the Mul folded into it if any.
struct Plan {
    region: Region,
    fold: Option<usize>,
    /// The result is zero outside the region, so the kernel writes zeros there (`fused_mul`).
    exact: bool,
}

fn plan(g: &Graph, links: &Links, needs: &[Need], zeros: &[Option<Region>], p: usize, kind: MaskKind) -> Result<Plan, String> {
    let node = &g.nodes[p];
    let &[out] = node.outputs.as_slice() else {
        return Err(format!("{} '{}' has more than one output", node.op.name(), node.name));
    };
    if g.values[out].dtype != DType::F32 {
        return Err("only float32 results are computed sparsely".into());
    }
    // A result read only by a multiplication with a map: the map is its region and the
    // multiplication folds into it (what it writes is then exactly the product).
    if let (false, &[m]) = (g.is_graph_output(out), links.cons[out].as_slice()) {
        let mul = &g.nodes[m];
        if mul.op == Op::Binary(BinaryKind::Mul) {
            if let Some(mk) = needed::masking(g, links, mul).filter(|mk| mk.value == out) {
                if g.values[mk.map].dtype == DType::F32 && needed::map_fits(kind, &g.values[out].shape, &g.values[mk.map].shape) {
                    return Ok(Plan { region: Region::Map(mk.map), fold: Some(m), exact: true });
                }
            }
        }
    }
    // Zero outside a region: computing only there and writing zeros elsewhere is exact, and
    // where only part of that region is needed, only that part is computed.
    match (&needs[out], zeros[out].clone()) {
        (Need::Part(r), Some(z)) => Ok(Plan { region: Region::join(vec![r.clone(), z], true), fold: None, exact: true }),
        (Need::Whole(_), Some(z)) => Ok(Plan { region: z, fold: None, exact: true }),
        (Need::Part(r), None) => Ok(Plan { region: r.clone(), fold: None, exact: false }),
        (Need::Whole(c), None) => Err(format!("needed at every position: {}", c.text)),
        (Need::AtLeast(..), Some(z)) => Ok(Plan { region: z, fold: None, exact: true }),
        (Need::AtLeast(t, _), None) => Err(format!("needed at every position: its result is compared with {t}")),
        (Need::Unread, _) => Err("its result is not read".into()),
    }
}

/// Builds the plan's mask and annotates `p`; returns the folded Mul's index.
fn place(
    g: &mut Graph,
    links: &Links,
    builder: &mut MaskBuilder,
    p: usize,
    kind: MaskKind,
    plan: Plan,
    opts: &SparseOptions,
    folded: &[usize],
) -> Result<Option<usize>, String> {
    let out = g.nodes[p].outputs[0];
    let mask = builder.build(g, &plan.region)?;
    if !needed::map_fits(kind, &g.values[out].shape, &g.values[mask].shape) {
        return Err(format!("mask {:?} does not fit the result {:?}", g.values[mask].shape, g.values[out].shape));
    }
    if depends_on(g, mask, p, plan.fold.iter().chain(folded).copied().collect::<Vec<_>>().as_slice()) {
        return Err("its mask is computed from its own result".into());
    }
    let mut maps = Vec::new();
    plan.region.maps(&mut maps);
    let mut traces = Vec::with_capacity(maps.len());
    for &m in &maps {
        traces.push(mask_trace::trace_mask(g, links, m)?);
    }
    let first = traces.first().ok_or("a region without a map")?;
    let source = mask_trace::source_of(g, links, first.origin);
    let cached = opts.cached_model_input_masks && traces.iter().all(|t| matches!(t.origin, Origin::Input(_)));
    let fill = if cached { FillPolicy::Cached } else { FillPolicy::Zero };
    let halo = halo(&plan.region, &|m| maps.iter().position(|&x| x == m).map_or([0, 0], |i| traces[i].halo));
    if let Some(m) = plan.fold {
        g.nodes[p].outputs[0] = g.nodes[m].outputs[0];
    }
    let name = g.nodes[p].name.clone();
    tracing::debug!(node = %name, ?kind, ?source, fused_mul = plan.exact, "sparse");
    g.nodes[p].sparse = Some(SparseSpec { mask, kind, source, dilation: halo, fill, fused_mul: plan.exact });
    Ok(plan.fold)
}

/// How far a region reaches beyond the maps it is built from, in its own positions.
fn halo(r: &Region, of_map: &dyn Fn(ValueId) -> [usize; 2]) -> [usize; 2] {
    match r {
        Region::Map(m) | Region::Tokens(m) => of_map(*m),
        Region::Spread(inner, w) => {
            let h = halo(inner, of_map);
            std::array::from_fn(
                |a| {
                    if w.transposed {
                        (h[a] + w.extent(a)).div_ceil(w.stride[a])
                    } else {
                        h[a] * w.stride[a] + w.extent(a)
                    }
                },
            )
        }
        Region::Both(v) => v.iter().map(|x| halo(x, of_map)).reduce(|a, b| [a[0].min(b[0]), a[1].min(b[1])]).unwrap_or([0, 0]),
        Region::Any(v) => v.iter().map(|x| halo(x, of_map)).reduce(|a, b| [a[0].max(b[0]), a[1].max(b[1])]).unwrap_or([0, 0]),
    }
}

/// Whether value `v` is computed, through inputs and masks, from node `p`'s results (`folded`:
/// multiplications folded into their producers, whose results those producers now write).
fn depends_on(g: &Graph, v: ValueId, p: usize, folded: &[usize]) -> bool {
    let mut prod = vec![None; g.values.len()];
    for (i, n) in g.nodes.iter().enumerate().filter(|(i, _)| !folded.contains(i)) {
        for &o in &n.outputs {
            prod[o] = Some(i);
        }
    }
    let mut seen = vec![false; g.nodes.len()];
    let mut stack: Vec<usize> = prod[v].into_iter().collect();
    while let Some(i) = stack.pop() {
        if i == p {
            return true;
        }
        if std::mem::replace(&mut seen[i], true) {
            continue;
        }
        let n = &g.nodes[i];
        stack.extend(n.inputs.iter().flatten().chain(n.sparse.as_ref().map(|s| &s.mask)).filter_map(|&x| prod[x]));
    }
    false
}

/// `Some` for an op that can run sparsely and what its mask ranges over; `Err` for a Conv or
/// MatMul that cannot.
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

#[cfg(test)]
#[path = "sparse_detect_tests.rs"]
mod tests;
