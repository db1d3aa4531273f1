//! Helpers of the sparse kernel tests: masks of a given density (salient blobs or scattered
//! bits), poisoned output buffers, and the check that active positions match the dense result
//! while every other position still holds the poison.

use crate::cpu::test_util::Rng;
use dynaspa_runtime::sparsity::BitMask;

/// Poison values an output buffer is filled with before a sparse run: a huge finite value and
/// a NaN (compared bitwise).
pub(crate) const POISONS: [f32; 2] = [1e30, f32::NAN];

/// About `density` of the positions set, as saliency masks look: a union of random discs.
pub(crate) fn blob_mask(rng: &mut Rng, h: usize, w: usize, density: f64) -> BitMask {
    let mut m = BitMask::zeros(h, w);
    let target = (density * (h * w) as f64).round() as usize;
    let rmax = 1 + h.max(w) / 6;
    while m.count_ones() < target {
        let (cy, cx, r) = (rng.below(h) as isize, rng.below(w) as isize, 1 + rng.below(rmax) as isize);
        for y in (cy - r).max(0)..(cy + r + 1).min(h as isize) {
            for x in (cx - r).max(0)..(cx + r + 1).min(w as isize) {
                if (y - cy).pow(2) + (x - cx).pow(2) <= r * r && m.count_ones() < target {
                    m.set(y as usize, x as usize, true);
                }
            }
        }
    }
    m
}

/// Every position set independently with probability `density`.
pub(crate) fn scattered_mask(rng: &mut Rng, h: usize, w: usize, density: f64) -> BitMask {
    BitMask::from_fn(h, w, |_, _| (rng.below(1 << 20) as f64) < density * (1 << 20) as f64)
}

/// Checks `got` (planes of the mask's size) against `want` at the set positions and that every
/// other position holds `poison` bit for bit. The error is relative to `|want|`, but at least to
/// the RMS of `want` (and 1): a value that is small because long sums of large terms cancel
/// carries the rounding of those terms, whatever the summation order.
pub(crate) fn check_masked(got: &[f32], want: &[f32], mask: &BitMask, poison: f32, tol: f32, what: &str) {
    let hw = mask.len();
    assert_eq!(got.len(), want.len(), "{what}: length");
    let bits = mask.to_bools();
    let rms = (want.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / want.len().max(1) as f64).sqrt() as f32;
    let floor = rms.max(1.0);
    let mut worst = 0.0f32;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let (c, p) = (i / hw, i % hw);
        if bits[p] {
            let err = (g - w).abs() / w.abs().max(floor);
            assert!(err <= tol, "{what}: channel {c} position {p}: got {g}, want {w} (relative error {err})");
            worst = worst.max(err);
        } else {
            assert_eq!(g.to_bits(), poison.to_bits(), "{what}: channel {c} position {p} (inactive) was written: {g}");
        }
    }
    assert!(worst.is_finite());
}

#[test]
fn masks_hit_their_density() {
    let mut rng = Rng::new(3);
    for d in [0.02, 0.1, 0.5, 1.0] {
        let b = blob_mask(&mut rng, 40, 40, d);
        assert_eq!(b.count_ones(), (d * 1600.0).round() as usize);
        let s = scattered_mask(&mut rng, 40, 40, d);
        assert!((s.density() - d).abs() < 0.06, "{d}: {}", s.density());
    }
}
