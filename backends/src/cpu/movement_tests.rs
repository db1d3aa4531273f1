use crate::cpu::ops_testkit::*;
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::graph::Op;
use dynaspa_runtime::tensor::strides_of;
use dynaspa_runtime::{DType, Tensor, TensorData};
use std::sync::Arc;

fn iota(shape: &[usize]) -> Tensor {
    f32t(shape, (0..count(shape)).map(|i| i as f32).collect())
}

#[test]
fn reshape_family_copies_data() {
    let x = iota(&[2, 3]);
    for op in
        [Op::Reshape { allowzero: false }, Op::Flatten { axis: 1 }, Op::Squeeze { axes: None }, Op::Unsqueeze { axes: None }, Op::Identity]
    {
        let got = run(&op, &[Some(&x)], spec(DType::F32, &[3, 1, 2])).unwrap();
        assert_eq!(got.shape(), &[3, 1, 2]);
        assert_eq!(f32s(&got), f32s(&x));
    }
    assert!(run(&Op::Identity, &[Some(&x)], spec(DType::F32, &[7])).is_err());
    assert!(run(&Op::Identity, &[Some(&x)], spec(DType::I64, &[6])).is_err());
}

fn naive_transpose(x: &[f32], shape: &[usize], perm: &[usize]) -> Vec<f32> {
    let oshape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let st = strides_of(shape);
    (0..count(&oshape))
        .map(|i| {
            let idx = unravel(i, &oshape);
            x[perm.iter().enumerate().map(|(d, &p)| idx[d] * st[p]).sum::<usize>()]
        })
        .collect()
}

#[test]
fn transpose_random_vs_naive() {
    let mut rng = Rng::new(5);
    let cases: [(&[usize], &[usize]); 8] = [
        (&[2, 3], &[1, 0]),
        (&[2, 3, 4], &[]),
        (&[2, 3, 4, 5], &[0, 2, 3, 1]),
        (&[2, 3, 4, 5], &[0, 3, 1, 2]),
        (&[2, 3, 1, 5], &[3, 2, 1, 0]),
        (&[2, 64, 40, 40], &[0, 2, 3, 1]),
        (&[2, 40, 40, 64], &[0, 3, 1, 2]),
        (&[3, 50, 7, 33], &[0, 2, 1, 3]),
    ];
    for (shape, perm) in cases {
        let v = rng.vec_f32(count(shape), -1.0, 1.0);
        let full: Vec<usize> = if perm.is_empty() { (0..shape.len()).rev().collect() } else { perm.to_vec() };
        let oshape: Vec<usize> = full.iter().map(|&p| shape[p]).collect();
        let got = run(&Op::Transpose { perm: perm.to_vec() }, &[Some(&f32t(shape, v.clone()))], spec(DType::F32, &oshape)).unwrap();
        assert_eq!(f32s(&got), naive_transpose(&v, shape, &full), "{shape:?} {perm:?}");
    }
    let x = data(&[2, 2], TensorData::U8(vec![1, 2, 3, 4]));
    let got = run(&Op::Transpose { perm: vec![] }, &[Some(&x)], spec(DType::U8, &[2, 2])).unwrap();
    assert_eq!(got.into_data(), TensorData::U8(vec![1, 3, 2, 4]));
    assert!(run(&Op::Transpose { perm: vec![0, 0] }, &[Some(&x)], spec(DType::U8, &[2, 2])).is_err());
    assert!(run(&Op::Transpose { perm: vec![0, 2] }, &[Some(&x)], spec(DType::U8, &[2, 2])).is_err());
}

