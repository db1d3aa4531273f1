//! Softmax: along one axis (opset >= 13), or over the flattened trailing block from `axis`
//! (opsets < 13). Subtracting the maximum first keeps exp from overflowing.

use super::input;
use super::kernel_util::{err, f32_data, norm_axis};
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::{Result, Tensor};
use rayon::prelude::*;

pub(crate) fn softmax(axis: i64, legacy: bool, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    const OP: &str = "Softmax";
    let x = input(ins, 0, OP)?;
    let xd = f32_data(x, OP, "input")?;
    let xs = x.shape();
    if xs != out.shape.as_slice() {
        return err(format!("{OP}: output shape {:?} must equal the input shape {xs:?}", out.shape));
    }
    let mut y = xd.to_vec();
    if xs.is_empty() {
        // A single element is its own distribution.
        y.fill(1.0);
        return Tensor::from_f32(vec![], y);
    }
    let ax = norm_axis(OP, axis, xs.len(), false)?;
    let (len, inner) = if legacy { (xs[ax..].iter().product::<usize>(), 1) } else { (xs[ax], xs[ax + 1..].iter().product::<usize>()) };
    let block = len * inner;
    if block == 0 {
        return Tensor::from_f32(xs.to_vec(), y);
    }
    y.par_chunks_mut(block).for_each(|b| {
        if inner == 1 {
            softmax_row(b);
        } else {
            strided(b, inner);
        }
    });
    Tensor::from_f32(xs.to_vec(), y)
}

fn softmax_row(v: &mut [f32]) {
    let max = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f32;
    for a in v.iter_mut() {
        *a = (*a - max).exp();
        sum += *a;
    }
    let inv = 1.0 / sum;
    v.iter_mut().for_each(|a| *a *= inv);
}

/// Softmax along the rows of a `rows x inner` block, column-wise; row operations keep the
/// memory access contiguous instead of striding down each column.
fn strided(b: &mut [f32], inner: usize) {
    let mut max = b[..inner].to_vec();
    for row in b.chunks(inner).skip(1) {
        max.iter_mut().zip(row).for_each(|(m, &v)| *m = m.max(v));
    }
    let mut sum = vec![0.0f32; inner];
    for row in b.chunks_mut(inner) {
        for ((v, &m), s) in row.iter_mut().zip(&max).zip(sum.iter_mut()) {
            *v = (*v - m).exp();
            *s += *v;
        }
    }
    sum.iter_mut().for_each(|s| *s = 1.0 / *s);
    for row in b.chunks_mut(inner) {
        row.iter_mut().zip(&sum).for_each(|(v, &s)| *v *= s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::test_util::*;

    fn reference(x: &[f32], outer: usize, len: usize, inner: usize) -> Vec<f32> {
        let mut y = vec![0.0; x.len()];
        for o in 0..outer {
            for i in 0..inner {
                let at = |j: usize| (o * len + j) * inner + i;
                let max = (0..len).map(|j| x[at(j)] as f64).fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = (0..len).map(|j| (x[at(j)] as f64 - max).exp()).sum();
                for j in 0..len {
                    y[at(j)] = ((x[at(j)] as f64 - max).exp() / sum) as f32;
                }
            }
        }
        y
    }

    #[test]
    fn softmax_axes_and_legacy() {
        let mut rng = Rng::new(4);
        let xs = [2usize, 3, 4, 5];
        // Large values check the max subtraction.
        let x = Tensor::from_f32(xs.to_vec(), rng.vec(120).iter().map(|v| v * 100.0).collect()).unwrap();
        let xd = x.as_f32().unwrap();
        for axis in -4i64..4 {
            let ax = (axis + 4) as usize % 4;
            let outer: usize = xs[..ax].iter().product();
            let got = softmax(axis, false, &[Some(&x)], &spec(&xs)).unwrap();
            let want = reference(xd, outer, xs[ax], xs[ax + 1..].iter().product());
            assert_close(got.as_f32().unwrap(), &want, 1e-5, &format!("axis {axis}"));
            let got = softmax(axis, true, &[Some(&x)], &spec(&xs)).unwrap();
            let want = reference(xd, outer, xs[ax..].iter().product(), 1);
            assert_close(got.as_f32().unwrap(), &want, 1e-5, &format!("legacy axis {axis}"));
        }
        assert!(softmax(4, false, &[Some(&x)], &spec(&xs)).is_err());
        assert!(softmax(-5, true, &[Some(&x)], &spec(&xs)).is_err());
        let s = Tensor::scalar_f32(3.0);
        assert_eq!(softmax(0, false, &[Some(&s)], &spec(&[])).unwrap().as_f32().unwrap(), &[1.0]);
        let e = Tensor::from_f32(vec![2, 0], vec![]).unwrap();
        assert_eq!(softmax(-1, false, &[Some(&e)], &spec(&[2, 0])).unwrap().len(), 0);
    }
}
