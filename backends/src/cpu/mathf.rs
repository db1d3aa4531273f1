//! Transcendental functions for the activation kernels.
//!
//! The f32 versions are branch-free (every path is computed, then selected), so the loops
//! calling them auto-vectorise; std's `expf`/`tanhf` are opaque library calls. Polynomial
//! coefficients were fitted for this file: least squares on Chebyshev nodes in 40-digit
//! arithmetic against mpmath, rounded to f32. Measured max errors on [-10, 10]: exp 1e-7
//! relative, tanh 1.2e-7 relative, erf 1.5e-7 absolute, erfc 8e-7 relative.
//! The f64 erf/erfc use a convergent series below 2.5 and erfc's continued fraction above.

// Coefficients are printed to 10 digits, a little past f32's precision.
#![allow(clippy::excessive_precision)]

/// e^r on |r| <= ln2/2.
const EXP: [f32; 7] = [1.0, 1.0, 5.0e-01, 1.666641533e-01, 4.166621715e-02, 8.375128731e-03, 1.394858118e-03];
/// tanh(x)/x as a polynomial in x^2 on |x| < 0.625.
const TANH: [f32; 6] = [1.0, -3.333326280e-01, 1.333114952e-01, -5.372267962e-02, 2.059567906e-02, -5.664775148e-03];
/// erf(x)/x as a polynomial in x^2 on |x| < 1.
const ERF_SMALL: [f32; 7] =
    [1.128379107e+00, -3.761262596e-01, 1.128359735e-01, -2.685432881e-02, 5.189312156e-03, -8.018855006e-04, 7.882497448e-05];
/// erfc(x) e^{x^2} as a polynomial in 1/x - 0.55, for 1 <= x <= 10.
const ERFC_TAIL: [f32; 11] = [
    2.762943804e-01,
    4.088341594e-01,
    -1.812348068e-01,
    3.372521698e-02,
    4.497391731e-02,
    -6.932661682e-02,
    5.687390268e-02,
    -2.552345768e-02,
    -1.869543269e-02,
    6.257249415e-02,
    -5.019900948e-02,
];

#[inline(always)]
fn horner<const N: usize>(c: &[f32; N], x: f32) -> f32 {
    let mut p = c[N - 1];
    for i in (0..N - 1).rev() {
        p = p * x + c[i];
    }
    p
}

/// 2^k for k in [-150, 128], as two factors that are each a normal float.
#[inline(always)]
fn pow2i(k: i32) -> (f32, f32) {
    let k1 = k >> 1;
    let k2 = k - k1;
    (f32::from_bits(((k1 + 127) << 23) as u32), f32::from_bits(((k2 + 127) << 23) as u32))
}