#[test]
fn concat_and_split() {
    let a = iota(&[2, 2]);
    let b = f32t(&[2, 1], vec![10.0, 11.0]);
    let got = run(&Op::Concat { axis: -1 }, &[Some(&a), Some(&b)], spec(DType::F32, &[2, 3])).unwrap();
    assert_eq!(f32s(&got), vec![0.0, 1.0, 10.0, 2.0, 3.0, 11.0]);
    let got = run(&Op::Concat { axis: 0 }, &[Some(&a), Some(&a)], spec(DType::F32, &[4, 2])).unwrap();
    assert_eq!(f32s(&got), vec![0.0, 1.0, 2.0, 3.0, 0.0, 1.0, 2.0, 3.0]);
    let e = f32t(&[2, 0], vec![]);
    let got = run(&Op::Concat { axis: 1 }, &[Some(&e), Some(&b), Some(&e)], spec(DType::F32, &[2, 1])).unwrap();
    assert_eq!(f32s(&got), vec![10.0, 11.0]);
    assert!(run(&Op::Concat { axis: 0 }, &[Some(&a), Some(&b)], spec(DType::F32, &[4, 2])).is_err());
    assert!(run(&Op::Concat { axis: 2 }, &[Some(&a)], spec(DType::F32, &[2, 2])).is_err());

    let x = iota(&[2, 6]);
    let op = Op::Split { axis: 1, split: None, num_outputs: None };
    let outs = [spec(DType::F32, &[2, 1]), spec(DType::F32, &[2, 0]), spec(DType::F32, &[2, 5])];
    let got = crate::cpu::eval_op(&op, &[Some(&x)], &outs).unwrap();
    assert_eq!(f32s(&got[0]), vec![0.0, 6.0]);
    assert_eq!(got[1].shape(), &[2, 0]);
    assert_eq!(f32s(&got[2]), vec![1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 8.0, 9.0, 10.0, 11.0]);
    let op = Op::Split { axis: -2, split: None, num_outputs: Some(2) };
    let got = crate::cpu::eval_op(&op, &[Some(&x)], &[spec(DType::F32, &[1, 6]), spec(DType::F32, &[1, 6])]).unwrap();
    assert_eq!(f32s(&got[1]), (6..12).map(|i| i as f32).collect::<Vec<_>>());
    let bad: [TensorSpec; 2] = [spec(DType::F32, &[2, 2]), spec(DType::F32, &[2, 2])];
    assert!(crate::cpu::eval_op(&Op::Split { axis: 1, split: None, num_outputs: None }, &[Some(&x)], &bad).is_err());
}

#[test]
fn expand_shape_constant_of_shape() {
    let x = f32t(&[3, 1], vec![1.0, 2.0, 3.0]);
    let s = i64t(&[3], vec![2, 1, 4]);
    let got = run(&Op::Expand, &[Some(&x), Some(&s)], spec(DType::F32, &[2, 3, 4])).unwrap();
    let want: Vec<f32> = (0..24).map(|i| ((i / 4) % 3 + 1) as f32).collect();
    assert_eq!(f32s(&got), want);
    // The shape may be smaller than the input; the result is the broadcast of both.
    let s = i64t(&[1], vec![1]);
    let got = run(&Op::Expand, &[Some(&x), Some(&s)], spec(DType::F32, &[3, 1])).unwrap();
    assert_eq!(f32s(&got), vec![1.0, 2.0, 3.0]);
    let s = i64t(&[2], vec![2, 2]);
    assert!(run(&Op::Expand, &[Some(&x), Some(&s)], spec(DType::F32, &[3, 2])).is_err());

    let x = iota(&[2, 3, 4, 5]);
    let sh = |start: i64, end: Option<i64>, want: Vec<i64>| {
        let got = run(&Op::Shape { start, end }, &[Some(&x)], spec(DType::I64, &[want.len()])).unwrap();
        assert_eq!(got.into_data(), TensorData::I64(want), "start {start} end {end:?}");
    };
    sh(0, None, vec![2, 3, 4, 5]);
    sh(1, Some(-1), vec![3, 4]);
    sh(-10, Some(10), vec![2, 3, 4, 5]);
    sh(-1, None, vec![5]);
    sh(3, Some(1), vec![]);

    let value = Arc::new(data(&[1], TensorData::I32(vec![7])));
    let got = run(&Op::ConstantOfShape { value }, &[Some(&i64t(&[2], vec![2, 2]))], spec(DType::I32, &[2, 2])).unwrap();
    assert_eq!(got.into_data(), TensorData::I32(vec![7; 4]));
    let value = Arc::new(Tensor::scalar_f32(0.5));
    let got = run(&Op::ConstantOfShape { value }, &[], spec(DType::F32, &[])).unwrap();
    assert_eq!(f32s(&got), vec![0.5]);
    let value = Arc::new(f32t(&[2], vec![0.0, 1.0]));
    assert!(run(&Op::ConstantOfShape { value }, &[], spec(DType::F32, &[3])).is_err());
}
