//! BatchNormalization (inference), LayerNormalization, InstanceNormalization, GroupNormalization.
//!
//! Statistics are accumulated in f64 in two passes (mean, then squared deviations): one pass
//! of E[x^2] - E[x]^2 in f32 loses everything on activations with a large mean.

use super::input;
use super::kernel_util::{err, f32_data, multiversion, norm_axis};
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::{Result, Tensor};
use rayon::prelude::*;

/// The f32 data of an optional-or-required per-channel parameter, checked to hold `len` values.
fn param<'a>(op: &str, what: &str, t: &'a Tensor, len: usize) -> Result<&'a [f32]> {
    let d = f32_data(t, op, what)?;
    if d.len() != len {
        return err(format!("{op}: {what} has shape {:?}, expected {len} values", t.shape()));
    }
    Ok(d)
}

fn check_out(op: &str, x: &Tensor, out: &TensorSpec) -> Result<()> {
    if x.shape() != out.shape.as_slice() {
        return err(format!("{op}: output shape {:?} must equal the input shape {:?}", out.shape, x.shape()));
    }
    Ok(())
}

multiversion! {
/// Mean and 1/sqrt(var + eps) of `v`.
fn stats(v: &[f32], eps: f32) -> (f32, f32) {
    let n = v.len().max(1) as f64;
    let mean = v.iter().map(|&a| a as f64).sum::<f64>() / n;
    let var = v.iter().map(|&a| (a as f64 - mean).powi(2)).sum::<f64>() / n;
    (mean as f32, (1.0 / (var + eps as f64).sqrt()) as f32)
}
}

multiversion! {
/// `row = row * a + b`.
fn affine(row: &mut [f32], a: f32, b: f32) {
    row.iter_mut().for_each(|v| *v = *v * a + b);
}
}

multiversion! {
/// `row = (row - mean) * inv * scale (+ bias)`, elementwise over the normalised block.
fn normalize(row: &mut [f32], mean: f32, inv: f32, scale: &[f32], bias: Option<&[f32]>) {
    match bias {
        Some(b) => row.iter_mut().zip(scale).zip(b).for_each(|((v, &s), &b)| *v = (*v - mean) * inv * s + b),
        None => row.iter_mut().zip(scale).for_each(|(v, &s)| *v = (*v - mean) * inv * s),
    }
}
}

pub(crate) fn batch_norm(eps: f32, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    const OP: &str = "BatchNormalization";
    let x = input(ins, 0, OP)?;
    let xd = f32_data(x, OP, "X")?;
    check_out(OP, x, out)?;
    let xs = x.shape();
    if xs.len() < 2 {
        return err(format!("{OP}: X {xs:?} must be (N, C, ...)"));
    }
    let c = xs[1];
    let names = ["scale", "B", "input_mean", "input_var"];
    let mut p = [&[][..]; 4];
    for (i, name) in names.iter().enumerate() {
        p[i] = param(OP, name, input(ins, i + 1, OP)?, c)?;
    }
    // Fold into y = x * a + b per channel.
    let (a, b): (Vec<f32>, Vec<f32>) = (0..c)
        .map(|i| {
            let a = p[0][i] / (p[3][i] + eps).sqrt();
            (a, p[1][i] - p[2][i] * a)
        })
        .unzip();
    let plane: usize = xs[2..].iter().product();
    let mut y = xd.to_vec();
    if plane > 0 && c > 0 {
        y.par_chunks_mut(plane).enumerate().for_each(|(i, row)| affine(row, a[i % c], b[i % c]));
    }
    Tensor::from_f32(xs.to_vec(), y)
}

pub(crate) fn layer_norm(axis: i64, eps: f32, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    const OP: &str = "LayerNormalization";
    let x = input(ins, 0, OP)?;
    let xd = f32_data(x, OP, "X")?;
    check_out(OP, x, out)?;
    let xs = x.shape();
    let ax = norm_axis(OP, axis, xs.len(), false)?;
    let inner = &xs[ax..];
    let block: usize = inner.iter().product();
    let scale = expand_to(OP, "Scale", input(ins, 1, OP)?, inner)?;
    let bias = match ins.get(2).copied().flatten() {
        Some(b) => Some(expand_to(OP, "B", b, inner)?),
        None => None,
    };
    let mut y = xd.to_vec();
    if block > 0 {
        y.par_chunks_mut(block).for_each(|row| {
            let (mean, inv) = stats(row, eps);
            normalize(row, mean, inv, &scale, bias.as_deref());
        });
    }
    Tensor::from_f32(xs.to_vec(), y)
}

