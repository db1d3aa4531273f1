use crate::cpu::ops_testkit::*;
use dynaspa_runtime::graph::*;
use dynaspa_runtime::{Tensor, TensorData};

fn params(mode: ResizeMode, coord: CoordTransform) -> Resize {
    Resize {
        mode,
        coord,
        nearest: NearestMode::RoundPreferFloor,
        exclude_outside: false,
        extrapolation_value: 0.0,
        antialias: false,
        axes: None,
        keep_aspect: KeepAspect::Stretch,
    }
}

fn resize(
    p: &Resize,
    x: &Tensor,
    roi: Option<&[f32]>,
    scales: Option<&[f32]>,
    sizes: Option<&[i64]>,
    out: &[usize],
) -> dynaspa_runtime::Result<Tensor> {
    let roi = roi.map(|r| f32t(&[r.len()], r.to_vec()));
    let scales = scales.map(|s| f32t(&[s.len()], s.to_vec()));
    let sizes = sizes.map(|s| i64t(&[s.len()], s.to_vec()));
    run(&Op::Resize(p.clone()), &[Some(x), roi.as_ref(), scales.as_ref(), sizes.as_ref()], spec(x.dtype(), out))
}

#[test]
fn resize_onnx_documented_cases() {
    let x22 = f32t(&[1, 1, 2, 2], vec![1.0, 2.0, 3.0, 4.0]);
    let p = params(ResizeMode::Nearest, CoordTransform::HalfPixel);
    let got = resize(&p, &x22, None, Some(&[1.0, 1.0, 2.0, 3.0]), None, &[1, 1, 4, 6]).unwrap();
    let row = |a: f32, b: f32| vec![a, a, a, b, b, b];
    assert_eq!(f32s(&got), [row(1., 2.), row(1., 2.), row(3., 4.), row(3., 4.)].concat());

    let p = params(ResizeMode::Linear, CoordTransform::HalfPixel);
    let got = resize(&p, &x22, None, Some(&[1.0, 1.0, 2.0, 2.0]), None, &[1, 1, 4, 4]).unwrap();
    #[rustfmt::skip]
    let want = [1.0, 1.25, 1.75, 2.0, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3.0, 3.25, 3.75, 4.0];
    assert_close(&f32s(&got), &want, 1e-6);

    let p = params(ResizeMode::Linear, CoordTransform::AlignCorners);
    let got = resize(&p, &x22, None, Some(&[1.0, 1.0, 2.0, 2.0]), None, &[1, 1, 4, 4]).unwrap();
    let t = 1.0 / 3.0;
    #[rustfmt::skip]
    let want = [1.0, 1.0 + t, 1.0 + 2.0 * t, 2.0, 1.0 + 2.0 * t, 2.0, 2.0 + t, 2.0 + 2.0 * t,
        2.0 + t, 2.0 + 2.0 * t, 3.0, 3.0 + t, 3.0, 3.0 + t, 3.0 + 2.0 * t, 4.0];
    assert_close(&f32s(&got), &want, 1e-6);

    let x24 = f32t(&[1, 1, 2, 4], (1..=8).map(|v| v as f32).collect());
    let got = resize(&p, &x24, None, Some(&[1.0, 1.0, 0.6, 0.6]), None, &[1, 1, 1, 2]).unwrap();
    assert_close(&f32s(&got), &[1.0, 3.142857], 1e-6);
    let p = params(ResizeMode::Linear, CoordTransform::HalfPixel);
    let got = resize(&p, &x24, None, Some(&[1.0, 1.0, 0.6, 0.6]), None, &[1, 1, 1, 2]).unwrap();
    assert_close(&f32s(&got), &[2.6666665, 4.333333], 1e-6);

    let x44 = f32t(&[1, 1, 4, 4], (1..=16).map(|v| v as f32).collect());
    let p = params(ResizeMode::Linear, CoordTransform::TfCropAndResize);
    let roi = [0.0, 0.0, 0.4, 0.6, 1.0, 1.0, 0.6, 0.8];
    let got = resize(&p, &x44, Some(&roi), None, Some(&[1, 1, 3, 3]), &[1, 1, 3, 3]).unwrap();
    assert_close(&f32s(&got), &[7.6, 7.9, 8.2, 8.8, 9.1, 9.4, 10.0, 10.3, 10.6], 1e-6);
    let mut p = p;
    p.extrapolation_value = 10.0;
    let roi = [0.0, 0.0, 0.4, 0.6, 1.0, 1.0, 1.2, 1.7];
    let got = resize(&p, &x44, Some(&roi), None, Some(&[1, 1, 3, 3]), &[1, 1, 3, 3]).unwrap();
    assert_close(&f32s(&got), &[7.6, 10.0, 10.0, 12.4, 10.0, 10.0, 10.0, 10.0, 10.0], 1e-6);
}

