//! Which token annotations (A-ViT's halting masks) the GPU runs over the active tokens, and the
//! fold of a token projection's epilogue into it.
//!
//! A token op runs sparsely when its mask is made inside the graph (a comparison cast to float:
//! binary by construction). The kernels find the active tokens on the device without telling
//! the host, so there is no readback that could report a mask value other than 0 or 1; masks
//! given as model inputs (which the CPU checks per frame) therefore keep the dense form.

use dynaspa_runtime::graph::{BinaryKind, Graph, MaskKind, MaskSource, Node, Op, UnaryKind};
use dynaspa_runtime::DType;

fn f32_value(g: &Graph, v: Option<usize>) -> Option<&dynaspa_runtime::graph::Value> {
    v.map(|v| &g.values[v]).filter(|x| x.dtype == DType::F32)
}

/// Whether `n` is a token-sparse MatMul or Attention the GPU token kernels run (see the module
/// docs). Mirrors what `token::lower` accepts.
pub(crate) fn runs_token_sparse(g: &Graph, n: &Node) -> bool {
    let Some(sp) = &n.sparse else { return false };
    if sp.kind != MaskKind::Token || matches!(sp.source, MaskSource::ModelInput { .. }) || n.outputs.len() != 1 {
        return false;
    }
    let y = &g.values[n.outputs[0]];
    let Some(m) = f32_value(g, Some(sp.mask)) else { return false };
    if y.dtype != DType::F32 || y.shape.iter().product::<usize>() == 0 {
        return false;
    }
    let input = |i: usize| f32_value(g, n.inputs.get(i).copied().flatten());
    match &n.op {
        Op::MatMul => {
            let (Some(x), Some(w)) = (input(0), input(1)) else { return false };
            let Some(wt) = w.constant.as_ref() else { return false };
            let r = x.shape.len();
            if x.constant.is_some() || !(2..=3).contains(&r) || wt.rank() != 2 || x.shape[r - 1] != wt.shape()[0] {
                return false;
            }
            let (t, nout) = (x.shape[r - 2], wt.shape()[1]);
            let mut want = x.shape[..r - 1].to_vec();
            want.push(nout);
            let images = if r == 3 { x.shape[0] } else { 1 };
            // One bit per token: [images or 1, T, 1], or [T, 1] over a 2-D product.
            let mask_ok = match r {
                3 => m.shape.len() == 3 && (m.shape[0] == 1 || m.shape[0] == images) && m.shape[1] == t && m.shape[2] == 1,
                _ => m.shape == [t, 1],
            };
            // A folded bias (input 2) holds one value per output column.
            let bias_ok = match n.inputs.get(2).copied().flatten() {
                None => n.inputs.len() <= 3,
                Some(b) => {
                    let bv = &g.values[b];
                    bv.dtype == DType::F32 && bv.constant.is_some() && bv.shape.iter().product::<usize>() == nout
                }
            };
            y.shape == want && mask_ok && bias_ok
        }
        Op::Attention(a) => {
            let Some(_) = a.key_mask else { return false };
            let (Some(q), Some(k), Some(v), Some(bias), Some(mi)) = (input(0), input(1), input(2), input(3), input(4)) else {
                return false;
            };
            let (qs, ks, vs) = (&q.shape, &k.shape, &v.shape);
            if qs.len() != 4 || ks.len() != 4 || vs.len() != 4 {
                return false;
            }
            let (b, h, t, dk) = (qs[0], qs[1], qs[2], qs[3]);
            let want_k = if a.k_transposed { [b, h, dk, t] } else { [b, h, t, dk] };
            let mut bias_shape = vec![1usize; 4usize.saturating_sub(bias.shape.len())];
            bias_shape.extend_from_slice(&bias.shape);
            ks[..] == want_k
                && vs[..3] == [b, h, t]
                && y.shape == [b, h, t, vs[3]]
                && bias_shape == [b, 1, 1, t]
                && (mi.shape == [b, t] || mi.shape == [b, t, 1])
                && n.inputs.get(4).copied().flatten() == Some(sp.mask)
        }
        _ => false,
    }
}

