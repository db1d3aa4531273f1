//! Fuses scaled dot-product attention into one `Attention` node:
//!
//! ```text
//! MatMul(Softmax(Add?(Mul|Div?(MatMul(q, kT), s), bias), axis = last), v)
//! ```
//!
//! `kT` is either `Transpose(k, [0, 1, 3, 2])` (the Transpose is then dropped when nothing
//! else reads it) or any `[B, H, dk, Tk]` value, read in place (`k_transposed`). The pass only
//! fires when every intermediate (scores, scaled scores, biased scores, probabilities) has
//! this chain as its sole reader and is not a graph output, so fusing removes work and never
//! hides a value someone needs. Shapes must match exactly (no broadcasting of q, k or v);
//! anything else leaves the graph as it was.
//!
//! When the bias is `(M - 1) * c` of a binary token mask `M` (A-ViT's halted keys), the op
//! records it (`key_mask`) and takes `M` as a fifth input; see [`super::op::Attention`].

use super::op::{Attention, BinaryKind, KeyMaskBias, Op, ScoreScale};
use super::shape_attention;
use super::{Graph, ValueId};
use crate::tensor::DType;

/// Fuses every attention pattern in `g`; returns how many were fused.
pub fn fuse_attention(g: &mut Graph) -> usize {
    let ctx = Ctx::new(g);
    let mut found = Vec::new();
    let mut dead = vec![false; g.nodes.len()];
    for mi in 0..g.nodes.len() {
        let Some(m) = ctx.match_at(mi) else { continue };
        // Intermediates have one reader each, so chains cannot overlap; checked anyway so a
        // future relaxation of `sole` cannot make two matches consume the same node.
        if m.remove.iter().any(|&n| dead[n]) {
            continue;
        }
        for &n in &m.remove {
            dead[n] = true;
        }
        found.push((mi, m));
    }
    let count = found.len();
    for (mi, m) in found {
        let node = &mut g.nodes[mi];
        node.op = Op::Attention(m.op);
        node.inputs = m.inputs;
    }
    let mut i = 0;
    g.nodes.retain(|_| {
        i += 1;
        !dead[i - 1]
    });
    count
}

struct Match {
    op: Attention,
    inputs: Vec<Option<ValueId>>,
    /// Nodes whose only purpose was feeding the fused chain.
    remove: Vec<usize>,
}

struct Ctx<'g> {
    g: &'g Graph,
    prod: Vec<Option<usize>>,
    cons: Vec<Vec<usize>>,
}

/// Ops that keep the row-major order of elements, only regrouping dimensions.
fn is_reshape_like(op: &Op) -> bool {
    matches!(op, Op::Reshape { .. } | Op::Flatten { .. } | Op::Squeeze { .. } | Op::Unsqueeze { .. } | Op::Identity)
}

/// Whether transposing `shape` by `perm` leaves the row-major element order unchanged: true
/// when it only moves size-1 axes.
fn order_preserving(perm: &[usize], shape: &[usize]) -> bool {
    let kept: Vec<usize> = perm.iter().copied().filter(|&p| shape.get(p).is_some_and(|&d| d != 1)).collect();
    perm.len() == shape.len() && kept.windows(2).all(|w| w[0] < w[1])
}

