//! Proof that a value is a binary map, and where that map comes from.
//!
//! Used by `sparse_detect`: a Mul may only be turned into a sparse region when its mask operand
//! holds nothing but 0 and 1, because skipped outputs must equal `value * 0`. Each rule below keeps
//! that property by construction; anything else is refused, never guessed.

use super::op::{BinaryKind, Op, UnaryKind};
use super::sparse::MaskSource;
use super::{Graph, ValueId};
use crate::tensor::{DType, Tensor, TensorData};

/// Producer and readers of every value; built once per rewrite, indices into `Graph::nodes`.
pub(crate) struct Links {
    pub prod: Vec<Option<usize>>,
    pub cons: Vec<Vec<usize>>,
}

impl Links {
    /// `None` when the graph refers to values that do not exist, produces a value twice or reads
    /// one before it is produced: the pass then leaves such a graph alone.
    pub fn new(g: &Graph) -> Option<Links> {
        let n = g.values.len();
        let mut prod = vec![None; n];
        let mut cons: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut ready = vec![false; n];
        for (i, v) in g.values.iter().enumerate() {
            ready[i] = v.constant.is_some();
        }
        for &i in &g.inputs {
            *ready.get_mut(i)? = true;
        }
        for &o in &g.outputs {
            if o >= n {
                return None;
            }
        }
        for (ni, node) in g.nodes.iter().enumerate() {
            let mask = node.sparse.as_ref().map(|s| &s.mask);
            for &v in node.inputs.iter().flatten().chain(mask) {
                if !*ready.get(v)? {
                    return None;
                }
                if !cons[v].contains(&ni) {
                    cons[v].push(ni);
                }
            }
            for &o in &node.outputs {
                let slot = prod.get_mut(o)?;
                if slot.is_some() || g.values[o].constant.is_some() {
                    return None;
                }
                *slot = Some(ni);
                ready[o] = true;
            }
        }
        Some(Links { prod, cons })
    }
}

/// What a binary map is derived from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// The node that turns non-binary values into a binary map (a comparison, or a Cast to bool).
    Threshold(usize),
    /// A model input, trusted to be binary because the executor checks it on every frame.
    Input(ValueId),
}

/// A proven-binary map: its single origin and the halo added on the way, in positions of the
/// map's own resolution along (y, x).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MaskTrace {
    pub origin: Origin,
    pub halo: [usize; 2],
}

enum Bin {
    /// A constant that is all 0/1: binary, but says nothing about where the mask comes from.
    Const,
    Map(MaskTrace),
}

/// Values a trace may visit; bounds the work on adversarial graphs (shared sub-DAGs).
const VISIT_BUDGET: usize = 256;

/// Proves that `v` only holds 0 and 1 and finds its origin. The error says why not.
pub(crate) fn trace_mask(g: &Graph, links: &Links, v: ValueId) -> Result<MaskTrace, String> {
    let mut budget = VISIT_BUDGET;
    match binary(g, links, v, &mut budget)? {
        Bin::Map(t) => Ok(t),
        Bin::Const => Err(format!("mask '{}' is constant: a static map, not an input-dependent one", name(g, v))),
    }
}

fn name(g: &Graph, v: ValueId) -> &str {
    g.values.get(v).map_or("?", |x| x.name.as_str())
}

pub(crate) fn is_binary_tensor(t: &Tensor) -> bool {
    Range::of_tensor(t).is_binary()
}

/// Ops whose every output element is one of their input's elements: they keep a map binary
/// and its values' range.
fn picks_elements(op: &Op) -> bool {
    matches!(
        op,
        Op::MaxPool(_)
            | Op::Reshape { .. }
            | Op::Unsqueeze { .. }
            | Op::Squeeze { .. }
            | Op::Flatten { .. }
            | Op::Transpose { .. }
            | Op::Expand
            | Op::Identity
    )
}