/// `t` broadcast (numpy rules, unidirectionally) to `shape`, materialised: LayerNorm's scale
/// and bias are small next to the activations they scale.
fn expand_to(op: &str, what: &str, t: &Tensor, shape: &[usize]) -> Result<Vec<f32>> {
    let d = f32_data(t, op, what)?;
    let ts = t.shape();
    let fits = ts.len() <= shape.len() && ts.iter().rev().zip(shape.iter().rev()).all(|(&a, &b)| a == b || a == 1);
    if !fits {
        return err(format!("{op}: {what} of shape {ts:?} does not broadcast to the normalised shape {shape:?}"));
    }
    let n: usize = shape.iter().product();
    if d.len() == n {
        return Ok(d.to_vec());
    }
    let skip = shape.len() - ts.len();
    Ok((0..n)
        .map(|mut i| {
            let (mut src, mut stride) = (0, 1);
            for a in (0..shape.len()).rev() {
                let idx = i % shape[a];
                i /= shape[a];
                if a >= skip {
                    let dim = ts[a - skip];
                    if dim != 1 {
                        src += idx * stride;
                    }
                    stride *= dim;
                }
            }
            d[src]
        })
        .collect())
}

pub(crate) fn instance_norm(eps: f32, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    const OP: &str = "InstanceNormalization";
    let x = input(ins, 0, OP)?;
    check_out(OP, x, out)?;
    let xs = x.shape();
    if xs.len() < 3 {
        return err(format!("{OP}: X {xs:?} must be (N, C, spatial...)"));
    }
    let c = xs[1];
    let scale = param(OP, "scale", input(ins, 1, OP)?, c)?;
    let bias = param(OP, "B", input(ins, 2, OP)?, c)?;
    grouped_norm(OP, x, c, eps, |ch| (scale[ch], bias[ch]))
}

pub(crate) fn group_norm(groups: usize, eps: f32, per_channel: bool, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    const OP: &str = "GroupNormalization";
    let x = input(ins, 0, OP)?;
    check_out(OP, x, out)?;
    let (scale, bias) = group_params(OP, x, groups, per_channel, ins)?;
    let per_group = x.shape()[1] / groups;
    grouped_norm(OP, x, groups, eps, |ch| {
        let i = if per_channel { ch } else { ch / per_group };
        (scale[i], bias[i])
    })
}

/// GroupNormalization's scale and bias for X, checked against its channels and groups.
fn group_params<'a>(op: &str, x: &Tensor, groups: usize, per_channel: bool, ins: &[Option<&'a Tensor>]) -> Result<(&'a [f32], &'a [f32])> {
    let xs = x.shape();
    if xs.len() < 2 {
        return err(format!("{op}: X {xs:?} must be (N, C, ...)"));
    }
    let c = xs[1];
    if groups == 0 || c % groups != 0 {
        return err(format!("{op}: num_groups {groups} must divide the {c} channels"));
    }
    let plen = if per_channel { c } else { groups };
    Ok((param(op, "scale", input(ins, 1, op)?, plen)?, param(op, "bias", input(ins, 2, op)?, plen)?))
}

/// The factor and offset per image and channel that GroupNormalization applies to X, as
/// `[2 N, C, 1, ...]` (factors, then offsets): `Op::NormScaleShift`.
pub(crate) fn norm_scale_shift(groups: usize, eps: f32, per_channel: bool, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    const OP: &str = "NormScaleShift";
    let x = input(ins, 0, OP)?;
    let (scale, bias) = group_params(OP, x, groups, per_channel, ins)?;
    let xd = f32_data(x, OP, "X")?;
    let xs = x.shape();
    let (n, c) = (xs[0], xs[1]);
    let mut want = vec![1; xs.len()];
    (want[0], want[1]) = (2 * n, c);
    if out.shape != want {
        return err(format!("{OP}: output {:?}, expected {want:?}", out.shape));
    }
    let (per_group, plane) = (c / groups, xs[2..].iter().product::<usize>());
    let block = per_group * plane;
    let mut y = vec![0.0; 2 * n * c];
    let (factors, offsets) = y.split_at_mut(n * c);
    if block > 0 {
        let stats: Vec<(f32, f32)> = xd.par_chunks(block).map(|b| stats(b, eps)).collect();
        for (i, (mean, inv)) in stats.into_iter().enumerate() {
            for j in 0..per_group {
                let ch = (i % groups) * per_group + j;
                let p = if per_channel { ch } else { i % groups };
                let a = inv * scale[p];
                factors[(i / groups) * c + ch] = a;
                offsets[(i / groups) * c + ch] = bias[p] - mean * a;
            }
        }
    }
    Tensor::from_f32(want, y)
}