impl<'g> Ctx<'g> {
    fn new(g: &'g Graph) -> Ctx<'g> {
        let mut prod = vec![None; g.values.len()];
        for (i, n) in g.nodes.iter().enumerate() {
            for &o in &n.outputs {
                prod[o] = Some(i);
            }
        }
        Ctx { g, prod, cons: g.consumers() }
    }

    fn shape(&self, v: ValueId) -> &[usize] {
        &self.g.values[v].shape
    }

    fn is_f32(&self, v: ValueId) -> bool {
        self.g.values[v].dtype == DType::F32
    }

    /// `v` is read by exactly one node and is not a graph output: it can be fused away.
    fn sole(&self, v: ValueId) -> bool {
        self.cons[v].len() == 1 && !self.g.is_graph_output(v)
    }

    /// The node producing `v`, when it is a plain (not sparse-annotated) node.
    fn producer(&self, v: ValueId) -> Option<(usize, &'g Op)> {
        let i = self.prod[v]?;
        let n = &self.g.nodes[i];
        n.sparse.is_none().then_some((i, &n.op))
    }

    fn input(&self, node: usize, i: usize) -> Option<ValueId> {
        self.g.nodes[node].inputs.get(i).copied().flatten()
    }

    fn match_at(&self, mi: usize) -> Option<Match> {
        let node = &self.g.nodes[mi];
        if node.op != Op::MatMul || node.sparse.is_some() || node.inputs.len() != 2 || node.outputs.len() != 1 {
            return None;
        }
        let (p, v) = (self.input(mi, 0)?, self.input(mi, 1)?);
        let (si, sop) = self.producer(p)?;
        let Op::Softmax { axis, .. } = sop else { return None };
        let rank = self.shape(p).len() as i64;
        // Legacy softmax flattens from `axis` to the end, which is the last axis alone here.
        if rank != 4 || (*axis != -1 && *axis != rank - 1) || !self.sole(p) {
            return None;
        }
        let s = self.input(si, 0)?;
        let mut remove = vec![si];
        let (scores, bias) = match self.producer(s) {
            Some((ai, Op::Binary(BinaryKind::Add))) if self.sole(s) => {
                let (a, b) = (self.input(ai, 0)?, self.input(ai, 1)?);
                let (x, bias) = [(a, b), (b, a)].into_iter().find(|&(x, _)| self.scores(x).is_some())?;
                remove.push(ai);
                (self.scores(x)?, Some(bias))
            }
            _ => (self.scores(s)?, None),
        };
        let (scale, mm, scale_node) = scores;
        remove.push(mm);
        remove.extend(scale_node);
        let (q, kt) = (self.input(mm, 0)?, self.input(mm, 1)?);
        let (k, k_transposed) = match self.producer(kt) {
            Some((ti, Op::Transpose { perm })) if perm == &[0, 1, 3, 2] => {
                if self.sole(kt) {
                    remove.push(ti);
                }
                (self.input(ti, 0)?, false)
            }
            _ => (kt, true),
        };
        let heads = *self.shape(q).get(1)?;
        let mut op = Attention { heads, scale, k_transposed, key_mask: None };
        if ![q, k, v, node.outputs[0]].iter().all(|&x| self.is_f32(x)) {
            return None;
        }
        let [b, h, tq, tk, _, dv] = shape_attention::dims(&op, self.shape(q), self.shape(k), self.shape(v)).ok()?;
        // The chain's own shapes must be the ones the op will produce: no broadcasting hid in
        // the MatMuls.
        let score_shape = [b, h, tq, tk];
        if self.shape(self.g.nodes[mm].outputs[0]) != score_shape
            || self.shape(p) != score_shape
            || self.shape(s) != score_shape
            || self.shape(node.outputs[0]) != [b, h, tq, dv]
        {
            return None;
        }
        // An operand computed by the chain itself (say `v` = the probabilities) would lose
        // its producer.
        let made_inside = |x: ValueId| self.prod[x].is_some_and(|n| remove.contains(&n));
        if [q, k, v].into_iter().chain(bias).any(made_inside) {
            return None;
        }
        let mut inputs = vec![Some(q), Some(k), Some(v)];
        if let Some(bv) = bias {
            let bs = self.shape(bv);
            let fits = bs.len() <= 4 && super::shape::broadcast(&[bs, &score_shape]).ok().as_deref() == Some(&score_shape[..]);
            if !self.is_f32(bv) || !fits {
                return None;
            }
            inputs.push(Some(bv));
            if let Some((c, mask)) = self.key_mask(bv, b, tq, tk) {
                op.key_mask = Some(KeyMaskBias { c });
                inputs.push(Some(mask));
            }
        }
        Some(Match { op, inputs, remove })
    }

    /// `x` = scale(MatMul(q, kT)) with the MatMul's output read only here: (scale, the
    /// MatMul node, the scaling node if any).
    fn scores(&self, x: ValueId) -> Option<(ScoreScale, usize, Option<usize>)> {
        if !self.sole(x) {
            return None;
        }
        let (xi, xop) = self.producer(x)?;
        let (scale, inner) = match xop {
            Op::MatMul => return Some((ScoreScale::Mul(1.0), xi, None)),
            Op::Binary(BinaryKind::Mul) => {
                let (a, b) = (self.input(xi, 0)?, self.input(xi, 1)?);
                match (self.g.scalar_f32(a), self.g.scalar_f32(b)) {
                    (_, Some(s)) => (ScoreScale::Mul(s), a),
                    (Some(s), None) => (ScoreScale::Mul(s), b),
                    _ => return None,
                }
            }
            Op::Binary(BinaryKind::Div) => (ScoreScale::Div(self.g.scalar_f32(self.input(xi, 1)?)?), self.input(xi, 0)?),
            _ => return None,
        };
        // A scalar of higher rank than the scores would broadcast them into a bigger tensor.
        if self.shape(inner) != self.shape(x) || !self.sole(inner) {
            return None;
        }
        match self.producer(inner)? {
            (mi, Op::MatMul) => Some((scale, mi, Some(xi))),
            _ => None,
        }
    }

    /// Recognises `bias = (M - 1) * c` (or `(1 - M) * -c`) broadcast as `[B, 1, 1, Tk]` from a
    /// binary token mask `M` (`[B, Tk]` or `[B, Tk, 1]`), with order-preserving reshapes and
    /// transposes on either side of the subtraction: returns (c, M). Binary means produced by
    /// `Cast(to FLOAT)` of a BOOL value, so 0 or 1 exactly.
    fn key_mask(&self, bias: ValueId, b: usize, tq: usize, tk: usize) -> Option<(f32, ValueId)> {
        let bs = self.shape(bias);
        let mut padded = vec![1usize; 4 - bs.len()];
        padded.extend_from_slice(bs);
        if tq != tk || padded != [b, 1, 1, tk] {
            return None;
        }
        let (mi, Op::Binary(BinaryKind::Mul)) = self.producer(bias)? else { return None };
        let (a0, a1) = (self.input(mi, 0)?, self.input(mi, 1)?);
        let (y, scale) = match (self.g.scalar_f32(a0), self.g.scalar_f32(a1)) {
            (_, Some(c)) => (a0, c),
            (Some(c), None) => (a1, c),
            _ => return None,
        };
        if !(scale.is_finite() && scale != 0.0) {
            return None;
        }
        let si = self.through_layout(y, |op| matches!(op, Op::Binary(BinaryKind::Sub)))?;
        let (l, r) = (self.input(si, 0)?, self.input(si, 1)?);
        let (z, c) = match (self.g.scalar_f32(l), self.g.scalar_f32(r)) {
            (None, Some(1.0)) if scale > 0.0 => (l, scale),
            (Some(1.0), None) if scale < 0.0 => (r, -scale),
            _ => return None,
        };
        let ci = self.through_layout(z, |op| matches!(op, Op::Cast { to: DType::F32 }))?;
        let (m, src) = (self.g.nodes[ci].outputs[0], self.input(ci, 0)?);
        let ms = self.shape(m);
        (self.g.values[src].dtype == DType::Bool && (ms == [b, tk] || ms == [b, tk, 1])).then_some((c, m))
    }

    /// The node producing `v`, or what `v` was reshaped or order-preservingly transposed from
    /// (a handful of such steps at most), when `want` accepts its op.
    fn through_layout(&self, mut v: ValueId, want: impl Fn(&Op) -> bool) -> Option<usize> {
        for _ in 0..8 {
            let (i, op) = self.producer(v)?;
            match op {
                op if want(op) => return Some(i),
                op if is_reshape_like(op) => v = self.input(i, 0)?,
                Op::Transpose { perm } => {
                    let src = self.input(i, 0)?;
                    if !order_preserving(perm, self.shape(src)) {
                        return None;
                    }
                    v = src;
                }
                _ => return None,
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposes_that_keep_element_order() {
        assert!(order_preserving(&[0, 2, 1], &[2, 7, 1]));
        assert!(order_preserving(&[1, 0, 2], &[1, 3, 4]));
        assert!(!order_preserving(&[0, 2, 1], &[2, 7, 3]));
        assert!(!order_preserving(&[1, 0], &[2, 3]));
        assert!(!order_preserving(&[0, 1], &[2, 3, 4]));
    }
}