fn binary(g: &Graph, links: &Links, v: ValueId, budget: &mut usize) -> Result<Bin, String> {
    *budget = budget.checked_sub(1).ok_or("mask expression too large to analyse")?;
    let val = g.values.get(v).ok_or("dangling value id")?;
    if let Some(t) = &val.constant {
        return if is_binary_tensor(t) { Ok(Bin::Const) } else { Err(format!("constant '{}' is not 0/1", val.name)) };
    }
    let Some(p) = links.prod.get(v).copied().flatten() else {
        return model_input(g, links, v);
    };
    let node = &g.nodes[p];
    let input = |i: usize| -> Result<ValueId, String> {
        node.inputs.get(i).copied().flatten().ok_or_else(|| format!("{} '{}' lacks input {i}", node.op.name(), node.name))
    };
    let map = |origin| Ok(Bin::Map(MaskTrace { origin, halo: [0, 0] }));
    match &node.op {
        Op::Binary(BinaryKind::Greater | BinaryKind::Less | BinaryKind::Equal | BinaryKind::GreaterOrEqual | BinaryKind::LessOrEqual) => {
            map(Origin::Threshold(p))
        }
        Op::Cast { to } => {
            let x = input(0)?;
            match binary(g, links, x, budget) {
                Ok(b) => Ok(b),
                // x != 0 as a map: a threshold in its own right.
                Err(_) if *to == DType::Bool => map(Origin::Threshold(p)),
                Err(e) => Err(e),
            }
        }
        Op::Unary(UnaryKind::Not) => match binary(g, links, input(0)?, budget)? {
            Bin::Map(t) if t.halo != [0, 0] => {
                Err(format!("Not '{}' complements a dilated map: its halo is no longer a dilation", node.name))
            }
            b => Ok(b),
        },
        Op::Binary(b @ (BinaryKind::Mul | BinaryKind::And | BinaryKind::Min | BinaryKind::Or | BinaryKind::Max))
            if !node.inputs.is_empty() =>
        {
            let mut parts = Vec::with_capacity(node.inputs.len());
            for i in 0..node.inputs.len() {
                parts.push(binary(g, links, input(i)?, budget)?);
            }
            if matches!(b, BinaryKind::Or | BinaryKind::Max) {
                // A union: its halo is at most the larger one.
                combine(parts, |x, y| x.max(y))
            } else {
                // An intersection: its halo is at most the smaller one.
                combine(parts, |x, y| x.min(y))
            }
        }
        Op::Where => {
            let c = binary(g, links, input(0)?, budget)?;
            if matches!(&c, Bin::Map(t) if t.halo != [0, 0]) {
                return Err(format!("Where '{}' selects on a dilated map: its halo is no longer a dilation", node.name));
            }
            let a = binary(g, links, input(1)?, budget)?;
            let b = binary(g, links, input(2)?, budget)?;
            combine(vec![c, a, b], |x, y| x.max(y))
        }
        Op::MaxPool(pool) => {
            let x = input(0)?;
            let w = &pool.window;
            let r = w.kernel_shape.len();
            let in_shape = &g.values[x].shape;
            let out_shape = node.outputs.first().and_then(|&o| g.values.get(o)).map_or(&[][..], |o| &o.shape[..]);
            let fits = (1..=2).contains(&r) && in_shape.len() >= r && out_shape.len() == in_shape.len();
            if !fits || w.strides.len() != r || w.dilations.len() != r || w.pads.len() != 2 * r {
                return Err(format!("MaxPool '{}' is not a 1-D or 2-D window", node.name));
            }
            let first = in_shape.len() - r;
            let mut reach = [0usize; 2];
            let mut stride = [1usize; 2];
            for i in 0..r {
                let (k, s, d, pb) = (w.kernel_shape[i], w.strides[i], w.dilations[i], w.pads[i]);
                if k == 0 || s == 0 || d == 0 || !every_window_hits_input(in_shape[first + i], out_shape[first + i], k, s, d, pb) {
                    // A window that sees only padding yields -inf, which is not binary.
                    return Err(format!("MaxPool '{}' has a window that covers only padding", node.name));
                }
                let eff = (k - 1) * d + 1;
                // How far a window reaches beyond the input cells that map onto its output cell.
                let left = pb;
                let right = (eff - 1).saturating_sub(pb).saturating_sub(s - 1);
                let ax = 2 - r + i;
                reach[ax] = left.max(right);
                stride[ax] = s;
            }
            match binary(g, links, x, budget)? {
                Bin::Const => Ok(Bin::Const),
                Bin::Map(mut t) => {
                    for ax in 0..2 {
                        t.halo[ax] = (t.halo[ax] + reach[ax]).div_ceil(stride[ax]);
                    }
                    Ok(Bin::Map(t))
                }
            }
        }
        // Nearest resampling copies cells: a map brought up from a lower resolution stays binary,
        // its halo scaled by the factor.
        Op::Resize(r) if r.mode == super::op::ResizeMode::Nearest => match binary(g, links, input(0)?, budget)? {
            Bin::Map(mut t) => {
                let (xs, ys) = (&g.values[input(0)?].shape, node.outputs.first().map_or(&[][..], |&o| &g.values[o].shape[..]));
                if xs.len() >= 2 && xs.len() == ys.len() {
                    let n = xs.len();
                    for ax in 0..2 {
                        let (i, o) = (xs[n - 2 + ax].max(1), ys[n - 2 + ax]);
                        t.halo[ax] = if o >= i { t.halo[ax] * o.div_ceil(i) } else { t.halo[ax].div_ceil(i / o.max(1)) };
                    }
                }
                Ok(Bin::Map(t))
            }
            b => Ok(b),
        },
        Op::Reshape { .. } | Op::Unsqueeze { .. } | Op::Squeeze { .. } | Op::Flatten { .. } | Op::Expand | Op::Identity => {
            binary(g, links, input(0)?, budget)
        }
        Op::Transpose { .. } => match binary(g, links, input(0)?, budget)? {
            // Axes may swap; the larger halo holds for both.
            Bin::Map(mut t) => {
                let h = t.halo[0].max(t.halo[1]);
                t.halo = [h, h];
                Ok(Bin::Map(t))
            }
            b => Ok(b),
        },
        // Anything else whose values are provably 0 or 1 (Round of a Sigmoid, Clip of a Sign,
        // ...) makes a binary map itself.
        op => match range(g, links, v, budget) {
            Some(r) if r.is_binary() => map(Origin::Threshold(p)),
            _ => Err(format!("{} '{}' does not keep a map binary", op.name(), node.name)),
        },
    }
}

