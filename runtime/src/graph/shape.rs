//! Static shape and type inference per op. Shape-deciding inputs must be constant by the time
//! a node is reached; folding runs in the same pass, so shape arithmetic is constant here.

use super::op::*;
use super::window;
use crate::backend::TensorSpec;
use crate::error::{Error, Result};
use crate::tensor::{numel, DType, Tensor};

/// What inference knows about one input.
#[derive(Clone, Copy)]
pub struct In<'a> {
    pub dtype: DType,
    pub shape: &'a [usize],
    pub value: Option<&'a Tensor>,
}

fn err(msg: impl Into<String>) -> Error {
    Error::Other(msg.into())
}

pub fn req<'a>(ins: &[Option<In<'a>>], i: usize) -> Result<In<'a>> {
    ins.get(i).copied().flatten().ok_or_else(|| err(format!("required input {i} is missing")))
}

/// A constant integer vector input (shapes, axes, pads...).
pub fn const_ints(ins: &[Option<In>], i: usize, what: &str) -> Result<Option<Vec<i64>>> {
    match ins.get(i).copied().flatten() {
        None => Ok(None),
        Some(x) => match x.value {
            Some(t) => t.to_i64_vec().map(Some).map_err(|e| err(format!("{what}: {e}"))),
            None => Err(err(format!("{what} (input {i}) is computed at run time; only constant {what} is supported (static shapes)"))),
        },
    }
}

/// Normalises an axis: negative counts from `rank`; valid up to `rank` (inclusive) or `rank - 1`.
pub fn axis(a: i64, rank: usize, inclusive: bool) -> Result<usize> {
    let v = if a < 0 { a + rank as i64 } else { a };
    let hi = rank as i64 + inclusive as i64;
    if v < 0 || v >= hi {
        return Err(err(format!("axis {a} is out of range for rank {rank}")));
    }
    Ok(v as usize)
}

/// Numpy multidirectional broadcasting.
pub fn broadcast(shapes: &[&[usize]]) -> Result<Vec<usize>> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; rank];
    for s in shapes {
        for (i, &d) in s.iter().enumerate() {
            let o = &mut out[rank - s.len() + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return Err(err(format!("shapes {:?} do not broadcast", shapes)));
            }
        }
    }
    Ok(out)
}

fn spec(dtype: DType, shape: Vec<usize>) -> TensorSpec {
    TensorSpec { dtype, shape }
}

fn same_dtype(ins: &[Option<In>], idx: &[usize]) -> Result<DType> {
    let d = req(ins, idx[0])?.dtype;
    for &i in &idx[1..] {
        if let Some(x) = ins.get(i).copied().flatten() {
            if x.dtype != d {
                return Err(err(format!("input {i} is {} but input {} is {d}", x.dtype, idx[0])));
            }
        }
    }
    Ok(d)
}

fn float_only(d: DType) -> Result<()> {
    if d != DType::F32 {
        return Err(err(format!("element type {d} is not supported (FLOAT only)")));
    }
    Ok(())
}

