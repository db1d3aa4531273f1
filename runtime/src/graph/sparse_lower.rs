//! The reference meaning of a sparse annotation in dense ops: the producer computes everywhere
//! and is multiplied by its mask. A backend without sparse kernels can run a lowered graph, and
//! tests compare a rewritten model with the original through it.

use super::op::{BinaryKind, Op};
use super::sparse::FillPolicy;
use super::sparse_residual::activation_op;
use super::{Graph, Node, Value, ValueId};
use crate::tensor::{DType, Tensor};
use std::sync::Arc;

/// Returns `g` with every annotation replaced by dense ops. With `poison`, the producer's raw
/// result is first overwritten with that value wherever the mask is 0: it stands for whatever a
/// sparse kernel leaves at skipped positions, which the graph's results must not depend on.
pub fn lower_to_dense(g: &Graph, poison: Option<f32>) -> Graph {
    let mut out = Graph { nodes: Vec::with_capacity(g.nodes.len()), ..g.clone() };
    for node in &g.nodes {
        let mut node = node.clone();
        let Some(spec) = node.sparse.take() else {
            out.nodes.push(node);
            continue;
        };
        let Some(&target) = node.outputs.first() else {
            out.nodes.push(node);
            continue;
        };
        // An attention's token axis is not the one its mask broadcasts along, and its skipped
        // rows are never multiplied by the mask (the next MatMul skips them): it stays as is;
        // tests/sparse_exec.rs checks the rows it computes.
        // Held statistics lowered are computed every frame: no mask applies to them.
        if (!spec.fused_mul && poison.is_none()) || matches!(node.op, Op::Attention(_)) || spec.fill == FillPolicy::Held {
            out.nodes.push(node);
            continue;
        }
        let base = node.name.clone();
        let shape = out.values[target].shape.clone();
        // A folded residual join comes apart again: conv, then mask, add and activation.
        let mut join = None;
        if spec.fill == FillPolicy::Residual {
            if let Op::Conv(c) = &mut node.op {
                join = Some((node.inputs.get(3).copied().flatten(), c.activation.take()));
                c.fused_add = false;
                node.inputs.truncate(3);
            }
        }
        let mask_shape = out.values.get(spec.mask).map_or_else(Vec::new, |v| v.shape.clone());
        let raw = fresh(&mut out, format!("{base}/dense"), shape.clone(), None);
        node.outputs[0] = raw;
        out.nodes.push(node);
        let mut cur = raw;
        if let Some(pz) = poison {
            let one = fresh(&mut out, format!("{base}/one"), vec![], Some(Tensor::scalar_f32(1.0)));
            let pzc = fresh(&mut out, format!("{base}/poison"), vec![], Some(Tensor::scalar_f32(pz)));
            let kept = fresh(&mut out, format!("{base}/kept"), shape.clone(), None);
            let inv = fresh(&mut out, format!("{base}/inactive"), mask_shape.clone(), None);
            let junk = fresh(&mut out, format!("{base}/junk"), mask_shape, None);
            let next = if spec.fused_mul { fresh(&mut out, format!("{base}/poisoned"), shape.clone(), None) } else { target };
            push(&mut out, format!("{base}/keep"), BinaryKind::Mul, cur, spec.mask, kept);
            push(&mut out, format!("{base}/invert"), BinaryKind::Sub, one, spec.mask, inv);
            push(&mut out, format!("{base}/junk"), BinaryKind::Mul, inv, pzc, junk);
            push(&mut out, format!("{base}/poison"), BinaryKind::Add, kept, junk, next);
            cur = next;
        }
        match join {
            Some((Some(r), act)) => {
                let masked = fresh(&mut out, format!("{base}/masked"), shape.clone(), None);
                push(&mut out, format!("{base}/mask"), BinaryKind::Mul, cur, spec.mask, masked);
                let act_op = act.and_then(activation_op);
                let sum = if act_op.is_some() { fresh(&mut out, format!("{base}/joined"), shape, None) } else { target };
                push(&mut out, format!("{base}/join"), BinaryKind::Add, masked, r, sum);
                if let Some(op) = act_op {
                    out.nodes.push(Node { name: format!("{base}/act"), op, inputs: vec![Some(sum)], outputs: vec![target], sparse: None });
                }
            }
            _ if spec.fused_mul => push(&mut out, format!("{base}/mask"), BinaryKind::Mul, cur, spec.mask, target),
            _ => {}
        }
    }
    out
}

fn fresh(g: &mut Graph, name: String, shape: Vec<usize>, constant: Option<Tensor>) -> ValueId {
    g.values.push(Value { name, dtype: DType::F32, shape, constant: constant.map(Arc::new) });
    g.values.len() - 1
}

fn push(g: &mut Graph, name: String, op: BinaryKind, a: ValueId, b: ValueId, y: ValueId) {
    g.nodes.push(Node { name, op: Op::Binary(op), inputs: vec![Some(a), Some(b)], outputs: vec![y], sparse: None });
}
