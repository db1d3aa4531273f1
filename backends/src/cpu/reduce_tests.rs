use crate::cpu::ops_testkit::*;
use dynaspa_runtime::graph::{Op, Reduce, ReduceKind};
use dynaspa_runtime::{DType, Tensor, TensorData};

fn red(kind: ReduceKind, axes: Option<Vec<i64>>, keepdims: bool, noop: bool) -> Op {
    Op::Reduce(Reduce { kind, axes, keepdims, noop_with_empty_axes: noop })
}

#[test]
fn reduce_every_axis_subset_vs_naive() {
    let mut rng = Rng::new(21);
    let shape = [3usize, 4, 1, 5];
    let x = rng.vec_f32(count(&shape), -2.0, 2.0);
    let t = f32t(&shape, x.clone());
    for mask in 0..16u32 {
        let axes: Vec<i64> = (0..4).filter(|d| mask >> d & 1 == 1).map(|d| d as i64 - if d % 2 == 0 { 4 } else { 0 }).collect();
        let red_d: Vec<bool> = (0..4).map(|d| mask == 0 || mask >> d & 1 == 1).collect();
        for keep in [true, false] {
            let oshape: Vec<usize> = (0..4).filter(|&d| keep || !red_d[d]).map(|d| if red_d[d] { 1 } else { shape[d] }).collect();
            let kept: Vec<usize> = (0..4).map(|d| if red_d[d] { 1 } else { shape[d] }).collect();
            for kind in [ReduceKind::Sum, ReduceKind::Mean, ReduceKind::Max] {
                // Axes once as the attribute, once as input 1.
                let ax = i64t(&[axes.len()], axes.clone());
                let a = run(&red(kind, Some(axes.clone()), keep, false), &[Some(&t)], spec(DType::F32, &oshape)).unwrap();
                let b = run(&red(kind, None, keep, false), &[Some(&t), Some(&ax)], spec(DType::F32, &oshape)).unwrap();
                let mut want = vec![if kind == ReduceKind::Max { f32::NEG_INFINITY } else { 0.0 }; count(&kept)];
                let mut n = vec![0usize; want.len()];
                for (i, &v) in x.iter().enumerate() {
                    let idx = unravel(i, &shape);
                    let o = (0..4).fold(0, |acc, d| acc * kept[d] + if red_d[d] { 0 } else { idx[d] });
                    want[o] = if kind == ReduceKind::Max { want[o].max(v) } else { want[o] + v };
                    n[o] += 1;
                }
                if kind == ReduceKind::Mean {
                    want.iter_mut().zip(&n).for_each(|(w, &c)| *w /= c as f32);
                }
                assert_close(&f32s(&a), &want, 1e-5);
                assert_eq!(f32s(&a), f32s(&b), "{kind:?} axes {axes:?}");
            }
        }
    }
}

#[test]
fn reduce_large_parallel_and_types() {
    let mut rng = Rng::new(4);
    let shape = [64usize, 33, 40];
    let x = rng.vec_i64(count(&shape), -100, 100);
    let t = i64t(&shape, x.clone());
    let got = run(&red(ReduceKind::Sum, Some(vec![1]), false, false), &[Some(&t)], spec(DType::I64, &[64, 40])).unwrap();
    let mut want = vec![0i64; 64 * 40];
    for a in 0..64 {
        for b in 0..33 {
            for c in 0..40 {
                want[a * 40 + c] += x[(a * 33 + b) * 40 + c];
            }
        }
    }
    assert_eq!(got.into_data(), TensorData::I64(want));
    let i = data(&[2, 2], TensorData::I32(vec![1, 2, -3, -4]));
    let got = run(&red(ReduceKind::Mean, Some(vec![1]), true, false), &[Some(&i)], spec(DType::I32, &[2, 1])).unwrap();
    assert_eq!(got.into_data(), TensorData::I32(vec![1, -3]));
    let b = data(&[2, 2], TensorData::Bool(vec![false, true, false, false]));
    let got = run(&red(ReduceKind::Max, Some(vec![1]), false, false), &[Some(&b)], spec(DType::Bool, &[2])).unwrap();
    assert_eq!(got.into_data(), TensorData::Bool(vec![true, false]));
    assert!(run(&red(ReduceKind::Sum, None, false, false), &[Some(&b)], spec(DType::Bool, &[])).is_err());
    let n = f32t(&[3], vec![1.0, f32::NAN, 2.0]);
    let got = run(&red(ReduceKind::Max, None, false, false), &[Some(&n)], spec(DType::F32, &[])).unwrap();
    assert!(f32s(&got)[0].is_nan());
}