/// Infers output specs; may resolve defaults inside `op` (auto_pad, perm...).
pub fn infer(op: &mut Op, ins: &[Option<In>], n_out: usize) -> Result<Vec<TensorSpec>> {
    let x = || req(ins, 0);
    let one = |d: DType, s: Vec<usize>| Ok(vec![spec(d, s)]);
    match op {
        Op::Conv(p) => window::conv(p, ins),
        Op::ConvTranspose(p) => window::conv_transpose(p, ins),
        Op::MaxPool(p) | Op::AveragePool(p) => window::pool(p, ins),
        Op::Resize(p) => window::resize(p, ins),
        Op::Pad { .. } => window::pad(ins),
        Op::GlobalAveragePool => {
            let x = x()?;
            float_only(x.dtype)?;
            if x.shape.len() < 3 {
                return Err(err(format!("input must be N x C x spatial, is {:?}", x.shape)));
            }
            let mut s = x.shape.to_vec();
            s[2..].iter_mut().for_each(|d| *d = 1);
            one(x.dtype, s)
        }
        Op::BatchNormalization { .. } => {
            let x = x()?;
            float_only(x.dtype)?;
            let c = *x.shape.get(1).ok_or_else(|| err("input needs a channel axis"))?;
            for i in 1..5 {
                if req(ins, i)?.shape != [c] {
                    return Err(err(format!("input {i} must have shape [{c}], has {:?}", req(ins, i)?.shape)));
                }
            }
            one(x.dtype, x.shape.to_vec())
        }
        Op::InstanceNormalization { .. } | Op::GroupNormalization { .. } | Op::NormScaleShift { .. } => {
            let x = x()?;
            float_only(x.dtype)?;
            if x.shape.len() < 3 {
                return Err(err(format!("input must be N x C x spatial, is {:?}", x.shape)));
            }
            let c = x.shape[1];
            let want = match op {
                Op::GroupNormalization { num_groups, per_channel_affine, .. }
                | Op::NormScaleShift { num_groups, per_channel_affine, .. } => {
                    if *num_groups == 0 || c % *num_groups != 0 {
                        return Err(err(format!("{c} channels do not split into {num_groups} groups")));
                    }
                    if *per_channel_affine {
                        c
                    } else {
                        *num_groups
                    }
                }
                _ => c,
            };
            for i in 1..3 {
                if req(ins, i)?.shape != [want] {
                    return Err(err(format!("input {i} must have shape [{want}], has {:?}", req(ins, i)?.shape)));
                }
            }
            if matches!(op, Op::NormScaleShift { .. }) {
                let mut s = vec![1; x.shape.len()];
                (s[0], s[1]) = (2 * x.shape[0], c);
                return one(x.dtype, s);
            }
            one(x.dtype, x.shape.to_vec())
        }
        Op::LayerNormalization { axis: a, .. } => {
            let x = x()?;
            float_only(x.dtype)?;
            let ax = axis(*a, x.shape.len(), false)?;
            for i in 1..3 {
                if let Some(s) = ins.get(i).copied().flatten() {
                    broadcast(&[&x.shape[ax..], s.shape])
                        .ok()
                        .filter(|b| b.as_slice() == &x.shape[ax..])
                        .ok_or_else(|| err(format!("input {i} of shape {:?} does not broadcast to {:?}", s.shape, &x.shape[ax..])))?;
                }
            }
            one(x.dtype, x.shape.to_vec())
        }
        Op::Softmax { axis: a, .. } => {
            let x = x()?;
            float_only(x.dtype)?;
            axis(*a, x.shape.len(), false)?;
            one(x.dtype, x.shape.to_vec())
        }
        Op::Unary(k) => {
            let x = x()?;
            match k {
                UnaryKind::Not if x.dtype != DType::Bool => Err(err("Not takes BOOL")),
                UnaryKind::Not => one(DType::Bool, x.shape.to_vec()),
                UnaryKind::Neg | UnaryKind::Abs | UnaryKind::Relu | UnaryKind::Sign if x.dtype != DType::Bool => {
                    one(x.dtype, x.shape.to_vec())
                }
                _ if x.dtype.is_float() => one(x.dtype, x.shape.to_vec()),
                _ => Err(err(format!("element type {} is not supported", x.dtype))),
            }
        }
        Op::Clip => {
            let d = same_dtype(ins, &[0, 1, 2])?;
            for i in 1..3 {
                if let Some(b) = ins.get(i).copied().flatten() {
                    if numel(b.shape) != 1 {
                        return Err(err(format!("bound (input {i}) must be a scalar, has shape {:?}", b.shape)));
                    }
                }
            }
            one(d, x()?.shape.to_vec())
        }
        Op::Binary(k) if k.is_variadic() => {
            let name = Op::Binary(*k).name();
            if ins.is_empty() {
                return Err(err(format!("{name} needs at least one input")));
            }
            let d = same_dtype(ins, &(0..ins.len()).collect::<Vec<_>>())?;
            if d == DType::Bool {
                return Err(err(format!("{name} does not take BOOL")));
            }
            let shapes = (0..ins.len()).map(|i| req(ins, i).map(|x| x.shape)).collect::<Result<Vec<_>>>()?;
            one(d, broadcast(&shapes)?)
        }
        Op::Binary(k) => {
            let (a, b) = (req(ins, 0)?, req(ins, 1)?);
            let s = broadcast(&[a.shape, b.shape])?;
            match k {
                BinaryKind::Pow => {
                    if a.dtype == DType::Bool || b.dtype == DType::Bool {
                        return Err(err("Pow does not take BOOL"));
                    }
                    one(a.dtype, s)
                }
                _ if k.is_logic() => {
                    if a.dtype != DType::Bool || b.dtype != DType::Bool {
                        return Err(err(format!("{} takes BOOL inputs", Op::Binary(*k).name())));
                    }
                    one(DType::Bool, s)
                }
                _ => {
                    let d = same_dtype(ins, &[0, 1])?;
                    match k {
                        _ if k.is_predicate() => one(DType::Bool, s),
                        _ if d == DType::Bool => Err(err("arithmetic on BOOL is not defined")),
                        BinaryKind::Mod { fmod: false } if d.is_float() => {
                            Err(err("Mod of floating-point values needs fmod=1 (ONNX defines fmod=0 for integers only)"))
                        }
                        _ => one(d, s),
                    }
                }
            }
        }
        Op::Where => {
            let c = req(ins, 0)?;
            if c.dtype != DType::Bool {
                return Err(err(format!("condition must be BOOL, is {}", c.dtype)));
            }
            let d = same_dtype(ins, &[1, 2])?;
            one(d, broadcast(&[c.shape, req(ins, 1)?.shape, req(ins, 2)?.shape])?)
        }
        Op::MatMul => {
            let d = same_dtype(ins, &[0, 1])?;
            float_only(d)?;
            one(d, matmul_shape(req(ins, 0)?.shape, req(ins, 1)?.shape)?)
        }
        Op::Gemm { trans_a, trans_b, .. } => {
            let d = same_dtype(ins, &[0, 1, 2])?;
            float_only(d)?;
            let (a, b) = (req(ins, 0)?.shape, req(ins, 1)?.shape);
            if a.len() != 2 || b.len() != 2 {
                return Err(err(format!("A and B must be 2-D, are {a:?} and {b:?}")));
            }
            let (m, k) = if *trans_a { (a[1], a[0]) } else { (a[0], a[1]) };
            let (k2, n) = if *trans_b { (b[1], b[0]) } else { (b[0], b[1]) };
            if k != k2 {
                return Err(err(format!("inner dimensions differ: A {a:?}, B {b:?}")));
            }
            if let Some(c) = ins.get(2).copied().flatten() {
                if broadcast(&[c.shape, &[m, n]]).ok().as_deref() != Some(&[m, n][..]) {
                    return Err(err(format!("C of shape {:?} does not broadcast to [{m}, {n}]", c.shape)));
                }
            }
            one(d, vec![m, n])
        }
        Op::Reduce(r) => {
            let x = x()?;
            let axes = match (&r.axes, const_ints(ins, 1, "axes")?) {
                (Some(a), _) => Some(a.clone()),
                (None, a) => a,
            };
            let rank = x.shape.len();
            let mut reduced = vec![false; rank];
            match axes {
                Some(a) if !a.is_empty() => {
                    for v in a {
                        reduced[axis(v, rank, false)?] = true;
                    }
                }
                _ if r.noop_with_empty_axes => {}
                _ => reduced.iter_mut().for_each(|x| *x = true),
            }
            let mut s = Vec::new();
            for (i, &d) in x.shape.iter().enumerate() {
                if !reduced[i] {
                    s.push(d);
                } else if r.keepdims {
                    s.push(1);
                } else if d == 0 && r.kind == ReduceKind::Max {
                    return Err(err("ReduceMax over an empty axis"));
                }
            }
            if x.dtype == DType::Bool && r.kind != ReduceKind::Max {
                return Err(err("ReduceMean and ReduceSum do not take BOOL"));
            }
            one(x.dtype, s)
        }
        Op::CumSum { .. } => {
            let x = x()?;
            let a = const_ints(ins, 1, "axis")?.ok_or_else(|| err("input 1 (axis) is required"))?;
            if a.len() != 1 {
                return Err(err("axis must be a scalar"));
            }
            axis(a[0], x.shape.len(), false)?;
            one(x.dtype, x.shape.to_vec())
        }
        Op::Cast { to } => one(*to, x()?.shape.to_vec()),
        Op::Identity => {
            let x = x()?;
            one(x.dtype, x.shape.to_vec())
        }
        Op::Constant { value } => one(value.dtype(), value.shape().to_vec()),
        Op::ConstantOfShape { value } => {
            let s = const_ints(ins, 0, "shape")?.ok_or_else(|| err("input 0 (shape) is required"))?;
            one(value.dtype(), dims(&s)?)
        }
        Op::Shape { start, end } => {
            let r = x()?.shape.len() as i64;
            let clamp = |v: i64| if v < 0 { (v + r).max(0) } else { v.min(r) };
            let (s, e) = (clamp(*start), clamp(end.unwrap_or(r)));
            one(DType::I64, vec![(e - s).max(0) as usize])
        }
        Op::Attention(a) => super::shape_attention::infer(a, ins),
        _ => super::shape_move::infer(op, ins, n_out),
    }
}

/// Non-negative dims from an int vector.
pub fn dims(v: &[i64]) -> Result<Vec<usize>> {
    v.iter().map(|&d| usize::try_from(d).map_err(|_| err(format!("negative dimension {d} in {v:?}")))).collect()
}

pub fn matmul_shape(a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    if a.is_empty() || b.is_empty() {
        return Err(err("MatMul inputs must have rank >= 1"));
    }
    let a2: Vec<usize> = if a.len() == 1 { vec![1, a[0]] } else { a.to_vec() };
    let b2: Vec<usize> = if b.len() == 1 { vec![b[0], 1] } else { b.to_vec() };
    let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let (k2, n) = (b2[b2.len() - 2], b2[b2.len() - 1]);
    if k != k2 {
        return Err(err(format!("MatMul inner dimensions differ: {a:?} x {b:?}")));
    }
    let mut s = broadcast(&[&a2[..a2.len() - 2], &b2[..b2.len() - 2]])?;
    if a.len() > 1 {
        s.push(m);
    }
    if b.len() > 1 {
        s.push(n);
    }
    Ok(s)
}
