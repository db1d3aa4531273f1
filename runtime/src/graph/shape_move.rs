//! Shape inference for data-movement ops (reshape family, transpose, concat, slice, split...).

use super::op::*;
use super::shape::{axis, broadcast, const_ints, dims, req, In};
use crate::backend::TensorSpec;
use crate::error::{Error, Result};
use crate::tensor::{numel, DType};

fn err(msg: impl Into<String>) -> Error {
    Error::Other(msg.into())
}

pub fn infer(op: &mut Op, ins: &[Option<In>], n_out: usize) -> Result<Vec<TensorSpec>> {
    let x = req(ins, 0)?;
    let one = |s: Vec<usize>| Ok(vec![TensorSpec { dtype: x.dtype, shape: s }]);
    match op {
        Op::Reshape { allowzero } => {
            let t = const_ints(ins, 1, "shape")?.ok_or_else(|| err("input 1 (shape) is required"))?;
            one(reshape(x.shape, &t, *allowzero)?)
        }
        Op::Flatten { axis: a } => {
            let ax = axis(*a, x.shape.len(), true)?;
            one(vec![numel(&x.shape[..ax]), numel(&x.shape[ax..])])
        }
        Op::Transpose { perm } => {
            let r = x.shape.len();
            if perm.is_empty() {
                *perm = (0..r).rev().collect();
            }
            let mut seen = vec![false; r];
            if perm.len() != r || perm.iter().any(|&p| p >= r || std::mem::replace(&mut seen[p], true)) {
                return Err(err(format!("perm {perm:?} is not a permutation of 0..{r}")));
            }
            one(perm.iter().map(|&p| x.shape[p]).collect())
        }
        Op::Concat { axis: a } => {
            let ax = axis(*a, x.shape.len(), false)?;
            let mut s = x.shape.to_vec();
            s[ax] = 0;
            for (i, t) in ins.iter().enumerate() {
                let t = t.ok_or_else(|| err(format!("input {i} is missing")))?;
                if t.dtype != x.dtype || t.shape.len() != s.len() {
                    return Err(err(format!("input {i} ({} {:?}) does not match input 0 ({} {:?})", t.dtype, t.shape, x.dtype, x.shape)));
                }
                for d in 0..s.len() {
                    if d != ax && t.shape[d] != x.shape[d] {
                        return Err(err(format!("input {i} shape {:?} differs from {:?} off the concat axis", t.shape, x.shape)));
                    }
                }
                s[ax] += t.shape[ax];
            }
            one(s)
        }
        Op::Slice => {
            let plan = slice_plan(x.shape, ins)?;
            one(plan.iter().map(|p| p.len).collect())
        }
        Op::Split { axis: a, split, num_outputs } => {
            let ax = axis(*a, x.shape.len(), false)?;
            let d = x.shape[ax];
            let sizes: Vec<usize> = match (const_ints(ins, 1, "split")?, split.clone()) {
                (Some(s), _) | (None, Some(s)) => dims(&s)?,
                (None, None) => {
                    let n = num_outputs.unwrap_or(n_out).max(1);
                    let chunk = d.div_ceil(n);
                    if num_outputs.is_none() && d % n != 0 {
                        return Err(err(format!("axis of size {d} does not split evenly into {n} outputs")));
                    }
                    (0..n).map(|i| chunk.min(d.saturating_sub(i * chunk))).collect()
                }
            };
            if sizes.len() != n_out || sizes.iter().sum::<usize>() != d {
                return Err(err(format!("split sizes {sizes:?} do not cover axis of size {d} with {n_out} outputs")));
            }
            Ok(sizes
                .into_iter()
                .map(|n| {
                    let mut s = x.shape.to_vec();
                    s[ax] = n;
                    TensorSpec { dtype: x.dtype, shape: s }
                })
                .collect())
        }
        Op::Gather { axis: a } => {
            let ax = axis(*a, x.shape.len(), false)?;
            let idx = req(ins, 1)?;
            if !matches!(idx.dtype, DType::I64 | DType::I32) {
                return Err(err(format!("indices must be INT32 or INT64, are {}", idx.dtype)));
            }
            let mut s = x.shape[..ax].to_vec();
            s.extend_from_slice(idx.shape);
            s.extend_from_slice(&x.shape[ax + 1..]);
            one(s)
        }
        Op::Squeeze { axes } => {
            let axes = match axes.clone() {
                Some(a) => Some(a),
                None => const_ints(ins, 1, "axes")?,
            };
            let r = x.shape.len();
            let drop: Vec<bool> = match axes {
                Some(a) => {
                    let mut d = vec![false; r];
                    for v in a {
                        let i = axis(v, r, false)?;
                        if x.shape[i] != 1 {
                            return Err(err(format!("cannot squeeze axis {v} of size {}", x.shape[i])));
                        }
                        d[i] = true;
                    }
                    d
                }
                None => x.shape.iter().map(|&d| d == 1).collect(),
            };
            one(x.shape.iter().zip(drop).filter(|(_, d)| !d).map(|(&s, _)| s).collect())
        }
        Op::Unsqueeze { axes } => {
            let axes = match axes.clone() {
                Some(a) => a,
                None => const_ints(ins, 1, "axes")?.ok_or_else(|| err("axes are required"))?,
            };
            let r = x.shape.len() + axes.len();
            let mut ins_at = vec![false; r];
            for v in axes {
                let i = axis(v, r, false)?;
                if std::mem::replace(&mut ins_at[i], true) {
                    return Err(err(format!("axis {v} repeated")));
                }
            }
            let mut src = x.shape.iter();
            one(ins_at.iter().map(|&u| if u { 1 } else { *src.next().unwrap() }).collect())
        }
        Op::Expand => {
            let t = const_ints(ins, 1, "shape")?.ok_or_else(|| err("input 1 (shape) is required"))?;
            one(broadcast(&[x.shape, &dims(&t)?])?)
        }
        other => Err(err(format!("no shape inference for {}", other.name()))),
    }
}

