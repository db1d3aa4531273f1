//! Shape inference for windowed and spatial ops: Conv, ConvTranspose, pools, Resize, Pad.
//! Resolves defaults and `auto_pad` into explicit values so kernels see one form.

use super::op::*;
use super::shape::{axis, const_ints, dims, req, In};
use crate::backend::TensorSpec;
use crate::error::{Error, Result};
use crate::tensor::DType;

fn err(msg: impl Into<String>) -> Error {
    Error::Other(msg.into())
}

/// Fills defaults for `r` spatial axes and checks lengths.
fn normalise(w: &mut Window, r: usize, kernel: &[usize]) -> Result<()> {
    if w.kernel_shape.is_empty() {
        w.kernel_shape = kernel.to_vec();
    }
    if w.strides.is_empty() {
        w.strides = vec![1; r];
    }
    if w.dilations.is_empty() {
        w.dilations = vec![1; r];
    }
    if w.pads.is_empty() {
        w.pads = vec![0; 2 * r];
    }
    if w.kernel_shape.len() != r || w.strides.len() != r || w.dilations.len() != r || w.pads.len() != 2 * r {
        return Err(err(format!(
            "kernel_shape {:?}, strides {:?}, dilations {:?}, pads {:?} do not fit {r} spatial axes",
            w.kernel_shape, w.strides, w.dilations, w.pads
        )));
    }
    Ok(())
}

/// Output extent of one axis; `ceil` for pools with ceil_mode.
fn extent(input: usize, k: usize, s: usize, d: usize, pb: usize, pe: usize, ceil: bool) -> Result<usize> {
    let eff = (k - 1) * d + 1;
    let padded = input + pb + pe;
    if padded < eff {
        return Err(err(format!("window of extent {eff} is larger than the padded input {padded}")));
    }
    let span = padded - eff;
    let mut out = if ceil { span.div_ceil(s) + 1 } else { span / s + 1 };
    // A window must start inside the input or its left padding.
    if ceil && (out - 1) * s >= input + pb {
        out -= 1;
    }
    Ok(out)
}

/// Resolves SAME_*/VALID padding in place (for Conv and pools).
fn resolve_auto_pad(w: &mut Window, spatial: &[usize]) {
    let r = spatial.len();
    match w.auto_pad {
        AutoPad::NotSet => {}
        AutoPad::Valid => w.pads = vec![0; 2 * r],
        AutoPad::SameUpper | AutoPad::SameLower => {
            for i in 0..r {
                let out = spatial[i].div_ceil(w.strides[i]);
                let eff = (w.kernel_shape[i] - 1) * w.dilations[i] + 1;
                let total = ((out - 1) * w.strides[i] + eff).saturating_sub(spatial[i]);
                let small = total / 2;
                let (b, e) = if w.auto_pad == AutoPad::SameUpper { (small, total - small) } else { (total - small, small) };
                w.pads[i] = b;
                w.pads[i + r] = e;
            }
        }
    }
    w.auto_pad = AutoPad::NotSet;
}

fn nchw(x: In, what: &str) -> Result<usize> {
    if x.shape.len() < 3 {
        return Err(err(format!("{what} must be N x C x spatial (rank >= 3), has shape {:?}", x.shape)));
    }
    if x.dtype != DType::F32 {
        return Err(err(format!("element type {} is not supported (FLOAT only)", x.dtype)));
    }
    Ok(x.shape.len() - 2)
}

