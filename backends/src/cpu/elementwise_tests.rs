#![allow(clippy::excessive_precision)]

use crate::cpu::ops_testkit::*;
use dynaspa_runtime::graph::{BinaryKind, Op, UnaryKind};
use dynaspa_runtime::{DType, Tensor, TensorData};

fn un(k: UnaryKind, x: &Tensor) -> dynaspa_runtime::Result<Tensor> {
    run(&Op::Unary(k), &[Some(x)], spec(x.dtype(), x.shape()))
}

#[test]
fn unary_f32_hand_values() {
    let x = f32t(&[5], vec![-2.0, -0.5, 0.0, 0.5, 3.0]);
    let cases: Vec<(UnaryKind, Vec<f32>)> = vec![
        (UnaryKind::Relu, vec![0.0, 0.0, 0.0, 0.5, 3.0]),
        (UnaryKind::LeakyRelu(0.1), vec![-0.2, -0.05, 0.0, 0.5, 3.0]),
        (UnaryKind::Sigmoid, vec![0.11920292, 0.37754067, 0.5, 0.62245933, 0.95257413]),
        (UnaryKind::HardSigmoid(0.2, 0.5), vec![0.1, 0.4, 0.5, 0.6, 1.0]),
        (UnaryKind::HardSwish, vec![-0.33333333, -0.20833333, 0.0, 0.29166667, 3.0]),
        (UnaryKind::Tanh, vec![-0.96402758, -0.46211716, 0.0, 0.46211716, 0.99505475]),
        (UnaryKind::Erf, vec![-0.99532227, -0.52049988, 0.0, 0.52049988, 0.99997791]),
        (UnaryKind::Gelu(false), vec![-0.04550026, -0.15426877, 0.0, 0.34573123, 2.99595031]),
        (UnaryKind::Gelu(true), vec![-0.04540231, -0.15428599, 0.0, 0.34571401, 2.99636261]),
        (UnaryKind::Exp, vec![0.13533528, 0.60653066, 1.0, 1.64872127, 20.08553692]),
        (UnaryKind::Neg, vec![2.0, 0.5, -0.0, -0.5, -3.0]),
        (UnaryKind::Abs, vec![2.0, 0.5, 0.0, 0.5, 3.0]),
    ];
    for (k, want) in cases {
        let got = f32s(&un(k, &x).unwrap());
        assert_close(&got, &want, 2e-6);
    }
    let s = un(UnaryKind::Sqrt, &f32t(&[3], vec![4.0, 2.0, -1.0])).unwrap();
    let s = f32s(&s);
    assert_eq!(&s[..2], &[2.0, std::f32::consts::SQRT_2]);
    assert!(s[2].is_nan());
}

#[test]
fn unary_keeps_nan_and_handles_f64_and_ints() {
    let x = f32t(&[2], vec![f32::NAN, 1.0]);
    assert!(f32s(&un(UnaryKind::Relu, &x).unwrap())[0].is_nan());
    let d = data(&[3], TensorData::F64(vec![-1.0, 0.25, 2.0]));
    let TensorData::F64(g) = un(UnaryKind::Gelu(false), &d).unwrap().into_data() else { panic!() };
    let want = [-0.15865525393145705, 0.14967658142073093, 1.9544997361036416];
    for (a, b) in g.iter().zip(want) {
        assert!((a - b).abs() < 1e-14, "{a} vs {b}");
    }
    let i = data(&[3], TensorData::I32(vec![-3, 0, i32::MIN]));
    assert_eq!(un(UnaryKind::Relu, &i).unwrap().into_data(), TensorData::I32(vec![0, 0, 0]));
    assert_eq!(un(UnaryKind::Abs, &i).unwrap().into_data(), TensorData::I32(vec![3, 0, i32::MIN]));
    assert_eq!(un(UnaryKind::Neg, &i).unwrap().into_data(), TensorData::I32(vec![3, 0, i32::MIN]));
    let b = data(&[2], TensorData::Bool(vec![true, false]));
    assert_eq!(un(UnaryKind::Not, &b).unwrap().into_data(), TensorData::Bool(vec![false, true]));
    assert!(un(UnaryKind::Sigmoid, &i).unwrap_err().to_string().contains("INT32"));
    assert!(un(UnaryKind::Not, &x).is_err());
    assert!(run(&Op::Unary(UnaryKind::Relu), &[Some(&x)], spec(DType::F32, &[3])).is_err());
    assert!(run(&Op::Unary(UnaryKind::Relu), &[None], spec(DType::F32, &[2])).is_err());
}

