use crate::cpu::ops_testkit::*;
use dynaspa_runtime::graph::Op;
use dynaspa_runtime::tensor::strides_of;
use dynaspa_runtime::{DType, Tensor, TensorData};

fn iota(shape: &[usize]) -> Tensor {
    f32t(shape, (0..count(shape)).map(|i| i as f32).collect())
}

fn slice(
    x: &Tensor,
    starts: &[i64],
    ends: &[i64],
    axes: Option<&[i64]>,
    steps: Option<&[i64]>,
    out: &[usize],
) -> dynaspa_runtime::Result<Tensor> {
    let n = starts.len();
    let (s, e) = (i64t(&[n], starts.to_vec()), i64t(&[n], ends.to_vec()));
    let a = axes.map(|a| i64t(&[a.len()], a.to_vec()));
    let st = steps.map(|a| i64t(&[a.len()], a.to_vec()));
    run(&Op::Slice, &[Some(x), Some(&s), Some(&e), a.as_ref(), st.as_ref()], spec(x.dtype(), out))
}

#[test]
fn slice_onnx_examples() {
    // Examples from the ONNX operator documentation.
    let x = iota(&[2, 4]).reshaped(vec![2, 4]).unwrap();
    let x = f32t(&[2, 4], f32s(&x).iter().map(|v| v + 1.0).collect());
    let got = slice(&x, &[1, 0], &[2, 3], Some(&[0, 1]), Some(&[1, 2]), &[1, 2]).unwrap();
    assert_eq!(f32s(&got), vec![5.0, 7.0]);
    let got = slice(&x, &[0, 1], &[-1, 1000], None, None, &[1, 3]).unwrap();
    assert_eq!(f32s(&got), vec![2.0, 3.0, 4.0]);
    // Negative steps, ends past the front, INT64 extremes.
    let v = iota(&[6]);
    assert_eq!(f32s(&slice(&v, &[-1], &[i64::MIN], None, Some(&[-1]), &[6]).unwrap()), vec![5.0, 4.0, 3.0, 2.0, 1.0, 0.0]);
    assert_eq!(f32s(&slice(&v, &[4], &[0], None, Some(&[-2]), &[2]).unwrap()), vec![4.0, 2.0]);
    assert_eq!(f32s(&slice(&v, &[1], &[i64::MAX], None, Some(&[2]), &[3]).unwrap()), vec![1.0, 3.0, 5.0]);
    assert_eq!(f32s(&slice(&v, &[100], &[1000], None, None, &[0]).unwrap()), Vec::<f32>::new());
    assert_eq!(f32s(&slice(&v, &[2], &[3], None, Some(&[i64::MAX]), &[1]).unwrap()), vec![2.0]);
    assert_eq!(f32s(&slice(&v, &[10], &[-10], None, Some(&[-1]), &[6]).unwrap()).len(), 6);
    // Errors: step 0, repeated axis, wrong declared shape, bad axis.
    assert!(slice(&v, &[0], &[3], None, Some(&[0]), &[3]).is_err());
    let m = iota(&[3, 3]);
    assert!(slice(&m, &[0, 0], &[1, 1], Some(&[0, -2]), None, &[1, 3]).is_err());
    assert!(slice(&v, &[0], &[3], None, None, &[2]).is_err());
    assert!(slice(&v, &[0], &[3], Some(&[1]), None, &[3]).is_err());
}

