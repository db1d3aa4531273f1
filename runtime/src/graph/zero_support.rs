//! Zero support: for every value, a region outside which it is exactly zero, proven forward from
//! the multiplications by binary maps that make it (graph/needed.rs recognises them). A MatMul
//! whose rows are zero outside a map computes zero rows there, so it may run on the map alone
//! and write zeros elsewhere, whatever reads its result: A-ViT multiplies every normalised token
//! by its halting mask before the qkv and fc1 projections, and keeps reading the projections of
//! halted tokens (their halting scores), so what those consumers need is every row.
//!
//! Only ops that map zero to zero position by position carry a support; anything else (a bias,
//! a norm, a window that spreads) ends it. Values are assumed finite, as everywhere in the graph:
//! `0 * x` is taken to be 0.

use super::mask_trace::Links;
use super::needed::{self, Region};
use super::op::{BinaryKind, Op, UnaryKind};
use super::{Graph, Node};
use crate::tensor::TensorData;

/// The region outside which each value is zero, where one is proven.
pub(crate) fn analyse(g: &Graph, links: &Links) -> Vec<Option<Region>> {
    let mut zs: Vec<Option<Region>> = vec![None; g.values.len()];
    for node in &g.nodes {
        let [out] = node.outputs.as_slice() else { continue };
        if node.sparse.is_some() {
            continue;
        }
        zs[*out] = forward(g, links, node, &zs);
    }
    zs
}

/// The support of `node`'s result from its operands'.
fn forward(g: &Graph, links: &Links, node: &Node, zs: &[Option<Region>]) -> Option<Region> {
    let out = *node.outputs.first()?;
    let out_shape = &g.values[out].shape;
    let kind = needed::layout(out_shape)?;
    // An operand's support, when the operand has the result's positions (not a broadcast).
    let of = |k: usize| -> Option<Region> {
        let v = node.inputs.get(k).copied().flatten()?;
        (g.values[v].shape == *out_shape).then(|| zs[v].clone()).flatten()
    };
    let zero_const = |k: usize| -> bool {
        let Some(v) = node.inputs.get(k).copied().flatten() else { return true };
        g.values[v].constant.as_ref().is_some_and(|t| match t.data() {
            TensorData::F32(x) => x.iter().all(|&a| a == 0.0),
            _ => false,
        })
    };
    let konst = |k: usize| node.inputs.get(k).copied().flatten().is_some_and(|v| g.values[v].constant.is_some());
    match &node.op {
        Op::Binary(BinaryKind::Mul) => {
            let mut parts: Vec<Region> = (0..2).filter_map(of).collect();
            parts.extend(needed::masking(g, links, node).map(|m| Region::Map(m.map)));
            (!parts.is_empty()).then(|| Region::join(parts, true))
        }
        Op::Where => {
            let m = needed::masking(g, links, node)?;
            Some(Region::join(std::iter::once(Region::Map(m.map)).chain(of(1)).collect(), true))
        }
        Op::Binary(BinaryKind::Add | BinaryKind::Sub) => match (of(0), of(1)) {
            (Some(a), Some(b)) => Some(Region::join(vec![a, b], false)),
            (Some(a), None) if zero_const(1) => Some(a),
            (None, Some(b)) if zero_const(0) => Some(b),
            _ => None,
        },
        Op::Binary(BinaryKind::Div) if konst(1) => of(0),
        Op::Unary(UnaryKind::Relu | UnaryKind::LeakyRelu(_) | UnaryKind::Neg | UnaryKind::Abs | UnaryKind::Tanh)
        | Op::Unary(UnaryKind::Erf | UnaryKind::Gelu(_) | UnaryKind::Sign | UnaryKind::Round)
        | Op::Identity => of(0),
        Op::Cast { to } if *to == crate::tensor::DType::F32 => of(0),
        // Rows in, rows out: a constant 2-D right-hand side, no bias.
        Op::MatMul if kind == needed::layout(&g.values[node.inputs.first().copied().flatten()?].shape)? => {
            let w = g.values[node.inputs.get(1).copied().flatten()?].constant.as_ref()?;
            let x = node.inputs.first().copied().flatten()?;
            (w.rank() == 2 && g.values[x].shape[..out_shape.len() - 1] == out_shape[..out_shape.len() - 1]).then(|| zs[x].clone()).flatten()
        }
        _ => None,
    }
}