#[test]
fn unary_large_parallel_matches_scalar() {
    let mut rng = Rng::new(7);
    let n = 300_001;
    let v = rng.vec_f32(n, -5.0, 5.0);
    let x = f32t(&[n], v.clone());
    let got = f32s(&un(UnaryKind::Gelu(false), &x).unwrap());
    for (g, &x) in got.iter().zip(&v) {
        let want = 0.5 * x as f64 * (1.0 + crate::cpu::mathf::erf_f64(x as f64 / 2f64.sqrt()));
        assert!((*g as f64 - want).abs() < 2e-6, "gelu({x}) = {g}, want {want}");
    }
}

#[test]
fn clip_bounds() {
    let x = f32t(&[5], vec![-3.0, -1.0, 0.0, 2.0, f32::NAN]);
    let (lo, hi) = (Tensor::scalar_f32(-1.5), Tensor::scalar_f32(1.0));
    let o = spec(DType::F32, &[5]);
    let got = f32s(&run(&Op::Clip, &[Some(&x), Some(&lo), Some(&hi)], o.clone()).unwrap());
    assert_eq!(&got[..4], &[-1.5, -1.0, 0.0, 1.0]);
    assert!(got[4].is_nan());
    let got = f32s(&run(&Op::Clip, &[Some(&x), None, Some(&hi)], o.clone()).unwrap());
    assert_eq!(&got[..4], &[-3.0, -1.0, 0.0, 1.0]);
    let got = f32s(&run(&Op::Clip, &[Some(&x)], o.clone()).unwrap());
    assert_eq!(&got[..4], &[-3.0, -1.0, 0.0, 2.0]);
    // min > max: everything becomes max.
    let (lo, hi) = (Tensor::scalar_f32(2.0), Tensor::scalar_f32(1.0));
    let got = f32s(&run(&Op::Clip, &[Some(&x), Some(&lo), Some(&hi)], o).unwrap());
    assert_eq!(&got[..4], &[1.0, 1.0, 1.0, 1.0]);
    let xi = data(&[4], TensorData::I8(vec![-128, -5, 5, 127]));
    let lo = data(&[], TensorData::I8(vec![-6]));
    let got = run(&Op::Clip, &[Some(&xi), Some(&lo)], spec(DType::I8, &[4])).unwrap();
    assert_eq!(got.into_data(), TensorData::I8(vec![-6, -5, 5, 127]));
    let bad = f32t(&[2], vec![0.0, 1.0]);
    assert!(run(&Op::Clip, &[Some(&x), Some(&bad)], spec(DType::F32, &[5])).is_err());
}

fn bin(k: BinaryKind, a: &Tensor, b: &Tensor, dt: DType, shape: &[usize]) -> dynaspa_runtime::Result<Tensor> {
    run(&Op::Binary(k), &[Some(a), Some(b)], spec(dt, shape))
}

/// Naive broadcast of `f` over two f32 inputs.
fn naive2(a: &[f32], ash: &[usize], b: &[f32], bsh: &[usize], osh: &[usize], f: impl Fn(f32, f32) -> f32) -> Vec<f32> {
    (0..count(osh))
        .map(|i| {
            let idx = unravel(i, osh);
            f(a[bcast_index(&idx, ash)], b[bcast_index(&idx, bsh)])
        })
        .collect()
}

