//! The search for one op (DynaSpa Algorithm 1): rounds of a mini-batch of masks; per round,
//! simulated annealing over the (pruned) space on the learned cost model, with the marginal
//! gain of eq. (7) against the current selection as energy, picks the schedules worth
//! measuring (plus a few random ones to explore); they are measured on the batch, the model is
//! refitted, and the selection is recomputed. The outcome is every measurement taken; the
//! caller makes the final greedy selection and the dispatch tables from it.

use crate::cost_model::{features, CostModel};
use crate::devices::DeviceDesc;
use crate::masks::Batches;
use crate::polykernel::{greedy_min_gain, marginal_gain};
use crate::rng::Rng;
use crate::roofline::{estimate, Estimate, TileStats};
use crate::space::{Point, Space};
use dynaspa_runtime::sparsity::{BitMask, Granularity};
use dynaspa_runtime::Result;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

#[derive(Clone, Debug)]
pub struct SearchConfig {
    /// Members of the final PolyKernel, the dense one included.
    pub k: usize,
    /// Schedules measured (each on one mini-batch) at most.
    pub trials: usize,
    /// Masks per mini-batch.
    pub batch: usize,
    /// Schedules measured per round.
    pub per_round: usize,
    /// Share of each round's schedules drawn at random (exploration).
    pub explore: f64,
    /// Annealing steps per round.
    pub sa_steps: usize,
    pub seed: u64,
}

impl Default for SearchConfig {
    fn default() -> SearchConfig {
        SearchConfig { k: 6, trials: 32, batch: 8, per_round: 4, explore: 0.25, sa_steps: 400, seed: 1 }
    }
}

/// Precomputed tile statistics and roofline estimates of the candidate points per frame.
pub struct Candidates<'a> {
    pub space: &'a Space,
    pub points: Vec<Point>,
    pub dev: &'a DeviceDesc,
    masks: &'a [BitMask],
    stats: HashMap<(Granularity, usize), TileStats>,
    index: HashMap<Point, usize>,
}

impl<'a> Candidates<'a> {
    pub fn new(space: &'a Space, points: Vec<Point>, dev: &'a DeviceDesc, masks: &'a [BitMask]) -> Candidates<'a> {
        let index = points.iter().enumerate().map(|(i, p)| (p.clone(), i)).collect();
        Candidates { space, points, dev, masks, stats: HashMap::new(), index }
    }

    pub fn stats(&mut self, g: Granularity, frame: usize) -> TileStats {
        let m = &self.masks[frame];
        *self.stats.entry((g, frame)).or_insert_with(|| TileStats::of(m, g))
    }

    pub fn estimate(&mut self, i: usize, frame: usize) -> (TileStats, Estimate) {
        let g = self.space.granularity(&self.points[i]);
        let st = self.stats(g, frame);
        (st, estimate(self.space, &self.points[i], &st, self.dev))
    }

    pub fn features(&mut self, i: usize, frame: usize) -> Vec<f64> {
        let (st, e) = self.estimate(i, frame);
        features(self.space, &self.points[i], &st, &e)
    }

    /// Mean roofline estimate over `frames`: the pruning score.
    pub fn roofline_score(&mut self, i: usize, frames: &[usize]) -> f64 {
        frames.iter().map(|&f| self.estimate(i, f).1.total).sum::<f64>() / frames.len().max(1) as f64
    }
}

/// Every measurement of one op's search.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// (candidate index, frame) -> seconds.
    pub times: BTreeMap<(usize, usize), f64>,
    pub dense: BTreeMap<usize, f64>,
    pub trials: usize,
}

impl Outcome {
    pub fn measured_points(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.times.keys().map(|k| k.0).collect();
        v.dedup();
        v
    }
}

/// Time of candidate `i` on `frame`: measured, else the model's prediction.
fn time_of(c: &mut Candidates, model: &CostModel, out: &Outcome, i: usize, frame: usize) -> f64 {
    match out.times.get(&(i, frame)) {
        Some(&t) => t,
        None => model.predict(&c.features(i, frame)),
    }
}

