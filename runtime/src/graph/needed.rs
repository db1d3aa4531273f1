//! Needed regions: for every value, the positions that some consumer actually reads (shared/
//! DESIGN.md, "How masks are found in a model"). Propagated backwards from the graph outputs,
//! which are needed whole: a multiplication by a provably binary map (or `Where(map, x, 0)`)
//! narrows what its operand needs to the map; position-local ops pass a region through;
//! windows (convs, pools) spread it through their stride, padding and dilation; every other
//! consumer needs its operand whole, and says why.
//!
//! Regions stay symbolic (`Region`) until an op is annotated with one; `needed_mask` turns them
//! into mask values. Anything not proven here is needed whole: a wrong region would be a wrong
//! result, a missing one only a dense op.

use super::mask_trace::{self, Links};
use super::needed_floor;
use super::op::{BinaryKind, Op, UnaryKind};
use super::sparse::MaskKind;
use super::{Graph, Node, ValueId};
use crate::tensor::TensorData;

/// How a window relates the positions of its input (the value a region is needed on) to those
/// of its output, along (y, x). `transposed`: a ConvTranspose, whose input position `i` feeds
/// outputs `i * stride + j * dilation - pad_begin`; otherwise output `o` reads inputs
/// `o * stride + j * dilation - pad_begin`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Reach {
    pub transposed: bool,
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub dilation: [usize; 2],
    pub pad_begin: [usize; 2],
    pub pad_end: [usize; 2],
    /// Positions of the window's input and output.
    pub input: [usize; 2],
    pub output: [usize; 2],
}

impl Reach {
    /// A window that reads exactly the position it writes.
    fn is_pointwise(&self) -> bool {
        self.kernel == [1, 1] && self.stride == [1, 1] && self.pad_begin == [0, 0] && self.input == self.output
    }
    /// How far, in input positions, the positions read reach beyond those of an output position
    /// (an upper bound over both sides), for `inspect`'s halo.
    pub fn extent(&self, axis: usize) -> usize {
        let eff = (self.kernel[axis] - 1) * self.dilation[axis];
        self.pad_begin[axis].max(eff.saturating_sub(self.pad_begin[axis]))
    }
}

/// A set of positions of one value, built from binary maps.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Region {
    /// Where the binary map is 1: `[N or 1, 1, H, W]` over a spatial value's positions, `[N or
    /// 1, T, 1]` or `[T, 1]` over token rows; float or bool.
    Map(ValueId),
    /// The input positions a window reads (or, transposed, feeds from) to produce the region.
    Spread(Box<Region>, Reach),
    /// Intersection, sorted and without repeats.
    Both(Vec<Region>),
    /// Union, sorted and without repeats.
    Any(Vec<Region>),
    /// Where the binary map `[N, T]` or `[N, T, 1]` (one value per token, float or bool) is 1:
    /// the token rows of `[N, T, C]` values and the elements of `[N, T]` token scalars.
    Tokens(ValueId),
}

/// Largest region kept symbolic; a larger one (a value read through many paths) is needed whole.
const MAX_REGION_TERMS: usize = 48;

impl Region {
    fn terms(&self) -> usize {
        match self {
            Region::Map(_) | Region::Tokens(_) => 1,
            Region::Spread(r, _) => 1 + r.terms(),
            Region::Both(v) | Region::Any(v) => 1 + v.iter().map(Region::terms).sum::<usize>(),
        }
    }
    pub(crate) fn join(parts: Vec<Region>, both: bool) -> Region {
        let mut flat = Vec::new();
        for p in parts {
            match p {
                Region::Both(v) if both => flat.extend(v),
                Region::Any(v) if !both => flat.extend(v),
                p => flat.push(p),
            }
        }
        flat.sort();
        flat.dedup();
        match flat.len() {
            1 => flat.pop().unwrap_or(Region::Any(Vec::new())),
            _ if both => Region::Both(flat),
            _ => Region::Any(flat),
        }
    }
    /// The maps the region is built from, in order of first appearance.
    pub fn maps(&self, out: &mut Vec<ValueId>) {
        match self {
            Region::Map(v) | Region::Tokens(v) => {
                if !out.contains(v) {
                    out.push(*v)
                }
            }
            Region::Spread(r, _) => r.maps(out),
            Region::Both(v) | Region::Any(v) => v.iter().for_each(|r| r.maps(out)),
        }
    }
}