#[test]
fn binary_broadcast_random_vs_naive() {
    let mut rng = Rng::new(3);
    let cases: [(&[usize], &[usize], &[usize]); 9] = [
        (&[2, 3, 4], &[2, 3, 4], &[2, 3, 4]),
        (&[2, 3, 4], &[], &[2, 3, 4]),
        (&[1], &[2, 3, 4], &[2, 3, 4]),
        (&[2, 8, 5, 5], &[1, 8, 1, 1], &[2, 8, 5, 5]),
        (&[2, 5, 5, 8], &[8], &[2, 5, 5, 8]),
        (&[3, 1, 4], &[5, 1], &[3, 5, 4]),
        (&[1, 6], &[7, 1], &[7, 6]),
        (&[4, 1, 3, 1], &[1, 5, 1, 2], &[4, 5, 3, 2]),
        (&[2, 64, 40, 40], &[1, 64, 1, 1], &[2, 64, 40, 40]),
    ];
    type F = fn(f32, f32) -> f32;
    let kinds: [(BinaryKind, F); 5] = [
        (BinaryKind::Add, |x, y| x + y),
        (BinaryKind::Sub, |x, y| x - y),
        (BinaryKind::Mul, |x, y| x * y),
        (BinaryKind::Div, |x, y| x / y),
        (BinaryKind::Pow, |x, y| x.powf(y)),
    ];
    for (ash, bsh, osh) in cases {
        let a = rng.vec_f32(count(ash), 0.5, 2.0);
        let b = rng.vec_f32(count(bsh), -2.0, 2.0);
        let (ta, tb) = (f32t(ash, a.clone()), f32t(bsh, b.clone()));
        for (k, f) in kinds {
            let got = f32s(&bin(k, &ta, &tb, DType::F32, osh).unwrap());
            assert_close(&got, &naive2(&a, ash, &b, bsh, osh, f), 1e-6);
            // Swapped operands exercise the other broadcast side.
            let got = f32s(&bin(k, &tb, &ta, DType::F32, osh).unwrap());
            assert_close(&got, &naive2(&b, bsh, &a, ash, osh, f), 1e-6);
        }
        let got = bin(BinaryKind::Greater, &ta, &tb, DType::Bool, osh).unwrap();
        let want: Vec<bool> = naive2(&a, ash, &b, bsh, osh, |x, y| (x > y) as u8 as f32).iter().map(|&v| v == 1.0).collect();
        assert_eq!(got.into_data(), TensorData::Bool(want));
    }
}

#[test]
fn binary_integer_semantics() {
    let a = data(&[4], TensorData::I32(vec![-7, 7, -7, i32::MIN]));
    let b = data(&[4], TensorData::I32(vec![2, -2, -2, -1]));
    assert_eq!(bin(BinaryKind::Div, &a, &b, DType::I32, &[4]).unwrap().into_data(), TensorData::I32(vec![-3, -3, 3, i32::MIN]));
    assert_eq!(bin(BinaryKind::Add, &a, &b, DType::I32, &[4]).unwrap().into_data(), TensorData::I32(vec![-5, 5, -9, i32::MAX]));
    let z = data(&[1], TensorData::I32(vec![0]));
    assert!(bin(BinaryKind::Div, &a, &z, DType::I32, &[4]).unwrap_err().to_string().contains("division by zero"));
    let u = data(&[2], TensorData::U8(vec![250, 3]));
    let v = data(&[], TensorData::U8(vec![10]));
    assert_eq!(bin(BinaryKind::Add, &u, &v, DType::U8, &[2]).unwrap().into_data(), TensorData::U8(vec![4, 13]));
    assert_eq!(bin(BinaryKind::Sub, &u, &v, DType::U8, &[2]).unwrap().into_data(), TensorData::U8(vec![240, 249]));
    let l = data(&[3], TensorData::I64(vec![1, 5, 9]));
    let r = data(&[1], TensorData::I64(vec![5]));
    assert_eq!(bin(BinaryKind::Equal, &l, &r, DType::Bool, &[3]).unwrap().into_data(), TensorData::Bool(vec![false, true, false]));
    assert_eq!(bin(BinaryKind::Less, &l, &r, DType::Bool, &[3]).unwrap().into_data(), TensorData::Bool(vec![true, false, false]));
    let p = data(&[2], TensorData::Bool(vec![true, true]));
    let q = data(&[2, 1], TensorData::Bool(vec![true, false]));
    assert_eq!(bin(BinaryKind::And, &p, &q, DType::Bool, &[2, 2]).unwrap().into_data(), TensorData::Bool(vec![true, true, false, false]));
    assert_eq!(bin(BinaryKind::Equal, &p, &q, DType::Bool, &[2, 2]).unwrap().into_data(), TensorData::Bool(vec![true, true, false, false]));
    // Mixed types, bool arithmetic, bad shapes and bad declared outputs are errors.
    assert!(bin(BinaryKind::Add, &a, &l, DType::I32, &[4]).is_err());
    assert!(bin(BinaryKind::Add, &p, &p, DType::Bool, &[2]).is_err());
    assert!(bin(BinaryKind::Add, &a, &l, DType::I32, &[3]).is_err());
    assert!(bin(BinaryKind::Add, &a, &a, DType::I32, &[5]).is_err());
    assert!(bin(BinaryKind::Greater, &a, &a, DType::I32, &[4]).is_err());
}