pub fn conv(p: &mut Conv, ins: &[Option<In>]) -> Result<Vec<TensorSpec>> {
    let (x, w) = (req(ins, 0)?, req(ins, 1)?);
    let r = nchw(x, "X")?;
    if w.shape.len() != r + 2 {
        return Err(err(format!("W has shape {:?}, expected rank {}", w.shape, r + 2)));
    }
    normalise(&mut p.window, r, &w.shape[2..])?;
    if p.window.kernel_shape != w.shape[2..] {
        return Err(err(format!("kernel_shape {:?} differs from W's {:?}", p.window.kernel_shape, &w.shape[2..])));
    }
    let (c, m, g) = (x.shape[1], w.shape[0], p.group);
    if c != w.shape[1] * g || m % g != 0 {
        return Err(err(format!("X has {c} channels, W {:?} with group {g} does not match", w.shape)));
    }
    if let Some(b) = ins.get(2).copied().flatten() {
        if b.shape != [m] {
            return Err(err(format!("B must have shape [{m}], has {:?}", b.shape)));
        }
    }
    resolve_auto_pad(&mut p.window, &x.shape[2..]);
    let mut out = vec![x.shape[0], m];
    for i in 0..r {
        let wd = &p.window;
        out.push(extent(x.shape[2 + i], wd.kernel_shape[i], wd.strides[i], wd.dilations[i], wd.pads[i], wd.pads[i + r], false)?);
    }
    if p.fused_add {
        let z = req(ins, 3)?;
        if z.shape != out.as_slice() {
            return Err(err(format!("fused addend has shape {:?}, output {:?}", z.shape, out)));
        }
    }
    Ok(vec![TensorSpec { dtype: DType::F32, shape: out }])
}

pub fn conv_transpose(p: &mut ConvTranspose, ins: &[Option<In>]) -> Result<Vec<TensorSpec>> {
    let (x, w) = (req(ins, 0)?, req(ins, 1)?);
    let r = nchw(x, "X")?;
    if w.shape.len() != r + 2 {
        return Err(err(format!("W has shape {:?}, expected rank {}", w.shape, r + 2)));
    }
    normalise(&mut p.window, r, &w.shape[2..])?;
    if p.output_padding.is_empty() {
        p.output_padding = vec![0; r];
    }
    if p.output_padding.len() != r {
        return Err(err(format!("output_padding {:?} does not fit {r} spatial axes", p.output_padding)));
    }
    let (c, g) = (x.shape[1], p.group);
    if w.shape[0] != c || c % g != 0 {
        return Err(err(format!("X has {c} channels, W {:?} with group {g} does not match", w.shape)));
    }
    let m = w.shape[1] * g;
    if let Some(b) = ins.get(2).copied().flatten() {
        if b.shape != [m] {
            return Err(err(format!("B must have shape [{m}], has {:?}", b.shape)));
        }
    }
    let wd = &mut p.window;
    let full: Vec<i64> = (0..r)
        .map(|i| (wd.strides[i] * (x.shape[2 + i] - 1) + p.output_padding[i] + (wd.kernel_shape[i] - 1) * wd.dilations[i] + 1) as i64)
        .collect();
    // Explicit output_shape or SAME_* decide the total padding; split it as the spec says.
    let target: Option<Vec<usize>> = match (&p.output_shape, wd.auto_pad) {
        (Some(s), _) => Some(if s.len() == r + 2 { s[2..].to_vec() } else { s.clone() }),
        (None, AutoPad::SameUpper | AutoPad::SameLower) => Some((0..r).map(|i| x.shape[2 + i] * wd.strides[i]).collect()),
        _ => None,
    };
    if wd.auto_pad == AutoPad::Valid {
        wd.pads = vec![0; 2 * r];
    }
    if let Some(t) = target {
        if t.len() != r {
            return Err(err(format!("output_shape {:?} does not fit {r} spatial axes", p.output_shape)));
        }
        for i in 0..r {
            let total = full[i] - t[i] as i64;
            let half = total.div_euclid(2);
            let (b, mut e) = if wd.auto_pad == AutoPad::SameUpper { (half, total - half) } else { (total - half, half) };
            if e < 0 {
                // A larger requested output extends the end: same as extra output padding.
                p.output_padding[i] += (-e) as usize;
                e = 0;
            }
            if b < 0 {
                return Err(err(format!("output_shape {t:?} needs negative leading padding")));
            }
            wd.pads[i] = b as usize;
            wd.pads[i + r] = e as usize;
        }
    }
    wd.auto_pad = AutoPad::NotSet;
    p.output_shape = None;
    let mut out = vec![x.shape[0], m];
    for i in 0..r {
        let o = (wd.strides[i] * (x.shape[2 + i] - 1) + p.output_padding[i] + (wd.kernel_shape[i] - 1) * wd.dilations[i] + 1) as i64
            - (wd.pads[i] + wd.pads[i + r]) as i64;
        if o <= 0 {
            return Err(err(format!("output extent {o} along spatial axis {i} is not positive")));
        }
        out.push(o as usize);
    }
    Ok(vec![TensorSpec { dtype: DType::F32, shape: out }])
}