/// Normalises each of the `groups` contiguous channel blocks of every image on its own, then
/// applies the affine of each channel (`affine_of(channel)` = (scale, bias)).
fn grouped_norm(op: &str, x: &Tensor, groups: usize, eps: f32, affine_of: impl Fn(usize) -> (f32, f32) + Sync) -> Result<Tensor> {
    let xd = f32_data(x, op, "X")?;
    let xs = x.shape();
    let c = xs[1];
    let plane: usize = xs[2..].iter().product();
    let block = c / groups * plane;
    let mut y = xd.to_vec();
    if block > 0 {
        y.par_chunks_mut(block).enumerate().for_each(|(i, blk)| {
            let (mean, inv) = stats(blk, eps);
            let ch0 = (i % groups) * (c / groups);
            for (j, row) in blk.chunks_mut(plane).enumerate() {
                let (s, b) = affine_of(ch0 + j);
                affine(row, inv * s, b - mean * inv * s);
            }
        });
    }
    Tensor::from_f32(xs.to_vec(), y)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::test_util::*;

    fn naive_norm(v: &[f64], eps: f64) -> Vec<f64> {
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / n;
        v.iter().map(|a| (a - mean) / (var + eps).sqrt()).collect()
    }

    #[test]
    fn batch_norm_matches_formula() {
        let mut rng = Rng::new(1);
        for xs in [vec![2, 3, 4, 5], vec![2, 3], vec![1, 4, 3, 2, 2]] {
            let c = xs[1];
            let x = rng.tensor(&xs);
            let (s, b, m) = (rng.tensor(&[c]), rng.tensor(&[c]), rng.tensor(&[c]));
            let var = Tensor::from_f32(vec![c], rng.vec(c).iter().map(|v| v.abs() + 0.1).collect()).unwrap();
            let got = batch_norm(1e-5, &[Some(&x), Some(&s), Some(&b), Some(&m), Some(&var)], &spec(&xs)).unwrap();
            let plane: usize = xs[2..].iter().product();
            let f = |t: &Tensor, i: usize| t.as_f32().unwrap()[i];
            let want: Vec<f32> = x
                .as_f32()
                .unwrap()
                .iter()
                .enumerate()
                .map(|(i, &v)| {
                    let ch = (i / plane) % c;
                    (v - f(&m, ch)) / (f(&var, ch) + 1e-5).sqrt() * f(&s, ch) + f(&b, ch)
                })
                .collect();
            assert_close(got.as_f32().unwrap(), &want, 1e-5, "batchnorm");
        }
        let x = rng.tensor(&[1, 2, 3]);
        let p3 = rng.tensor(&[3]);
        assert!(batch_norm(1e-5, &[Some(&x), Some(&p3), Some(&p3), Some(&p3), Some(&p3)], &spec(&[1, 2, 3])).is_err());
        assert!(batch_norm(1e-5, &[Some(&x), Some(&p3)], &spec(&[1, 2, 3])).is_err());
    }

    #[test]
    fn layer_norm_axes_and_broadcast_params() {
        let mut rng = Rng::new(2);
        let cases: &[(&[usize], i64, &[usize])] =
            &[(&[2, 3, 8], -1, &[8]), (&[2, 3, 8], 1, &[3, 8]), (&[2, 3, 8], 1, &[1, 8]), (&[2, 3, 8], 0, &[2, 3, 8]), (&[4, 5], -2, &[5])];
        for &(xs, axis, ps) in cases {
            for with_bias in [true, false] {
                // Offset the data so a one-pass variance would visibly lose precision.
                let x = Tensor::from_f32(xs.to_vec(), rng.vec(xs.iter().product()).iter().map(|v| v + 300.0).collect()).unwrap();
                let (s, b) = (rng.tensor(ps), rng.tensor(ps));
                let ax = if axis < 0 { (axis + xs.len() as i64) as usize } else { axis as usize };
                let inner = &xs[ax..];
                let block: usize = inner.iter().product();
                let sexp = expand_to("t", "s", &s, inner).unwrap();
                let bexp = expand_to("t", "b", &b, inner).unwrap();
                let mut want = vec![];
                for row in x.as_f32().unwrap().chunks(block) {
                    let nrm = naive_norm(&row.iter().map(|&v| v as f64).collect::<Vec<_>>(), 1e-5);
                    for (j, v) in nrm.iter().enumerate() {
                        want.push((v * sexp[j] as f64 + if with_bias { bexp[j] as f64 } else { 0.0 }) as f32);
                    }
                }
                let ins = [Some(&x), Some(&s), with_bias.then_some(&b)];
                let got = layer_norm(axis, 1e-5, &ins, &spec(xs)).unwrap();
                assert_close(got.as_f32().unwrap(), &want, 1e-4, &format!("layernorm {xs:?} axis {axis}"));
            }
        }
        let x = rng.tensor(&[2, 3]);
        let s = rng.tensor(&[2]);
        assert!(layer_norm(-1, 1e-5, &[Some(&x), Some(&s)], &spec(&[2, 3])).is_err());
        assert!(layer_norm(2, 1e-5, &[Some(&x), Some(&s)], &spec(&[2, 3])).is_err());
    }

    fn check_grouped(xs: &[usize], groups: usize, per_channel: bool, instance: bool, seed: u64) {
        let mut rng = Rng::new(seed);
        let c = xs[1];
        let plen = if per_channel { c } else { groups };
        let x = rng.tensor(xs);
        let (s, b) = (rng.tensor(&[plen]), rng.tensor(&[plen]));
        let got = if instance {
            instance_norm(1e-5, &[Some(&x), Some(&s), Some(&b)], &spec(xs)).unwrap()
        } else {
            group_norm(groups, 1e-5, per_channel, &[Some(&x), Some(&s), Some(&b)], &spec(xs)).unwrap()
        };
        let plane: usize = xs[2..].iter().product();
        let cpg = c / groups;
        let mut want = vec![];
        for (gi, blk) in x.as_f32().unwrap().chunks(cpg * plane).enumerate() {
            let nrm = naive_norm(&blk.iter().map(|&v| v as f64).collect::<Vec<_>>(), 1e-5);
            for (j, v) in nrm.iter().enumerate() {
                let ch = (gi % groups) * cpg + j / plane;
                let pi = if per_channel { ch } else { ch / cpg };
                want.push((v * s.as_f32().unwrap()[pi] as f64 + b.as_f32().unwrap()[pi] as f64) as f32);
            }
        }
        assert_close(got.as_f32().unwrap(), &want, 1e-4, &format!("grouped {xs:?} g={groups} pc={per_channel}"));
        // The same norm as a factor and an offset per image and channel (NormScaleShift).
        let n = xs[0];
        let mut fs = vec![1; xs.len()];
        (fs[0], fs[1]) = (2 * n, c);
        let f = norm_scale_shift(groups, 1e-5, per_channel, &[Some(&x), Some(&s), Some(&b)], &spec(&fs)).unwrap();
        let f = f.as_f32().unwrap();
        let applied: Vec<f32> = x.as_f32().unwrap().iter().enumerate().map(|(i, &v)| v * f[i / plane] + f[n * c + i / plane]).collect();
        assert_close(&applied, &want, 1e-4, &format!("factors {xs:?} g={groups} pc={per_channel}"));
    }

    #[test]
    fn instance_and_group_norm() {
        check_grouped(&[2, 3, 4, 5], 3, true, true, 1);
        check_grouped(&[1, 4, 7], 4, true, true, 2);
        check_grouped(&[2, 6, 3, 3], 3, false, false, 3);
        check_grouped(&[2, 6, 3, 3], 2, true, false, 4);
        check_grouped(&[1, 8, 2, 2, 3], 4, true, false, 5);
        check_grouped(&[3, 4, 5], 1, false, false, 6);
        let mut rng = Rng::new(9);
        let x = rng.tensor(&[1, 6, 2]);
        let p = rng.tensor(&[6]);
        assert!(group_norm(4, 1e-5, true, &[Some(&x), Some(&p), Some(&p)], &spec(&[1, 6, 2])).is_err());
        assert!(group_norm(3, 1e-5, false, &[Some(&x), Some(&p), Some(&p)], &spec(&[1, 6, 2])).is_err());
        let x2 = rng.tensor(&[1, 6]);
        assert!(instance_norm(1e-5, &[Some(&x2), Some(&p), Some(&p)], &spec(&[1, 6])).is_err());
    }
}