#[test]
fn pow_type_combinations() {
    let x = f32t(&[3], vec![1.0, 2.0, 3.0]);
    let e = data(&[3], TensorData::I64(vec![4, 5, 6]));
    assert_eq!(f32s(&bin(BinaryKind::Pow, &x, &e, DType::F32, &[3]).unwrap()), vec![1.0, 32.0, 729.0]);
    let two = data(&[], TensorData::I32(vec![2]));
    assert_eq!(f32s(&bin(BinaryKind::Pow, &x, &two, DType::F32, &[3]).unwrap()), vec![1.0, 4.0, 9.0]);
    let xi = data(&[3], TensorData::I32(vec![1, 2, 3]));
    let ef = f32t(&[3], vec![4.0, 5.0, 0.5]);
    assert_eq!(bin(BinaryKind::Pow, &xi, &ef, DType::I32, &[3]).unwrap().into_data(), TensorData::I32(vec![1, 32, 1]));
    let xl = data(&[4], TensorData::I64(vec![2, -3, 2, 1]));
    let el = data(&[4], TensorData::I64(vec![10, 3, -1, -5]));
    assert_eq!(bin(BinaryKind::Pow, &xl, &el, DType::I64, &[4]).unwrap().into_data(), TensorData::I64(vec![1024, -27, 0, 1]));
    let b = data(&[1], TensorData::Bool(vec![true]));
    assert!(bin(BinaryKind::Pow, &x, &b, DType::F32, &[3]).is_err());
}

#[test]
fn cast_semantics() {
    let x = f32t(&[6], vec![-2.7, -0.0, 0.5, 2.7, 300.0, f32::NAN]);
    let c = |to: DType| run(&Op::Cast { to }, &[Some(&x)], spec(to, &[6])).unwrap().into_data();
    assert_eq!(c(DType::I32), TensorData::I32(vec![-2, 0, 0, 2, 300, 0]));
    assert_eq!(c(DType::I64), TensorData::I64(vec![-2, 0, 0, 2, 300, 0]));
    assert_eq!(c(DType::Bool), TensorData::Bool(vec![true, false, true, true, true, true]));
    let TensorData::F64(d) = c(DType::F64) else { panic!() };
    assert_eq!(d[0], -2.7f32 as f64);
    let i = data(&[4], TensorData::I64(vec![300, -1, 0, 1 << 40]));
    let ci = |to: DType| run(&Op::Cast { to }, &[Some(&i)], spec(to, &[4])).unwrap().into_data();
    assert_eq!(ci(DType::U8), TensorData::U8(vec![44, 255, 0, 0]));
    assert_eq!(ci(DType::I8), TensorData::I8(vec![44, -1, 0, 0]));
    assert_eq!(ci(DType::F32), TensorData::F32(vec![300.0, -1.0, 0.0, (1u64 << 40) as f32]));
    assert_eq!(ci(DType::Bool), TensorData::Bool(vec![true, true, false, true]));
    let b = data(&[2], TensorData::Bool(vec![true, false]));
    let cb = |to: DType| run(&Op::Cast { to }, &[Some(&b)], spec(to, &[2])).unwrap().into_data();
    assert_eq!(cb(DType::F32), TensorData::F32(vec![1.0, 0.0]));
    assert_eq!(cb(DType::U8), TensorData::U8(vec![1, 0]));
    // Every pair converts and round-trips small integers.
    let all = [DType::F32, DType::F64, DType::I64, DType::I32, DType::I8, DType::U8, DType::Bool];
    let small = data(&[3], TensorData::U8(vec![0, 1, 7]));
    for &from in &all {
        let s = run(&Op::Cast { to: from }, &[Some(&small)], spec(from, &[3])).unwrap();
        for &to in &all {
            let t = run(&Op::Cast { to }, &[Some(&s)], spec(to, &[3])).unwrap();
            let back = run(&Op::Cast { to: DType::U8 }, &[Some(&t)], spec(DType::U8, &[3])).unwrap();
            let want = if from == DType::Bool || to == DType::Bool { vec![0, 1, 1] } else { vec![0, 1, 7] };
            assert_eq!(back.into_data(), TensorData::U8(want), "{from} -> {to}");
        }
    }
    assert!(run(&Op::Cast { to: DType::I32 }, &[Some(&x)], spec(DType::I64, &[6])).is_err());
}