pub fn pool(p: &mut Pool, ins: &[Option<In>]) -> Result<Vec<TensorSpec>> {
    let x = req(ins, 0)?;
    let r = nchw(x, "X")?;
    let k = p.window.kernel_shape.clone();
    normalise(&mut p.window, r, &k)?;
    resolve_auto_pad(&mut p.window, &x.shape[2..]);
    let mut out = x.shape[..2].to_vec();
    for i in 0..r {
        let w = &p.window;
        if w.pads[i] >= (w.kernel_shape[i] - 1) * w.dilations[i] + 1 || w.pads[i + r] >= (w.kernel_shape[i] - 1) * w.dilations[i] + 1 {
            return Err(err(format!("pads {:?} must be smaller than the window {:?}", w.pads, w.kernel_shape)));
        }
        out.push(extent(x.shape[2 + i], w.kernel_shape[i], w.strides[i], w.dilations[i], w.pads[i], w.pads[i + r], p.ceil_mode)?);
    }
    Ok(vec![TensorSpec { dtype: DType::F32, shape: out }])
}

pub fn resize(p: &mut Resize, ins: &[Option<In>]) -> Result<Vec<TensorSpec>> {
    let x = req(ins, 0)?;
    if x.dtype == DType::Bool && p.mode != ResizeMode::Nearest {
        return Err(err("linear resize of BOOL is not defined"));
    }
    let rank = x.shape.len();
    let axes: Vec<usize> = match &p.axes {
        Some(a) => a.iter().map(|&v| axis(v, rank, false)).collect::<Result<_>>()?,
        None => (0..rank).collect(),
    };
    let scales = match ins.get(2).copied().flatten() {
        Some(s) if s.shape.iter().product::<usize>() > 0 => match s.value {
            Some(t) => Some(t.to_f64_vec()),
            None => return Err(err("scales are computed at run time; only constant scales are supported")),
        },
        _ => None,
    };
    let sizes = const_ints(ins, 3, "sizes")?.filter(|s| !s.is_empty());
    let mut out = x.shape.to_vec();
    match (scales, sizes) {
        (Some(_), Some(_)) => return Err(err("only one of scales and sizes may be given")),
        (Some(s), None) => {
            if s.len() != axes.len() {
                return Err(err(format!("{} scales for {} axes", s.len(), axes.len())));
            }
            for (&a, &sc) in axes.iter().zip(&s) {
                if !(sc > 0.0) {
                    return Err(err(format!("scale {sc} must be positive")));
                }
                out[a] = (x.shape[a] as f64 * sc).floor() as usize;
            }
        }
        (None, Some(sz)) => {
            let sz = dims(&sz)?;
            if sz.len() != axes.len() {
                return Err(err(format!("{} sizes for {} axes", sz.len(), axes.len())));
            }
            let ratio = |i: usize| sz[i] as f64 / x.shape[axes[i]] as f64;
            let common = match p.keep_aspect {
                KeepAspect::Stretch => None,
                KeepAspect::NotLarger => Some((0..axes.len()).map(ratio).fold(f64::INFINITY, f64::min)),
                KeepAspect::NotSmaller => Some((0..axes.len()).map(ratio).fold(0.0, f64::max)),
            };
            for (i, &a) in axes.iter().enumerate() {
                out[a] = match common {
                    None => sz[i],
                    Some(c) => (c * x.shape[a] as f64).round() as usize,
                };
            }
        }
        (None, None) => return Err(err("one of scales (input 2) and sizes (input 3) is required")),
    }
    if out.iter().any(|&d| d == 0) {
        return Err(err(format!("resize to {out:?} leaves an empty axis")));
    }
    Ok(vec![TensorSpec { dtype: x.dtype, shape: out }])
}