/// Why a value is needed at every position: the consumer that first asked for it whole, and why
/// (carried from consumer to producer, so a chain of position-local ops reports its end).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    pub text: String,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Need {
    /// No consumer reads the value.
    Unread,
    Part(Region),
    /// Exact on the region; elsewhere any value of at least the bound, which the true value also
    /// is there (graph/needed_floor.rs).
    AtLeast(f32, Region),
    Whole(Cause),
}

impl Need {
    fn whole(text: impl Into<String>) -> Need {
        Need::Whole(Cause { text: text.into() })
    }
    /// The union of two consumers' needs.
    fn or(self, other: Need) -> Need {
        match (self, other) {
            (Need::Unread, n) | (n, Need::Unread) => n,
            (w @ Need::Whole(_), _) | (_, w @ Need::Whole(_)) => w,
            (Need::Part(a), Need::Part(b)) => Need::Part(Region::join(vec![a, b], false)),
            (Need::Part(a), Need::AtLeast(t, b)) | (Need::AtLeast(t, b), Need::Part(a)) => {
                Need::AtLeast(t, Region::join(vec![a, b], false))
            }
            (Need::AtLeast(s, a), Need::AtLeast(t, b)) => Need::AtLeast(s.max(t), Region::join(vec![a, b], false)),
        }
    }
    /// Whole when the region has grown too large to keep symbolic.
    fn bounded(self) -> Need {
        match self {
            Need::Part(r) => bounded(r),
            Need::AtLeast(t, r) => match bounded(r) {
                Need::Part(r) => Need::AtLeast(t, r),
                n => n,
            },
            n => n,
        }
    }
}

fn bounded(r: Region) -> Need {
    if r.terms() > MAX_REGION_TERMS {
        Need::whole(format!("it is read through too many paths to track (a region of more than {MAX_REGION_TERMS} terms)"))
    } else {
        Need::Part(r)
    }
}

/// What the positions of a value are: `[N, C, H, W]` (spatial) or token rows `[N, T, C]` / `[T, C]`.
pub(crate) fn layout(shape: &[usize]) -> Option<MaskKind> {
    match shape.len() {
        4 => Some(MaskKind::Spatial),
        2 | 3 => Some(MaskKind::Token),
        _ => None,
    }
}

/// Whether `m` holds one value per position of `out` broadcast over its channels.
pub(crate) fn map_fits(kind: MaskKind, out: &[usize], m: &[usize]) -> bool {
    let r = out.len();
    if m.len() != r {
        return false;
    }
    let batch_ok = m[0] == 1 || m[0] == out[0];
    match kind {
        MaskKind::Spatial => r == 4 && batch_ok && m[1] == 1 && m[2..] == out[2..],
        MaskKind::Token => (r == 2 || r == 3) && m[r - 1] == 1 && m[r - 2] == out[r - 2] && (r == 2 || batch_ok),
    }
}

/// Computes every value's need. `links` must describe `g`.
pub(crate) fn analyse(g: &Graph, links: &Links) -> Vec<Need> {
    let mut need: Vec<Need> = vec![Need::Unread; g.values.len()];
    for &o in &g.outputs {
        need[o] = Need::whole(format!("'{}' is a graph output", g.values[o].name));
    }
    let scalars = token_scalars(g);
    for node in g.nodes.iter().rev() {
        // A value's readers all come after its producer, so its need is final here.
        let outs: Vec<Need> = node.outputs.iter().map(|&o| need[o].clone()).collect();
        if outs.iter().all(|n| *n == Need::Unread) {
            continue;
        }
        for (v, n) in backward(g, links, &scalars, node, &outs) {
            let old = std::mem::replace(&mut need[v], Need::Unread);
            need[v] = needed_floor::prune(g, links, old.or(n)).bounded();
        }
    }
    need
}