#[test]
fn where_broadcasts_three_ways() {
    let c = data(&[2, 1], TensorData::Bool(vec![true, false]));
    let x = f32t(&[3], vec![1.0, 2.0, 3.0]);
    let y = f32t(&[], vec![-1.0]);
    let got = run(&Op::Where, &[Some(&c), Some(&x), Some(&y)], spec(DType::F32, &[2, 3])).unwrap();
    assert_eq!(f32s(&got), vec![1.0, 2.0, 3.0, -1.0, -1.0, -1.0]);
    let mut rng = Rng::new(11);
    let (csh, xsh, ysh, osh) = ([4usize, 1, 6], [3usize, 1], [1usize, 5, 6], [4usize, 5, 6]);
    let cv: Vec<bool> = (0..count(&csh)).map(|_| rng.below(2) == 1).collect();
    let xv = rng.vec_i64(3, -9, 9);
    let yv = rng.vec_i64(30, -9, 9);
    let got = run(
        &Op::Where,
        &[Some(&data(&csh, TensorData::Bool(cv.clone()))), Some(&i64t(&xsh[..1], xv.clone())), Some(&i64t(&ysh, yv.clone()))],
        spec(DType::I64, &osh),
    );
    // X of shape [3] does not broadcast with [.., 6].
    assert!(got.is_err());
    let xv = rng.vec_i64(6, -9, 9);
    let got = run(
        &Op::Where,
        &[Some(&data(&csh, TensorData::Bool(cv.clone()))), Some(&i64t(&[6], xv.clone())), Some(&i64t(&ysh, yv.clone()))],
        spec(DType::I64, &osh),
    )
    .unwrap();
    let want: Vec<i64> = (0..count(&osh))
        .map(|i| {
            let idx = unravel(i, &osh);
            if cv[bcast_index(&idx, &csh)] {
                xv[bcast_index(&idx, &[6])]
            } else {
                yv[bcast_index(&idx, &ysh)]
            }
        })
        .collect();
    assert_eq!(got.into_data(), TensorData::I64(want));
    let _ = xsh;
}

#[test]
fn mask_unit_unaries_hand_values() {
    // Halves round to the even neighbour; zeros keep their sign through Sign, Round, Floor, Ceil.
    let x = f32t(&[10], vec![-2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, 0.49999997, -3.7]);
    let cases: Vec<(UnaryKind, Vec<f32>)> = vec![
        (UnaryKind::Round, vec![-2.0, -2.0, -0.0, -0.0, 0.0, 0.0, 2.0, 2.0, 0.0, -4.0]),
        (UnaryKind::Floor, vec![-3.0, -2.0, -1.0, -0.0, 0.0, 0.0, 1.0, 2.0, 0.0, -4.0]),
        (UnaryKind::Ceil, vec![-2.0, -1.0, -0.0, -0.0, 0.0, 1.0, 2.0, 3.0, 1.0, -3.0]),
        (UnaryKind::Sign, vec![-1.0, -1.0, -1.0, -0.0, 0.0, 1.0, 1.0, 1.0, 1.0, -1.0]),
    ];
    for (k, want) in cases {
        let got = f32s(&un(k, &x).unwrap());
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want), "{k:?}: {got:?}");
    }
    let y = f32t(&[6], vec![-30.0, -2.0, 0.25, 0.5, 4.0, 100.0]);
    let cases: Vec<(UnaryKind, Vec<f32>)> = vec![
        (UnaryKind::Reciprocal, vec![-1.0 / 30.0, -0.5, 4.0, 2.0, 0.25, 0.01]),
        (UnaryKind::Log, vec![f32::NAN, f32::NAN, -1.38629436, -std::f32::consts::LN_2, 1.38629436, 4.60517019]),
        (UnaryKind::Softplus, vec![9.3576230e-14, 0.12692801, 0.82593942, 0.97407698, 4.01814993, 100.0]),
    ];
    for (k, want) in cases {
        assert_close(&f32s(&un(k, &y).unwrap()), &want, 2e-6);
    }
    let zero = f32t(&[1], vec![0.0]);
    assert_eq!(f32s(&un(UnaryKind::Reciprocal, &zero).unwrap()), vec![f32::INFINITY]);
    assert_eq!(f32s(&un(UnaryKind::Log, &zero).unwrap()), vec![f32::NEG_INFINITY]);
    // Softplus keeps the relative accuracy of the negative tail (e^-30) and does not overflow.
    let s = f32s(&un(UnaryKind::Softplus, &f32t(&[2], vec![-30.0, 1e30])).unwrap());
    assert!((s[0] / 9.357623e-14 - 1.0).abs() < 1e-6 && s[1] == 1e30, "{s:?}");
    let nan = f32t(&[1], vec![f32::NAN]);
    use UnaryKind::{Ceil, Floor, Log, Round, Sign, Softplus};
    for k in [Sign, Round, Floor, Ceil, Log, Softplus] {
        assert!(f32s(&un(k, &nan).unwrap())[0].is_nan(), "{k:?} of NaN");
    }
    let d = data(&[3], TensorData::F64(vec![-2.5, 0.5, 3.5]));
    assert_eq!(un(UnaryKind::Round, &d).unwrap().into_data(), TensorData::F64(vec![-2.0, 0.0, 4.0]));
    let i = data(&[4], TensorData::I32(vec![-7, 0, 3, i32::MIN]));
    assert_eq!(un(UnaryKind::Sign, &i).unwrap().into_data(), TensorData::I32(vec![-1, 0, 1, -1]));
    let u = data(&[2], TensorData::U8(vec![0, 200]));
    assert_eq!(un(UnaryKind::Sign, &u).unwrap().into_data(), TensorData::U8(vec![0, 1]));
    assert!(un(UnaryKind::Round, &i).is_err());
    assert!(un(UnaryKind::Sign, &data(&[1], TensorData::Bool(vec![true]))).is_err());
}

