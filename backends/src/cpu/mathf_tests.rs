#![allow(clippy::excessive_precision)]

use super::*;

/// erf and erfc to 16 digits (DLMF 7.2 tables / mpmath).
const KNOWN: [(f64, f64, f64); 8] = [
    (0.1, 0.1124629160182849, 0.8875370839817151),
    (0.5, 0.5204998778130465, 0.4795001221869535),
    (1.0, 0.8427007929497149, 0.1572992070502851),
    (1.5, 0.9661051464753108, 0.033894853524689274),
    (2.0, 0.9953222650189527, 0.004677734981047266),
    (3.0, 0.9999779095030014, 2.209049699858544e-05),
    (5.0, 0.9999999999984626, 1.5374597944280349e-12),
    (10.0, 1.0, 2.088487583762545e-45),
];

#[test]
fn f64_erf_erfc_match_tables() {
    for (x, e, c) in KNOWN {
        assert!((erf_f64(x) - e).abs() < 1e-15, "erf({x}) = {}", erf_f64(x));
        assert!((erf_f64(-x) + e).abs() < 1e-15);
        assert!((erfc_f64(x) - c).abs() <= 2e-15 * c, "erfc({x}) = {} want {c}", erfc_f64(x));
        assert!((erfc_f64(-x) - (2.0 - c)).abs() < 1e-15);
    }
    assert_eq!(erf_f64(0.0), 0.0);
    assert_eq!(erf_f64(f64::NEG_INFINITY), -1.0);
    assert_eq!(erfc_f64(f64::INFINITY), 0.0);
    assert!(erf_f64(f64::NAN).is_nan() && erfc_f64(f64::NAN).is_nan());
}

/// Every f32 from -lim to lim in small steps (plus the points given).
fn grid(lim: f32, step: f32) -> impl Iterator<Item = f32> {
    let n = (2.0 * lim / step) as i32;
    (0..=n).map(move |i| -lim + i as f32 * step).chain([0.0, -0.0, 1e-30, -1e-30, 1e-6, 0.625, 1.0, -1.0])
}

#[test]
fn f32_functions_within_stated_error() {
    let (mut e_exp, mut e_tanh, mut e_erf, mut e_erfc) = (0f64, 0f64, 0f64, 0f64);
    for x in grid(10.0, 1.0 / 1024.0 + 1e-6) {
        let xd = x as f64;
        e_exp = e_exp.max(((exp_f32(x) as f64) / xd.exp() - 1.0).abs());
        let t = xd.tanh();
        if t != 0.0 {
            e_tanh = e_tanh.max(((tanh_f32(x) as f64) / t - 1.0).abs());
        }
        e_erf = e_erf.max((erf_f32(x) as f64 - erf_f64(xd)).abs());
        let c = erfc_f64(xd);
        if c > 1e-36 {
            e_erfc = e_erfc.max(((erfc_f32(x) as f64) / c - 1.0).abs());
        }
    }
    eprintln!("max error: exp {e_exp:.2e} tanh {e_tanh:.2e} erf {e_erf:.2e} (abs) erfc {e_erfc:.2e}");
    assert!(e_exp < 2e-7, "exp {e_exp}");
    assert!(e_tanh < 3e-7, "tanh {e_tanh}");
    assert!(e_erf < 2e-7, "erf {e_erf}");
    assert!(e_erfc < 1e-6, "erfc {e_erfc}");
}

#[test]
fn f32_special_values() {
    assert_eq!(exp_f32(0.0), 1.0);
    assert_eq!(exp_f32(89.0), f32::INFINITY);
    assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
    assert_eq!(exp_f32(-105.0), 0.0);
    assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
    assert!(exp_f32(88.7).is_finite() && exp_f32(88.7) > 3.2e38);
    // Gradual underflow into the subnormals.
    let d = exp_f32(-100.0) as f64;
    assert!((d - (-100f64).exp()).abs() < 2e-45, "{d}");
    for f in [exp_f32, tanh_f32, erf_f32, erfc_f32] {
        assert!(f(f32::NAN).is_nan());
    }
    assert_eq!(tanh_f32(100.0), 1.0);
    assert_eq!(tanh_f32(-100.0), -1.0);
    assert_eq!(tanh_f32(f32::NEG_INFINITY), -1.0);
    assert_eq!(erf_f32(f32::INFINITY), 1.0);
    assert_eq!(erf_f32(-30.0), -1.0);
    assert_eq!(erfc_f32(-30.0), 2.0);
    assert_eq!(erfc_f32(30.0), 0.0);
    assert_eq!(erf_f32(0.0), 0.0);
    assert!((erf_f32(1e-20) - 1.1283792e-20).abs() < 1e-26);
    for x in [0.3f32, 1.1, 2.7, 3.99, 7.5] {
        assert_eq!(erf_f32(-x), -erf_f32(x));
        assert_eq!(tanh_f32(-x), -tanh_f32(x));
    }
}
