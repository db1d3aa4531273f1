//! The expensive f32 activations (erf, GELU, sigmoid, exp) as loops compiled for AVX-512 where
//! the CPU has it: the scalar formulas in `mathf` are branch-free, so these vectorise 16 wide,
//! where the generic element path runs them with the baseline target's SSE2.

use super::kernel_util::multiversion;
use super::mathf::{erf_f32, erfc_f32, exp_f32};
use super::par::{alloc, par_chunks_from, PAR_MIN_HEAVY};
use dynaspa_runtime::graph::UnaryKind;
use dynaspa_runtime::Result;

multiversion! {
fn erf_run(src: &[f32], dst: &mut [f32]) {
    let n = dst.len().min(src.len());
    let (s, d) = (&src[..n], &mut dst[..n]);
    // An index loop: iterator adapters are generic functions that need not inline into this
    // AVX-512 body, and then run at the baseline target.
    for i in 0..n {
        d[i] = erf_f32(s[i]);
    }
}
}

multiversion! {
/// 0.5 x (1 + erf(x / sqrt 2)), written with erfc(-x / sqrt 2) to keep the negative tail accurate.
fn gelu_run(src: &[f32], dst: &mut [f32]) {
    let r = -std::f32::consts::FRAC_1_SQRT_2;
    let n = dst.len().min(src.len());
    let (s, d) = (&src[..n], &mut dst[..n]);
    for i in 0..n {
        d[i] = 0.5 * s[i] * erfc_f32(s[i] * r);
    }
}
}

multiversion! {
fn sigmoid_run(src: &[f32], dst: &mut [f32]) {
    let n = dst.len().min(src.len());
    let (s, d) = (&src[..n], &mut dst[..n]);
    for i in 0..n {
        d[i] = 1.0 / (1.0 + exp_f32(-s[i]));
    }
}
}

multiversion! {
fn exp_run(src: &[f32], dst: &mut [f32]) {
    let n = dst.len().min(src.len());
    let (s, d) = (&src[..n], &mut dst[..n]);
    for i in 0..n {
        d[i] = exp_f32(s[i]);
    }
}
}

/// `k` over `v` when it has a vectorised f32 loop here; `None` sends it to the generic path.
pub(crate) fn try_unary(k: UnaryKind, v: &[f32]) -> Option<Result<Vec<f32>>> {
    let run: fn(&[f32], &mut [f32]) = match k {
        UnaryKind::Erf => erf_run,
        UnaryKind::Gelu(false) => gelu_run,
        UnaryKind::Sigmoid => sigmoid_run,
        UnaryKind::Exp => exp_run,
        _ => return None,
    };
    Some(alloc(v.len(), 0.0f32).map(|mut out| {
        par_chunks_from(&mut out, PAR_MIN_HEAVY, |start, o: &mut [f32]| run(&v[start..start + o.len()], o));
        out
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wide loops compute exactly what the scalar formulas do (same operations, no
    /// contraction), on random values across the range and the special ones; long enough to
    /// take the parallel path too.
    #[test]
    fn vector_loops_match_the_scalar_formulas_bit_for_bit() {
        let mut s = 0x1234_5678_9abc_def0u64;
        let mut v: Vec<f32> = (0..20_000)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 40.0
            })
            .collect();
        v.extend([0.0, -0.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1e-30, -88.0, 88.0, -104.0, 9.99, 10.01]);
        let cases: [(UnaryKind, fn(f32) -> f32); 4] = [
            (UnaryKind::Erf, erf_f32),
            (UnaryKind::Gelu(false), |x| 0.5 * x * erfc_f32(x * -std::f32::consts::FRAC_1_SQRT_2)),
            (UnaryKind::Sigmoid, |x| 1.0 / (1.0 + exp_f32(-x))),
            (UnaryKind::Exp, exp_f32),
        ];
        for (k, f) in cases {
            let got = try_unary(k, &v).expect("has a wide loop").unwrap();
            for (i, (&g, &x)) in got.iter().zip(&v).enumerate() {
                let want = f(x);
                assert!(g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()), "{k:?} at {i} (x = {x}): {g} vs {want}");
            }
        }
        assert!(try_unary(UnaryKind::Relu, &v).is_none());
    }
}
