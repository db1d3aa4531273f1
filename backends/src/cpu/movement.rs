//! Data movement: reshapes, Transpose, Concat, Split, Expand, Shape, ConstantOfShape.
//! Slice and Gather live in `index.rs`.

use super::broadcast::{bcast_strides, broadcast_shape};
use super::elem::{expect_out, make, norm_axis, same_count, typed, Elem};
use super::input;
use super::par::{alloc, par_rows};
use super::strided::{gather_view, istrides};
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::tensor::numel;
use dynaspa_runtime::{map_data, DType, Error, Result, Tensor, TensorData};

/// Reshape, Flatten, Squeeze, Unsqueeze and Identity: the data, in the output's shape.
pub(crate) fn reshape_like(ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    let x = input(ins, 0, "Reshape")?;
    same_count(x, &out.shape, "Reshape")?;
    if x.dtype() != out.dtype {
        return Err(Error::Other(format!("Reshape: input is {} but the output is declared {}", x.dtype(), out.dtype)));
    }
    Tensor::new(out.shape.clone(), x.data().clone())
}

pub(crate) fn transpose(perm: &[usize], ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    let x = input(ins, 0, "Transpose")?;
    let r = x.rank();
    let perm: Vec<usize> = if perm.is_empty() { (0..r).rev().collect() } else { perm.to_vec() };
    let mut seen = vec![false; r];
    if perm.len() != r || perm.iter().any(|&p| p >= r || std::mem::replace(&mut seen[p], true)) {
        return Err(Error::Other(format!("Transpose: perm {perm:?} is not a permutation of 0..{r}")));
    }
    let shape: Vec<usize> = perm.iter().map(|&p| x.shape()[p]).collect();
    expect_out("Transpose", x.dtype(), &shape, out.dtype, &out.shape)?;
    let own = istrides(x.shape());
    let st: Vec<isize> = perm.iter().map(|&p| own[p]).collect();
    map_data!(x.data(), v => make(&shape, gather_view(v, 0, &shape, &st, "Transpose")?))
}

pub(crate) fn concat(axis: i64, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    let parts: Vec<&Tensor> = (0..ins.len()).map(|i| input(ins, i, "Concat")).collect::<Result<_>>()?;
    let first = *parts.first().ok_or_else(|| Error::Other("Concat: no inputs".into()))?;
    let r = first.rank();
    let ax = norm_axis(axis, r, "Concat")?;
    let mut shape = first.shape().to_vec();
    shape[ax] = 0;
    for p in &parts {
        let same_rest = p.rank() == r && (0..r).all(|d| d == ax || p.shape()[d] == first.shape()[d]);
        if !same_rest || p.dtype() != first.dtype() {
            return Err(Error::Other(format!(
                "Concat: input {} {:?} does not match {} {:?} outside axis {ax}",
                p.dtype(),
                p.shape(),
                first.dtype(),
                first.shape()
            )));
        }
        shape[ax] += p.shape()[ax];
    }
    expect_out("Concat", first.dtype(), &shape, out.dtype, &out.shape)?;
    map_data!(first.data(), v => concat_typed(v, &parts, &shape, ax))
}

fn concat_typed<T: Elem>(_witness: &[T], parts: &[&Tensor], shape: &[usize], ax: usize) -> Result<Tensor> {
    let inner: usize = shape[ax + 1..].iter().product();
    let srcs: Vec<(&[T], usize)> = parts.iter().map(|p| Ok((typed::<T>(p, "Concat")?, p.shape()[ax] * inner))).collect::<Result<_>>()?;
    let row = shape[ax] * inner;
    let mut v = alloc(numel(shape), T::default())?;
    par_rows(&mut v, row, |o, dst| {
        let mut at = 0;
        for &(s, len) in &srcs {
            dst[at..at + len].copy_from_slice(&s[o * len..(o + 1) * len]);
            at += len;
        }
    });
    make(shape, v)
}

pub(crate) fn slice(ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    super::index::slice(ins, out)
}

pub(crate) fn gather(axis: i64, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    super::index::gather(axis, ins, out)
}