/// Whether `n` is a token projection the GPU runs as a PolyKernel op: a token-sparse MatMul.
pub(crate) fn runs_token_projection(g: &Graph, n: &Node) -> bool {
    n.op == Op::MatMul && runs_token_sparse(g, n)
}

/// Activation codes of the fused epilogues (gpu/kernels/common.h): GELU with erf.
pub(crate) const ACT_GELU_ERF: i32 = 7;

/// Token projections whose epilogue `fold_epilogues` folded in: output value -> activation code
/// (applied after the bias; absent: none).
pub(crate) type TokenActs = std::collections::HashMap<usize, i32>;

/// Folds `Mul(f(Add(MatMul(x, W), bias)), M)` into a token-sparse MatMul over mask `M`, `f`
/// nothing or GELU as exported from PyTorch (`y * (Erf(y / sqrt 2) + 1) * 0.5`): the node takes
/// the bias as input 2, writes the Mul's output (0 on inactive rows, which is what the product
/// with `M` holds there, f(0) being 0 for both) and is marked `fused_mul`; the folded nodes
/// go, and `acts` records GELU. Each intermediate must have the chain as its only reader.
/// Returns how many were folded.
pub(crate) fn fold_epilogues(g: &mut Graph, acts: &mut TokenActs) -> usize {
    let consumers = g.consumers();
    let sole = |v: usize| -> Option<usize> {
        match consumers[v].as_slice() {
            [c] if !g.is_graph_output(v) => Some(*c),
            _ => None,
        }
    };
    let mut folds = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        if n.op != Op::MatMul || n.inputs.len() != 2 || !runs_token_sparse(g, n) {
            continue;
        }
        let Some(spec) = n.sparse.as_ref() else { continue };
        let y = n.outputs[0];
        let shape = &g.values[y].shape;
        let nout = shape[shape.len() - 1];
        let Some(ai) = sole(y) else { continue };
        let Some(bias) = binary_with_constant(g, ai, BinaryKind::Add, y) else { continue };
        let bv = &g.values[bias];
        // Broadcast along the rows only: [N], [1, N], [1, 1, N].
        let row_vector =
            bv.shape.len() <= shape.len() && bv.shape.last() == Some(&nout) && bv.shape[..bv.shape.len() - 1].iter().all(|&d| d == 1);
        let a_out = g.nodes[ai].outputs[0];
        if bv.dtype != DType::F32 || !row_vector || g.values[a_out].shape != *shape {
            continue;
        }
        let (act, mut dead, before_mask) = match gelu(g, a_out, &sole) {
            Some((nodes, out, mi)) => (Some(ACT_GELU_ERF), [vec![ai], nodes].concat(), (out, mi)),
            None => match sole(a_out) {
                Some(mi) => (None, vec![ai], (a_out, mi)),
                None => continue,
            },
        };
        let (pre, mi) = before_mask;
        let mul = &g.nodes[mi];
        let operands_ok = mul.inputs.len() == 2 && mul.inputs.contains(&Some(pre)) && mul.inputs.contains(&Some(spec.mask));
        if mul.op != Op::Binary(BinaryKind::Mul) || mul.sparse.is_some() || !operands_ok || mul.outputs.len() != 1 {
            continue;
        }
        if g.values[mul.outputs[0]].shape != *shape {
            continue;
        }
        dead.push(mi);
        folds.push((i, dead, bias, mul.outputs[0], act));
    }
    let mut gone = vec![false; g.nodes.len()];
    for (i, dead, bias, out, act) in &folds {
        let n = &mut g.nodes[*i];
        n.inputs.push(Some(*bias));
        n.outputs = vec![*out];
        if let Some(sp) = n.sparse.as_mut() {
            sp.fused_mul = true;
        }
        if let Some(a) = act {
            acts.insert(*out, *a);
        }
        for &d in dead {
            gone[d] = true;
        }
    }
    let mut k = 0;
    g.nodes.retain(|_| {
        k += 1;
        !gone[k - 1]
    });
    folds.len()
}

