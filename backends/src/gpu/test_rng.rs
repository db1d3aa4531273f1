//! The seeded xorshift the GPU unit tests draw masks and operands from.

pub(crate) struct Rng(pub u64);

impl Rng {
    /// Uniform in [0, 1).
    pub(crate) fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `n` values uniform in [-a, a).
    pub(crate) fn vec(&mut self, n: usize, a: f64) -> Vec<f32> {
        (0..n).map(|_| ((self.next() * 2.0 - 1.0) * a) as f32).collect()
    }
}
