//! Slice and Gather: reads at computed positions, with ONNX's clamping and wrap-around rules.

use super::elem::{expect_out, make, norm_axis, Elem};
use super::input;
use super::par::{alloc, par_rows};
use super::strided::{gather_view, istrides};
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::tensor::numel;
use dynaspa_runtime::{map_data, Error, Result, Tensor};

fn ints(t: &Tensor, what: &str) -> Result<Vec<i64>> {
    t.to_i64_vec().map_err(|e| Error::Other(format!("{what}: {e}")))
}

/// One sliced axis: first position, step and element count, clamped as ONNX Slice does.
pub(crate) fn slice_axis(n: usize, start: i64, end: i64, step: i64) -> (i64, i64, usize) {
    let n = n as i64;
    let wrap = |i: i64| if i < 0 { i.saturating_add(n) } else { i };
    let (s, e) = (wrap(start), wrap(end));
    if n == 0 {
        return (0, step, 0);
    }
    let (s, count) = if step > 0 {
        let (s, e) = (s.clamp(0, n), e.clamp(0, n));
        (s, if e > s { ((e - s - 1) as u64 / step as u64 + 1) as usize } else { 0 })
    } else {
        let (s, e) = (s.clamp(0, n - 1), e.clamp(-1, n - 1));
        (s, if s > e { ((s - e - 1) as u64 / step.unsigned_abs() + 1) as usize } else { 0 })
    };
    (s, step, count)
}

pub(crate) fn slice(ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    let x = input(ins, 0, "Slice")?;
    let starts = ints(input(ins, 1, "Slice")?, "Slice starts")?;
    let ends = ints(input(ins, 2, "Slice")?, "Slice ends")?;
    let r = x.rank();
    let axes = match ins.get(3).copied().flatten() {
        Some(t) => ints(t, "Slice axes")?,
        None => (0..starts.len() as i64).collect(),
    };
    let steps = match ins.get(4).copied().flatten() {
        Some(t) => ints(t, "Slice steps")?,
        None => vec![1; starts.len()],
    };
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(Error::Other(format!(
            "Slice: starts, ends, axes, steps have lengths {}, {}, {}, {}",
            starts.len(),
            ends.len(),
            axes.len(),
            steps.len()
        )));
    }
    let own = istrides(x.shape());
    let mut shape = x.shape().to_vec();
    let mut strides = own.clone();
    let mut offset = 0isize;
    let mut seen = vec![false; r];
    for i in 0..starts.len() {
        let ax = norm_axis(axes[i], r, "Slice")?;
        if std::mem::replace(&mut seen[ax], true) {
            return Err(Error::Other(format!("Slice: axis {ax} is given twice")));
        }
        if steps[i] == 0 {
            return Err(Error::Other(format!("Slice: step for axis {ax} is 0")));
        }
        let (s, step, count) = slice_axis(x.shape()[ax], starts[i], ends[i], steps[i]);
        shape[ax] = count;
        if count > 0 {
            offset += s as isize * own[ax];
        }
        // With one element the step never applies, and a huge step would overflow.
        strides[ax] = if count > 1 { own[ax] * step as isize } else { 0 };
    }
    expect_out("Slice", x.dtype(), &shape, out.dtype, &out.shape)?;
    if numel(&shape) == 0 {
        return Ok(Tensor::zeros(x.dtype(), shape));
    }
    map_data!(x.data(), v => make(&shape, gather_view(v, offset, &shape, &strides, "Slice")?))
}

pub(crate) fn gather(axis: i64, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    let data = input(ins, 0, "Gather")?;
    let ind = input(ins, 1, "Gather")?;
    let ax = norm_axis(axis, data.rank(), "Gather")?;
    let n = data.shape()[ax];
    let idx: Vec<usize> = ints(ind, "Gather indices")?
        .into_iter()
        .map(|i| {
            let j = if i < 0 { i + n as i64 } else { i };
            if j < 0 || j >= n as i64 {
                Err(Error::Other(format!("Gather: index {i} is out of range for axis {ax} of size {n}")))
            } else {
                Ok(j as usize)
            }
        })
        .collect::<Result<_>>()?;
    let mut shape = data.shape()[..ax].to_vec();
    shape.extend_from_slice(ind.shape());
    shape.extend_from_slice(&data.shape()[ax + 1..]);
    expect_out("Gather", data.dtype(), &shape, out.dtype, &out.shape)?;
    map_data!(data.data(), v => gather_typed(v, data.shape(), ax, &idx, &shape))
}

fn gather_typed<T: Elem>(src: &[T], dshape: &[usize], ax: usize, idx: &[usize], shape: &[usize]) -> Result<Tensor> {
    let inner: usize = dshape[ax + 1..].iter().product();
    let n = dshape[ax];
    let k = idx.len();
    let mut v = alloc(numel(shape), T::default())?;
    if inner == 1 {
        // Gathering single elements: one output row per outer index.
        par_rows(&mut v, k, |o, dst| {
            for (d, &j) in dst.iter_mut().zip(idx) {
                *d = src[o * n + j];
            }
        });
    } else {
        par_rows(&mut v, inner, |r, dst| {
            let (o, j) = (r / k, idx[r % k]);
            let at = (o * n + j) * inner;
            dst.copy_from_slice(&src[at..at + inner]);
        });
    }
    make(shape, v)
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
