//! Values compared with a threshold, where only their side of it matters (graph/needed.rs).
//!
//! A-ViT's halting keeps a cumulative score `c' = c + h` per token, with `h = sigmoid(..) >= 0`,
//! and a token still runs while `c < t`. Where the previous score had already reached `t`, the
//! new one is at least `t` whatever `h` is, so `c' < t` is false there without computing `h`:
//! `h` (and the block output it is read from) is needed only where the token was still running.
//!
//! `Need::AtLeast(t, R)` says so: exact on `R`, any value of at least `t` elsewhere, and the
//! value's true result is at least `t` off `R` (every rule below keeps that promise). Values
//! computed off a region are finite (sparse ops write their fill there), so a sigmoid of them
//! stays in [0, 1].

use super::mask_trace::Links;
use super::needed::{Need, Region};
use super::op::{BinaryKind, Op, UnaryKind};
use super::{Graph, Node, ValueId};
use crate::tensor::TensorData;

/// What node `node` needs of its inputs when its result is needed `AtLeast(t, r)`; `None` when
/// no rule applies (the caller then needs the inputs whole).
pub(crate) fn at_least(g: &Graph, links: &Links, node: &Node, t: f32, r: &Region) -> Option<Vec<(ValueId, Need)>> {
    let x = node.inputs.first().copied().flatten()?;
    match &node.op {
        Op::Identity | Op::Reshape { .. } if keeps_tokens(g, node) => Some(vec![(x, Need::AtLeast(t, r.clone()))]),
        Op::Cast { to } if *to == g.values[x].dtype => Some(vec![(x, Need::AtLeast(t, r.clone()))]),
        // Any finite input gives a result of at least 0.
        Op::Unary(UnaryKind::Sigmoid | UnaryKind::HardSigmoid(..) | UnaryKind::Relu | UnaryKind::Abs) if t <= 0.0 => {
            Some(vec![(x, Need::Part(r.clone()))])
        }
        Op::Binary(BinaryKind::Add) => {
            let &[Some(a), Some(b)] = node.inputs.as_slice() else { return None };
            [(a, b), (b, a)].into_iter().find_map(|(base, step)| {
                (non_negative(g, links, step) && floored_off(g, links, base, t, r)).then(|| {
                    [(base, Need::AtLeast(t, r.clone())), (step, Need::AtLeast(0.0, r.clone()))]
                        .into_iter()
                        .filter(|(v, _)| g.values[*v].constant.is_none())
                        .collect()
                })
            })
        }
        _ => None,
    }
}

/// What `Less(a, t)` (or `Greater(t, a)`), read whole, needs of `a`: where `a = base + step` with
/// `step >= 0` and the graph also computes `Less(base, t')` with `t' >= t`, `a` is below `t` only
/// where that map is 1, so `a` is needed `AtLeast(t, map)`.
pub(crate) fn below(g: &Graph, links: &Links, node: &Node) -> Option<(ValueId, Need)> {
    let (a, t) = compared_below(g, node)?;
    Some((a, Need::AtLeast(t, Region::Tokens(earlier_map(g, links, a, t)?))))
}

/// For `a = base + step` with `step >= 0`: the map `Less(base, t')` with `t' >= t` that the graph
/// computes, whose 0s are tokens where `a` is at least `t` too.
fn earlier_map(g: &Graph, links: &Links, a: ValueId, t: f32) -> Option<ValueId> {
    let add = &g.nodes[links.prod.get(a).copied().flatten()?];
    let &[Some(x), Some(y)] = add.inputs.as_slice() else { return None };
    if add.op != Op::Binary(BinaryKind::Add) {
        return None;
    }
    [(x, y), (y, x)].into_iter().find_map(|(base, step)| {
        if !non_negative(g, links, step) {
            return None;
        }
        links.cons.get(base)?.iter().find_map(|&c| {
            let n = &g.nodes[c];
            let (v, t2) = compared_below(g, n)?;
            (v == base && t2 >= t).then(|| n.outputs.first().copied()).flatten()
        })
    })
}

/// `(a, t)` for `Less(a, t)` and `Greater(t, a)` with a constant scalar `t`.
fn compared_below(g: &Graph, node: &Node) -> Option<(ValueId, f32)> {
    let &[Some(x), Some(y)] = node.inputs.as_slice() else { return None };
    match node.op {
        Op::Binary(BinaryKind::Less) => Some((x, g.scalar_f32(y)?)),
        Op::Binary(BinaryKind::Greater) => Some((y, g.scalar_f32(x)?)),
        _ => None,
    }
    .filter(|&(a, _)| g.values[a].constant.is_none())
}

/// Whether `v` is at least 0 at every position, whatever finite values its inputs hold there
/// (a constant, or the result of an op whose every result is).
fn non_negative(g: &Graph, links: &Links, mut v: ValueId) -> bool {
    if let Some(t) = &g.values[v].constant {
        return matches!(t.data(), TensorData::F32(x) if x.iter().all(|&a| a >= 0.0));
    }
    for _ in 0..8 {
        let Some(p) = links.prod.get(v).copied().flatten() else { return false };
        let n = &g.nodes[p];
        match &n.op {
            Op::Unary(UnaryKind::Sigmoid | UnaryKind::HardSigmoid(..) | UnaryKind::Relu | UnaryKind::Abs) => return true,
            Op::Identity | Op::Reshape { .. } => match n.inputs.first().copied().flatten() {
                Some(x) => v = x,
                None => return false,
            },
            _ => return false,
        }
    }
    false
}