/// Bounds on every element of a value; `integral`: every element is a whole number.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Range {
    lo: f64,
    hi: f64,
    integral: bool,
}

impl Range {
    const ANY: Range = Range { lo: f64::NEG_INFINITY, hi: f64::INFINITY, integral: false };
    const BIT: Range = Range { lo: 0.0, hi: 1.0, integral: true };
    fn is_binary(self) -> bool {
        self.integral && self.lo >= 0.0 && self.hi <= 1.0
    }
    fn hull(self, o: Range) -> Range {
        Range { lo: self.lo.min(o.lo), hi: self.hi.max(o.hi), integral: self.integral && o.integral }
    }
    fn of_tensor(t: &Tensor) -> Range {
        let vals: Vec<f64> = match t.data() {
            TensorData::F32(x) => x.iter().map(|&a| a as f64).collect(),
            TensorData::F64(x) => x.clone(),
            TensorData::I64(x) => x.iter().map(|&a| a as f64).collect(),
            TensorData::I32(x) => x.iter().map(|&a| a as f64).collect(),
            TensorData::I8(x) => x.iter().map(|&a| a as f64).collect(),
            TensorData::U8(x) => x.iter().map(|&a| a as f64).collect(),
            TensorData::Bool(_) => return Range::BIT,
        };
        if vals.iter().any(|a| a.is_nan()) {
            return Range::ANY;
        }
        let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Range { lo, hi, integral: vals.iter().all(|a| a.fract() == 0.0) }
    }
}