/// What one node needs of each of its non-constant inputs, given what is needed of its outputs.
fn backward(g: &Graph, links: &Links, scalars: &[bool], node: &Node, outs: &[Need]) -> Vec<(ValueId, Need)> {
    let inputs: Vec<ValueId> = node.inputs.iter().flatten().copied().filter(|&v| g.values[v].constant.is_none()).collect();
    let mask = node.sparse.as_ref().map(|s| s.mask);
    let who = || format!("{} '{}'", node.op.name(), node.name);
    let whole_all = |why: String| -> Vec<(ValueId, Need)> {
        let mut v: Vec<_> = inputs.iter().map(|&x| (x, Need::whole(why.clone()))).collect();
        v.extend(mask.map(|m| (m, Need::whole(format!("{} reads it as its mask", who())))));
        v
    };
    if node.sparse.is_some() {
        return whole_all(format!("{} is already sparse", who()));
    }
    let out = match outs {
        [n] => n.clone(),
        _ if matches!(node.op, Op::Split { .. }) => outs.iter().cloned().fold(Need::Unread, Need::or),
        _ => return whole_all(format!("{} has several outputs", who())),
    };
    let out = match out {
        Need::Unread => return Vec::new(),
        Need::AtLeast(t, r) => match needed_floor::at_least(g, links, node, t, &r) {
            Some(v) => return v,
            None => Need::whole(format!("{} feeds a comparison with {t} at every position", who())),
        },
        n => n,
    };
    let out_shape = node.outputs.first().map_or(&[][..], |&o| &g.values[o].shape[..]);
    let Some(kind) = layout(out_shape) else {
        return whole_all(format!("{} has a result of rank {}, neither positions nor token rows", who(), out_shape.len()));
    };
    // What a position-local op needs of operand `x`: what is needed of its result, unless `x`
    // is broadcast over positions (then all of it).
    let same = |x: ValueId| -> Need {
        match &out {
            Need::Part(_) if !same_positions(&g.values[x].shape, out_shape, kind) => {
                Need::whole(format!("{} broadcasts '{}' {:?} over positions", who(), g.values[x].name, g.values[x].shape))
            }
            n => n.clone(),
        }
    };
    let local = |why_not: Option<String>| -> Vec<(ValueId, Need)> {
        match why_not {
            Some(w) => whole_all(w),
            None => inputs.iter().map(|&x| (x, same(x))).collect(),
        }
    };
    let through = |reach: Reach| -> Need {
        match &out {
            Need::Part(r) => spread(r.clone(), reach),
            n => n.clone(),
        }
    };
    let masked = |m: Masking| -> Vec<(ValueId, Need)> {
        let map = match needed_floor::token_threshold(g, links, m.map) {
            Some(t) if out_shape.len() == 3 => Region::Tokens(t),
            _ => Region::Map(m.map),
        };
        let keep = match &out {
            Need::Part(r) => bounded(Region::join(vec![map, r.clone()], true)),
            _ => Need::Part(map),
        };
        let mut v = vec![(m.value, keep), (m.map, Need::whole(format!("{} uses it as a mask", who())))];
        if m.source != m.map {
            v.push((m.source, Need::whole(format!("{} uses it as a mask", who()))));
        }
        v
    };
    let konst = |k: usize| node.inputs.get(k).copied().flatten().is_none_or(|v| g.values[v].constant.is_some());
    let input0 = node.inputs.first().copied().flatten().filter(|&x| g.values[x].constant.is_none());
    if node.outputs.first().is_some_and(|&o| scalars[o]) {
        return token_scalar(g, links, scalars, node, &inputs, out, &whole_all);
    }
    match &node.op {
        Op::Reshape { .. } | Op::Identity if needed_floor::keeps_tokens(g, node) => input0.map(|x| (x, out.clone())).into_iter().collect(),
        Op::Binary(b) => {
            if let Some(m) = masking(g, links, node) {
                return masked(m);
            }
            let computed_divisor = matches!(b, BinaryKind::Div | BinaryKind::Pow | BinaryKind::Mod { .. }) && !konst(1);
            local(computed_divisor.then(|| format!("{} by a computed value could turn a skipped position into inf or NaN", who())))
        }
        Op::Where => match masking(g, links, node) {
            Some(m) => masked(m),
            None => local(None),
        },
        Op::Unary(UnaryKind::Sqrt | UnaryKind::Log | UnaryKind::Reciprocal) => {
            whole_all(format!("{} of a skipped position could be inf or NaN", who()))
        }
        Op::Unary(_) | Op::Identity | Op::Cast { .. } => local(None),
        Op::Clip => local((!(konst(1) && konst(2))).then(|| format!("{} has computed bounds", who()))),
        Op::BatchNormalization { .. } if kind == MaskKind::Spatial => {
            local((!(1..5).all(konst)).then(|| format!("{} has computed statistics", who())))
        }
        Op::Conv(c) => {
            if !konst(1) || !konst(2) {
                return whole_all(format!("{} has computed weights", who()));
            }
            let Some(reach) = window_reach(g, node, &c.window, false) else {
                return whole_all(format!("{} is not a 2-D window over positions", who()));
            };
            let mut v: Vec<_> = input0.map(|x| (x, through(reach))).into_iter().collect();
            if let Some(r) = node.inputs.get(3).copied().flatten().filter(|&r| g.values[r].constant.is_none()) {
                v.push((r, same(r)));
            }
            v
        }
        Op::ConvTranspose(c) => {
            if !konst(1) || !konst(2) {
                return whole_all(format!("{} has computed weights", who()));
            }
            match window_reach(g, node, &c.window, true) {
                Some(reach) => input0.map(|x| (x, through(reach))).into_iter().collect(),
                None => whole_all(format!("{} is not a 2-D window over positions", who())),
            }
        }
        Op::MaxPool(p) | Op::AveragePool(p) if node.outputs.len() == 1 => match window_reach(g, node, &p.window, false) {
            Some(reach) => input0.map(|x| (x, through(reach))).into_iter().collect(),
            None => whole_all(format!("{} is not a 2-D window over positions", who())),
        },
        Op::Concat { axis } if channel_axis(*axis, out_shape.len(), kind) => local(None),
        Op::Split { axis, .. } if channel_axis(*axis, out_shape.len(), kind) => local(None),
        Op::Slice if (1..5).all(konst) && slices_channels_only(g, node, kind) => local(None),
        Op::MatMul | Op::Gemm { trans_a: false, .. } if kind == MaskKind::Token && konst(1) && konst(2) && rows_of(g, node) => local(None),
        Op::LayerNormalization { axis, .. } if kind == MaskKind::Token && last_axis(*axis, out_shape.len()) => {
            local((!(konst(1) && konst(2))).then(|| format!("{} has computed scale or bias", who())))
        }
        Op::Softmax { axis, legacy: false } if channel_axis(*axis, out_shape.len(), kind) => local(None),
        _ => whole_all(format!("{} reads it at every position", who())),
    }
}

