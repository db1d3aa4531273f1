//! GELU as exporters spell it, `x * 0.5 * (1 + erf(x / sqrt(2)))` in five nodes, rewritten to
//! one `Gelu` node: one pass over the values instead of five (A-ViT's MLPs spent a seventh of
//! their frame in these).

use super::op::{BinaryKind, Op, UnaryKind};
use super::{Graph, ValueId};

pub(crate) fn fuse_gelu(g: &mut Graph) {
    let prod = g.producers();
    let cons = g.consumers();
    for e in 0..g.nodes.len() {
        if g.nodes[e].op != Op::Unary(UnaryKind::Erf) {
            continue;
        }
        if let Some((last, x)) = match_gelu(g, &prod, &cons, e) {
            let node = &mut g.nodes[last];
            node.op = Op::Unary(UnaryKind::Gelu(false));
            node.inputs = vec![Some(x)];
        }
    }
    // The Div, Erf, Add and Mul nodes before the rewritten one are now unread.
    super::fuse::remove_dead(g);
}

/// The last node of the GELU whose Erf is node `e`, and its input `x`.
fn match_gelu(g: &Graph, prod: &[Option<usize>], cons: &[Vec<usize>], e: usize) -> Option<(usize, ValueId)> {
    let erf_in = g.nodes[e].inputs.first().copied().flatten()?;
    let scaled = &g.nodes[prod[erf_in]?];
    let x = match (&scaled.op, scaled.inputs.as_slice()) {
        (Op::Binary(BinaryKind::Div), &[Some(x), Some(s)]) if near(g.scalar_f32(s)?, std::f32::consts::SQRT_2) => x,
        (Op::Binary(BinaryKind::Mul), &[Some(a), Some(b)]) => {
            let (x, r) = if g.scalar_f32(b).is_some() { (a, b) } else { (b, a) };
            near(g.scalar_f32(r)?, std::f32::consts::FRAC_1_SQRT_2).then_some(x)?
        }
        _ => return None,
    };
    let sole = |v: ValueId| -> Option<usize> {
        match cons[v].as_slice() {
            &[c] if !g.is_graph_output(v) => Some(c),
            _ => None,
        }
    };
    // Of a binary node, the operand that is not `v`.
    let other = |n: usize, v: ValueId| -> Option<ValueId> {
        match g.nodes[n].inputs.as_slice() {
            &[Some(a), Some(b)] if a == v => Some(b),
            &[Some(a), Some(b)] if b == v => Some(a),
            _ => None,
        }
    };
    let is = |n: usize, k: BinaryKind| g.nodes[n].op == Op::Binary(k);
    let erf_out = g.nodes[e].outputs[0];
    let add = sole(erf_out)?;
    if !is(add, BinaryKind::Add) || !near(g.scalar_f32(other(add, erf_out)?)?, 1.0) {
        return None;
    }
    let one_plus = g.nodes[add].outputs[0];
    let m1 = sole(one_plus)?;
    if !is(m1, BinaryKind::Mul) {
        return None;
    }
    let with = other(m1, one_plus)?;
    if with == x {
        // x * (1 + erf) then * 0.5.
        let prod_out = g.nodes[m1].outputs[0];
        let m2 = sole(prod_out)?;
        (is(m2, BinaryKind::Mul) && near(g.scalar_f32(other(m2, prod_out)?)?, 0.5)).then_some((m2, x))
    } else {
        // (x * 0.5) * (1 + erf).
        let half = &g.nodes[prod[with]?];
        let ok =
            half.op == Op::Binary(BinaryKind::Mul) && other(prod[with]?, x).and_then(|c| g.scalar_f32(c)).is_some_and(|c| near(c, 0.5));
        ok.then_some((m1, x))
    }
}

fn near(a: f32, b: f32) -> bool {
    (a - b).abs() <= 1e-5 * b.abs()
}