#[test]
fn resize_axes_sizes_and_errors() {
    let x = f32t(&[1, 2, 2, 1], vec![1.0, 2.0, 3.0, 4.0]);
    let mut p = params(ResizeMode::Nearest, CoordTransform::HalfPixel);
    p.axes = Some(vec![2, 1]);
    let got = resize(&p, &x, None, None, Some(&[4, 2]), &[1, 2, 4, 1]).unwrap();
    assert_eq!(f32s(&got), vec![1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0]);
    // Integer data is resampled without conversion in nearest mode.
    let xi = data(&[1, 3], TensorData::U8(vec![10, 20, 30]));
    let mut p = params(ResizeMode::Nearest, CoordTransform::Asymmetric);
    p.axes = Some(vec![-1]);
    let got = resize(&p, &xi, None, Some(&[2.0]), None, &[1, 6]).unwrap();
    assert_eq!(got.into_data(), TensorData::U8(vec![10, 10, 20, 20, 30, 30]));
    assert!(resize(&p, &xi, None, None, None, &[1, 6]).is_err());
    assert!(resize(&p, &xi, None, Some(&[2.0, 1.0]), None, &[1, 6]).is_err());
    assert!(resize(&p, &xi, None, Some(&[-2.0]), None, &[1, 6]).is_err());
    assert!(resize(&p, &xi, None, Some(&[2.0]), None, &[2, 6]).is_err());
    p.axes = Some(vec![1, -1]);
    assert!(resize(&p, &xi, None, Some(&[2.0, 2.0]), None, &[1, 6]).is_err());
}

// ---- A transliteration of the ONNX reference (onnx/reference/ops/op_resize.py) -------------
// Deliberately naive and independent of the kernel: it picks neighbours by sorting the
// edge-padded array by distance, and recurses over dims, exactly as the reference does.

struct Ref<'a> {
    p: &'a Resize,
    roi: Vec<(f64, f64)>,
}