/// Interval arithmetic over what the graph computes; `None` where nothing is known. Products
/// of infinite bounds give NaN, which the comparisons of `is_binary` reject.
fn range(g: &Graph, links: &Links, v: ValueId, budget: &mut usize) -> Option<Range> {
    *budget = budget.checked_sub(1)?;
    let val = g.values.get(v)?;
    if let Some(t) = &val.constant {
        return Some(Range::of_tensor(t));
    }
    if val.dtype == DType::Bool {
        return Some(Range::BIT);
    }
    let p = links.prod.get(v).copied().flatten()?;
    let node = &g.nodes[p];
    let at = |i: usize, budget: &mut usize| node.inputs.get(i).copied().flatten().map_or(Some(Range::ANY), |x| range(g, links, x, budget));
    let r = match &node.op {
        Op::Binary(b) if b.is_predicate() => Range::BIT,
        Op::Unary(u) => {
            let x = at(0, budget)?;
            match u {
                UnaryKind::Sigmoid | UnaryKind::HardSigmoid(..) => Range { lo: 0.0, hi: 1.0, integral: false },
                UnaryKind::Tanh | UnaryKind::Erf | UnaryKind::Sin | UnaryKind::Cos => Range { lo: -1.0, hi: 1.0, integral: false },
                UnaryKind::Sign => Range { lo: -1.0, hi: 1.0, integral: true },
                UnaryKind::Round => Range { lo: x.lo.round(), hi: x.hi.round(), integral: true },
                UnaryKind::Floor => Range { lo: x.lo.floor(), hi: x.hi.floor(), integral: true },
                UnaryKind::Ceil => Range { lo: x.lo.ceil(), hi: x.hi.ceil(), integral: true },
                UnaryKind::Relu => Range { lo: x.lo.max(0.0), hi: x.hi.max(0.0), integral: x.integral },
                UnaryKind::Neg => Range { lo: -x.hi, hi: -x.lo, integral: x.integral },
                UnaryKind::Abs => {
                    let m = x.lo.abs().max(x.hi.abs());
                    let lo = if x.lo <= 0.0 && x.hi >= 0.0 { 0.0 } else { x.lo.abs().min(x.hi.abs()) };
                    Range { lo, hi: m, integral: x.integral }
                }
                UnaryKind::Not => Range::BIT,
                _ => Range::ANY,
            }
        }
        Op::Clip => {
            let x = at(0, budget)?;
            let bound = |i: usize| -> Option<f64> {
                let c = g.values.get(node.inputs.get(i).copied().flatten()?)?.constant.as_ref()?;
                let r = Range::of_tensor(c);
                (r.lo == r.hi).then_some(r.lo)
            };
            let (a, b) = (bound(1), bound(2));
            let lo = a.map_or(x.lo, |a| x.lo.max(a));
            let hi = b.map_or(x.hi, |b| x.hi.min(b));
            let whole = |c: Option<f64>| c.is_none_or(|c| c.fract() == 0.0);
            Range { lo: lo.min(hi), hi, integral: x.integral && whole(a) && whole(b) }
        }
        Op::Binary(b @ (BinaryKind::Add | BinaryKind::Sub | BinaryKind::Mul | BinaryKind::Min | BinaryKind::Max)) => {
            let mut acc = at(0, budget)?;
            for i in 1..node.inputs.len() {
                let y = at(i, budget)?;
                let integral = acc.integral && y.integral;
                acc = match b {
                    BinaryKind::Add => Range { lo: acc.lo + y.lo, hi: acc.hi + y.hi, integral },
                    BinaryKind::Sub => Range { lo: acc.lo - y.hi, hi: acc.hi - y.lo, integral },
                    BinaryKind::Mul => {
                        let c = [acc.lo * y.lo, acc.lo * y.hi, acc.hi * y.lo, acc.hi * y.hi];
                        Range {
                            lo: c.iter().copied().fold(f64::INFINITY, f64::min),
                            hi: c.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                            integral,
                        }
                    }
                    BinaryKind::Min => Range { lo: acc.lo.min(y.lo), hi: acc.hi.min(y.hi), integral },
                    _ => Range { lo: acc.lo.max(y.lo), hi: acc.hi.max(y.hi), integral },
                };
            }
            acc
        }
        Op::Where => at(1, budget)?.hull(at(2, budget)?),
        Op::Resize(r) if r.mode == super::op::ResizeMode::Nearest => at(0, budget)?,
        // A ConvTranspose whose taps never overlap (stride at least the dilated kernel) with a
        // 0/1 kernel and no bias places each input cell, times one tap, at its own outputs: a
        // one-hot kernel is how a mask made at a lower resolution is spread out.
        Op::ConvTranspose(c) if node.inputs.get(2).copied().flatten().is_none() => {
            let w = &c.window;
            let apart = w.kernel_shape.iter().zip(&w.strides).zip(&w.dilations).all(|((&k, &s), &d)| s >= k.saturating_sub(1) * d + 1);
            let kernel = node.inputs.get(1).copied().flatten().and_then(|x| g.values[x].constant.as_ref()).map(|t| Range::of_tensor(t));
            let one_input_channel = node.inputs.first().copied().flatten().is_some_and(|x| g.values[x].shape.get(1) == Some(&1));
            match kernel {
                Some(k) if apart && one_input_channel && k.is_binary() => {
                    let x = at(0, budget)?;
                    Range { lo: x.lo.min(0.0), hi: x.hi.max(0.0), integral: x.integral }
                }
                _ => Range::ANY,
            }
        }
        Op::Cast { to } if *to == DType::Bool => Range::BIT,
        Op::Cast { to } => {
            let x = at(0, budget)?;
            if to.is_float() {
                x
            } else {
                Range { lo: x.lo.trunc(), hi: x.hi.trunc(), integral: true }
            }
        }
        op if picks_elements(op) => at(0, budget)?,
        _ => Range::ANY,
    };
    Some(r)
}

