//! Choosing the PolyKernel: the k schedules (dense always among them) whose best member per
//! mask is fastest on average, and their dispatch tables.
//!
//! With `t[s][m]` the time of schedule s on mask m and `d[m]` the dense time, the objective is
//! `F(S) = mean_m min(d[m], min_{s in S} t[s][m])`. The gain `G(S) = mean_m d[m] - F(S)` is a
//! facility-location function: monotone and submodular (F is supermodular), so greedy addition
//! of the member with the largest marginal gain (DynaSpa eq. (7)) reaches at least (1 - 1/e) of
//! the best gain any k-set has (Nemhauser, Wolsey and Fisher, 1978).

use dynaspa_runtime::dispatch::DispatchTable;
use dynaspa_runtime::Result;

/// Mean over masks of the best time among `sel` and the dense member.
pub fn objective(sel: &[usize], times: &[Vec<f64>], dense: &[f64]) -> f64 {
    if dense.is_empty() {
        return 0.0;
    }
    let total: f64 = (0..dense.len()).map(|m| sel.iter().map(|&s| times[s][m]).fold(dense[m], f64::min)).sum();
    total / dense.len() as f64
}

/// Marginal gain of adding `s` to a set whose best time per mask is `best` (eq. (7)).
pub fn marginal_gain(s_times: &[f64], best: &[f64]) -> f64 {
    if best.is_empty() {
        return 0.0;
    }
    s_times.iter().zip(best).map(|(&t, &b)| (b - t).max(0.0)).sum::<f64>() / best.len() as f64
}

/// Greedy selection of at most `k_sparse` of the candidates `times` (one row per candidate,
/// one column per mask) next to the dense member. Stops early when no candidate gains.
pub fn greedy(times: &[Vec<f64>], dense: &[f64], k_sparse: usize) -> Vec<usize> {
    greedy_min_gain(times, dense, k_sparse, 0.0)
}

/// [`greedy`] that adds a member only when it gains more than `min_rel` of the current mean
/// best time: with measured times, a member that wins by less than the noise only costs a
/// tile count per frame and a chance of mispredicted dispatch.
pub fn greedy_min_gain(times: &[Vec<f64>], dense: &[f64], k_sparse: usize, min_rel: f64) -> Vec<usize> {
    let mut best = dense.to_vec();
    let mut sel: Vec<usize> = Vec::new();
    while sel.len() < k_sparse {
        let floor = min_rel * best.iter().sum::<f64>() / best.len().max(1) as f64;
        let pick = (0..times.len())
            .filter(|s| !sel.contains(s))
            .map(|s| (s, marginal_gain(&times[s], &best)))
            .filter(|&(_, g)| g > floor && g > 0.0)
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)));
        let Some((s, _)) = pick else { break };
        for (b, &t) in best.iter_mut().zip(&times[s]) {
            *b = b.min(t);
        }
        sel.push(s);
    }
    sel
}

/// The best set of at most `k_sparse` candidates by trying every one (small instances only).
pub fn exhaustive(times: &[Vec<f64>], dense: &[f64], k_sparse: usize) -> (Vec<usize>, f64) {
    let n = times.len();
    let mut best = (vec![], objective(&[], times, dense));
    let mut set = vec![];
    fn rec(i: usize, n: usize, k: usize, set: &mut Vec<usize>, times: &[Vec<f64>], dense: &[f64], best: &mut (Vec<usize>, f64)) {
        let v = objective(set, times, dense);
        if v < best.1 - 1e-15 {
            *best = (set.clone(), v);
        }
        if set.len() == k {
            return;
        }
        for j in i..n {
            set.push(j);
            rec(j + 1, n, k, set, times, dense, best);
            set.pop();
        }
    }
    rec(0, n, k_sparse, &mut set, times, dense, &mut best);
    best
}

/// A dispatch table from measured `(tiles, µs)` points of one member: the points are binned by
/// tile count into at most `bins` groups, each bin's medians become a point, and times are
/// made non-decreasing in tiles (noise must not make more work look cheaper).
pub fn dispatch_table(points: Vec<(u32, f64)>, bins: usize) -> Result<DispatchTable> {
    dispatch_table_with(points, bins, &[])
}

