use crate::cpu::ops_testkit::*;
use dynaspa_runtime::graph::{Op, PadMode};
use dynaspa_runtime::{Tensor, TensorData};

fn pad(
    mode: PadMode,
    x: &Tensor,
    pads: &[i64],
    value: Option<&Tensor>,
    axes: Option<&[i64]>,
    out: &[usize],
) -> dynaspa_runtime::Result<Tensor> {
    let p = i64t(&[pads.len()], pads.to_vec());
    let a = axes.map(|a| i64t(&[a.len()], a.to_vec()));
    run(&Op::Pad { mode }, &[Some(x), Some(&p), value, a.as_ref()], spec(x.dtype(), out))
}

#[test]
fn pad_modes_onnx_example() {
    // The 3x2 example of the ONNX Pad documentation, padded by 2 at the front of axis 1.
    let x = f32t(&[3, 2], vec![1.0, 1.2, 2.3, 3.4, 4.5, 5.7]);
    let cases = [
        (PadMode::Constant, vec![0.0, 0.0, 1.0, 1.2, 0.0, 0.0, 2.3, 3.4, 0.0, 0.0, 4.5, 5.7]),
        (PadMode::Reflect, vec![1.0, 1.2, 1.0, 1.2, 2.3, 3.4, 2.3, 3.4, 4.5, 5.7, 4.5, 5.7]),
        (PadMode::Edge, vec![1.0, 1.0, 1.0, 1.2, 2.3, 2.3, 2.3, 3.4, 4.5, 4.5, 4.5, 5.7]),
        (PadMode::Wrap, vec![1.0, 1.2, 1.0, 1.2, 2.3, 3.4, 2.3, 3.4, 4.5, 5.7, 4.5, 5.7]),
    ];
    for (mode, want) in cases {
        let got = pad(mode, &x, &[0, 2, 0, 0], None, None, &[3, 4]).unwrap();
        assert_eq!(f32s(&got), want, "{mode:?}");
    }
    let got = pad(PadMode::Reflect, &x, &[2, 0, 0, 0], None, None, &[5, 2]).unwrap();
    assert_eq!(f32s(&got), vec![4.5, 5.7, 2.3, 3.4, 1.0, 1.2, 2.3, 3.4, 4.5, 5.7]);
}

#[test]
fn pad_wide_reflect_and_wrap_follow_numpy() {
    // numpy: np.pad([1,2,3], (7,0), 'reflect') == [2,3,2,1,2,3,2,1,2,3]
    let x = data(&[3], TensorData::I64(vec![1, 2, 3]));
    let got = pad(PadMode::Reflect, &x, &[7, 0], None, None, &[10]).unwrap();
    assert_eq!(got.into_data(), TensorData::I64(vec![2, 3, 2, 1, 2, 3, 2, 1, 2, 3]));
    let got = pad(PadMode::Reflect, &x, &[0, 7], None, None, &[10]).unwrap();
    assert_eq!(got.into_data(), TensorData::I64(vec![1, 2, 3, 2, 1, 2, 3, 2, 1, 2]));
    let got = pad(PadMode::Wrap, &x, &[7, 0], None, None, &[10]).unwrap();
    assert_eq!(got.into_data(), TensorData::I64(vec![3, 1, 2, 3, 1, 2, 3, 1, 2, 3]));
    let one = data(&[1], TensorData::I64(vec![5]));
    let got = pad(PadMode::Reflect, &one, &[2, 1], None, None, &[4]).unwrap();
    assert_eq!(got.into_data(), TensorData::I64(vec![5; 4]));
}

