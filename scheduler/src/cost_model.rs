//! The learned cost model: ridge regression on log time over schedule and mask features,
//! refitted after every round of measurements. Its prior is the roofline: with no data it
//! predicts the roofline estimate, and the ridge penalty pulls the weights toward that prior
//! (not toward zero), so a few measurements correct the roofline instead of replacing it.

use crate::roofline::{Estimate, TileStats};
use crate::space::{Point, Space};

/// Bumped whenever features or fitting change: profiles record which model chose them.
pub const VERSION: &str = "ridge-logtime-v1";

/// Features of (schedule, mask): logs of the roofline components and of the work counts,
/// density, granularity sides, and each knob's log2 value.
pub fn features(space: &Space, p: &Point, st: &TileStats, est: &Estimate) -> Vec<f64> {
    let ln = |x: f64| x.max(1e-12).ln();
    let g = space.granularity(p);
    let plane = (st.h * st.w).max(1) as f64;
    let mut f = vec![
        1.0,
        ln(est.total),
        ln(est.compute),
        ln(est.global + 1e-9),
        (1.0 + st.tiles as f64).ln(),
        (1.0 + st.computed as f64).ln(),
        (1.0 + st.runs as f64).ln(),
        (1.0 + st.active as f64).ln(),
        st.active as f64 / plane,
        (g.h as f64).ln(),
        (g.w as f64).ln(),
    ];
    for i in 0..space.knobs.len() {
        f.push((space.knobs[i].values[p[i + 1] as usize].max(1) as f64).log2());
    }
    f
}

/// Index of the roofline feature (`ln(est.total)`) in [`features`].
const ROOFLINE_FEATURE: usize = 1;

#[derive(Clone, Debug)]
pub struct CostModel {
    weights: Vec<f64>,
    lambda: f64,
    samples: Vec<(Vec<f64>, f64)>,
}

impl CostModel {
    /// `lambda`: ridge strength toward the roofline prior.
    pub fn new(lambda: f64) -> CostModel {
        CostModel { weights: vec![], lambda, samples: vec![] }
    }

    pub fn samples(&self) -> usize {
        self.samples.len()
    }

    /// Adds a measurement (`seconds` > 0) of the schedule with features `f`.
    pub fn add(&mut self, f: Vec<f64>, seconds: f64) {
        if seconds > 0.0 && seconds.is_finite() && f.iter().all(|v| v.is_finite()) {
            self.samples.push((f, seconds.ln()));
        }
    }

    fn prior(n: usize) -> Vec<f64> {
        let mut w = vec![0.0; n];
        if n > ROOFLINE_FEATURE {
            w[ROOFLINE_FEATURE] = 1.0;
        }
        w
    }

    /// Refits on every sample so far: minimises `|Xw - y|^2 + lambda |w - prior|^2`.
    pub fn fit(&mut self) {
        let Some(n) = self.samples.first().map(|s| s.0.len()) else { return };
        let prior = CostModel::prior(n);
        let mut a = vec![vec![0.0; n]; n];
        let mut b = vec![0.0; n];
        for (f, y) in self.samples.iter().filter(|s| s.0.len() == n) {
            for i in 0..n {
                b[i] += f[i] * y;
                for j in 0..n {
                    a[i][j] += f[i] * f[j];
                }
            }
        }
        // The intercept is free: a constant factor between roofline and measurement is the
        // first thing the data should correct.
        for i in 1..n {
            a[i][i] += self.lambda;
            b[i] += self.lambda * prior[i];
        }
        if let Some(w) = solve(a, b) {
            self.weights = w;
        }
    }

    /// Predicted seconds.
    pub fn predict(&self, f: &[f64]) -> f64 {
        let w: &[f64] = if self.weights.len() == f.len() { &self.weights } else { &[] };
        let y = if w.is_empty() { f.get(ROOFLINE_FEATURE).copied().unwrap_or(0.0) } else { w.iter().zip(f).map(|(a, b)| a * b).sum() };
        y.clamp(-60.0, 10.0).exp()
    }
}

/// Gaussian elimination with partial pivoting; `None` for a singular system.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for c in 0..n {
        let piv = (c..n).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))?;
        if a[piv][c].abs() < 1e-12 {
            return None;
        }
        a.swap(c, piv);
        b.swap(c, piv);
        for r in c + 1..n {
            let f = a[r][c] / a[c][c];
            if f != 0.0 {
                for k in c..n {
                    a[r][k] -= f * a[c][k];
                }
                b[r] -= f * b[c];
            }
        }
    }
    let mut x = vec![0.0; n];
    for r in (0..n).rev() {
        let s: f64 = (r + 1..n).map(|k| a[r][k] * x[k]).sum();
        x[r] = (b[r] - s) / a[r][r];
    }
    x.iter().all(|v| v.is_finite()).then_some(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_at_the_roofline_and_learns_a_hidden_law() {
        let mut m = CostModel::new(0.01);
        // No data: the roofline estimate itself.
        let f = vec![1.0, (3e-5f64).ln(), 0.0, 0.0, 2.0];
        assert!((m.predict(&f) - 3e-5).abs() < 1e-12);
        // Truth: time = 2.5x roofline * tiles^0.3; features [1, ln roof, noise-free junk, ln tiles].
        let mut st = 12345u64;
        let mut rnd = || {
            st ^= st << 13;
            st ^= st >> 7;
            st ^= st << 17;
            (st >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut rows = vec![];
        for _ in 0..200 {
            let (roof, tiles, junk) = (1e-6 * (1.0 + 100.0 * rnd()), 1.0 + 500.0 * rnd(), rnd());
            let f = vec![1.0, roof.ln(), junk, tiles.ln()];
            let t = 2.5 * roof * tiles.powf(0.3) * (1.0 + 0.02 * (rnd() - 0.5));
            rows.push((f.clone(), t));
            m.add(f, t);
        }
        m.fit();
        let mut worst: f64 = 0.0;
        for (f, t) in &rows {
            worst = worst.max((m.predict(f) / t).ln().abs());
        }
        assert!(worst < 0.05, "worst log error {worst}");
        assert!(solve(vec![vec![1.0, 2.0], vec![2.0, 4.0]], vec![1.0, 2.0]).is_none());
    }
}
