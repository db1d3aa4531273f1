//! Token sparsity of fused attention: an `Attention` whose key bias is a binary token mask
//! (`key_mask`, proved by `fuse_attention`) computes only the query rows of active tokens, where
//! its rows of inactive tokens are don't-care — its output reaches, through shape-only ops with
//! no other reader, a token-sparse MatMul, which reads only active rows and whose own output the
//! mask zeroes.

use super::{FillPolicy, Graph, MaskKind, Op, SparseSpec};

/// Annotates such attentions; returns how many. Runs after the MatMuls are annotated.
pub(crate) fn annotate(g: &mut Graph) -> usize {
    let consumers = g.consumers();
    let mut found = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        let Op::Attention(a) = &n.op else { continue };
        let (Some(_), Some(Some(mask))) = (a.key_mask, n.inputs.get(4).copied()) else { continue };
        if n.sparse.is_some() || n.outputs.len() != 1 {
            continue;
        }
        let mut v = n.outputs[0];
        let spec = loop {
            if g.is_graph_output(v) {
                break None;
            }
            let [c] = consumers.get(v).map(Vec::as_slice).unwrap_or(&[]) else { break None };
            let next = &g.nodes[*c];
            match &next.op {
                Op::Transpose { .. } | Op::Reshape { .. } if next.outputs.len() == 1 => v = next.outputs[0],
                Op::MatMul if next.inputs.first() == Some(&Some(v)) => {
                    break next.sparse.as_ref().filter(|s| s.kind == MaskKind::Token).map(|s| SparseSpec {
                        mask,
                        kind: MaskKind::Token,
                        source: s.source.clone(),
                        dilation: [0, 0],
                        fill: FillPolicy::Zero,
                        fused_mul: false,
                    })
                }
                _ => break None,
            }
        };
        if let Some(s) = spec {
            found.push((i, s));
        }
    }
    let n = found.len();
    for (i, s) in found {
        g.nodes[i].sparse = Some(s);
    }
    n
}
