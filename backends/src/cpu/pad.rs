//! Pad: constant, reflect, edge and wrap, with optional axes and negative (cropping) pads.
//!
//! Each output index along an axis maps to one input index (or to the constant), so the
//! whole op is a per-axis index map followed by one gather. A negative pad crops its side
//! first; the other side then pads relative to the cropped extent.

use super::elem::{conv, expect_out, make, norm_axis, Elem};
use super::input;
use super::par::alloc_with;
use super::strided::gather_axes;
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::graph::*;
use dynaspa_runtime::{map_data, Error, Result, Tensor};

pub(crate) fn pad(mode: PadMode, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    let x = input(ins, 0, "Pad")?;
    let (shape, maps) = pad_maps(mode, x.shape(), ins)?;
    expect_out("Pad", x.dtype(), &shape, out.dtype, &out.shape)?;
    if shape.contains(&0) {
        return Ok(Tensor::zeros(x.dtype(), shape));
    }
    let value = ins.get(2).copied().flatten().filter(|t| !t.is_empty());
    if let Some(v) = value {
        if v.len() != 1 {
            return Err(Error::Other(format!("Pad: constant_value must be a scalar, got shape {:?}", v.shape())));
        }
    }
    map_data!(x.data(), v => {
        let fill = match value {
            Some(c) => map_data!(c.data(), c => conv(c[0])),
            None => Default::default(),
        };
        padded(v, x.shape(), &maps, fill, &shape)
    })
}

/// The padded shape of an `xs` input and, per axis, the input index each output index reads
/// (-1: the constant). `ins[1]` (pads) and `ins[3]` (axes) must be present as host tensors;
/// the GPU backends plan their Pad from the same function.
pub(crate) fn pad_maps(mode: PadMode, xs: &[usize], ins: &[Option<&Tensor>]) -> Result<(Vec<usize>, Vec<Vec<i64>>)> {
    let pads = input(ins, 1, "Pad")?.to_i64_vec().map_err(|e| Error::Other(format!("Pad: pads: {e}")))?;
    let r = xs.len();
    let axes: Vec<usize> = match ins.get(3).copied().flatten() {
        Some(t) => t
            .to_i64_vec()
            .map_err(|e| Error::Other(format!("Pad: axes: {e}")))?
            .into_iter()
            .map(|a| norm_axis(a, r, "Pad"))
            .collect::<Result<_>>()?,
        None => (0..r).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(Error::Other(format!("Pad: {} pads for {} axes (need begins then ends)", pads.len(), axes.len())));
    }
    let mut per_dim = vec![(0i64, 0i64); r];
    let mut seen = vec![false; r];
    for (i, &a) in axes.iter().enumerate() {
        if std::mem::replace(&mut seen[a], true) {
            return Err(Error::Other(format!("Pad: axis {a} is given twice")));
        }
        per_dim[a] = (pads[i], pads[axes.len() + i]);
    }
    let shape: Vec<usize> = (0..r).map(|d| padded_len(xs[d], per_dim[d])).collect::<Result<_>>()?;
    if shape.contains(&0) {
        return Ok((shape, Vec::new()));
    }
    let maps: Vec<Vec<i64>> = (0..r).map(|d| axis_map(mode, xs[d], per_dim[d].0, per_dim[d].1)).collect::<Result<_>>()?;
    Ok((shape, maps))
}

fn padded<T: Elem>(src: &[T], shape: &[usize], maps: &[Vec<i64>], fill: T, out: &[usize]) -> Result<Tensor> {
    make(out, gather_axes(src, shape, maps, fill, "Pad")?)
}

/// Length of an axis of `n` elements after cropping/padding by `(begin, end)`.
fn padded_len(n: usize, (begin, end): (i64, i64)) -> Result<usize> {
    let len = (n as i64).saturating_add(begin).saturating_add(end);
    let crop = begin.saturating_neg().max(0).saturating_add(end.saturating_neg().max(0));
    if crop > n as i64 || len < 0 {
        return Err(Error::Other(format!("Pad: pads ({begin}, {end}) crop more than the {n} elements of an axis")));
    }
    Ok(len as usize)
}

/// Input index read by each output index along one axis of length `n`; -1 for the constant.
fn axis_map(mode: PadMode, n: usize, begin: i64, end: i64) -> Result<Vec<i64>> {
    let n = n as i64;
    let lo = begin.saturating_neg().max(0);
    let m = n - lo - end.saturating_neg().max(0);
    let (pb, pe) = (begin.max(0), end.max(0));
    if m == 0 && pb + pe > 0 && mode != PadMode::Constant {
        return Err(Error::Other(format!("Pad: cannot {mode:?}-pad an axis with no elements")));
    }
    let len = m + pb + pe;
    alloc_with(len as usize, |o| {
        let o = o as i64;
        let j = o - pb;
        if (0..m).contains(&j) {
            return lo + j;
        }
        lo + match mode {
            PadMode::Constant => return -1,
            PadMode::Edge => j.clamp(0, m - 1),
            PadMode::Wrap => j.rem_euclid(m),
            // Mirror without repeating the edge, periodically as numpy does for pads
            // wider than the axis.
            PadMode::Reflect if m == 1 => 0,
            PadMode::Reflect => {
                let p = 2 * (m - 1);
                let t = j.rem_euclid(p);
                if t >= m {
                    p - t
                } else {
                    t
                }
            }
        }
    })
}

#[cfg(test)]
#[path = "pad_tests.rs"]
mod tests;
