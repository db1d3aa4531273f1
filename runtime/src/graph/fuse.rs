//! Load-time rewrites that change no result: BatchNormalization folded into the preceding Conv,
//! residual Add and activations fused into the Conv epilogue, GELU's five nodes made one,
//! dead nodes removed.

use super::op::*;
use super::{Graph, Value, ValueId};
use crate::tensor::{Tensor, TensorData};
use std::sync::Arc;

pub fn optimise(g: &mut Graph) {
    fold_batch_norm(g);
    fuse_conv_add(g);
    fuse_conv_activation(g);
    super::fuse_gelu::fuse_gelu(g);
    super::fuse_attention::fuse_attention(g);
    remove_dead(g);
    g.compact();
}

fn constant(g: &Graph, v: Option<ValueId>) -> Option<Arc<Tensor>> {
    v.and_then(|v| g.values[v].constant.clone())
}

/// The Conv node producing `v`, if `v` feeds nothing else and is not a graph output.
fn sole_conv(g: &Graph, v: ValueId, prod: &[Option<usize>], cons: &[Vec<usize>]) -> Option<usize> {
    let p = prod[v]?;
    let single = cons[v].len() == 1 && !g.is_graph_output(v);
    (single && matches!(g.nodes[p].op, Op::Conv(_))).then_some(p)
}

fn add_constant(g: &mut Graph, name: String, t: Tensor) -> ValueId {
    g.values.push(Value { name, dtype: t.dtype(), shape: t.shape().to_vec(), constant: Some(Arc::new(t)) });
    g.values.len() - 1
}

fn fold_batch_norm(g: &mut Graph) {
    let (prod, cons) = (g.producers(), g.consumers());
    let mut dead = vec![false; g.nodes.len()];
    for bi in 0..g.nodes.len() {
        let Op::BatchNormalization { epsilon } = g.nodes[bi].op else { continue };
        let bn = g.nodes[bi].clone();
        let Some(ci) = bn.inputs[0].and_then(|x| sole_conv(g, x, &prod, &cons)) else { continue };
        let conv = &g.nodes[ci];
        let Op::Conv(c) = &conv.op else { continue };
        if c.fused_add || c.activation.is_some() {
            continue;
        }
        let params: Option<Vec<Arc<Tensor>>> = bn.inputs[1..5].iter().map(|&v| constant(g, v)).collect();
        let (Some(w), Some(params)) = (constant(g, conv.inputs[1]), params) else { continue };
        let bias = match conv.inputs.get(2).copied().flatten() {
            Some(b) => match constant(g, Some(b)) {
                Some(b) => Some(b),
                None => continue,
            },
            None => None,
        };
        let (Ok(w), Ok(s), Ok(beta), Ok(mean), Ok(var)) =
            (w.as_f32(), params[0].as_f32(), params[1].as_f32(), params[2].as_f32(), params[3].as_f32())
        else {
            continue;
        };
        let m = s.len();
        let Some(wv) = conv.inputs[1] else { continue };
        let wshape = g.values[wv].shape.clone();
        // A malformed model (parameter lengths that disagree with the weight) is left unfused
        // for the kernels to reject with a clear error, rather than indexed out of bounds here.
        let b0 = bias.as_ref().and_then(|b| b.as_f32().ok().map(|v| v.to_vec())).unwrap_or_else(|| vec![0.0; m]);
        if m == 0 || wshape.first() != Some(&m) || w.len() % m != 0 || [beta.len(), mean.len(), var.len(), b0.len()] != [m; 4] {
            continue;
        }
        let per = w.len() / m;
        let factor: Vec<f32> = (0..m).map(|i| s[i] / (var[i] + epsilon).sqrt()).collect();
        let new_w: Vec<f32> = w.iter().enumerate().map(|(i, &x)| x * factor[i / per]).collect();
        let new_b: Vec<f32> = (0..m).map(|i| (b0[i] - mean[i]) * factor[i] + beta[i]).collect();
        let cname = conv.name.clone();
        let (Ok(wt), Ok(bt)) = (Tensor::new(wshape, TensorData::F32(new_w)), Tensor::new(vec![m], TensorData::F32(new_b))) else {
            continue;
        };
        let wid = add_constant(g, format!("{cname}.folded_weight"), wt);
        let bid = add_constant(g, format!("{cname}.folded_bias"), bt);
        let conv = &mut g.nodes[ci];
        conv.inputs.truncate(2);
        conv.inputs[1] = Some(wid);
        conv.inputs.push(Some(bid));
        conv.outputs = bn.outputs.clone();
        dead[bi] = true;
    }
    retain(g, &dead);
}