/// Whether every output cell's window touches at least one input cell along an axis (windows
/// are checked one by one; absurdly large ones are refused rather than scanned).
pub(crate) fn every_window_hits_input(input: usize, out: usize, k: usize, s: usize, d: usize, pb: usize) -> bool {
    if out.saturating_mul(k) > 1 << 24 {
        return false;
    }
    (0..out).all(|o| {
        (0..k).any(|j| {
            let pos = (o as u128) * (s as u128) + (j as u128) * (d as u128);
            pos >= pb as u128 && pos - (pb as u128) < input as u128
        })
    })
}

/// Joins the maps of an op's operands; constants do not count. Maps of several origins report
/// the first in-graph one, so a map that is not wholly a model input is never taken for one.
fn combine(parts: Vec<Bin>, halo: impl Fn(usize, usize) -> usize) -> Result<Bin, String> {
    let mut acc: Option<MaskTrace> = None;
    for p in parts {
        let Bin::Map(t) = p else { continue };
        acc = Some(match acc {
            None => t,
            Some(a) => {
                let origin = match (a.origin, t.origin) {
                    (Origin::Input(_), o @ Origin::Threshold(_)) => o,
                    (o, _) => o,
                };
                MaskTrace { origin, halo: [halo(a.halo[0], t.halo[0]), halo(a.halo[1], t.halo[1])] }
            }
        });
    }
    Ok(acc.map_or(Bin::Const, Bin::Map))
}

/// Ops that a model input may feed and still be taken for a mask: everything that keeps a map
/// binary. A float input that also feeds a Conv, a norm, etc. is data (an image), not a mask.
fn mask_like_reader(op: &Op) -> bool {
    picks_elements(op)
        || matches!(
            op,
            Op::Cast { .. }
                | Op::Binary(BinaryKind::Mul | BinaryKind::And | BinaryKind::Or | BinaryKind::Min | BinaryKind::Max)
                | Op::Unary(UnaryKind::Not)
                | Op::Where
        )
}