/// Token scalars `[N, T]` (one value per token: A-ViT's halting scores and masks): picked from a
/// channel of `[N, T, C]` token rows, or computed elementwise from such values.
fn token_scalars(g: &Graph) -> Vec<bool> {
    let mut s = vec![false; g.values.len()];
    for node in &g.nodes {
        let &[y] = node.outputs.as_slice() else { continue };
        let ys = &g.values[y].shape;
        if ys.len() != 2 {
            continue;
        }
        let computed: Vec<ValueId> = node.inputs.iter().flatten().copied().filter(|&v| g.values[v].constant.is_none()).collect();
        s[y] = match &node.op {
            Op::Gather { axis } => match node.inputs.as_slice() {
                &[Some(x), Some(i)] => {
                    let xs = &g.values[x].shape;
                    let index = g.values[i].constant.as_ref().is_some_and(|t| t.rank() == 0);
                    xs.len() == 3 && (*axis == 2 || *axis == -1) && index && xs[..2] == ys[..]
                }
                _ => false,
            },
            Op::Binary(_) | Op::Unary(_) | Op::Cast { .. } | Op::Identity | Op::Where | Op::Clip => {
                !computed.is_empty() && computed.iter().all(|&v| s[v] && g.values[v].shape == *ys)
            }
            _ => false,
        };
    }
    s
}