#[test]
fn reduce_empty_axes_and_empty_sets() {
    let x = f32t(&[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let empty = i64t(&[0], vec![]);
    let got = run(&red(ReduceKind::Sum, None, true, true), &[Some(&x), Some(&empty)], spec(DType::F32, &[2, 3])).unwrap();
    assert_eq!(f32s(&got), f32s(&x));
    let got = run(&red(ReduceKind::Sum, None, true, false), &[Some(&x), Some(&empty)], spec(DType::F32, &[1, 1])).unwrap();
    assert_eq!(f32s(&got), vec![21.0]);
    let got = run(&red(ReduceKind::Mean, None, false, false), &[Some(&x)], spec(DType::F32, &[])).unwrap();
    assert_eq!(f32s(&got), vec![3.5]);
    // Reducing a zero-length axis: 0 for Sum, -inf for Max, NaN for Mean.
    let z = f32t(&[2, 0, 4], vec![]);
    let o = spec(DType::F32, &[2, 1, 4]);
    let s = run(&red(ReduceKind::Sum, Some(vec![1]), true, false), &[Some(&z)], o.clone()).unwrap();
    assert_eq!(f32s(&s), vec![0.0; 8]);
    let m = run(&red(ReduceKind::Max, Some(vec![1]), true, false), &[Some(&z)], o.clone()).unwrap();
    assert_eq!(f32s(&m), vec![f32::NEG_INFINITY; 8]);
    let a = run(&red(ReduceKind::Mean, Some(vec![1]), true, false), &[Some(&z)], o).unwrap();
    assert!(f32s(&a).iter().all(|v| v.is_nan()));
    let got = run(&red(ReduceKind::Sum, Some(vec![2]), true, false), &[Some(&z)], spec(DType::F32, &[2, 0, 1])).unwrap();
    assert_eq!(got.len(), 0);
    assert!(run(&red(ReduceKind::Sum, Some(vec![2]), true, false), &[Some(&x)], spec(DType::F32, &[2, 1])).is_err());
    assert!(run(&red(ReduceKind::Sum, Some(vec![1]), true, false), &[Some(&x)], spec(DType::F32, &[2])).is_err());
}

fn cumsum(x: &Tensor, axis: i64, exclusive: bool, reverse: bool) -> Vec<f32> {
    let a = Tensor::scalar_i64(axis);
    f32s(&run(&Op::CumSum { exclusive, reverse }, &[Some(x), Some(&a)], spec(x.dtype(), x.shape())).unwrap())
}

#[test]
fn cumsum_onnx_examples() {
    let x = f32t(&[5], vec![1.0, 2.0, 3.0, 4.0, 5.0]);
    assert_eq!(cumsum(&x, 0, false, false), vec![1.0, 3.0, 6.0, 10.0, 15.0]);
    assert_eq!(cumsum(&x, 0, true, false), vec![0.0, 1.0, 3.0, 6.0, 10.0]);
    assert_eq!(cumsum(&x, 0, false, true), vec![15.0, 14.0, 12.0, 9.0, 5.0]);
    assert_eq!(cumsum(&x, -1, true, true), vec![14.0, 12.0, 9.0, 5.0, 0.0]);
    let m = f32t(&[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(cumsum(&m, 0, false, false), vec![1.0, 2.0, 3.0, 5.0, 7.0, 9.0]);
    assert_eq!(cumsum(&m, 1, false, false), vec![1.0, 3.0, 6.0, 4.0, 9.0, 15.0]);
    let i = data(&[3], TensorData::I32(vec![i32::MAX, 1, 1]));
    let a = data(&[1], TensorData::I32(vec![0]));
    let got = run(&Op::CumSum { exclusive: false, reverse: false }, &[Some(&i), Some(&a)], spec(DType::I32, &[3])).unwrap();
    assert_eq!(got.into_data(), TensorData::I32(vec![i32::MAX, i32::MIN, i32::MIN + 1]));
    let bad = i64t(&[2], vec![0, 1]);
    assert!(run(&Op::CumSum { exclusive: false, reverse: false }, &[Some(&x), Some(&bad)], spec(DType::F32, &[5])).is_err());
    assert!(
        run(&Op::CumSum { exclusive: false, reverse: false }, &[Some(&x), Some(&Tensor::scalar_i64(1))], spec(DType::F32, &[5])).is_err()
    );
}
