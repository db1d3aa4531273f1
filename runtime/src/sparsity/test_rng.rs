//! Seeded randomness for the property tests of this module: a fresh seed per test run (so many
//! different inputs get exercised over time), printed when a test fails, and fixed by setting
//! `DYNASPA_TEST_SEED` to reproduce that failure.

use super::BitMask;
use std::sync::atomic::{AtomicU64, Ordering};

static STARTED: AtomicU64 = AtomicU64::new(0);

/// SplitMix64: tiny, fast, and good enough to draw test inputs.
pub(crate) struct TestRng(u64);

impl TestRng {
    /// Seeded from `DYNASPA_TEST_SEED` or the clock; the guard prints the seed if the test fails.
    pub(crate) fn fresh() -> (TestRng, SeedGuard) {
        let seed = match std::env::var("DYNASPA_TEST_SEED") {
            Ok(s) => s.trim().parse().expect("DYNASPA_TEST_SEED must be a u64"),
            Err(_) => {
                let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
                // Tests start in parallel threads, possibly within one clock tick.
                t ^ STARTED.fetch_add(1, Ordering::Relaxed).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            }
        };
        (TestRng(seed), SeedGuard(seed))
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..hi` (`hi > lo`).
    pub(crate) fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo) as u64) as usize
    }

    /// Uniform in [0, 1).
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A word whose density itself is random (so runs of zeros and ones both appear).
    pub(crate) fn sparse_word(&mut self) -> u64 {
        match self.range(0, 4) {
            0 => self.next_u64() & self.next_u64() & self.next_u64(),
            1 => self.next_u64() | self.next_u64(),
            2 => self.next_u64() & (self.next_u64() >> self.range(0, 64)),
            _ => self.next_u64(),
        }
    }

    /// A mask side in 1..=max, often 1 so that 1×N and N×1 masks are common.
    pub(crate) fn side(&mut self, max: usize) -> usize {
        if self.range(0, 8) == 0 {
            1
        } else {
            self.range(1, max + 1)
        }
    }

    /// A random mask of the given size: uniform noise at a random density, blobs (rectangles,
    /// the shape real masks have), or the two extremes.
    pub(crate) fn mask(&mut self, h: usize, w: usize) -> BitMask {
        match self.range(0, 10) {
            0 => BitMask::zeros(h, w),
            1 => BitMask::ones(h, w),
            2..=5 => {
                let d = self.unit();
                BitMask::from_fn(h, w, |_, _| self.unit() < d)
            }
            _ => {
                let mut m = BitMask::zeros(h, w);
                for _ in 0..self.range(1, 8) {
                    let (bh, bw) = (self.range(1, h + 1), self.range(1, w + 1));
                    let (y0, x0) = (self.range(0, h), self.range(0, w));
                    let d = 0.5 + self.unit() / 2.0;
                    for y in y0..(y0 + bh).min(h) {
                        for x in x0..(x0 + bw).min(w) {
                            if self.unit() < d {
                                m.set(y, x, true);
                            }
                        }
                    }
                }
                m
            }
        }
    }
}

/// Prints the seed if the test panics while it is alive.
pub(crate) struct SeedGuard(u64);

impl Drop for SeedGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let seed = self.0;
            eprintln!("random inputs from seed {seed}: rerun with DYNASPA_TEST_SEED={seed}");
        }
    }
}
