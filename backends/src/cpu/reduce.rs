//! ReduceMean / ReduceSum / ReduceMax and CumSum.
//!
//! A reduction is laid out as alternating groups of kept and reduced dims (adjacent dims of
//! the same kind merged). Walking the input in memory order, an innermost reduced group
//! folds a contiguous run into one accumulator, an innermost kept group folds a run into a
//! contiguous run of accumulators; either way the input is read once, sequentially.

use super::elem::{expect_out, make, norm_axis, numeric, Arith, Elem};
use super::input;
use super::par::{alloc, par_rows};
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::graph::*;
use dynaspa_runtime::{map_data, Error, Result, Tensor};
use rayon::prelude::*;

pub(crate) fn reduce(r: &Reduce, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    let name = match r.kind {
        ReduceKind::Mean => "ReduceMean",
        ReduceKind::Sum => "ReduceSum",
        ReduceKind::Max => "ReduceMax",
    };
    let x = input(ins, 0, name)?;
    let axes = match (&r.axes, ins.get(1).copied().flatten()) {
        (Some(a), _) => a.clone(),
        (None, Some(t)) => t.to_i64_vec().map_err(|e| Error::Other(format!("{name}: axes: {e}")))?,
        (None, None) => Vec::new(),
    };
    let rank = x.rank();
    if axes.is_empty() && r.noop_with_empty_axes {
        expect_out(name, x.dtype(), x.shape(), out.dtype, &out.shape)?;
        return Ok(x.clone());
    }
    let mut red = vec![axes.is_empty(); rank];
    for &a in &axes {
        red[norm_axis(a, rank, name)?] = true;
    }
    let shape: Vec<usize> = (0..rank).filter(|&d| r.keepdims || !red[d]).map(|d| if red[d] { 1 } else { x.shape()[d] }).collect();
    expect_out(name, x.dtype(), &shape, out.dtype, &out.shape)?;
    let count: usize = (0..rank).filter(|&d| red[d]).map(|d| x.shape()[d]).product();
    match r.kind {
        ReduceKind::Max => map_data!(x.data(), v => make(&shape, max_reduce(v, x.shape(), &red)?)),
        kind => numeric!(x.data(), v => make(&shape, sum_reduce(v, x.shape(), &red, kind == ReduceKind::Mean, count)?),
            bool => Err(Error::Other(format!("{name}: BOOL input is not supported")))),
    }
}

fn max_reduce<T: Elem>(src: &[T], shape: &[usize], red: &[bool]) -> Result<Vec<T>> {
    // NaN wins, as in numpy's maximum.reduce.
    fold_reduce(src, shape, red, T::lowest(), |a: T, x: T| if x > a || x.is_nan() { x } else { a })
}

/// Sums in f64 (floats) or wrapping i64 (integers, which wraps like the native type would).
fn sum_reduce<T: Elem>(src: &[T], shape: &[usize], red: &[bool], mean: bool, count: usize) -> Result<Vec<T>> {
    if T::DTYPE.is_float() {
        let acc = fold_reduce(src, shape, red, 0.0f64, |a, x: T| a + x.to_f64())?;
        let scale = if mean { 1.0 / count as f64 } else { 1.0 };
        Ok(acc.into_iter().map(|a| T::from_f64(if mean && count == 0 { f64::NAN } else { a * scale })).collect())
    } else {
        let acc = fold_reduce(src, shape, red, 0i64, |a, x: T| a.wrapping_add(x.to_i64()))?;
        Ok(acc.into_iter().map(|a| T::from_i64(if mean { a.checked_div(count as i64).unwrap_or(0) } else { a })).collect())
    }
}

fn fold_reduce<T, A, F>(src: &[T], shape: &[usize], red: &[bool], init: A, fold: F) -> Result<Vec<A>>
where
    T: Copy + Sync,
    A: Copy + Send + Sync,
    F: Fn(A, T) -> A + Sync,
{
    let out_len: usize = shape.iter().zip(red).filter(|(_, &r)| !r).map(|(&n, _)| n).product();
    let mut out = alloc(out_len, init)?;
    if src.is_empty() || out_len == 0 {
        return Ok(out);
    }
    let mut groups: Vec<(usize, bool)> = Vec::new();
    for (&n, &r) in shape.iter().zip(red) {
        match groups.last_mut() {
            _ if n == 1 => {}
            Some((m, gr)) if *gr == r => *m *= n,
            _ => groups.push((n, r)),
        }
    }
    if groups.is_empty() {
        groups.push((1, false));
    }
    match groups[0] {
        // Outermost kept group: its slices are independent, so split them across threads.
        (n, false) if n > 1 && src.len() >= super::par::PAR_MIN => {
            let (sub_in, sub_out) = (src.len() / n, out_len / n);
            out.par_chunks_mut(sub_out).zip(src.par_chunks(sub_in)).for_each(|(o, s)| walk(s, &groups[1..], o, &fold));
        }
        _ => walk(src, &groups, &mut out, &fold),
    }
    Ok(out)
}

fn walk<T: Copy, A: Copy, F: Fn(A, T) -> A>(src: &[T], groups: &[(usize, bool)], out: &mut [A], fold: &F) {
    let Some(&(n, red)) = groups.first() else {
        out[0] = fold(out[0], src[0]);
        return;
    };
    if groups.len() == 1 {
        if red {
            out[0] = src.iter().fold(out[0], |a, &x| fold(a, x));
        } else {
            for (o, &x) in out.iter_mut().zip(src) {
                *o = fold(*o, x);
            }
        }
        return;
    }
    let sub_in = src.len() / n;
    let sub_out = if red { out.len() } else { out.len() / n };
    for i in 0..n {
        let s = &src[i * sub_in..(i + 1) * sub_in];
        let o = if red { &mut out[..] } else { &mut out[i * sub_out..(i + 1) * sub_out] };
        walk(s, &groups[1..], o, fold);
    }
}

pub(crate) fn cumsum(exclusive: bool, reverse: bool, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    let x = input(ins, 0, "CumSum")?;
    let axis = super::elem::scalar_i64(input(ins, 1, "CumSum")?, "CumSum axis")?;
    let ax = norm_axis(axis, x.rank(), "CumSum")?;
    expect_out("CumSum", x.dtype(), x.shape(), out.dtype, &out.shape)?;
    let (n, inner) = (x.shape()[ax], x.shape()[ax + 1..].iter().product::<usize>());
    numeric!(x.data(), v => make(x.shape(), cumsum_typed(v, n, inner, exclusive, reverse)?),
        bool => Err(Error::Other("CumSum: BOOL input is not supported".into())))
}

fn cumsum_typed<T: Arith>(src: &[T], n: usize, inner: usize, exclusive: bool, reverse: bool) -> Result<Vec<T>> {
    let mut out = alloc(src.len(), T::zero())?;
    par_rows(&mut out, n * inner, |o, dst| {
        let block = &src[o * n * inner..(o + 1) * n * inner];
        let mut acc = vec![T::zero(); inner];
        for step in 0..n {
            let k = if reverse { n - 1 - step } else { step };
            let (s, d) = (&block[k * inner..(k + 1) * inner], &mut dst[k * inner..(k + 1) * inner]);
            for ((a, &x), y) in acc.iter_mut().zip(s).zip(d) {
                if exclusive {
                    *y = *a;
                    *a = a.add(x);
                } else {
                    *a = a.add(x);
                    *y = *a;
                }
            }
        }
    });
    Ok(out)
}

#[cfg(test)]
#[path = "reduce_tests.rs"]
mod tests;
