//! Delta mode's graph: a change map of the frame input, given per frame as an extra model
//! input, carried forward through the graph so that every conv recomputes only the outputs whose
//! receptive field saw a change and keeps its last activations elsewhere (`FillPolicy::Cached`).
//!
//! Each value gets one of three states: unchanged (it does not depend on the frame), changed on a
//! map (`[N, 1, H, W]`, 1 where it may differ from the last frame) or changed anywhere. A conv or
//! pool takes its input's map through a max-pool with its own window (an output changes when any
//! position it reads changed); elementwise ops and BatchNormalization keep the map; binary ops,
//! a conv's fused addend and channel concatenations join maps by their maximum. Anything else
//! (global pooling, reshapes, matrix products, resampling) ends the map: its result and
//! everything computed from it count as changed everywhere and run densely.
//!
//! With `Spread::Stride` the map only follows strides and resampling, not windows: a conv
//! recomputes the outputs at changed positions and keeps its cached outputs next to them, as
//! SIGE does with an edit's mask (one map per resolution), and Instance- and
//! GroupNormalization normalise with the statistics of the last whole frame (SIGE reuses the
//! original's), so the map passes them. Outputs then differ from dense near the border of a
//! change and wherever statistics moved; with `Spread::Window` they equal dense.

use super::op::{AutoPad, BinaryKind, CoordTransform, KeepAspect, NearestMode, Op, Pool, Resize, ResizeMode, Window};
use super::sparse::{FillPolicy, MaskKind, MaskSource, SparseSpec};
use super::{order, Graph, Node, Value, ValueId};

use crate::tensor::DType;

/// What `add_change_map` did.
#[derive(Clone, Debug, PartialEq)]
pub struct DeltaPlan {
    /// The frame input the change map describes.
    pub frame_input: String,
    /// The model input the change map is fed as, `[N, 1, H, W]` FLOAT of 0 and 1.
    pub map_input: String,
    /// Convs that recompute only where their map says (the rest run densely).
    pub convs: Vec<String>,
    /// Elementwise ops (activations, BatchNormalization, arithmetic) that recompute only where
    /// their map says, on backends that run them so (the CPU); elsewhere they run whole.
    pub elementwise: Vec<String>,
    /// Norms over the plane whose statistics come from the last whole frame (`Spread::Stride`).
    pub held_norms: Vec<String>,
}

/// Whether `op` computes each output position from the same position of its inputs only, so
/// that a backend can compute it on the changed positions alone and keep the rest: the
/// elementwise ops delta mode carries a map through.
pub fn region_elementwise(op: &Op) -> bool {
    matches!(op, Op::Unary(_) | Op::Clip | Op::BatchNormalization { .. } | Op::Identity | Op::Binary(_))
}

/// How far a change reaches through windowed ops (convs, pools, resampling).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Spread {
    /// Every output whose window read a changed position is recomputed: results equal dense.
    #[default]
    Window,
    /// Only the outputs at changed positions (the map brought to each op's resolution) are
    /// recomputed; outputs beside a change keep their cached values, and norms over the plane
    /// keep the last whole frame's statistics (SIGE's approximation).
    Stride,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Change {
    None,
    Map(ValueId),
    All,
}

/// Rewrites `g` for delta mode on its input `frame_input` (`[N, C, H, W]`): adds the change
/// map input and its max-pools, and marks every conv the map reaches as sparse with cached fill.
/// Nodes that already run sparse keep their own masks. Fails, leaving `g` unchanged, when the
/// input is not a 4-D graph input.
pub fn add_change_map(g: &mut Graph, frame_input: &str, spread: Spread) -> Result<DeltaPlan, String> {
    let x = g
        .inputs
        .iter()
        .copied()
        .find(|&i| g.values[i].name == frame_input)
        .ok_or_else(|| format!("the model has no input '{frame_input}'; its inputs are: {}", g.input_names().join(", ")))?;
    let shape = g.values[x].shape.clone();
    if shape.len() != 4 {
        return Err(format!("delta mode needs a frame input [N, C, H, W]; '{frame_input}' is {shape:?}"));
    }
    let mut out = g.clone();
    let map_name = unique(&out, &format!("{frame_input}:changed"));
    out.values.push(Value { name: map_name.clone(), dtype: DType::F32, shape: vec![shape[0], 1, shape[2], shape[3]], constant: None });
    let map = out.values.len() - 1;
    out.inputs.push(map);
    let mut change = vec![Change::None; out.values.len()];
    for &i in &g.inputs {
        change[i] = if i == x { Change::Map(map) } else { Change::All };
    }
    let mut b = Builder { g: &mut out, source: map_name.clone(), spread, convs: Vec::new(), elementwise: Vec::new(), held: Vec::new(), pools: Vec::new(), count: 0 };
    let nodes = b.g.nodes.len();
    for ni in 0..nodes {
        let ins: Vec<Change> =
            b.g.nodes[ni].inputs.iter().map(|v| v.and_then(|v| change.get(v).copied()).unwrap_or(Change::None)).collect();
        let result = if ins.iter().all(|c| *c == Change::None) { Change::None } else { b.node(ni, &ins) };
        // Values the node's rewrite added (maps) are never read by the graph's own nodes.
        change.resize(b.g.values.len(), Change::None);
        for &o in &b.g.nodes[ni].outputs {
            change[o] = result;
        }
    }
    let (convs, elementwise, held_norms) = (std::mem::take(&mut b.convs), std::mem::take(&mut b.elementwise), std::mem::take(&mut b.held));
    order::restore_order(&mut out)?;
    *g = out;
    Ok(DeltaPlan { frame_input: frame_input.to_string(), map_input: map_name, convs, elementwise, held_norms })
}