#[test]
fn pad_constant_value_axes_and_negative() {
    let x = f32t(&[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let v = Tensor::scalar_f32(9.0);
    // axes [-1]: pads (1, 2) on the last axis only.
    let got = pad(PadMode::Constant, &x, &[1, 2], Some(&v), Some(&[-1]), &[2, 6]).unwrap();
    assert_eq!(f32s(&got), vec![9.0, 1.0, 2.0, 3.0, 9.0, 9.0, 9.0, 4.0, 5.0, 6.0, 9.0, 9.0]);
    // Negative pads crop: drop the first row and the last column, then edge-pad 1 in front of axis 1.
    let got = pad(PadMode::Edge, &x, &[-1, 1, 0, -1], None, None, &[1, 3]).unwrap();
    assert_eq!(f32s(&got), vec![4.0, 4.0, 5.0]);
    let got = pad(PadMode::Constant, &x, &[0, -3, 0, 1], Some(&v), None, &[2, 1]).unwrap();
    assert_eq!(f32s(&got), vec![9.0, 9.0]);
    // Integer data with an empty constant_value tensor (= absent).
    let xi = data(&[2], TensorData::U8(vec![7, 8]));
    let empty = data(&[0], TensorData::U8(vec![]));
    let got = pad(PadMode::Constant, &xi, &[1, 1], Some(&empty), None, &[4]).unwrap();
    assert_eq!(got.into_data(), TensorData::U8(vec![0, 7, 8, 0]));
    // Errors: wrong pad count, over-cropping, reflecting an empty axis, wrong declared shape.
    assert!(pad(PadMode::Constant, &x, &[1, 1], None, None, &[4, 3]).is_err());
    assert!(pad(PadMode::Constant, &x, &[-3, 0, 0, 0], None, None, &[0, 3]).is_err());
    let e = f32t(&[0], vec![]);
    assert!(pad(PadMode::Reflect, &e, &[1, 1], None, None, &[2]).is_err());
    assert_eq!(pad(PadMode::Constant, &e, &[1, 1], None, None, &[2]).unwrap().len(), 2);
    assert!(pad(PadMode::Constant, &x, &[1, 0, 0, 0], None, None, &[2, 3]).is_err());
    assert!(pad(PadMode::Constant, &x, &[0, 0], None, Some(&[0, 0]), &[2, 3]).is_err());
}

#[test]
fn pad_random_vs_naive() {
    let mut rng = Rng::new(17);
    let shape = [3usize, 4, 5];
    let x = rng.vec_f32(count(&shape), -1.0, 1.0);
    let t = f32t(&shape, x.clone());
    for mode in [PadMode::Constant, PadMode::Reflect, PadMode::Edge, PadMode::Wrap] {
        for _ in 0..30 {
            let pads: Vec<i64> = (0..6).map(|_| rng.below(7) as i64 - 1).collect();
            let out: Vec<usize> = (0..3).map(|d| (shape[d] as i64 + pads[d] + pads[d + 3]) as usize).collect();
            let got = pad(mode, &t, &pads, Some(&Tensor::scalar_f32(-7.0)), None, &out).unwrap();
            let want: Vec<f32> = (0..count(&out))
                .map(|i| {
                    let idx = unravel(i, &out);
                    let mut flat = 0;
                    for d in 0..3 {
                        // Crop, then index into the cropped extent.
                        let lo = (-pads[d]).max(0);
                        let m = shape[d] as i64 - lo - (-pads[d + 3]).max(0);
                        let mut j = idx[d] as i64 - pads[d].max(0);
                        if !(0..m).contains(&j) {
                            j = match mode {
                                PadMode::Constant => return -7.0,
                                PadMode::Edge => j.clamp(0, m - 1),
                                PadMode::Wrap => j.rem_euclid(m),
                                PadMode::Reflect if m == 1 => 0,
                                PadMode::Reflect => {
                                    // Bounce between the ends one step at a time.
                                    let mut k = j;
                                    while !(0..m).contains(&k) {
                                        k = if k < 0 { -k } else { 2 * (m - 1) - k };
                                    }
                                    k
                                }
                            };
                        }
                        flat = flat * shape[d] + (lo + j) as usize;
                    }
                    x[flat]
                })
                .collect();
            assert_eq!(f32s(&got), want, "{mode:?} pads {pads:?}");
        }
    }
}
