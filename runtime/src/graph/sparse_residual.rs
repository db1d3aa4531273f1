//! Folds the residual join after a masked conv into the conv: `act(Mul(conv, M) + r)` becomes
//! one sparse conv with a fused add and activation whose inactive outputs are `act(r)`
//! (`FillPolicy::Residual`). DynConv's blocks end this way; fused, the join costs one pass over
//! the output instead of an Add and an activation over the whole map after the sparse op.

use super::op::{Activation, BinaryKind, Op, UnaryKind};
use super::sparse::{FillPolicy, MaskKind};
use super::{Graph, ValueId};
use crate::tensor::DType;

/// The unary op an activation stands for, where there is one (Clip needs bound inputs, so the
/// pass leaves it unfused).
pub fn activation_op(a: Activation) -> Option<Op> {
    Some(Op::Unary(match a {
        Activation::Relu => UnaryKind::Relu,
        Activation::LeakyRelu(x) => UnaryKind::LeakyRelu(x),
        Activation::Sigmoid => UnaryKind::Sigmoid,
        Activation::HardSigmoid(a, b) => UnaryKind::HardSigmoid(a, b),
        Activation::HardSwish => UnaryKind::HardSwish,
        Activation::Tanh => UnaryKind::Tanh,
        Activation::Clip(..) => return None,
    }))
}

/// The one node reading `v`, when `v` is not a graph output.
fn sole_reader(g: &Graph, cons: &[Vec<usize>], v: ValueId) -> Option<usize> {
    (cons[v].len() == 1 && !g.is_graph_output(v)).then(|| cons[v][0])
}

/// Rewrites every eligible masked conv; returns how many.
pub fn fuse_sparse_residuals(g: &mut Graph) -> usize {
    let cons = g.consumers();
    let mut dead = vec![false; g.nodes.len()];
    let mut fused = 0;
    for ci in 0..g.nodes.len() {
        let node = &g.nodes[ci];
        let (Op::Conv(c), Some(sp)) = (&node.op, &node.sparse) else { continue };
        let zero_fused = sp.kind == MaskKind::Spatial && sp.fill == FillPolicy::Zero && sp.fused_mul;
        if !zero_fused || c.fused_add || c.activation.is_some() || node.outputs.len() != 1 {
            continue;
        }
        let y = node.outputs[0];
        let Some(ai) = sole_reader(g, &cons, y) else { continue };
        let add = &g.nodes[ai];
        if add.op != Op::Binary(BinaryKind::Add) || add.inputs.len() != 2 || dead[ai] {
            continue;
        }
        let r = match (add.inputs[0], add.inputs[1]) {
            (Some(a), Some(b)) if a == y && b != y => b,
            (Some(a), Some(b)) if b == y && a != y => a,
            _ => continue,
        };
        // The residual must exist when the conv runs and match its output exactly (no broadcast).
        let ready = g.nodes[..ci].iter().any(|n| n.outputs.contains(&r)) || g.inputs.contains(&r) || g.values[r].constant.is_some();
        let (rv, yv) = (&g.values[r], &g.values[y]);
        if !ready || rv.shape != yv.shape || rv.dtype != DType::F32 || yv.dtype != DType::F32 {
            continue;
        }
        let mut out = add.outputs[0];
        let mut act = None;
        if let Some(ri) = sole_reader(g, &cons, out) {
            // Clip is left out: its bounds are inputs the dense lowering would have to rebuild.
            if let Some(a) = super::fuse::activation_of(g, &g.nodes[ri]).filter(|a| !matches!(a, Activation::Clip(..))) {
                act = Some(a);
                out = g.nodes[ri].outputs[0];
                dead[ri] = true;
            }
        }
        dead[ai] = true;
        let conv = &mut g.nodes[ci];
        let Op::Conv(c) = &mut conv.op else { continue };
        c.fused_add = true;
        c.activation = act;
        conv.inputs.resize(3, None);
        conv.inputs.push(Some(r));
        conv.outputs = vec![out];
        if let Some(sp) = &mut conv.sparse {
            sp.fill = FillPolicy::Residual;
        }
        fused += 1;
    }
    if fused > 0 {
        let mut i = 0;
        g.nodes.retain(|_| {
            i += 1;
            !dead[i - 1]
        });
        g.compact();
    }
    fused
}