/// Split into `outs`; the size of each piece along `axis` comes from its declared shape.
pub(crate) fn split(axis: i64, ins: &[Option<&Tensor>], outs: &[TensorSpec]) -> Result<Vec<Tensor>> {
    let x = input(ins, 0, "Split")?;
    let ax = norm_axis(axis, x.rank(), "Split")?;
    let mut total = 0;
    for o in outs {
        let ok = o.shape.len() == x.rank() && (0..x.rank()).all(|d| d == ax || o.shape[d] == x.shape()[d]);
        if !ok || o.dtype != x.dtype() {
            return Err(Error::Other(format!(
                "Split: output {} {:?} is not a piece of {} {:?} along axis {ax}",
                o.dtype,
                o.shape,
                x.dtype(),
                x.shape()
            )));
        }
        total += o.shape[ax];
    }
    if total != x.shape()[ax] {
        return Err(Error::Other(format!("Split: pieces sum to {total} along axis {ax}, input has {}", x.shape()[ax])));
    }
    map_data!(x.data(), v => split_typed(v, x.shape(), ax, outs))
}

fn split_typed<T: Elem>(src: &[T], shape: &[usize], ax: usize, outs: &[TensorSpec]) -> Result<Vec<Tensor>> {
    let inner: usize = shape[ax + 1..].iter().product();
    let row = shape[ax] * inner;
    let mut start = 0;
    outs.iter()
        .map(|o| {
            let len = o.shape[ax] * inner;
            let mut v = alloc(numel(&o.shape), T::default())?;
            par_rows(&mut v, len, |r, dst| dst.copy_from_slice(&src[r * row + start..r * row + start + len]));
            start += len;
            make(&o.shape, v)
        })
        .collect()
}

pub(crate) fn expand(ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    let x = input(ins, 0, "Expand")?;
    let s = input(ins, 1, "Expand")?.to_i64_vec().map_err(|e| Error::Other(format!("Expand: shape: {e}")))?;
    let target: Vec<usize> = s
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| Error::Other(format!("Expand: negative dim in shape {s:?}"))))
        .collect::<Result<_>>()?;
    let shape = broadcast_shape(&[x.shape(), &target], "Expand")?;
    expect_out("Expand", x.dtype(), &shape, out.dtype, &out.shape)?;
    let st = bcast_strides(x.shape(), &shape, "Expand")?;
    map_data!(x.data(), v => make(&shape, gather_view(v, 0, &shape, &st, "Expand")?))
}

pub(crate) fn shape(start: i64, end: Option<i64>, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    let x = input(ins, 0, "Shape")?;
    let r = x.rank() as i64;
    let clamp = |i: i64| (if i < 0 { i.saturating_add(r) } else { i }).clamp(0, r) as usize;
    let (s, e) = (clamp(start), clamp(end.unwrap_or(r)));
    let dims: Vec<i64> = x.shape()[s..e.max(s)].iter().map(|&d| d as i64).collect();
    expect_out("Shape", DType::I64, &[dims.len()], out.dtype, &out.shape)?;
    Tensor::from_i64(vec![dims.len()], dims)
}

pub(crate) fn constant_of_shape(value: &Tensor, out: &TensorSpec) -> Result<Tensor> {
    if value.len() != 1 {
        return Err(Error::Other(format!("ConstantOfShape: value must have one element, got shape {:?}", value.shape())));
    }
    // A value of another type than the output would be an importer slip; convert it.
    let v = if value.dtype() == out.dtype {
        value.data().clone()
    } else {
        map_data!(value.data(), v => super::elementwise::cast_slice(v, out.dtype)?)
    };
    let n = super::elem::checked_numel(&out.shape, "ConstantOfShape")?;
    let data = map_data!(&v, v => fill(v[0], n)?);
    Tensor::new(out.shape.clone(), data)
}

fn fill<T: Elem>(x: T, n: usize) -> Result<TensorData> {
    alloc(n, x).map(T::wrap)
}

#[cfg(test)]
#[path = "movement_tests.rs"]
mod tests;
