//! `dynaspa tune` without the command line: every sparse op of the model through pruning,
//! search, greedy selection and dispatch-table measurement, into a profile.

use crate::cost_model::{self, CostModel};
use crate::devices::DeviceDesc;
use crate::masks::MaskSet;
use crate::measure::{MeasureLog, Measurer};
use crate::polykernel::dispatch_table_with;
use crate::roofline::prune;
use crate::search::{self, Candidates, SearchConfig};
use crate::space::{Point, Space};
use crate::stats::median;
use dynaspa_runtime::dispatch::{DispatchTable, Member, PolyKernel, Schedule};
use dynaspa_runtime::profile::{MaskSetInfo, OpProfile, OpStats, Profile};
use dynaspa_runtime::{Error, Result};
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct TuneConfig {
    pub search: SearchConfig,
    /// Share of the space the roofline keeps before anything is measured (DynaSpa: 0.1%).
    pub prune_fraction: f64,
    /// ... but never fewer candidates than this (the CPU spaces are small).
    pub min_keep: usize,
    /// Tail of the frames kept out of tuning, for evaluation.
    pub held_out: f64,
    /// Frames each selected member is measured on for its dispatch table.
    pub table_frames: usize,
    pub time_budget: Option<Duration>,
    /// Ridge strength of the cost model toward its roofline prior.
    pub lambda: f64,
}

impl Default for TuneConfig {
    fn default() -> TuneConfig {
        TuneConfig {
            search: SearchConfig::default(),
            prune_fraction: 0.001,
            min_keep: 16,
            held_out: 0.25,
            table_frames: 24,
            time_budget: None,
            lambda: 0.05,
        }
    }
}

/// Progress of a tune: `done` of `total` units (a schedule measured on a batch, or a member
/// measured for its table), and what is being tuned.
pub trait Progress {
    fn update(&mut self, done: usize, total: usize, what: &str);
}

pub struct NoProgress;
impl Progress for NoProgress {
    fn update(&mut self, _: usize, _: usize, _: &str) {}
}

/// One row of the summary table.
#[derive(Clone, Debug)]
pub struct OpReport {
    pub node: String,
    pub signature: String,
    pub space: usize,
    pub candidates: usize,
    pub schedules_measured: usize,
    pub measurements: usize,
    pub dense_us: f64,
    pub poly_mean_us: f64,
    pub members: Vec<String>,
}

pub struct TuneOutput {
    pub profile: Profile,
    pub reports: Vec<OpReport>,
    /// Measurements read back from the log, and taken now.
    pub replayed: usize,
    pub measured: usize,
}

/// The space of an op on `dev`.
pub fn space_for(geo: crate::space::OpGeometry, dev: &DeviceDesc) -> Space {
    if dev.cpu_kernels() {
        Space::cpu(geo)
    } else {
        Space::gpu(geo, dev)
    }
}

/// Frames spread evenly over `frames`, at most `n`.
pub fn spread(frames: &[usize], n: usize) -> Vec<usize> {
    if frames.len() <= n {
        return frames.to_vec();
    }
    (0..n).map(|i| frames[i * frames.len() / n]).collect()
}

/// The candidate points of `space` after roofline pruning, ranked best first.
pub fn pruned_points(
    space: &Space,
    dev: &DeviceDesc,
    masks: &[dynaspa_runtime::sparsity::BitMask],
    frames: &[usize],
    fraction: f64,
    min_keep: usize,
) -> Vec<Point> {
    let all = space.points();
    let mut c = Candidates::new(space, all, dev, masks);
    let sample = spread(frames, 8);
    let scores: Vec<f64> = (0..c.points.len()).map(|i| c.roofline_score(i, &sample)).collect();
    prune(&scores, fraction, min_keep).into_iter().map(|i| c.points[i].clone()).collect()
}

/// Log keys of the dispatch tables' end points (one active position; all positions).
const ANCHOR_ONE: usize = usize::MAX - 1;
const ANCHOR_FULL: usize = usize::MAX;