/// The other operand of node `i` when it is the plain binary `kind` of `x` and a constant
/// (either order).
fn binary_with_constant(g: &Graph, i: usize, kind: BinaryKind, x: usize) -> Option<usize> {
    let n = &g.nodes[i];
    if n.op != Op::Binary(kind) || n.sparse.is_some() || n.inputs.len() != 2 || n.outputs.len() != 1 || !n.inputs.contains(&Some(x)) {
        return None;
    }
    let other = n.inputs.iter().flatten().copied().find(|&v| v != x).unwrap_or(x);
    g.values[other].constant.is_some().then_some(other)
}

/// The GELU of `y` (one `Gelu` node: the load fuses PyTorch's exported five-node chain) when
/// it is `y`'s only reader: (its node, its output, the one node reading the output).
fn gelu(g: &Graph, y: usize, sole: &dyn Fn(usize) -> Option<usize>) -> Option<(Vec<usize>, usize, usize)> {
    let gi = sole(y)?;
    let n = &g.nodes[gi];
    if n.op != Op::Unary(UnaryKind::Gelu(false)) || n.sparse.is_some() || n.outputs.len() != 1 {
        return None;
    }
    let out = n.outputs[0];
    (g.values[out].shape == g.values[y].shape).then_some((vec![gi], out, sole(out)?))
}

/// Whether the graph makes every inactive key of the token-sparse attention `n` exactly 0, so
/// the attention kernel needs no pass over those keys to prove their softmax weights vanish:
/// its `k` is, through views, transposes and Gathers of one constant index, the output of a
/// folded token projection over the same mask (zeros on inactive rows, `fold_epilogues`), with
/// that output's batch and token axes landing on `k`'s. `roots`: the view root of every value.
pub(crate) fn keys_proven_zero(g: &Graph, n: &Node, roots: &[usize]) -> bool {
    let (Op::Attention(a), Some(sp), Some(Some(k))) = (&n.op, &n.sparse, n.inputs.get(1)) else { return false };
    let (b, t) = (g.values[*k].shape[0], g.values[n.outputs[0]].shape[2]);
    let (mut v, mut ab, mut at) = (*k, 0usize, if a.k_transposed { 3usize } else { 2 });
    for _ in 0..32 {
        let Some(p) = g.nodes.iter().find(|m| m.outputs.contains(&v)) else { return false };
        let input = |i: usize| p.inputs.get(i).copied().flatten();
        match &p.op {
            Op::MatMul => {
                let Some(ps) = &p.sparse else { return false };
                let shape = &g.values[v].shape;
                return ps.fused_mul
                    && runs_token_sparse(g, p)
                    && roots[ps.mask] == roots[sp.mask]
                    && shape.len() == 3
                    && (ab, at) == (0, 1)
                    && shape[..2] == [b, t];
            }
            Op::Transpose { perm } => {
                let (Some(&pb), Some(&pt), Some(src)) = (perm.get(ab), perm.get(at), input(0)) else { return false };
                (ab, at, v) = (pb, pt, src);
            }
            Op::Gather { axis } => {
                let (Some(data), Some(idx)) = (input(0), input(1)) else { return false };
                let rank = g.values[data].shape.len() as i64;
                let ax = if *axis < 0 { axis + rank } else { *axis };
                let scalar = g.values[idx].constant.as_ref().is_some_and(|c| c.rank() == 0);
                if !scalar || !(0..rank).contains(&ax) {
                    return false;
                }
                let ax = ax as usize;
                (ab, at, v) = (ab + (ab >= ax) as usize, at + (at >= ax) as usize, data);
            }
            Op::Reshape { .. } | Op::Flatten { .. } | Op::Squeeze { .. } | Op::Unsqueeze { .. } | Op::Identity => {
                // Only reshapes that keep every axis up to the tracked ones.
                let Some(src) = input(0) else { return false };
                let (ins, outs) = (&g.values[src].shape, &g.values[v].shape);
                let hi = ab.max(at);
                if ins.len() <= hi || outs.len() <= hi || ins[..=hi] != outs[..=hi] {
                    return false;
                }
                v = src;
            }
            _ => return false,
        }
    }
    false
}
