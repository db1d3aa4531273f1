//! Resize: nearest and (N-)linear, every coordinate transformation, antialiasing, `axes`.
//!
//! Both modes are separable: each output index along an axis reads a few input indices
//! along that axis with fixed weights ("taps"). Nearest is then one gather; linear applies
//! the taps one axis at a time in f64 and converts once at the end, as the ONNX reference
//! computes in double and casts back.

use super::elem::{conv, expect_out, make, norm_axis, Elem};
use super::input;
use super::par::{alloc, alloc_with, map1, par_rows};
use super::strided::gather_axes;
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::graph::*;
use dynaspa_runtime::{map_data, Error, Result, Tensor};

/// How one axis is resampled.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AxisPlan {
    /// Per output index: (input index, weight) pairs; empty when outside (extrapolated).
    pub taps: Vec<Vec<(usize, f64)>>,
}

impl AxisPlan {
    fn is_identity(&self, in_len: usize) -> bool {
        self.taps.len() == in_len
            && self.taps.iter().enumerate().all(|(j, t)| t.iter().all(|&(i, w)| if i == j { w == 1.0 } else { w == 0.0 }) && !t.is_empty())
    }
}

fn floats(t: Option<&Tensor>) -> Option<Vec<f64>> {
    t.filter(|t| !t.is_empty()).map(|t| t.to_f64_vec())
}

pub(crate) fn resize(p: &Resize, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    let x = input(ins, 0, "Resize")?;
    let r = x.rank();
    let in_shape = x.shape();
    if out.shape.len() != r {
        return Err(Error::Other(format!("Resize: output rank {} differs from input rank {r}", out.shape.len())));
    }
    expect_out("Resize", x.dtype(), &out.shape, out.dtype, &out.shape)?;
    if out.shape.contains(&0) {
        return Ok(Tensor::zeros(x.dtype(), out.shape.clone()));
    }
    let plans = resize_plans(p, ins, in_shape, &out.shape)?;
    map_data!(x.data(), v => match p.mode {
        ResizeMode::Nearest => nearest(v, in_shape, &plans, conv(p.extrapolation_value), &out.shape),
        ResizeMode::Linear => linear(v, in_shape, &plans, p.extrapolation_value as f64, &out.shape),
    })
}

/// Per axis of an `in_shape` -> `out_shape` Resize, how it is resampled (`None`: unchanged).
/// `ins[1..]` (roi, scales, sizes) must be host tensors; the GPU backends plan from this too.
pub(crate) fn resize_plans(p: &Resize, ins: &[Option<&Tensor>], in_shape: &[usize], out_shape: &[usize]) -> Result<Vec<Option<AxisPlan>>> {
    let r = in_shape.len();
    let axes: Vec<usize> = match &p.axes {
        Some(a) => a.iter().map(|&a| norm_axis(a, r, "Resize")).collect::<Result<_>>()?,
        None => (0..r).collect(),
    };
    let mut listed = vec![false; r];
    for &a in &axes {
        if std::mem::replace(&mut listed[a], true) {
            return Err(Error::Other(format!("Resize: axis {a} is given twice")));
        }
    }
    let roi = floats(ins.get(1).copied().flatten());
    let scales = floats(ins.get(2).copied().flatten());
    let sizes = ins.get(3).copied().flatten().filter(|t| !t.is_empty());
    let n = axes.len();
    let mut scale = vec![1.0f64; r];
    if let Some(s) = &scales {
        if s.len() != n {
            return Err(Error::Other(format!("Resize: {} scales for {n} axes", s.len())));
        }
        for (i, &a) in axes.iter().enumerate() {
            scale[a] = s[i];
        }
    } else if let Some(t) = sizes {
        let s = t.to_i64_vec().map_err(|e| Error::Other(format!("Resize: sizes: {e}")))?;
        if s.len() != n {
            return Err(Error::Other(format!("Resize: {} sizes for {n} axes", s.len())));
        }
        let ratio: Vec<f64> = axes.iter().zip(&s).map(|(&a, &z)| z as f64 / in_shape[a] as f64).collect();
        // keep_aspect_ratio_policy: one scale for every listed axis (the output shape was
        // already rounded by shape inference).
        let common = match p.keep_aspect {
            KeepAspect::Stretch => None,
            KeepAspect::NotLarger => ratio.iter().copied().reduce(f64::min),
            KeepAspect::NotSmaller => ratio.iter().copied().reduce(f64::max),
        };
        for (i, &a) in axes.iter().enumerate() {
            scale[a] = common.unwrap_or(ratio[i]);
        }
    } else {
        return Err(Error::Other("Resize: needs either scales or sizes".into()));
    }
    let mut roi_of = vec![(0.0f64, 1.0f64); r];
    if let (Some(roi), CoordTransform::TfCropAndResize) = (&roi, p.coord) {
        if roi.len() != 2 * n {
            return Err(Error::Other(format!("Resize: roi has {} values for {n} axes", roi.len())));
        }
        for (i, &a) in axes.iter().enumerate() {
            roi_of[a] = (roi[i], roi[n + i]);
        }
    }
    let mut plans = Vec::with_capacity(r);
    for d in 0..r {
        let (ni, no) = (in_shape[d], out_shape[d]);
        if !listed[d] {
            if ni != no {
                return Err(Error::Other(format!("Resize: dim {d} is not resized but changes from {ni} to {no}")));
            }
            plans.push(None);
            continue;
        }
        if !(scale[d].is_finite() && scale[d] > 0.0) {
            return Err(Error::Other(format!("Resize: scale {} for dim {d} is not positive", scale[d])));
        }
        if ni == 0 && no > 0 {
            return Err(Error::Other(format!("Resize: cannot resize empty dim {d} to {no}")));
        }
        let plan = axis_plan(p, ni, no, scale[d], roi_of[d])?;
        plans.push(if plan.is_identity(ni) { None } else { Some(plan) });
    }
    Ok(plans)
}