#[test]
fn sin_and_cos_hand_values() {
    let x = [-500.0, -2.0, -0.5, 0.0, 1.0, std::f64::consts::PI, 997.25];
    // Of the f32 arguments (pi is 3.1415927 there).
    let sin = [0.46777181, -0.90929743, -0.47942554, 0.0, 0.84147098, -8.742278e-8, -0.97892488];
    let cos = [-0.88384927, -0.41614684, 0.87758256, 1.0, 0.54030231, -1.0, -0.20422065];
    let xf = f32t(&[7], x.iter().map(|&v| v as f32).collect());
    assert_close(&f32s(&un(UnaryKind::Sin, &xf).unwrap()), &sin.map(|v| v as f32), 2e-6);
    assert_close(&f32s(&un(UnaryKind::Cos, &xf).unwrap()), &cos.map(|v| v as f32), 2e-6);
    // Integers are refused; DOUBLE keeps its precision.
    assert!(un(UnaryKind::Sin, &data(&[1], TensorData::I32(vec![1]))).is_err());
    let d = un(UnaryKind::Cos, &data(&[2], TensorData::F64(vec![1e-4, 2.0]))).unwrap().into_data();
    let TensorData::F64(d) = d else { panic!("Cos of DOUBLE gives {d:?}") };
    assert!((d[0] - 0.999999995).abs() < 1e-15 && (d[1] + 0.4161468365471424).abs() < 1e-15, "{d:?}");
    let nan = f32s(&un(UnaryKind::Sin, &f32t(&[2], vec![f32::NAN, f32::INFINITY])).unwrap());
    assert!(nan.iter().all(|v| v.is_nan()), "{nan:?}");
}