impl Ref<'_> {
    fn coeffs(&self, ratio: f64, scale: f64) -> Vec<f64> {
        match self.p.mode {
            ResizeMode::Nearest => {
                if ratio == ratio.floor() {
                    return vec![0.0, 1.0];
                }
                let up = match self.p.nearest {
                    NearestMode::RoundPreferFloor => ratio > 0.5,
                    NearestMode::RoundPreferCeil => ratio >= 0.5,
                    NearestMode::Floor => false,
                    NearestMode::Ceil => true,
                };
                if up {
                    vec![0.0, 1.0]
                } else {
                    vec![1.0, 0.0]
                }
            }
            ResizeMode::Linear if !self.p.antialias => vec![1.0 - ratio, ratio],
            ResizeMode::Linear => {
                let s = scale.min(1.0);
                let start = (-1.0 / s).floor() as i64 + 1;
                let fp = 2 - 2 * start;
                let c: Vec<f64> = (start..start + fp).map(|i| (1.0 - ((i as f64 - ratio) * s).abs()).clamp(0.0, 1.0)).collect();
                let sum: f64 = c.iter().sum();
                c.iter().map(|v| v / sum).collect()
            }
        }
    }

    fn interp_1d(&self, data: &[f64], scale: f64, out_int: usize, x: f64, roi: (f64, f64)) -> f64 {
        let inw = data.len() as f64;
        let outw = scale * inw;
        let x_ori = match self.p.coord {
            CoordTransform::AlignCorners => {
                if outw == 1.0 {
                    0.0
                } else {
                    x * (inw - 1.0) / (outw - 1.0)
                }
            }
            CoordTransform::Asymmetric => x / scale,
            CoordTransform::TfCropAndResize => {
                let v = if outw == 1.0 { (roi.1 - roi.0) * (inw - 1.0) / 2.0 } else { x * (roi.1 - roi.0) * (inw - 1.0) / (outw - 1.0) };
                let v = v + roi.0 * (inw - 1.0);
                if v < 0.0 || v > inw - 1.0 {
                    return self.p.extrapolation_value as f64;
                }
                v
            }
            CoordTransform::PytorchHalfPixel => {
                if outw == 1.0 {
                    -0.5
                } else {
                    (x + 0.5) / scale - 0.5
                }
            }
            CoordTransform::HalfPixel => (x + 0.5) / scale - 0.5,
            CoordTransform::HalfPixelSymmetric => {
                let adj = out_int as f64 / outw;
                inw / 2.0 * (1.0 - adj) + (x + 0.5) / scale - 0.5
            }
        };
        let ratio = if x_ori == x_ori.floor() { 1.0 } else { x_ori - x_ori.floor() };
        let mut c = self.coeffs(ratio, scale);
        let n = c.len();
        let pad = n.div_ceil(2);
        let padded: Vec<f64> =
            (0..data.len() + 2 * pad).map(|i| data[(i as i64 - pad as i64).clamp(0, data.len() as i64 - 1) as usize]).collect();
        let xp = x_ori + pad as f64;
        let mut idx: Vec<usize> = (0..padded.len()).collect();
        idx.sort_by(|&a, &b| ((xp - a as f64).abs(), a).partial_cmp(&((xp - b as f64).abs(), b)).unwrap());
        idx.truncate(n);
        idx.sort();
        if self.p.exclude_outside {
            for (k, &i) in idx.iter().enumerate() {
                let o = i as i64 - pad as i64;
                if o < 0 || o >= data.len() as i64 {
                    c[k] = 0.0;
                }
            }
            let s: f64 = c.iter().sum();
            c.iter_mut().for_each(|v| *v /= s);
        }
        idx.iter().zip(&c).map(|(&i, w)| w * padded[i]).sum()
    }

    fn interp_nd(&self, data: &[f64], shape: &[usize], scales: &[f64], out: &[usize], x: &[usize], roi: &[(f64, f64)]) -> f64 {
        if shape.len() == 1 {
            return self.interp_1d(data, scales[0], out[0], x[0] as f64, roi[0]);
        }
        let inner = data.len() / shape[0];
        let res: Vec<f64> = (0..shape[0])
            .map(|i| self.interp_nd(&data[i * inner..(i + 1) * inner], &shape[1..], &scales[1..], &out[1..], &x[1..], &roi[1..]))
            .collect();
        self.interp_1d(&res, scales[0], out[0], x[0] as f64, roi[0])
    }

    fn run(&self, data: &[f32], shape: &[usize], scales: &[f64], out: &[usize]) -> Vec<f32> {
        let d: Vec<f64> = data.iter().map(|&v| v as f64).collect();
        (0..count(out)).map(|i| self.interp_nd(&d, shape, scales, out, &unravel(i, out), &self.roi) as f32).collect()
    }
}