/// Whether `base`'s true value is at least `t` off `r`: `r` holds, as a term of its union, the
/// map `Less(base, t')` with `t' >= t`.
fn floored_off(g: &Graph, links: &Links, base: ValueId, t: f32, r: &Region) -> bool {
    let terms: &[Region] = match r {
        Region::Any(v) => v,
        r => std::slice::from_ref(r),
    };
    terms.iter().any(|term| {
        let Region::Tokens(m) = term else { return false };
        links.prod.get(*m).copied().flatten().is_some_and(|p| compared_below(g, &g.nodes[p]).is_some_and(|(v, t2)| v == base && t2 >= t))
    })
}

/// A Reshape (or Identity) between `[N, T]` token scalars and `[N, T, 1]`, which keeps every
/// token's position.
pub(crate) fn keeps_tokens(g: &Graph, node: &Node) -> bool {
    let (Some(x), Some(&y)) = (node.inputs.first().copied().flatten(), node.outputs.first()) else { return false };
    let (xs, ys) = (&g.values[x].shape, &g.values[y].shape);
    let unit = |a: &[usize], b: &[usize]| a.len() == 2 && b.len() == 3 && b[2] == 1 && a == &b[..2];
    xs == ys || unit(xs, ys) || unit(ys, xs)
}

/// The comparison whose bool result a token map is (through casts, reshapes between `[N, T]`
/// and `[N, T, 1]`, and `1 - (1 - m)`), so the same map reached through different nodes is one
/// region term.
pub(crate) fn token_threshold(g: &Graph, links: &Links, mut m: ValueId) -> Option<ValueId> {
    for _ in 0..16 {
        let node = &g.nodes[links.prod.get(m).copied().flatten()?];
        let x = node.inputs.first().copied().flatten()?;
        m = match &node.op {
            Op::Binary(BinaryKind::Less | BinaryKind::Greater) if compared_below(g, node).is_some() => return Some(m),
            Op::Cast { .. } | Op::Identity | Op::Reshape { .. } if keeps_tokens(g, node) => x,
            Op::Binary(BinaryKind::Sub) if g.scalar_f32(x) == Some(1.0) => {
                let inner = &g.nodes[links.prod.get(node.inputs.get(1).copied().flatten()?).copied().flatten()?];
                match (&inner.op, inner.inputs.as_slice()) {
                    (Op::Binary(BinaryKind::Sub), &[Some(one), Some(y)]) if g.scalar_f32(one) == Some(1.0) => y,
                    _ => return None,
                }
            }
            _ => return None,
        };
    }
    None
}

/// Whether the tokens below threshold `a` are among those below threshold `b`: `a` compares
/// `base + step` (`step >= 0`) where `b`, or a map it contains the same way, compares `base`
/// with a threshold at least as high.
fn within(g: &Graph, links: &Links, a: ValueId, b: ValueId) -> bool {
    let mut cur = a;
    for _ in 0..64 {
        if cur == b {
            return true;
        }
        let next = links
            .prod
            .get(cur)
            .copied()
            .flatten()
            .and_then(|p| compared_below(g, &g.nodes[p]))
            .and_then(|(x, t)| earlier_map(g, links, x, t));
        match next {
            Some(q) => cur = q,
            None => return false,
        }
    }
    false
}

/// `n` with its region simplified where one term provably contains another: a union keeps
/// the larger, an intersection the smaller.
pub(crate) fn prune(g: &Graph, links: &Links, n: Need) -> Need {
    // Only token maps are compared; a region with fewer than two is left as it is.
    fn tokens(r: &Region) -> usize {
        match r {
            Region::Tokens(_) => 1,
            Region::Map(_) => 0,
            Region::Spread(r, _) => tokens(r),
            Region::Both(v) | Region::Any(v) => v.iter().map(tokens).sum(),
        }
    }
    if let Need::Part(r) | Need::AtLeast(_, r) = &n {
        if tokens(r) < 2 {
            return n;
        }
    }
    match n {
        Need::Part(r) => Need::Part(simplify(g, links, r)),
        Need::AtLeast(t, r) => Need::AtLeast(t, simplify(g, links, r)),
        n => n,
    }
}

fn simplify(g: &Graph, links: &Links, r: Region) -> Region {
    let (terms, union) = match r {
        Region::Any(v) => (v, true),
        Region::Both(v) => (v, false),
        Region::Spread(inner, reach) => return Region::Spread(Box::new(simplify(g, links, *inner)), reach),
        r => return r,
    };
    let terms = match Region::join(terms.into_iter().map(|t| simplify(g, links, t)).collect(), !union) {
        Region::Any(v) if union => v,
        Region::Both(v) if !union => v,
        r => return r,
    };
    let kept: Vec<Region> = terms
        .iter()
        .enumerate()
        .filter(|&(i, t)| {
            !terms.iter().enumerate().any(|(j, u)| {
                // Of two terms that contain each other, the first is kept.
                let (small, large) = if union { (t, u) } else { (u, t) };
                j != i && subset(g, links, small, large) && (j < i || !subset(g, links, large, small))
            })
        })
        .map(|(_, t)| t.clone())
        .collect();
    Region::join(kept, !union)
}

/// Whether region `a` is provably within region `b`.
fn subset(g: &Graph, links: &Links, a: &Region, b: &Region) -> bool {
    if a == b {
        return true;
    }
    match (a, b) {
        (Region::Tokens(x), Region::Tokens(y)) => within(g, links, *x, *y),
        (Region::Any(v), _) => v.iter().all(|t| subset(g, links, t, b)),
        (Region::Both(v), _) if v.iter().any(|t| subset(g, links, t, b)) => true,
        (_, Region::Any(v)) => v.iter().any(|t| subset(g, links, a, t)),
        (_, Region::Both(v)) => v.iter().all(|t| subset(g, links, a, t)),
        _ => false,
    }
}