fn model_input(g: &Graph, links: &Links, v: ValueId) -> Result<Bin, String> {
    let val = &g.values[v];
    if !g.inputs.contains(&v) {
        return Err(format!("'{}' has no producer", val.name));
    }
    if val.dtype != DType::Bool {
        if let Some(&n) = links.cons[v].iter().find(|&&n| !mask_like_reader(&g.nodes[n].op)) {
            let node = &g.nodes[n];
            return Err(format!("model input '{}' also feeds {} '{}', so it is data, not a mask", val.name, node.op.name(), node.name));
        }
    }
    Ok(Bin::Map(MaskTrace { origin: Origin::Input(v), halo: [0, 0] }))
}

/// Describes an origin as the annotation reports it. A threshold of a halting score (a sum of
/// Sigmoid terms kept while it stays below a limit, as A-ViT does) is `Halting`; any other
/// threshold (a mask unit's logit compared with a constant, ...) is `InGraph`.
pub(crate) fn source_of(g: &Graph, links: &Links, origin: Origin) -> MaskSource {
    match origin {
        Origin::Input(v) => MaskSource::ModelInput { name: name(g, v).to_string() },
        Origin::Threshold(n) => {
            let node = &g.nodes[n];
            let score = match (&node.op, node.inputs.as_slice()) {
                (Op::Binary(BinaryKind::Less | BinaryKind::LessOrEqual), [Some(x), Some(c)]) if is_const(g, *c) && !is_const(g, *x) => {
                    Some(*x)
                }
                (Op::Binary(BinaryKind::Greater | BinaryKind::GreaterOrEqual), [Some(c), Some(x)])
                    if is_const(g, *c) && !is_const(g, *x) =>
                {
                    Some(*x)
                }
                _ => None,
            };
            let name = node.name.clone();
            match score {
                Some(x) if sum_of_sigmoids(g, links, x) => MaskSource::Halting { node: name },
                _ => MaskSource::InGraph { node: name },
            }
        }
    }
}

fn is_const(g: &Graph, v: ValueId) -> bool {
    g.values.get(v).is_some_and(|x| x.constant.is_some())
}

/// Whether `x` is built only from Sigmoid outputs and constants by sums, scalings and shape ops.
fn sum_of_sigmoids(g: &Graph, links: &Links, x: ValueId) -> bool {
    let mut stack = vec![x];
    let mut seen = Vec::new();
    let mut sigmoids = 0;
    while let Some(v) = stack.pop() {
        if seen.contains(&v) || is_const(g, v) {
            continue;
        }
        if seen.len() >= VISIT_BUDGET {
            return false;
        }
        seen.push(v);
        let Some(p) = links.prod.get(v).copied().flatten() else { return false };
        let node = &g.nodes[p];
        match node.op {
            Op::Unary(UnaryKind::Sigmoid) => sigmoids += 1,
            Op::Binary(BinaryKind::Add | BinaryKind::Sub | BinaryKind::Mul | BinaryKind::Div)
            | Op::Identity
            | Op::Reshape { .. }
            | Op::Unsqueeze { .. }
            | Op::Squeeze { .. }
            | Op::Cast { .. } => {
                for i in node.inputs.iter().flatten() {
                    stack.push(*i);
                }
            }
            _ => return false,
        }
    }
    sigmoids > 0
}

#[cfg(test)]
mod tests {
    use super::every_window_hits_input;

    #[test]
    fn windows_that_see_only_padding_are_found() {
        // 3x3, pad 1 over 8 cells: every window overlaps the input.
        assert!(every_window_hits_input(8, 8, 3, 1, 1, 1));
        // k = 2 with dilation 3 and pad 2 over one cell: taps at -2 and 1, both outside.
        assert!(!every_window_hits_input(1, 2, 2, 1, 3, 2));
        // Stride 2, k = s: a plain resampling.
        assert!(every_window_hits_input(8, 4, 2, 2, 1, 0));
    }
}