#[test]
fn resize_random_vs_reference_transliteration() {
    let mut rng = Rng::new(33);
    let coords = [
        CoordTransform::HalfPixel,
        CoordTransform::HalfPixelSymmetric,
        CoordTransform::PytorchHalfPixel,
        CoordTransform::AlignCorners,
        CoordTransform::Asymmetric,
        CoordTransform::TfCropAndResize,
    ];
    let nearest = [NearestMode::RoundPreferFloor, NearestMode::RoundPreferCeil, NearestMode::Floor, NearestMode::Ceil];
    let mut cases = 0;
    for &coord in &coords {
        for trial in 0..24 {
            let mode = if trial % 2 == 0 { ResizeMode::Nearest } else { ResizeMode::Linear };
            let mut p = params(mode, coord);
            p.nearest = nearest[trial / 2 % 4];
            p.antialias = mode == ResizeMode::Linear && trial % 4 == 1;
            p.exclude_outside = trial % 6 == 3;
            p.extrapolation_value = -3.5;
            let shape = [1 + rng.below(2) as usize, 1 + rng.below(6) as usize, 1 + rng.below(7) as usize];
            let x = rng.vec_f32(count(&shape), -4.0, 4.0);
            let t = f32t(&shape, x.clone());
            let roi: Vec<(f64, f64)> =
                (0..3).map(|d| if d == 0 { (0.0, 1.0) } else { (rng.f32(-0.3, 0.5) as f64, rng.f32(0.5, 1.3) as f64) }).collect();
            let roi_in: Vec<f32> = roi.iter().map(|r| r.0 as f32).chain(roi.iter().map(|r| r.1 as f32)).collect();
            let roi_arg = (coord == CoordTransform::TfCropAndResize).then_some(roi_in.as_slice());
            let rref = Ref { p: &p, roi: if coord == CoordTransform::TfCropAndResize { roi.clone() } else { vec![(0.0, 1.0); 3] } };
            if trial % 3 == 0 {
                // Sizes: scale = out / in.
                let out = [shape[0], 1 + rng.below(9) as usize, 1 + rng.below(9) as usize];
                let sizes: Vec<i64> = out.iter().map(|&v| v as i64).collect();
                let scales: Vec<f64> = (0..3).map(|d| out[d] as f64 / shape[d] as f64).collect();
                let got = resize(&p, &t, roi_arg, None, Some(&sizes), &out).unwrap();
                assert_close(&f32s(&got), &rref.run(&x, &shape, &scales, &out), 1e-5);
            } else {
                let sc = [
                    1.0f32,
                    [0.5, 0.6, 1.5, 2.0, 2.5, 3.0, 0.75][rng.below(7) as usize],
                    [0.4, 0.5, 1.0, 1.7, 2.0, 4.0][rng.below(6) as usize],
                ];
                let out: Vec<usize> = (0..3).map(|d| (shape[d] as f64 * sc[d] as f64).floor() as usize).collect();
                if out.contains(&0) {
                    continue;
                }
                let scales: Vec<f64> = sc.iter().map(|&s| s as f64).collect();
                let got = resize(&p, &t, roi_arg, Some(&sc), None, &out).unwrap();
                assert_close(&f32s(&got), &rref.run(&x, &shape, &scales, &out), 1e-5);
            }
            cases += 1;
        }
    }
    assert!(cases > 100);
}

#[test]
fn resize_keep_aspect_ratio_uses_one_scale() {
    // sizes [7, 8] on a 4x4 image: not_larger scales both axes by 7/4 (output 7x7),
    // not_smaller by 2 (output 8x8); coordinates use that common scale.
    let x = f32t(&[4, 4], (0..16).map(|v| v as f32).collect());
    for (policy, s, n) in [(KeepAspect::NotLarger, 7.0 / 4.0, 7usize), (KeepAspect::NotSmaller, 2.0, 8)] {
        let mut p = params(ResizeMode::Nearest, CoordTransform::HalfPixel);
        p.keep_aspect = policy;
        let got = resize(&p, &x, None, None, Some(&[7, 8]), &[n, n]).unwrap();
        let r = Ref { p: &p, roi: vec![(0.0, 1.0); 2] };
        assert_eq!(f32s(&got), r.run(&f32s(&x), &[4, 4], &[s, s], &[n, n]), "{policy:?}");
    }
}