/// Source coordinate of output index `x` along an axis, or `None` where tf_crop_and_resize
/// extrapolates. Follows the ONNX reference, including that "output length" in the
/// formulas is `scale * in_len`, not the rounded size.
pub(crate) fn source_coord(coord: CoordTransform, x: f64, in_len: usize, out_len: usize, scale: f64, roi: (f64, f64)) -> Option<f64> {
    let inl = in_len as f64;
    let out_w = scale * inl;
    Some(match coord {
        CoordTransform::HalfPixel => (x + 0.5) / scale - 0.5,
        CoordTransform::HalfPixelSymmetric => {
            let adjustment = out_len as f64 / out_w;
            let offset = inl / 2.0 * (1.0 - adjustment);
            offset + (x + 0.5) / scale - 0.5
        }
        CoordTransform::PytorchHalfPixel => {
            if out_w == 1.0 {
                -0.5
            } else {
                (x + 0.5) / scale - 0.5
            }
        }
        CoordTransform::AlignCorners => {
            if out_w == 1.0 {
                0.0
            } else {
                x * (inl - 1.0) / (out_w - 1.0)
            }
        }
        CoordTransform::Asymmetric => x / scale,
        CoordTransform::TfCropAndResize => {
            let v = if out_w == 1.0 { (roi.1 - roi.0) * (inl - 1.0) / 2.0 } else { x * (roi.1 - roi.0) * (inl - 1.0) / (out_w - 1.0) }
                + roi.0 * (inl - 1.0);
            if !(0.0..=inl - 1.0).contains(&v) {
                return None;
            }
            v
        }
    })
}

pub(crate) fn axis_plan(p: &Resize, in_len: usize, out_len: usize, scale: f64, roi: (f64, f64)) -> Result<AxisPlan> {
    let last = in_len as i64 - 1;
    let clamp = |i: i64| i.clamp(0, last.max(0)) as usize;
    let taps = alloc_with(out_len, |j| {
        let Some(x) = source_coord(p.coord, j as f64, in_len, out_len, scale, roi) else {
            return Vec::new();
        };
        // The reference takes the pixel left of x (ratio in (0, 1]); at integers that
        // means the pair (x - 1, x) with all weight on x.
        let (x0, ratio) = if x == x.floor() { (x as i64 - 1, 1.0) } else { (x.floor() as i64, x - x.floor()) };
        match p.mode {
            ResizeMode::Nearest => {
                let up = match p.nearest {
                    _ if ratio == 1.0 => true,
                    NearestMode::RoundPreferFloor => ratio > 0.5,
                    NearestMode::RoundPreferCeil => ratio >= 0.5,
                    NearestMode::Floor => false,
                    NearestMode::Ceil => true,
                };
                vec![(clamp(x0 + up as i64), 1.0)]
            }
            ResizeMode::Linear => linear_taps(x0, ratio, in_len, scale, p.antialias, p.exclude_outside, clamp),
        }
    })?;
    Ok(AxisPlan { taps })
}

/// Triangle-filter weights at positions x0 + start .. around the source coordinate
/// x0 + ratio; with antialiasing on a downscale the triangle widens by 1/scale.
fn linear_taps(
    x0: i64,
    ratio: f64,
    in_len: usize,
    scale: f64,
    antialias: bool,
    exclude_outside: bool,
    clamp: impl Fn(i64) -> usize,
) -> Vec<(usize, f64)> {
    let s = if antialias { scale.min(1.0) } else { 1.0 };
    let start = if s < 1.0 { (-1.0 / s).floor() as i64 + 1 } else { 0 };
    let footprint = 2 - 2 * start;
    let mut t: Vec<(i64, f64)> = (0..footprint)
        .map(|k| {
            let arg = ((start + k) as f64 - ratio) * s;
            (x0 + start + k, (1.0 - arg.abs()).clamp(0.0, 1.0))
        })
        .collect();
    let normalize = |t: &mut Vec<(i64, f64)>| {
        let sum: f64 = t.iter().map(|c| c.1).sum();
        if sum != 0.0 {
            t.iter_mut().for_each(|c| c.1 /= sum);
        }
    };
    if antialias {
        normalize(&mut t);
    }
    if exclude_outside {
        for c in t.iter_mut() {
            if c.0 < 0 || c.0 >= in_len as i64 {
                c.1 = 0.0;
            }
        }
        normalize(&mut t);
    }
    t.into_iter().map(|(i, w)| (clamp(i), w)).collect()
}