/// What an op with a token-scalar result needs of its inputs: elementwise ops pass the need on,
/// a product with a binary token map keeps its other operand only where the map is 1 (of two
/// maps, the later is kept where the earlier is 1), a threshold of a cumulative score needs it
/// only on its side of the threshold (graph/needed_floor.rs), and a channel pick needs its rows.
fn token_scalar(
    g: &Graph,
    links: &Links,
    scalars: &[bool],
    node: &Node,
    inputs: &[ValueId],
    out: Need,
    whole_all: &dyn Fn(String) -> Vec<(ValueId, Need)>,
) -> Vec<(ValueId, Need)> {
    let who = || format!("{} '{}'", node.op.name(), node.name);
    let y = node.outputs[0];
    let shape = &g.values[y].shape;
    let is_map = |v: ValueId| scalars[v] && g.values[v].shape == *shape && mask_trace::trace_mask(g, links, v).is_ok();
    let made = |v: ValueId| links.prod.get(v).copied().flatten();
    match (&node.op, node.inputs.as_slice()) {
        (Op::Binary(BinaryKind::Mul), &[Some(a), Some(b)]) => {
            for (x, m) in [(a, b), (b, a)] {
                if g.values[x].constant.is_some() || g.values[x].shape != *shape || !is_map(m) {
                    continue;
                }
                if is_map(x) && made(m) >= made(x) {
                    continue;
                }
                let map = Region::Tokens(needed_floor::token_threshold(g, links, m).unwrap_or(m));
                let keep = match &out {
                    Need::Part(r) => bounded(Region::join(vec![map, r.clone()], true)),
                    _ => Need::Part(map),
                };
                return vec![(x, keep), (m, Need::whole(format!("{} uses it as a mask", who())))];
            }
        }
        (Op::Binary(BinaryKind::Less | BinaryKind::Greater), _) if matches!(out, Need::Whole(_)) => {
            if let Some(n) = needed_floor::below(g, links, node) {
                return vec![n];
            }
        }
        (Op::Gather { .. }, &[Some(x), _]) => return vec![(x, out)],
        _ => {}
    }
    let elementwise = match &node.op {
        Op::Binary(b) => {
            let constant_divisor = node.inputs.get(1).copied().flatten().is_some_and(|v| g.values[v].constant.is_some());
            !matches!(b, BinaryKind::Div | BinaryKind::Pow | BinaryKind::Mod { .. }) || constant_divisor
        }
        Op::Unary(u) => !matches!(u, UnaryKind::Sqrt | UnaryKind::Log | UnaryKind::Reciprocal),
        Op::Cast { .. } | Op::Identity | Op::Where => true,
        Op::Clip => inputs.len() == 1,
        _ => false,
    };
    if !elementwise {
        return whole_all(format!("{} reads it at every token", who()));
    }
    inputs
        .iter()
        .map(|&x| match &out {
            Need::Part(_) if g.values[x].shape != *shape => {
                (x, Need::whole(format!("{} broadcasts '{}' over tokens", who(), g.values[x].name)))
            }
            n => (x, n.clone()),
        })
        .collect()
}

fn spread(r: Region, reach: Reach) -> Need {
    if reach.is_pointwise() {
        Need::Part(r)
    } else {
        bounded(Region::Spread(Box::new(r), reach))
    }
}

/// `op` with a constant 2-D right-hand side, so output rows are input rows.
fn rows_of(g: &Graph, node: &Node) -> bool {
    let w = node.inputs.get(1).copied().flatten().and_then(|v| g.values[v].constant.as_ref());
    let x = node.inputs.first().copied().flatten().map(|v| g.values[v].shape.len());
    w.is_some_and(|w| w.rank() == 2) && matches!(x, Some(2) | Some(3))
}

fn last_axis(axis: i64, rank: usize) -> bool {
    axis == -1 || axis == rank as i64 - 1
}

fn channel_axis(axis: i64, rank: usize, kind: MaskKind) -> bool {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    match kind {
        MaskKind::Spatial => a == 1,
        MaskKind::Token => a == rank as i64 - 1,
    }
}

/// A Slice whose axes (given or implied) are the channel axis alone.
fn slices_channels_only(g: &Graph, node: &Node, kind: MaskKind) -> bool {
    let rank = node.inputs.first().copied().flatten().map_or(0, |v| g.values[v].shape.len());
    let ints = |k: usize| -> Option<Vec<i64>> {
        let v = node.inputs.get(k).copied().flatten()?;
        match g.values[v].constant.as_ref()?.data() {
            TensorData::I64(x) => Some(x.clone()),
            TensorData::I32(x) => Some(x.iter().map(|&a| a as i64).collect()),
            _ => None,
        }
    };
    match ints(3) {
        Some(axes) => axes.iter().all(|&a| channel_axis(a, rank, kind)),
        // Without axes, the starts cover the leading axes: only a slice of axis 0 alone, which is
        // never the channel axis of a spatial value.
        None => false,
    }
}