pub fn reshape(input: &[usize], target: &[i64], allowzero: bool) -> Result<Vec<usize>> {
    let mut out = Vec::with_capacity(target.len());
    let mut infer_at = None;
    for (i, &t) in target.iter().enumerate() {
        match t {
            0 if !allowzero => out.push(
                *input.get(i).ok_or_else(|| err(format!("shape {target:?}: 0 at {i} copies a dimension the input {input:?} lacks")))?,
            ),
            -1 if infer_at.is_none() => {
                infer_at = Some(i);
                out.push(1);
            }
            t if t >= 0 => out.push(t as usize),
            _ => return Err(err(format!("invalid reshape target {target:?}"))),
        }
    }
    let n = numel(input);
    if let Some(i) = infer_at {
        let rest = numel(&out);
        if rest == 0 || n % rest != 0 {
            return Err(err(format!("cannot reshape {input:?} ({n} elements) to {target:?}")));
        }
        out[i] = n / rest;
    }
    if numel(&out) != n {
        return Err(err(format!("cannot reshape {input:?} ({n} elements) to {target:?}")));
    }
    Ok(out)
}

/// Per axis: first index, step and output length of a Slice.
#[derive(Clone, Copy, Debug)]
pub struct SliceAxis {
    pub start: i64,
    pub step: i64,
    pub len: usize,
}

pub fn slice_plan(shape: &[usize], ins: &[Option<In>]) -> Result<Vec<SliceAxis>> {
    let starts = const_ints(ins, 1, "starts")?.ok_or_else(|| err("starts are required"))?;
    let ends = const_ints(ins, 2, "ends")?.ok_or_else(|| err("ends are required"))?;
    let r = shape.len();
    let axes = const_ints(ins, 3, "axes")?.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = const_ints(ins, 4, "steps")?.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(err("starts, ends, axes and steps must have the same length"));
    }
    slice_axes(shape, &starts, &ends, &axes, &steps).map(|p| {
        debug_assert_eq!(p.len(), r);
        p
    })
}

/// ONNX Slice clamping rules, for every axis (untouched axes take the whole range).
pub fn slice_axes(shape: &[usize], starts: &[i64], ends: &[i64], axes: &[i64], steps: &[i64]) -> Result<Vec<SliceAxis>> {
    let r = shape.len();
    let mut plan: Vec<SliceAxis> = shape.iter().map(|&d| SliceAxis { start: 0, step: 1, len: d }).collect();
    let mut seen = vec![false; r];
    for i in 0..starts.len() {
        let ax = axis(axes[i], r, false)?;
        if std::mem::replace(&mut seen[ax], true) {
            return Err(err(format!("axis {} repeated", axes[i])));
        }
        let d = shape[ax] as i64;
        let step = steps[i];
        if step == 0 {
            return Err(err("slice step must not be 0"));
        }
        let norm = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
        let (s, e) = (norm(starts[i]), norm(ends[i]));
        let (s, e) = if step > 0 { (s.clamp(0, d), e.clamp(0, d)) } else { (s.clamp(-1, d - 1), e.clamp(-1, d - 1)) };
        let len = if step > 0 { (e - s + step - 1).div_euclid(step) } else { (s - e + (-step) - 1).div_euclid(-step) };
        plan[ax] = SliceAxis { start: s, step, len: len.max(0) as usize };
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reshape_copies_zeros_and_infers_minus_one() {
        assert_eq!(reshape(&[2, 3, 4], &[0, -1], false).unwrap(), vec![2, 12]);
        assert_eq!(reshape(&[2, 3, 4], &[4, 0, -1], false).unwrap(), vec![4, 3, 2]);
        assert_eq!(reshape(&[0, 3], &[3, 0], true).unwrap(), vec![3, 0]);
        assert!(reshape(&[2, 3], &[4, -1], false).is_err());
        assert!(reshape(&[2, 3], &[-1, -1], false).is_err());
    }

    #[test]
    fn slice_clamps_like_onnx() {
        let p = slice_axes(&[10], &[-3], &[i64::MAX], &[0], &[1]).unwrap();
        assert_eq!((p[0].start, p[0].len), (7, 3));
        let p = slice_axes(&[10], &[20], &[-20], &[0], &[-3]).unwrap();
        assert_eq!((p[0].start, p[0].step, p[0].len), (9, -3, 4)); // 9, 6, 3, 0
        let p = slice_axes(&[4, 5], &[1], &[1000], &[-1], &[2]).unwrap();
        assert_eq!((p[0].len, p[1].start, p[1].len), (4, 1, 2));
        assert!(slice_axes(&[4], &[0], &[4], &[0], &[0]).is_err());
        assert!(slice_axes(&[4], &[0, 0], &[4, 4], &[0, 0], &[1, 1]).is_err());
    }
}