/// The input delta mode watches when none is named: the model's only `[N, C, H, W]` FLOAT input.
pub fn default_frame_input(g: &Graph) -> Result<String, String> {
    let four: Vec<&str> =
        g.inputs.iter().map(|&i| &g.values[i]).filter(|v| v.shape.len() == 4 && v.dtype == DType::F32).map(|v| v.name.as_str()).collect();
    match four.as_slice() {
        [one] => Ok(one.to_string()),
        [] => Err("delta mode needs a frame input [N, C, H, W] of FLOAT; the model has none".into()),
        many => Err(format!("delta mode: the model has several frame inputs ({}); name one", many.join(", "))),
    }
}

/// A node computed where map `mask` (fed as the model input `source`) says, its last results
/// kept elsewhere.
fn cached_by_map(source: &str, mask: ValueId, fused_mul: bool) -> SparseSpec {
    SparseSpec {
        mask,
        kind: MaskKind::Spatial,
        source: MaskSource::ModelInput { name: source.to_string() },
        dilation: [0, 0],
        fill: FillPolicy::Cached,
        fused_mul,
    }
}

fn unique(g: &Graph, base: &str) -> String {
    let mut name = base.to_string();
    let mut k = 1;
    while g.values.iter().any(|v| v.name == name) {
        k += 1;
        name = format!("{base}{k}");
    }
    name
}

struct Builder<'a> {
    g: &'a mut Graph,
    source: String,
    spread: Spread,
    convs: Vec<String>,
    elementwise: Vec<String>,
    held: Vec<String>,
    /// Max-pools made so far: (map, pool, result).
    pools: Vec<(ValueId, Pool, ValueId)>,
    count: usize,
}