pub fn tune(
    m: &mut dyn Measurer,
    dev: &DeviceDesc,
    masks: &MaskSet,
    model_name: &str,
    cfg: &TuneConfig,
    log: &mut MeasureLog,
    progress: &mut dyn Progress,
) -> Result<TuneOutput> {
    let device = m.device();
    let ops = m.ops().to_vec();
    let (train, _held) = masks.split(cfg.held_out);
    if train.is_empty() {
        return Err(Error::Other(format!("mask set {} has no frames to tune on", masks.source)));
    }
    let tunable: Vec<usize> = (0..ops.len()).filter(|&i| ops[i].geometry.is_some() && masks.ops.contains_key(&ops[i].node)).collect();
    for o in ops.iter().filter(|o| o.geometry.is_some() && !masks.ops.contains_key(&o.node)) {
        tracing::warn!(node = %o.node, "no masks for this op in {}; it keeps calibration", masks.source);
    }
    let k = cfg.search.k.clamp(1, dynaspa_runtime::dispatch::MAX_MEMBERS);
    let per_op_units = cfg.search.trials + k;
    let total = per_op_units * tunable.len();
    let (mut done, mut measured_now) = (0usize, 0usize);
    let replayed_before = log.len();
    let t0 = Instant::now();
    let info = MaskSetInfo { source: masks.source.clone(), frames: masks.frames, tuned_on: train.len(), checksum: masks.checksum() };
    let mut profile = Profile::new(device, model_name, false, cost_model::VERSION, info);
    let mut reports = vec![];
    for (oi, &op) in tunable.iter().enumerate() {
        let o = &ops[op];
        let geo = o.geometry.clone().expect("filtered above");
        let op_masks = &masks.ops[&o.node];
        let space = space_for(geo, dev);
        let raw = space.points().len();
        let points = pruned_points(&space, dev, op_masks, &train, cfg.prune_fraction, cfg.min_keep);
        let schedules: Vec<Schedule> = points.iter().map(|p| space.schedule(p)).collect();
        let mut c = Candidates::new(&space, points.clone(), dev, op_masks);
        let mut model = CostModel::new(cfg.lambda);
        // Each op gets its share of the budget; what an op leaves unused carries over.
        let deadline = cfg.time_budget.map(|b| t0 + b.mul_f64((oi + 1) as f64 / tunable.len() as f64));
        let what = format!("op {}/{} {}", oi + 1, tunable.len(), o.node);
        // The ends of the tile range, for the dispatch tables; measured and logged under frame
        // keys no real frame has.
        let (h, w) = o.plane;
        let mut one = dynaspa_runtime::sparsity::BitMask::zeros(h, w);
        one.set(h / 2, w / 2, true);
        let ends = [(ANCHOR_ONE, one), (ANCHOR_FULL, dynaspa_runtime::sparsity::BitMask::ones(h, w))];
        let mut measure = |pt: Option<usize>, frame: usize| -> Result<f64> {
            let (name, sched) = match pt {
                None => ("dense", None),
                Some(i) => (schedules[i].name.as_str(), Some(&schedules[i])),
            };
            if let Some(t) = log.get(&o.node, name, frame) {
                return Ok(t);
            }
            let mask = ends.iter().find(|e| e.0 == frame).map_or_else(|| &op_masks[frame], |e| &e.1);
            let t = m.measure(op, sched, mask)?;
            log.record(&o.node, name, frame, t)?;
            measured_now += 1;
            Ok(t)
        };
        let start_done = done;
        let search_cfg = SearchConfig { k, seed: cfg.search.seed ^ (oi as u64).wrapping_mul(0x9e37), ..cfg.search.clone() };
        let outcome = {
            let mut on_trial = || {
                done += 1;
                progress.update(done, total, &what);
            };
            search::run(&mut c, &train, &search_cfg, &mut model, &mut measure, deadline, &mut on_trial)?
        };
        let mut sel = search::select(&mut c, &model, &outcome, k);
        if sel.is_empty() && outcome.times.is_empty() && !points.is_empty() {
            // Out of time before anything was measured: the roofline's best.
            sel.push(0);
        }
        done = start_done + cfg.search.trials;
        progress.update(done, total, &what);
        // Dispatch tables: each member on frames spread over the tuning set.
        let frames = spread(&train, cfg.table_frames);
        let mut dense_t = vec![];
        for &f in &frames {
            dense_t.push(measure(None, f)? * 1e6);
        }
        let dense_us = median(&dense_t).unwrap_or(0.0);
        let mut members =
            vec![Member { schedule: Schedule::dense("dense"), table: DispatchTable::constant((dense_us * 1e3).round() / 1e3)? }];
        let mut member_times: Vec<Vec<f64>> = vec![];
        for &s in &sel {
            let g = space.granularity(&points[s]);
            let mut pts = vec![];
            let mut ts = vec![];
            for &f in &frames {
                let t = measure(Some(s), f)? * 1e6;
                pts.push((op_masks[f].count_aligned_tiles(g) as u32, t));
                ts.push(t);
            }
            let mut anchors = vec![];
            for (key, mask) in &ends {
                let t = measure(Some(s), *key)?;
                anchors.push((mask.count_aligned_tiles(g) as u32, t * 1e6));
            }
            if ts.iter().chain(anchors.iter().map(|a| &a.1)).any(|t| !t.is_finite()) {
                tracing::warn!(node = %o.node, schedule = %schedules[s].name, "failed on a table frame; left out of the PolyKernel");
                continue;
            }
            members.push(Member { schedule: schedules[s].clone(), table: dispatch_table_with(pts, 6, &anchors)? });
            member_times.push(ts);
            done += 1;
            progress.update(done, total, &what);
        }
        done = start_done + per_op_units;
        let poly = PolyKernel::new(members)?;
        // What dispatch would run on each table frame, at its measured time.
        let mut picked = vec![];
        for (fi, &f) in frames.iter().enumerate() {
            let counts = poly.member_counts(&op_masks[f].count_tiles_many(poly.granularities()))?;
            let i = poly.select(&counts);
            picked.push(if i == poly.dense_index() { dense_t[fi] } else { member_times[i - 1][fi] });
        }
        let poly_mean_us = picked.iter().sum::<f64>() / picked.len().max(1) as f64;
        let measurements = outcome.times.len() + outcome.dense.len();
        let stats = OpStats { dense_us, poly_mean_us, schedules_measured: outcome.measured_points().len(), measurements };
        reports.push(OpReport {
            node: o.node.clone(),
            signature: o.signature.short(),
            space: raw,
            candidates: points.len(),
            schedules_measured: stats.schedules_measured,
            measurements,
            dense_us,
            poly_mean_us,
            members: poly.members().iter().map(|m| m.schedule.name.clone()).collect(),
        });
        profile.ops.push(OpProfile { node: o.node.clone(), signature: o.signature.clone(), poly, stats: Some(stats) });
    }
    Ok(TuneOutput { profile, reports, replayed: replayed_before.min(log.replayed), measured: measured_now })
}