fn nearest<T: Elem>(src: &[T], shape: &[usize], plans: &[Option<AxisPlan>], fill: T, out: &[usize]) -> Result<Tensor> {
    let maps: Vec<Vec<i64>> = plans
        .iter()
        .zip(shape)
        .map(|(p, &n)| match p {
            None => (0..n as i64).collect(),
            Some(p) => p.taps.iter().map(|t| t.first().map_or(-1, |&(i, _)| i as i64)).collect(),
        })
        .collect();
    make(out, gather_axes(src, shape, &maps, fill, "Resize")?)
}

fn linear<T: Elem>(src: &[T], shape: &[usize], plans: &[Option<AxisPlan>], extrapolation: f64, out: &[usize]) -> Result<Tensor> {
    let mut cur: Option<Vec<f64>> = None;
    let mut cur_shape = shape.to_vec();
    for (d, plan) in plans.iter().enumerate() {
        if let Some(plan) = plan {
            let table = Table::new(plan);
            cur = Some(match &cur {
                None => resample_axis(src, &cur_shape, d, &table)?,
                Some(c) => resample_axis(c.as_slice(), &cur_shape, d, &table)?,
            });
            cur_shape[d] = plan.taps.len();
        }
    }
    let mut cur = cur.unwrap_or_else(|| src.iter().map(|v| v.to_f64()).collect());
    // Any axis outside the crop box makes the whole output position the extrapolation value.
    for (d, plan) in plans.iter().enumerate() {
        let Some(plan) = plan else { continue };
        let inner: usize = cur_shape[d + 1..].iter().product();
        let m = cur_shape[d];
        if inner == 0 || m == 0 || plan.taps.iter().all(|t| !t.is_empty()) {
            continue;
        }
        for (k, block) in cur.chunks_mut(inner).enumerate() {
            if plan.taps[k % m].is_empty() {
                block.fill(extrapolation);
            }
        }
    }
    make(out, map1(&cur, T::from_f64)?)
}

/// An axis plan as flat arrays: `width` (index, weight) pairs per output index, padded
/// with zero weights, so the inner loops index instead of chasing vectors.
struct Table {
    width: usize,
    idx: Vec<usize>,
    w: Vec<f64>,
}

impl Table {
    fn new(plan: &AxisPlan) -> Table {
        let width = plan.taps.iter().map(|t| t.len()).max().unwrap_or(1).max(1);
        let mut idx = vec![0; plan.taps.len() * width];
        let mut w = vec![0.0; plan.taps.len() * width];
        for (j, taps) in plan.taps.iter().enumerate() {
            for (k, &(i, wt)) in taps.iter().enumerate() {
                idx[j * width + k] = i;
                w[j * width + k] = wt;
            }
        }
        Table { width, idx, w }
    }
}

fn resample_axis<S: Elem>(src: &[S], shape: &[usize], d: usize, t: &Table) -> Result<Vec<f64>> {
    let inner: usize = shape[d + 1..].iter().product();
    let n_in = shape[d];
    let n_out = t.idx.len() / t.width;
    let outer: usize = shape[..d].iter().product();
    let mut out = alloc(outer * n_out * inner, 0.0f64)?;
    let wd = t.width;
    if inner == 1 {
        par_rows(&mut out, n_out, |o, dst| {
            let row = &src[o * n_in..(o + 1) * n_in];
            for (j, y) in dst.iter_mut().enumerate() {
                let (ix, w) = (&t.idx[j * wd..(j + 1) * wd], &t.w[j * wd..(j + 1) * wd]);
                *y = ix.iter().zip(w).map(|(&i, &w)| w * row[i].to_f64()).sum();
            }
        });
    } else {
        par_rows(&mut out, inner, |r, dst| {
            let (o, j) = (r / n_out, r % n_out);
            let base = o * n_in * inner;
            let at = |k: usize| &src[base + t.idx[j * wd + k] * inner..base + (t.idx[j * wd + k] + 1) * inner];
            if wd == 2 {
                let (w0, w1) = (t.w[j * wd], t.w[j * wd + 1]);
                for ((y, a), b) in dst.iter_mut().zip(at(0)).zip(at(1)) {
                    *y = w0 * a.to_f64() + w1 * b.to_f64();
                }
                return;
            }
            for k in 0..wd {
                let w = t.w[j * wd + k];
                if w != 0.0 {
                    for (y, v) in dst.iter_mut().zip(at(k)) {
                        *y += w * v.to_f64();
                    }
                }
            }
        });
    }
    Ok(out)
}

#[cfg(test)]
#[path = "resize_tests.rs"]
mod tests;