fn fuse_conv_add(g: &mut Graph) {
    let (prod, cons) = (g.producers(), g.consumers());
    let mut dead = vec![false; g.nodes.len()];
    for ai in 0..g.nodes.len() {
        if g.nodes[ai].op != Op::Binary(BinaryKind::Add) {
            continue;
        }
        let add = g.nodes[ai].clone();
        let out_shape = &g.values[add.outputs[0]].shape;
        for (mine, other) in [(0, 1), (1, 0)] {
            let (Some(x), Some(z)) = (add.inputs[mine], add.inputs[other]) else { break };
            let Some(ci) = sole_conv(g, x, &prod, &cons) else { continue };
            // The addend must exist when the conv runs, and match the output exactly.
            let ready = prod[z].is_none_or(|p| p < ci);
            if !ready || &g.values[z].shape != out_shape || g.values[x].shape != *out_shape || dead[ci] {
                continue;
            }
            let Op::Conv(c) = &mut g.nodes[ci].op else { continue };
            if c.fused_add || c.activation.is_some() {
                continue;
            }
            c.fused_add = true;
            let conv = &mut g.nodes[ci];
            conv.inputs.resize(3, None);
            conv.inputs.push(Some(z));
            conv.outputs = add.outputs.clone();
            dead[ai] = true;
            break;
        }
    }
    retain(g, &dead);
}

pub(super) fn activation_of(g: &Graph, node: &super::Node) -> Option<Activation> {
    Some(match node.op {
        Op::Unary(UnaryKind::Relu) => Activation::Relu,
        Op::Unary(UnaryKind::LeakyRelu(a)) => Activation::LeakyRelu(a),
        Op::Unary(UnaryKind::Sigmoid) => Activation::Sigmoid,
        Op::Unary(UnaryKind::HardSigmoid(a, b)) => Activation::HardSigmoid(a, b),
        Op::Unary(UnaryKind::HardSwish) => Activation::HardSwish,
        Op::Unary(UnaryKind::Tanh) => Activation::Tanh,
        Op::Clip => {
            let bound = |i: usize, d: f32| match node.inputs.get(i).copied().flatten() {
                None => Some(d),
                Some(v) => constant(g, Some(v)).and_then(|t| t.as_f32().ok().and_then(|s| s.first().copied())),
            };
            Activation::Clip(bound(1, f32::NEG_INFINITY)?, bound(2, f32::INFINITY)?)
        }
        _ => return None,
    })
}

fn fuse_conv_activation(g: &mut Graph) {
    let (prod, cons) = (g.producers(), g.consumers());
    let mut dead = vec![false; g.nodes.len()];
    for ai in 0..g.nodes.len() {
        let Some(act) = activation_of(g, &g.nodes[ai]) else { continue };
        let Some(x) = g.nodes[ai].inputs[0] else { continue };
        if g.values[x].dtype != crate::tensor::DType::F32 {
            continue;
        }
        let Some(ci) = sole_conv(g, x, &prod, &cons) else { continue };
        let Op::Conv(c) = &mut g.nodes[ci].op else { continue };
        if c.activation.is_some() {
            continue;
        }
        c.activation = Some(act);
        g.nodes[ci].outputs = g.nodes[ai].outputs.clone();
        dead[ai] = true;
    }
    retain(g, &dead);
}

/// Drops nodes none of whose outputs reach a graph output.
pub(crate) fn remove_dead(g: &mut Graph) {
    let mut needed = vec![false; g.values.len()];
    for &o in &g.outputs {
        needed[o] = true;
    }
    let mut dead = vec![true; g.nodes.len()];
    for i in (0..g.nodes.len()).rev() {
        if g.nodes[i].outputs.iter().any(|&o| needed[o]) {
            dead[i] = false;
            let node = &g.nodes[i];
            for v in node.inputs.iter().flatten().chain(node.sparse.as_ref().map(|s| &s.mask)) {
                needed[*v] = true;
            }
        }
    }
    retain(g, &dead);
}

fn retain(g: &mut Graph, dead: &[bool]) {
    let mut i = 0;
    g.nodes.retain(|_| {
        i += 1;
        !dead[i - 1]
    });
}