/// Whether operand `x` has the positions of `out` itself (and its images), not a broadcast.
fn same_positions(x: &[usize], out: &[usize], kind: MaskKind) -> bool {
    let r = out.len();
    if x.len() > r {
        return false;
    }
    let pad = r - x.len();
    let dim = |a: usize| if a < pad { 1 } else { x[a - pad] };
    let (batch, pos): (Option<usize>, Vec<usize>) = match (kind, r) {
        (MaskKind::Spatial, 4) => (Some(0), vec![2, 3]),
        (MaskKind::Token, 3) => (Some(0), vec![1]),
        (MaskKind::Token, 2) => (None, vec![0]),
        _ => return false,
    };
    pos.iter().all(|&a| dim(a) == out[a]) && batch.is_none_or(|b| dim(b) == out[b])
}

/// The 2-D window of a Conv, ConvTranspose or pool over `[N, C, H, W]` values.
fn window_reach(g: &Graph, node: &Node, w: &super::op::Window, transposed: bool) -> Option<Reach> {
    let x = node.inputs.first().copied().flatten()?;
    let y = *node.outputs.first()?;
    let (xs, ys) = (&g.values[x].shape, &g.values[y].shape);
    if xs.len() != 4 || ys.len() != 4 || w.kernel_shape.len() != 2 || w.pads.len() != 4 {
        return None;
    }
    let two = |v: &[usize]| -> Option<[usize; 2]> { (v.len() == 2 && v.iter().all(|&a| a > 0)).then(|| [v[0], v[1]]) };
    Some(Reach {
        transposed,
        kernel: two(&w.kernel_shape)?,
        stride: two(&w.strides)?,
        dilation: two(&w.dilations)?,
        pad_begin: [w.pads[0], w.pads[1]],
        pad_end: [w.pads[2], w.pads[3]],
        input: [xs[2], xs[3]],
        output: [ys[2], ys[3]],
    })
}

/// A multiplication (or `Where(map, x, 0)`) that keeps `value` only where `map` is 1.
pub(crate) struct Masking {
    pub value: ValueId,
    /// The binary map, one value per position (`source` itself or what it was expanded from).
    pub map: ValueId,
    /// The operand as the graph has it.
    pub source: ValueId,
}

/// Recognises `Mul(x, M)` / `Mul(M, x)` and `Where(M, x, 0)` with `M` provably binary and one
/// value per position of the result (broadcast over channels, or expanded from such a map).
pub(crate) fn masking(g: &Graph, links: &Links, node: &Node) -> Option<Masking> {
    let out = *node.outputs.first()?;
    let out_shape = &g.values[out].shape;
    let kind = layout(out_shape)?;
    let as_map = |m: ValueId| -> Option<ValueId> {
        let map = per_position(g, links, m, out_shape, kind)?;
        mask_trace::trace_mask(g, links, map).ok()?;
        Some(map)
    };
    match (&node.op, node.inputs.as_slice()) {
        (Op::Binary(BinaryKind::Mul), &[Some(a), Some(b)]) => {
            for (x, m) in [(a, b), (b, a)] {
                // A product of two maps is mask algebra, not a value kept where a map is 1.
                if g.values[x].constant.is_some() || g.values[x].shape != *out_shape || mask_trace::trace_mask(g, links, x).is_ok() {
                    continue;
                }
                if let Some(map) = as_map(m) {
                    return Some(Masking { value: x, map, source: m });
                }
            }
            None
        }
        (Op::Where, &[Some(c), Some(x), Some(z)]) => {
            let zero = g.values[z].constant.as_ref().is_some_and(|t| match t.data() {
                TensorData::F32(v) => v.iter().all(|&a| a == 0.0),
                _ => false,
            });
            if !zero || g.values[x].constant.is_some() || g.values[x].shape != *out_shape {
                return None;
            }
            as_map(c).map(|map| Masking { value: x, map, source: c })
        }
        _ => None,
    }
}

/// `m` itself when it is one value per position of `out`, or the map an Expand (over channels)
/// made it from.
fn per_position(g: &Graph, links: &Links, m: ValueId, out: &[usize], kind: MaskKind) -> Option<ValueId> {
    if map_fits(kind, out, &g.values[m].shape) {
        return Some(m);
    }
    let p = links.prod.get(m).copied().flatten()?;
    let node = &g.nodes[p];
    match (&node.op, node.inputs.first().copied().flatten()) {
        (Op::Expand, Some(src)) if map_fits(kind, out, &g.values[src].shape) => Some(src),
        _ => None,
    }
}