pub fn pad(ins: &[Option<In>]) -> Result<Vec<TensorSpec>> {
    let x = req(ins, 0)?;
    let r = x.shape.len();
    let pads = const_ints(ins, 1, "pads")?.ok_or_else(|| err("input 1 (pads) is required"))?;
    let axes: Vec<usize> = match const_ints(ins, 3, "axes")? {
        Some(a) => a.iter().map(|&v| axis(v, r, false)).collect::<Result<_>>()?,
        None => (0..r).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(err(format!("{} pads for {} axes", pads.len(), axes.len())));
    }
    if let Some(c) = ins.get(2).copied().flatten() {
        if c.dtype != x.dtype {
            return Err(err(format!("constant_value is {} but data is {}", c.dtype, x.dtype)));
        }
    }
    let n = axes.len();
    let mut out = x.shape.to_vec();
    for (i, &a) in axes.iter().enumerate() {
        let o = x.shape[a] as i64 + pads[i] + pads[i + n];
        if o < 0 {
            return Err(err(format!("pads {pads:?} leave a negative extent on axis {a}")));
        }
        out[a] = o as usize;
    }
    Ok(vec![TensorSpec { dtype: x.dtype, shape: out }])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::DType;

    fn input(shape: &[usize]) -> Option<In<'_>> {
        Some(In { dtype: DType::F32, shape, value: None })
    }

    fn conv_op(auto_pad: AutoPad, strides: Vec<usize>) -> Conv {
        Conv {
            window: Window { kernel_shape: vec![], strides, pads: vec![], dilations: vec![], auto_pad },
            group: 1,
            fused_add: false,
            activation: None,
        }
    }

    #[test]
    fn same_upper_and_lower_split_odd_padding_differently() {
        let (x, w) = ([1usize, 2, 7, 7], [4usize, 2, 4, 4]);
        let mut up = conv_op(AutoPad::SameUpper, vec![2, 2]);
        let s = conv(&mut up, &[input(&x), input(&w)]).unwrap();
        assert_eq!(s[0].shape, vec![1, 4, 4, 4]);
        // out 4, eff 4: total = 3*2 + 4 - 7 = 3 -> upper puts the extra at the end.
        assert_eq!(up.window.pads, vec![1, 1, 2, 2]);
        let mut lo = conv_op(AutoPad::SameLower, vec![2, 2]);
        conv(&mut lo, &[input(&x), input(&w)]).unwrap();
        assert_eq!(lo.window.pads, vec![2, 2, 1, 1]);
        assert_eq!(up.window.auto_pad, AutoPad::NotSet);
    }

    #[test]
    fn conv_rejects_channel_mismatch() {
        let mut c = conv_op(AutoPad::NotSet, vec![]);
        c.group = 2;
        assert!(conv(&mut c, &[input(&[1, 6, 8, 8]), input(&[4, 2, 3, 3])]).is_err());
        assert!(conv(&mut c, &[input(&[1, 4, 8, 8]), input(&[4, 2, 3, 3])]).is_ok());
    }

    #[test]
    fn ceil_mode_pool_drops_window_starting_in_padding() {
        let mut p = Pool {
            window: Window { kernel_shape: vec![3], strides: vec![2], pads: vec![0, 1], dilations: vec![], auto_pad: AutoPad::NotSet },
            ceil_mode: true,
            count_include_pad: false,
        };
        // in 6, pad end 1: span 4 -> ceil(4/2)+1 = 3 windows starting at 0, 2, 4: all inside.
        assert_eq!(pool(&mut p, &[input(&[1, 1, 6])]).unwrap()[0].shape, vec![1, 1, 3]);
        p.window.pads = vec![0, 0];
        p.window.kernel_shape = vec![2];
        // in 5, k 2, s 2: span 3 -> ceil(1.5)+1 = 3 windows at 0, 2, 4 (the last partial).
        assert_eq!(pool(&mut p, &[input(&[1, 1, 5])]).unwrap()[0].shape, vec![1, 1, 3]);
    }
}