#[test]
fn inclusive_comparisons_and_logic() {
    let a = f32t(&[4], vec![1.0, 2.0, f32::NAN, -0.0]);
    let b = f32t(&[1], vec![2.0]);
    let z = f32t(&[], vec![0.0]);
    let ge = |x: &Tensor, y: &Tensor| bin(BinaryKind::GreaterOrEqual, x, y, DType::Bool, &[4]).unwrap().into_data();
    let le = |x: &Tensor, y: &Tensor| bin(BinaryKind::LessOrEqual, x, y, DType::Bool, &[4]).unwrap().into_data();
    assert_eq!(ge(&a, &b), TensorData::Bool(vec![false, true, false, false]));
    assert_eq!(le(&a, &b), TensorData::Bool(vec![true, true, false, true]));
    // -0 >= 0: the threshold `x >= 0` keeps negative zero.
    assert_eq!(ge(&a, &z), TensorData::Bool(vec![true, true, false, true]));
    let l = data(&[4], TensorData::I64(vec![-1, 5, 9, 5]));
    let r = data(&[1], TensorData::I64(vec![5]));
    assert_eq!(
        bin(BinaryKind::GreaterOrEqual, &l, &r, DType::Bool, &[4]).unwrap().into_data(),
        TensorData::Bool(vec![false, true, true, true])
    );
    let p = data(&[2], TensorData::Bool(vec![true, false]));
    let q = data(&[2, 1], TensorData::Bool(vec![true, false]));
    assert_eq!(bin(BinaryKind::Or, &p, &q, DType::Bool, &[2, 2]).unwrap().into_data(), TensorData::Bool(vec![true, true, true, false]));
    assert_eq!(bin(BinaryKind::Xor, &p, &q, DType::Bool, &[2, 2]).unwrap().into_data(), TensorData::Bool(vec![false, true, true, false]));
    assert!(bin(BinaryKind::Or, &l, &r, DType::Bool, &[4]).is_err());
    assert!(bin(BinaryKind::LessOrEqual, &l, &r, DType::I64, &[4]).is_err());
}

#[test]
fn min_and_max_take_one_or_more_broadcast_inputs() {
    let ext = |k: BinaryKind, xs: &[&Tensor], dt: DType, shape: &[usize]| {
        let ins: Vec<Option<&Tensor>> = xs.iter().map(|&x| Some(x)).collect();
        run(&Op::Binary(k), &ins, spec(dt, shape))
    };
    let a = f32t(&[3], vec![1.0, 5.0, -2.0]);
    let b = f32t(&[2, 1], vec![0.0, 4.0]);
    let c = f32t(&[], vec![3.0]);
    let max3 = f32s(&ext(BinaryKind::Max, &[&a, &b, &c], DType::F32, &[2, 3]).unwrap());
    assert_eq!(max3, vec![3.0, 5.0, 3.0, 4.0, 5.0, 4.0]);
    let min3 = f32s(&ext(BinaryKind::Min, &[&a, &b, &c], DType::F32, &[2, 3]).unwrap());
    assert_eq!(min3, vec![0.0, 0.0, -2.0, 1.0, 3.0, -2.0]);
    assert_eq!(f32s(&ext(BinaryKind::Min, &[&c, &a], DType::F32, &[3]).unwrap()), vec![1.0, 3.0, -2.0]);
    assert_eq!(f32s(&ext(BinaryKind::Max, &[&a], DType::F32, &[3]).unwrap()), vec![1.0, 5.0, -2.0]);
    // NaN wins from either side, as numpy's maximum and minimum.
    let n = f32t(&[2], vec![f32::NAN, 1.0]);
    let m = f32t(&[2], vec![0.0, f32::NAN]);
    for k in [BinaryKind::Min, BinaryKind::Max] {
        assert!(f32s(&ext(k, &[&n, &m], DType::F32, &[2]).unwrap()).iter().all(|v| v.is_nan()), "{k:?}");
    }
    let i = data(&[3], TensorData::I64(vec![-3, 7, 0]));
    let j = data(&[1], TensorData::I64(vec![2]));
    assert_eq!(ext(BinaryKind::Max, &[&i, &j], DType::I64, &[3]).unwrap().into_data(), TensorData::I64(vec![2, 7, 2]));
    let u = data(&[2], TensorData::U8(vec![200, 3]));
    let v = data(&[2], TensorData::U8(vec![100, 4]));
    assert_eq!(ext(BinaryKind::Min, &[&u, &v], DType::U8, &[2]).unwrap().into_data(), TensorData::U8(vec![100, 3]));
    // Mixed types, bool inputs, no inputs and a wrong declared shape are errors.
    assert!(ext(BinaryKind::Max, &[&a, &i], DType::F32, &[3]).is_err());
    let t = data(&[1], TensorData::Bool(vec![true]));
    assert!(ext(BinaryKind::Max, &[&t, &t], DType::Bool, &[1]).is_err());
    assert!(ext(BinaryKind::Max, &[], DType::F32, &[]).is_err());
    assert!(ext(BinaryKind::Max, &[&a, &b], DType::F32, &[3]).is_err());
}