/// [`dispatch_table`] plus `anchors` kept as points of their own (not binned): measurements at
/// the ends of the tile range (one active position, every position), so frames denser or
/// sparser than the tuning masks interpolate instead of extrapolating a noisy last segment.
pub fn dispatch_table_with(mut points: Vec<(u32, f64)>, bins: usize, anchors: &[(u32, f64)]) -> Result<DispatchTable> {
    points.retain(|p| p.1.is_finite() && p.1 >= 0.0);
    if points.is_empty() {
        return Err(dynaspa_runtime::Error::Other("dispatch table: no measurements".into()));
    }
    points.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let bins = bins.max(1).min(points.len());
    let mut out: Vec<(u32, f64)> = Vec::with_capacity(bins);
    for b in 0..bins {
        let chunk = &points[b * points.len() / bins..(b + 1) * points.len() / bins];
        if chunk.is_empty() {
            continue;
        }
        let tiles = chunk[chunk.len() / 2].0;
        let mut ts: Vec<f64> = chunk.iter().map(|p| p.1).collect();
        ts.sort_by(f64::total_cmp);
        let t = ts[ts.len() / 2];
        match out.last_mut() {
            Some(last) if last.0 >= tiles => last.1 = last.1.max(t),
            _ => out.push((tiles, t)),
        }
    }
    for &(t, v) in anchors.iter().filter(|a| a.1.is_finite() && a.1 >= 0.0) {
        match out.binary_search_by_key(&t, |p| p.0) {
            Ok(_) => {}
            Err(i) => out.insert(i, (t, v)),
        }
    }
    for i in 1..out.len() {
        out[i].1 = out[i].1.max(out[i - 1].1);
    }
    // Whole nanoseconds: the JSON reads back exactly.
    for p in &mut out {
        p.1 = (p.1 * 1e3).round() / 1e3;
    }
    DispatchTable::new(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Rng(u64);
    impl Rng {
        fn unit(&mut self) -> f64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// Times with structure like real ones: each schedule is good on some densities.
    fn instance(rng: &mut Rng, n: usize, masks: usize) -> (Vec<Vec<f64>>, Vec<f64>) {
        let dense: Vec<f64> = (0..masks).map(|_| 80.0 + 40.0 * rng.unit()).collect();
        let dens: Vec<f64> = (0..masks).map(|_| rng.unit()).collect();
        let times = (0..n)
            .map(|_| {
                let (fixed, slope, sweet) = (5.0 + 30.0 * rng.unit(), 60.0 + 120.0 * rng.unit(), rng.unit());
                dens.iter().map(|&d| fixed + slope * d + 80.0 * (d - sweet).abs() * rng.unit()).collect()
            })
            .collect();
        (times, dense)
    }

    #[test]
    fn greedy_is_within_the_bound_of_exhaustive_and_usually_optimal() {
        let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1;
        let mut rng = Rng(seed);
        let (mut optimal, cases) = (0, 300);
        let bound = 1.0 - (-1.0f64).exp();
        for case in 0..cases {
            let n = 4 + (rng.unit() * 9.0) as usize;
            let masks = 3 + (rng.unit() * 10.0) as usize;
            let k = 1 + (rng.unit() * 4.0) as usize;
            let (times, dense) = instance(&mut rng, n, masks);
            let sel = greedy(&times, &dense, k);
            assert!(sel.len() <= k);
            let base = objective(&[], &times, &dense);
            let (opt_set, opt) = exhaustive(&times, &dense, k);
            let g = objective(&sel, &times, &dense);
            assert!(g >= opt - 1e-9, "seed {seed} case {case}: greedy beat exhaustive?");
            let (gain_g, gain_o) = (base - g, base - opt);
            assert!(gain_g >= bound * gain_o - 1e-9, "seed {seed} case {case}: gain {gain_g} < (1-1/e) {gain_o} ({opt_set:?})");
            optimal += ((g - opt).abs() < 1e-9) as usize;
        }
        eprintln!("greedy optimal in {optimal} of {cases} random instances (seed {seed})");
        assert!(optimal * 10 >= cases * 7, "greedy optimal in only {optimal} of {cases} (seed {seed})");
    }

    #[test]
    fn marginal_gain_is_the_objective_difference() {
        let times: Vec<Vec<f64>> = vec![vec![10.0, 50.0, 90.0], vec![60.0, 20.0, 95.0]];
        let dense = vec![80.0, 80.0, 80.0];
        let best: Vec<f64> = (0..3).map(|m| times[0][m].min(dense[m])).collect();
        let g = marginal_gain(&times[1], &best);
        let diff = objective(&[0], &times, &dense) - objective(&[0, 1], &times, &dense);
        assert!((g - diff).abs() < 1e-12 && g > 0.0);
        assert_eq!(greedy(&times, &dense, 5), vec![0, 1], "stops when nothing gains");
    }

    #[test]
    fn tables_are_binned_medians_and_never_fall() {
        let pts = vec![(10, 5.0), (12, 5.4), (11, 50.0), (100, 30.0), (110, 28.0), (105, 31.0), (300, 80.0), (310, 82.0), (305, 79.0)];
        let t = dispatch_table(pts, 3).unwrap();
        let p = t.points();
        assert_eq!(p.len(), 3);
        assert_eq!(p[0], (11, 5.4), "the outlier 50 µs is not the median");
        assert_eq!(p[1..], [(105, 30.0), (305, 80.0)]);
        assert!(p.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1), "{p:?}");
        assert!(dispatch_table(vec![], 4).is_err());
        // Anchors at both ends stay points of their own; the end anchor is not below the bins.
        let t = dispatch_table_with(vec![(50, 10.0), (52, 11.0), (60, 12.0)], 2, &[(1, 2.0), (400, 9.0)]).unwrap();
        assert_eq!(t.points().first(), Some(&(1, 2.0)));
        assert_eq!(t.points().last(), Some(&(400, 12.0)), "{:?}", t.points());
        assert!(dispatch_table(vec![(3, f64::NAN)], 4).is_err());
    }
}