/// A member must gain at least this share of the mean best time to be selected (measurement
/// noise on a shared machine is a few percent).
pub const MIN_REL_GAIN: f64 = 0.01;

/// Greedy selection among the measured candidates over the frames with a dense time, gaps
/// filled by the model. Returns candidate indices.
pub fn select(c: &mut Candidates, model: &CostModel, out: &Outcome, k: usize) -> Vec<usize> {
    let pts = out.measured_points();
    let frames: Vec<usize> = out.dense.keys().copied().collect();
    let dense: Vec<f64> = frames.iter().map(|f| out.dense[f]).collect();
    let times: Vec<Vec<f64>> = pts.iter().map(|&i| frames.iter().map(|&f| time_of(c, model, out, i, f)).collect()).collect();
    greedy_min_gain(&times, &dense, k.saturating_sub(1), MIN_REL_GAIN).into_iter().map(|j| pts[j]).collect()
}

/// Runs the search. `measure(Some(i), frame)` times candidate `i`, `measure(None, frame)` the
/// dense member (seconds). `on_trial` is called after each schedule is measured on a batch.
pub fn run(
    c: &mut Candidates,
    train: &[usize],
    cfg: &SearchConfig,
    model: &mut CostModel,
    measure: &mut dyn FnMut(Option<usize>, usize) -> Result<f64>,
    deadline: Option<Instant>,
    on_trial: &mut dyn FnMut(),
) -> Result<Outcome> {
    let mut out = Outcome::default();
    let n = c.points.len();
    if n == 0 || train.is_empty() {
        return Ok(out);
    }
    let mut rng = Rng::new(cfg.seed);
    let mut batches = Batches::new(train.to_vec(), cfg.seed ^ 0x5eed);
    let mut measured: HashSet<usize> = HashSet::new();
    let trials = cfg.trials.min(n);
    while out.trials < trials && deadline.is_none_or(|d| Instant::now() < d) {
        let batch = batches.next_batch(cfg.batch);
        for &f in &batch {
            if !out.dense.contains_key(&f) {
                let t = measure(None, f)?;
                out.dense.insert(f, t);
            }
        }
        let sel = select(c, model, &out, cfg.k);
        let best: Vec<f64> =
            batch.iter().map(|&f| sel.iter().map(|&s| time_of(c, model, &out, s, f)).fold(out.dense[&f], f64::min)).collect();
        let gain = |c: &mut Candidates, i: usize| {
            let ts: Vec<f64> = batch.iter().map(|&f| time_of(c, model, &out, i, f)).collect();
            marginal_gain(&ts, &best)
        };
        // Annealing over the candidates, from the best of a few random starts; energy = -gain.
        let mut visited: HashMap<usize, f64> = HashMap::new();
        let starts: Vec<usize> = (0..8.min(n)).map(|_| rng.below(n)).collect();
        let mut cur = starts.iter().copied().max_by(|&a, &b| gain(c, a).total_cmp(&gain(c, b))).unwrap_or(0);
        let mut e_cur = -gain(c, cur);
        visited.insert(cur, -e_cur);
        let t0 = (e_cur.abs() * 0.5).max(1e-9);
        for step in 0..cfg.sa_steps {
            let temp = t0 * (1.0 - step as f64 / cfg.sa_steps as f64).max(0.01);
            let nb: Vec<usize> = c.space.neighbours(&c.points[cur]).into_iter().filter_map(|q| c.index.get(&q).copied()).collect();
            // Pruning can leave a point without candidate neighbours: jump.
            let next = if nb.is_empty() || rng.unit() < 0.05 { rng.below(n) } else { nb[rng.below(nb.len())] };
            let g = *visited.entry(next).or_insert_with(|| gain(c, next));
            let e = -g;
            if e < e_cur || rng.unit() < ((e_cur - e) / temp).exp() {
                (cur, e_cur) = (next, e);
            }
        }
        // Exploit: the best-gaining points not yet measured; explore: random unmeasured ones.
        let mut ranked: Vec<(usize, f64)> = visited.into_iter().filter(|(i, _)| !measured.contains(i)).collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let want = cfg.per_round.min(trials - out.trials).max(1);
        let exploit = ((want as f64) * (1.0 - cfg.explore)).ceil() as usize;
        let mut pick: Vec<usize> = ranked.iter().take(exploit).map(|r| r.0).collect();
        let mut guard = 0;
        while pick.len() < want && measured.len() + pick.len() < n && guard < 10 * n {
            guard += 1;
            let r = rng.below(n);
            if !measured.contains(&r) && !pick.contains(&r) {
                pick.push(r);
            }
        }
        if pick.is_empty() {
            break;
        }
        for i in pick {
            for &f in &batch {
                let t = measure(Some(i), f)?;
                out.times.insert((i, f), t);
                let feat = c.features(i, f);
                model.add(feat, t);
            }
            measured.insert(i);
            out.trials += 1;
            on_trial();
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
        }
        model.fit();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices;
    use crate::polykernel::{exhaustive, objective};
    use crate::space::{OpGeometry, OpKind};

    fn blobs(seed: u64, n: usize, h: usize, w: usize) -> Vec<BitMask> {
        let mut r = Rng::new(seed);
        (0..n)
            .map(|_| {
                let d = 0.05 + 0.5 * r.unit();
                let mut m = BitMask::zeros(h, w);
                while m.density() < d {
                    let (cy, cx, rad) = (r.unit() * h as f64, r.unit() * w as f64, 1.0 + 3.0 * r.unit());
                    for y in 0..h {
                        for x in 0..w {
                            if (y as f64 - cy).powi(2) + (x as f64 - cx).powi(2) <= rad * rad {
                                m.set(y, x, true);
                            }
                        }
                    }
                }
                m
            })
            .collect()
    }

    /// A hidden "true" time the roofline gets wrong in ways its features can learn: long
    /// rows are cheaper than it thinks (fewer gather runs), and each tile costs a fixed
    /// overhead it does not model.
    fn truth(c: &mut Candidates, i: usize, f: usize) -> f64 {
        let g = c.space.granularity(&c.points[i]);
        let (st, e) = c.estimate(i, f);
        e.total * (g.w as f64).powf(-0.3) + 3e-7 * st.tiles as f64
    }

    #[test]
    fn finds_a_selection_close_to_the_best_over_the_whole_space() {
        let op = OpGeometry {
            kind: OpKind::Conv,
            images: 1,
            c_in: 32,
            c_out: 32,
            groups: 1,
            kh: 3,
            kw: 3,
            sh: 1,
            sw: 1,
            h: 18,
            w: 24,
            heads: 0,
            head_dim: 0,
        };
        let dev = devices::cpu(2);
        let space = Space::cpu(op);
        let masks = blobs(3, 40, 18, 24);
        let points = space.points();
        let n = points.len();
        let train: Vec<usize> = (0..40).collect();
        let mut c = Candidates::new(&space, points, &dev, &masks);
        let dense: Vec<f64> = train.iter().map(|_| 4e-4).collect();
        let mut full: Vec<Vec<f64>> = vec![];
        for i in 0..n {
            full.push(train.iter().map(|&f| truth(&mut c, i, f)).collect());
        }
        let cfg = SearchConfig { k: 3, trials: 20, batch: 8, per_round: 4, explore: 0.25, sa_steps: 300, seed: 11 };
        let mut model = CostModel::new(0.05);
        let mut calls = 0;
        let truth_tab = full.clone();
        let mut measure = |p: Option<usize>, f: usize| -> Result<f64> {
            calls += 1;
            Ok(match p {
                None => 4e-4,
                Some(i) => truth_tab[i][f],
            })
        };
        let out = run(&mut c, &train, &cfg, &mut model, &mut measure, None, &mut || {}).unwrap();
        assert_eq!(out.trials, 20);
        let sel = select(&mut c, &model, &out, cfg.k);
        let got = objective(&sel, &full, &dense);
        // Best pair over all 56 schedules.
        let (_, best) = exhaustive(&full, &dense, 2);
        assert!(got <= best * 1.05, "search {got} vs best {best} after 20 of {n} schedules");
        assert!(model.samples() >= 20 * 8);
    }
}