#[test]
fn slice_random_vs_naive() {
    let mut rng = Rng::new(9);
    let shape = [4usize, 5, 6];
    let x = rng.vec_f32(count(&shape), -1.0, 1.0);
    let t = f32t(&shape, x.clone());
    let st = strides_of(&shape);
    for _ in 0..200 {
        let mut starts = vec![];
        let mut ends = vec![];
        let mut steps = vec![];
        let mut out = vec![];
        let mut sel: Vec<Vec<usize>> = vec![];
        for &n in &shape {
            let n = n as i64;
            let (s, e) = (rng.below(2 * n as u64 + 3) as i64 - n - 1, rng.below(2 * n as u64 + 3) as i64 - n - 1);
            let step = [1, 2, 3, -1, -2][rng.below(5) as usize];
            // Naive: walk the Python-style range after ONNX clamping.
            let norm = |i: i64| if i < 0 { i + n } else { i };
            let idx: Vec<usize> = if step > 0 {
                let (a, b) = (norm(s).clamp(0, n), norm(e).clamp(0, n));
                (a..b).step_by(step as usize).map(|i| i as usize).collect()
            } else {
                let (a, b) = (norm(s).clamp(0, n - 1), norm(e).clamp(-1, n - 1));
                let mut v = vec![];
                let mut i = a;
                while i > b {
                    v.push(i as usize);
                    i += step;
                }
                v
            };
            starts.push(s);
            ends.push(e);
            steps.push(step);
            out.push(idx.len());
            sel.push(idx);
        }
        let got = slice(&t, &starts, &ends, Some(&[0, 1, 2]), Some(&steps), &out).unwrap();
        let want: Vec<f32> = (0..count(&out))
            .map(|i| {
                let idx = unravel(i, &out);
                x[(0..3).map(|d| sel[d][idx[d]] * st[d]).sum::<usize>()]
            })
            .collect();
        assert_eq!(f32s(&got), want, "starts {starts:?} ends {ends:?} steps {steps:?}");
    }
}

#[test]
fn gather_axes_and_negative_indices() {
    let x = iota(&[3, 4]);
    let ind = i64t(&[2, 2], vec![0, -1, 2, 1]);
    let got = run(&Op::Gather { axis: 0 }, &[Some(&x), Some(&ind)], spec(DType::F32, &[2, 2, 4])).unwrap();
    let want: Vec<f32> = [0, 2, 2, 1].iter().flat_map(|&r| (0..4).map(move |c| (r * 4 + c) as f32)).collect();
    assert_eq!(f32s(&got), want);
    let ind = data(&[3], TensorData::I32(vec![3, 0, -4]));
    let got = run(&Op::Gather { axis: -1 }, &[Some(&x), Some(&ind)], spec(DType::F32, &[3, 3])).unwrap();
    assert_eq!(f32s(&got), vec![3.0, 0.0, 0.0, 7.0, 4.0, 4.0, 11.0, 8.0, 8.0]);
    // Scalar index removes the axis.
    let got = run(&Op::Gather { axis: 1 }, &[Some(&x), Some(&Tensor::scalar_i64(-2))], spec(DType::F32, &[3])).unwrap();
    assert_eq!(f32s(&got), vec![2.0, 6.0, 10.0]);
    let b = data(&[2, 2], TensorData::Bool(vec![true, false, false, true]));
    let got = run(&Op::Gather { axis: 0 }, &[Some(&b), Some(&i64t(&[1], vec![1]))], spec(DType::Bool, &[1, 2])).unwrap();
    assert_eq!(got.into_data(), TensorData::Bool(vec![false, true]));
    let err = run(&Op::Gather { axis: 0 }, &[Some(&x), Some(&i64t(&[1], vec![3]))], spec(DType::F32, &[1, 4])).unwrap_err();
    assert!(err.to_string().contains("out of range"), "{err}");
    assert!(run(&Op::Gather { axis: 0 }, &[Some(&x), Some(&i64t(&[1], vec![-4]))], spec(DType::F32, &[1, 4])).is_err());
    assert!(run(&Op::Gather { axis: 2 }, &[Some(&x), Some(&i64t(&[1], vec![0]))], spec(DType::F32, &[3, 4])).is_err());
    assert!(run(&Op::Gather { axis: 0 }, &[Some(&x), Some(&f32t(&[1], vec![0.0]))], spec(DType::F32, &[1, 4])).is_err());
}

#[test]
fn gather_large_rows() {
    let mut rng = Rng::new(2);
    let (n, d) = (1000usize, 96usize);
    let table = rng.vec_f32(n * d, -1.0, 1.0);
    let idx = rng.vec_i64(700, -(n as i64), n as i64);
    let got =
        run(&Op::Gather { axis: 0 }, &[Some(&f32t(&[n, d], table.clone())), Some(&i64t(&[700], idx.clone()))], spec(DType::F32, &[700, d]))
            .unwrap();
    let want: Vec<f32> = idx
        .iter()
        .flat_map(|&i| {
            let r = if i < 0 { i + n as i64 } else { i } as usize;
            table[r * d..(r + 1) * d].to_vec()
        })
        .collect();
    assert_eq!(f32s(&got), want);
}