#[inline(always)]
pub(crate) fn exp_f32(x: f32) -> f32 {
    const HI: f32 = 88.72283;
    const LO: f32 = -103.97208;
    // 1.5 * 2^23: adding and subtracting it rounds to the nearest integer.
    const MAGIC: f32 = 12_582_912.0;
    // ln 2 split so that k * LN2_HI is exact for |k| < 256.
    const LN2_HI: f32 = 0.693_145_751_953_125;
    const LN2_LO: f32 = 1.428_606_765_330_187e-6;
    let xc = x.clamp(LO, HI);
    let t = xc * std::f32::consts::LOG2_E + MAGIC;
    let kf = t - MAGIC;
    // The integer k sits in t's low mantissa bits; reading it there (rather than with a
    // saturating `as i32`) keeps the loop vectorisable.
    let k = (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    let r = xc - kf * LN2_HI - kf * LN2_LO;
    let (s1, s2) = pow2i(k);
    let y = horner(&EXP, r) * s1 * s2;
    if x.is_nan() {
        x
    } else if x > HI {
        f32::INFINITY
    } else if x < LO {
        0.0
    } else {
        y
    }
}

#[inline(always)]
pub(crate) fn tanh_f32(x: f32) -> f32 {
    let a = x.abs();
    let small = x * horner(&TANH, x * x);
    // tanh a = 1 - 2 / (e^{2a} + 1); past a = 44 the fraction is below f32's resolution.
    let e = exp_f32(2.0 * a.min(44.0));
    let big = (1.0 - 2.0 / (e + 1.0)).copysign(x);
    if a < 0.625 {
        small
    } else if x.is_nan() {
        x
    } else {
        big
    }
}

/// erfc(|x|) for |x| >= 1 (clamped into [1, 10]; beyond 10 it is below f32's range).
#[inline(always)]
fn erfc_tail(a: f32) -> f32 {
    let ac = a.clamp(1.0, 10.0);
    // e^{-a^2} with a^2 rounded to f32 would be off by up to 4e-6 relative at a = 10.
    // Split a = hi + lo with hi on 12 bits, so hi^2 is exact, and correct by
    // e^{-d}, d = lo (a + hi) < 0.1, from its Taylor series to d^5.
    let hi = f32::from_bits(ac.to_bits() & 0xFFFF_F000);
    let d = (ac - hi) * (ac + hi);
    let corr = 1.0 - d * (1.0 - d * 0.5 * (1.0 - d * (1.0 / 3.0) * (1.0 - d * 0.25 * (1.0 - d * 0.2))));
    let e = exp_f32(-hi * hi) * corr;
    let v = e * horner(&ERFC_TAIL, 1.0 / ac - 0.55);
    if a > 10.0 {
        0.0
    } else {
        v
    }
}

#[inline(always)]
pub(crate) fn erf_f32(x: f32) -> f32 {
    let a = x.abs();
    let small = x * horner(&ERF_SMALL, x * x);
    let big = (1.0 - erfc_tail(a)).copysign(x);
    if a < 1.0 || x.is_nan() {
        small
    } else {
        big
    }
}

/// erfc with relative accuracy for large positive x, where 1 - erf(x) would cancel.
#[inline(always)]
pub(crate) fn erfc_f32(x: f32) -> f32 {
    let a = x.abs();
    let small = 1.0 - x * horner(&ERF_SMALL, x * x);
    let t = erfc_tail(a);
    let big = if x < 0.0 { 2.0 - t } else { t };
    if a < 1.0 || x.is_nan() {
        small
    } else {
        big
    }
}

/// sum_n a^{2n+1} 2^n / (2n+1)!!, so that erf(a) = 2/sqrt(pi) e^{-a^2} * this. All terms
/// are positive (no cancellation); at most ~40 of them for a < 2.5.
fn erf_series(a: f64) -> f64 {
    let mut t = a;
    let mut s = a;
    let mut n = 0.0;
    while t > 1e-17 * s {
        t *= 2.0 * a * a / (2.0 * n + 3.0);
        s += t;
        n += 1.0;
    }
    std::f64::consts::FRAC_2_SQRT_PI * (-a * a).exp() * s
}

/// erfc(a) for a >= 1: e^{-a^2}/sqrt(pi) / (a + (1/2)/(a + 1/(a + (3/2)/(a + ...)))),
/// evaluated from a depth at which it has converged to f64 precision (it converges faster
/// for larger a: ~200 terms at 1, ~30 at 2.5).
fn erfc_cf(a: f64) -> f64 {
    let depth = (240.0 / (a * a)) as usize + 10;
    let mut t = a;
    for k in (1..=depth).rev() {
        t = a + (k as f64 * 0.5) / t;
    }
    (-a * a).exp() / (std::f64::consts::PI.sqrt() * t)
}

pub(crate) fn erf_f64(x: f64) -> f64 {
    let a = x.abs();
    if a.is_nan() {
        return x;
    }
    let r = if a >= 6.0 {
        1.0
    } else if a < 2.5 {
        erf_series(a)
    } else {
        1.0 - erfc_cf(a)
    };
    r.copysign(x)
}

pub(crate) fn erfc_f64(x: f64) -> f64 {
    let a = x.abs();
    if a.is_nan() {
        return x;
    }
    let e = if a < 1.0 {
        1.0 - erf_series(a)
    } else if a < 27.0 {
        erfc_cf(a)
    } else {
        0.0
    };
    if x < 0.0 {
        2.0 - e
    } else {
        e
    }
}

#[cfg(test)]
#[path = "mathf_tests.rs"]
mod tests;