impl Builder<'_> {
    /// The change of node `ni`'s results from its inputs' changes (not all `None`).
    fn node(&mut self, ni: usize, ins: &[Change]) -> Change {
        if ins.contains(&Change::All) {
            return Change::All;
        }
        let n = &self.g.nodes[ni];
        let out = n.outputs.first().copied();
        let result = match (&n.op, out) {
            (Op::Conv(c), Some(o)) if n.outputs.len() == 1 => {
                let Change::Map(m) = ins[0] else { return Change::All };
                if ins.get(1..3).is_some_and(|w| w.iter().any(|c| *c != Change::None)) {
                    return Change::All;
                }
                let window = c.window.clone();
                let Some(mut r) = self.through_window(m, &window, false, o) else { return Change::All };
                if let Some(&Change::Map(a)) = ins.get(3) {
                    r = self.join(r, a);
                }
                let n = &mut self.g.nodes[ni];
                if n.sparse.is_none() && window.kernel_shape.len() == 2 {
                    n.sparse = Some(cached_by_map(&self.source, r, true));
                    self.convs.push(n.name.clone());
                }
                Some(r)
            }
            (Op::MaxPool(p) | Op::AveragePool(p), Some(o)) if n.outputs.len() == 1 => {
                let Change::Map(m) = ins[0] else { return Change::All };
                let (window, ceil) = (p.window.clone(), p.ceil_mode);
                self.through_window(m, &window, ceil, o)
            }
            (Op::Resize(_), Some(o)) if n.outputs.len() == 1 => match ins[0] {
                Change::Map(m) if ins[1..].iter().all(|c| *c == Change::None) => self.through_resize(m, o),
                _ => None,
            },
            (Op::InstanceNormalization { .. } | Op::GroupNormalization { .. }, Some(o)) if self.spread == Spread::Stride => {
                match ins[0] {
                    Change::Map(m) if ins[1..].iter().all(|c| *c == Change::None) => self.held_norm(ni, m, o),
                    _ => None,
                }
            }
            (Op::Unary(_) | Op::Clip | Op::BatchNormalization { .. } | Op::Identity, Some(o)) => match ins[0] {
                Change::Map(m) if ins[1..].iter().all(|c| *c == Change::None) => self.same_plane(m, o),
                _ => None,
            },
            (Op::Binary(k), Some(o)) if !matches!(k, BinaryKind::Min | BinaryKind::Max) || ins.len() == 2 => {
                let maps: Vec<ValueId> = ins.iter().filter_map(|c| if let Change::Map(m) = c { Some(*m) } else { None }).collect();
                let joined = maps.iter().copied().reduce(|a, b| self.join(a, b));
                joined.and_then(|m| self.same_plane(m, o))
            }
            (Op::Concat { axis }, Some(o)) if self.g.values[o].shape.len() == 4 && (*axis == 1 || *axis == -3) => {
                let maps: Vec<ValueId> = ins.iter().filter_map(|c| if let Change::Map(m) = c { Some(*m) } else { None }).collect();
                let joined = maps.iter().copied().reduce(|a, b| self.join(a, b));
                joined.and_then(|m| self.same_plane(m, o))
            }
            _ => None,
        };
        if let Some(m) = result {
            self.mark_elementwise(ni, m);
        }
        result.map_or(Change::All, Change::Map)
    }

    /// Marks elementwise node `ni`, whose result changed on map `m`, to recompute only there
    /// with its last results kept elsewhere: single images whose plane inputs are the map's plane
    /// and whose other inputs are per-channel (BatchNormalization's parameters, `[C, 1, 1]`
    /// operands) or scalars, so that the op can be computed on the gathered positions alone.
    fn mark_elementwise(&mut self, ni: usize, m: ValueId) {
        let n = &self.g.nodes[ni];
        let [o] = n.outputs[..] else { return };
        let os = &self.g.values[o].shape;
        if !region_elementwise(&n.op) || n.sparse.is_some() || os.len() != 4 || os[0] != 1 || self.same_plane(m, o).is_none() {
            return;
        }
        let bn = matches!(n.op, Op::BatchNormalization { .. });
        let fits = n.inputs.iter().enumerate().all(|(i, v)| {
            let Some(v) = *v else { return true };
            let s = &self.g.values[v].shape;
            let plane = s.len() == 4 && s[0] == 1 && s[2..] == os[2..];
            // Right-aligned to four dimensions, a broadcast operand is 1 on the plane and the batch.
            let per_channel = s.len() <= 4 && s.iter().rev().take(2).all(|&d| d == 1) && (s.len() < 4 || s[0] == 1);
            plane || (if bn { i > 0 } else { per_channel })
        });
        if !fits {
            return;
        }
        let name = n.name.clone();
        self.g.nodes[ni].sparse = Some(cached_by_map(&self.source, m, false));
        self.elementwise.push(name);
    }

    /// Rewrites norm `ni` (Instance- or GroupNormalization of `x [1, C, H, W]`, changed on map
    /// `m`, into `o`) as `x * factor + offset` with the factor and offset of its statistics
    /// computed on whole frames only (`FillPolicy::Held`), as SIGE reuses the original's
    /// statistics in an edit: its result then changes where `x` does, on map `m`.
    fn held_norm(&mut self, ni: usize, m: ValueId, o: ValueId) -> Option<ValueId> {
        let n = &self.g.nodes[ni];
        let (num_groups, epsilon, per_channel_affine) = match n.op {
            Op::InstanceNormalization { epsilon } => (self.g.values[o].shape.get(1).copied()?, epsilon, true),
            Op::GroupNormalization { num_groups, epsilon, per_channel_affine } => (num_groups, epsilon, per_channel_affine),
            _ => return None,
        };
        let (Some(Some(x)), Some(&scale), Some(&bias)) = (n.inputs.first().copied(), n.inputs.get(1), n.inputs.get(2)) else {
            return None;
        };
        let xs = self.g.values[x].shape.clone();
        if xs.len() != 4 || xs[0] != 1 || self.same_plane(m, o).is_none() {
            return None;
        }
        let name = n.name.clone();
        let c = xs[1];
        let op = Op::NormScaleShift { num_groups, epsilon, per_channel_affine };
        let stats = self.push(op, vec![Some(x), scale, bias], vec![2, c, 1, 1]);
        let held = self.g.nodes.len() - 1;
        self.g.nodes[held].sparse = Some(SparseSpec { fill: FillPolicy::Held, ..cached_by_map(&self.source, m, false) });
        let [factor, offset] = ["factor", "offset"].map(|part| {
            self.g.values.push(Value { name: unique(self.g, &format!("{name}/{part}")), dtype: DType::F32, shape: vec![1, c, 1, 1], constant: None });
            self.g.values.len() - 1
        });
        self.g.nodes.push(Node {
            name: unique(self.g, &format!("{name}/split")),
            op: Op::Split { axis: 0, split: None, num_outputs: Some(2) },
            inputs: vec![Some(stats)],
            outputs: vec![factor, offset],
            sparse: None,
        });
        let scaled = self.push(Op::Binary(BinaryKind::Mul), vec![Some(x), Some(factor)], xs);
        let mul = self.g.nodes.len() - 1;
        let n = &mut self.g.nodes[ni];
        (n.op, n.inputs) = (Op::Binary(BinaryKind::Add), vec![Some(scaled), Some(offset)]);
        self.mark_elementwise(mul, m);
        self.held.push(name);
        Some(m)
    }

    /// `m` when it is the change map of an `[N, C, H, W]` value `o` of the same plane.
    fn same_plane(&self, m: ValueId, o: ValueId) -> Option<ValueId> {
        let (ms, os) = (&self.g.values[m].shape, &self.g.values[o].shape);
        (os.len() == 4 && ms[0] == os[0] && ms[2..] == os[2..]).then_some(m)
    }

    /// The change map of a windowed op's output `o` whose input changed on `m`: a max-pool with
    /// the op's window (a 1x1 stride-1 window keeps `m`).
    fn through_window(&mut self, m: ValueId, w: &Window, ceil_mode: bool, o: ValueId) -> Option<ValueId> {
        let os = self.g.values[o].shape.clone();
        if os.len() != 4 || w.kernel_shape.len() != 2 || w.auto_pad != AutoPad::NotSet {
            return None;
        }
        let ones = |v: &[usize]| v.is_empty() || v.iter().all(|&s| s == 1);
        if w.kernel_shape == [1, 1] && ones(&w.strides) && w.pads.iter().all(|&p| p == 0) {
            return self.same_plane(m, o);
        }
        let shape = vec![self.g.values[m].shape[0], 1, os[2], os[3]];
        // An op whose output plane is not the input's by a stride (a valid-padded window) reads
        // its window in either spread.
        if let Some(v) = (self.spread == Spread::Stride).then(|| self.by_stride(m, shape.clone())).flatten() {
            return Some(v);
        }
        self.through_pool(m, w.clone(), ceil_mode, shape)
    }

    /// `m` brought to the plane `shape` by its stride alone (`Spread::Stride`): output `o` of a
    /// stride-`s` op covers input positions `[o s, o s + s)`, a max-pool of `s` at stride `s`
    /// (padded at the end where the op's output reaches past the input).
    fn by_stride(&mut self, m: ValueId, shape: Vec<usize>) -> Option<ValueId> {
        let ms = self.g.values[m].shape.clone();
        if ms[2..] == shape[2..] {
            return Some(m);
        }
        let stride = |i: usize, o: usize| {
            if o == 0 || o > i {
                return None;
            }
            let s = i.div_ceil(o);
            (i.div_ceil(s) == o).then_some(s)
        };
        let (sy, sx) = (stride(ms[2], shape[2])?, stride(ms[3], shape[3])?);
        let pad = |i: usize, o: usize, s: usize| (o * s).saturating_sub(i);
        let w = Window {
            kernel_shape: vec![sy, sx],
            strides: vec![sy, sx],
            pads: vec![0, 0, pad(ms[2], shape[2], sy), pad(ms[3], shape[3], sx)],
            dilations: vec![1, 1],
            auto_pad: AutoPad::NotSet,
        };
        self.through_pool(m, w, false, shape)
    }

    /// The change map of a Resize's output `o` by whole factors: upsampling reads each output
    /// from the input position it maps to and its neighbour (nearest or linear, any coordinate
    /// mode), so the map widened by one and repeated; downsampling by `f` reads within
    /// `[o f - 1, o f + f]`, a max-pool of `f + 2` at stride `f`. Other ratios end the map.
    fn through_resize(&mut self, m: ValueId, o: ValueId) -> Option<ValueId> {
        let (ms, os) = (self.g.values[m].shape.clone(), self.g.values[o].shape.clone());
        if os.len() != 4 || os[0] != ms[0] {
            return None;
        }
        let (h, w, oh, ow) = (ms[2], ms[3], os[2], os[3]);
        let whole = |a: usize, b: usize| a > 0 && b > 0 && a.is_multiple_of(b);
        let pool = |kernel: Vec<usize>, strides: Vec<usize>| Window {
            kernel_shape: kernel,
            strides,
            pads: vec![1, 1, 1, 1],
            dilations: vec![1, 1],
            auto_pad: AutoPad::NotSet,
        };
        if (oh, ow) == (h, w) {
            return Some(m);
        }
        if oh >= h && ow >= w && whole(oh, h) && whole(ow, w) {
            let wide = match self.spread {
                Spread::Window => self.through_pool(m, pool(vec![3, 3], vec![1, 1]), false, vec![ms[0], 1, h, w])?,
                Spread::Stride => m,
            };
            let sizes =
                crate::tensor::Tensor::new(vec![4], crate::tensor::TensorData::I64(vec![ms[0] as i64, 1, oh as i64, ow as i64])).ok()?;
            let sizes = self.constant(sizes);
            let mut op = Op::Resize(Resize {
                mode: ResizeMode::Nearest,
                coord: CoordTransform::Asymmetric,
                nearest: NearestMode::Floor,
                exclude_outside: false,
                extrapolation_value: 0.0,
                antialias: false,
                axes: None,
                keep_aspect: KeepAspect::Stretch,
            });
            let shape = vec![ms[0], 1, oh, ow];
            let specs = {
                let (wv, sv) = (&self.g.values[wide], &self.g.values[sizes]);
                let ins = [
                    Some(super::shape::In { dtype: DType::F32, shape: &wv.shape, value: None }),
                    None,
                    None,
                    Some(super::shape::In { dtype: DType::I64, shape: &sv.shape, value: sv.constant.as_deref() }),
                ];
                super::shape::infer(&mut op, &ins, 1).ok()?
            };
            if specs.first().map(|s| &s.shape) != Some(&shape) {
                return None;
            }
            // Resize's inputs: X, roi, scales, sizes (the optional ones left out).
            return Some(self.push(op, vec![Some(wide), None, None, Some(sizes)], shape));
        }
        if oh <= h && ow <= w && whole(h, oh) && whole(w, ow) {
            let (fy, fx) = (h / oh, w / ow);
            if self.spread == Spread::Stride {
                return self.by_stride(m, vec![ms[0], 1, oh, ow]);
            }
            return self.through_pool(m, pool(vec![fy + 2, fx + 2], vec![fy, fx]), false, vec![ms[0], 1, oh, ow]);
        }
        None
    }

    /// `m` through a max-pool with window `w`, when it gives `shape`; an identical pool of the
    /// same map (two convs reading one value with one window) is reused.
    fn through_pool(&mut self, m: ValueId, w: Window, ceil_mode: bool, shape: Vec<usize>) -> Option<ValueId> {
        let pool = Pool { window: w, ceil_mode, count_include_pad: false };
        if let Some(&(_, _, v)) = self.pools.iter().find(|(pm, pp, _)| *pm == m && *pp == pool) {
            return Some(v);
        }
        let mut op = Op::MaxPool(pool.clone());
        let input = super::shape::In { dtype: DType::F32, shape: &self.g.values[m].shape, value: None };
        let specs = super::shape::infer(&mut op, &[Some(input)], 1).ok()?;
        if specs.first().map(|s| &s.shape) != Some(&shape) {
            return None;
        }
        let v = self.push(op, vec![Some(m)], shape);
        self.pools.push((m, pool, v));
        Some(v)
    }

    fn constant(&mut self, t: crate::tensor::Tensor) -> ValueId {
        self.count += 1;
        let name = unique(self.g, &format!("delta/const_{}", self.count));
        self.g.values.push(Value { name, dtype: t.dtype(), shape: t.shape().to_vec(), constant: Some(std::sync::Arc::new(t)) });
        self.g.values.len() - 1
    }

    /// The elementwise maximum of two maps of one plane (a union of changes).
    fn join(&mut self, a: ValueId, b: ValueId) -> ValueId {
        if a == b {
            return a;
        }
        let shape = self.g.values[a].shape.clone();
        self.push(Op::Binary(BinaryKind::Max), vec![Some(a), Some(b)], shape)
    }

    fn push(&mut self, op: Op, inputs: Vec<Option<ValueId>>, shape: Vec<usize>) -> ValueId {
        self.count += 1;
        let name = unique(self.g, &format!("delta/{}_{}", op.name(), self.count));
        self.g.values.push(Value { name: name.clone(), dtype: DType::F32, shape, constant: None });
        let out = self.g.values.len() - 1;
        self.g.nodes.push(Node { name, op, inputs, outputs: vec![out], sparse: None });
        out
    }
}
