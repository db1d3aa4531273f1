//! Which annotated nodes the GPU runs sparsely: 2-D float convs over a spatial mask, with a
//! GEMM (one group, weights known at compile time) or depthwise (`sparse_conv::select`), and
//! token MatMuls and attentions over an in-graph token mask (`token::select`), held statistics
//! (recomputed on whole frames only). Every other
//! annotation runs in its dense form (`lower_to_dense`: computed everywhere, multiplied by the
//! mask).

use crate::gpu::sparse_conv::select::{runs_cached_dense, runs_sparse};
use crate::gpu::token::select::{fold_epilogues, runs_token_sparse, TokenActs};
use dynaspa_runtime::graph::sparse_lower::lower_to_dense;
use dynaspa_runtime::graph::{FillPolicy, Graph, Node, Op};

/// Held statistics over an `[N, C, H, W]` input (delta mode's norms): recomputed on whole
/// frames only.
fn held(n: &Node) -> bool {
    matches!(n.op, Op::NormScaleShift { .. }) && n.sparse.as_ref().is_some_and(|s| s.fill == FillPolicy::Held)
}

/// `g` with the annotations the GPU cannot run sparsely lowered to dense ops; the others kept.
/// `tokens`: token ops run over their active tokens (else densely), with a projection's bias,
/// GELU and mask product folded in (`token::select::fold_epilogues`, whose activations come back).
pub(crate) fn split(g: &Graph, tokens: bool) -> (Graph, TokenActs) {
    let mut acts = TokenActs::new();
    if !g.nodes.iter().any(|n| n.sparse.is_some()) {
        return (g.clone(), acts);
    }
    let keep: Vec<bool> =
        g.nodes.iter().map(|n| runs_sparse(g, n) || runs_cached_dense(g, n) || held(n) || (tokens && runs_token_sparse(g, n))).collect();
    let mut stripped = g.clone();
    let mut kept = Vec::new();
    for (n, &k) in stripped.nodes.iter_mut().zip(&keep) {
        if k {
            kept.push((n.name.clone(), n.outputs.clone(), n.sparse.take()));
        }
    }
    let mut out = lower_to_dense(&stripped, None);
    // Kept nodes pass through the lowering unchanged (name and outputs identify them).
    let mut next = kept.into_iter().peekable();
    for n in &mut out.nodes {
        if let Some((name, outs, _)) = next.peek() {
            if *name == n.name && *outs == n.outputs {
                n.sparse = next.next().and_then(|k| k.2);
            }
        }
    }
    if tokens {
        fold_epilogues(&mut out, &mut acts);
    }
    (out, acts)
}
