//! The tuner's measurements on a GPU backend (PoCL, lavapipe, CUDA, NVIDIA OpenCL), where the
//! spaces have 10^4 - 10^5 valid schedules and cannot be measured whole:
//!
//! 1. Kendall tau between the roofline and measured time over a seeded random sample of each
//!    op's valid schedules plus its pruned candidates, on a few tuning frames; and how the
//!    pruned candidates' best compares with the sample's best and with calibration's default;
//! 2. roofline pruning: the search (Algorithm 1) run live on the whole space and on the pruned
//!    candidates, seeds 1..=SEEDS; after each trial the true objective of its selection
//!    (mean over evaluation frames of the best member, dense included, measured); measurements
//!    (schedule x mask) until the pruned search is within 5% of the unpruned search's final.
//!
//! 3. a k = 6 PolyKernel (dense + 5) chosen greedily from the sampled and pruned schedules'
//!    times on the training frames, against the oracle (the best measured schedule, dense
//!    included, per frame) on HELD held-out frames; both with ideal per-frame dispatch.
//!
//! Every (schedule, frame) is measured once (minimum of 3 after a warm-up) and cached.
//! With `TX_DUMP=FILE`, step 1's pairs go to FILE as JSON lines (op geometry, knobs, the
//! frame's tile statistics, the roofline's components, the measured seconds): the data the
//! model's terms are checked against offline.
//!
//! ```sh
//! cargo run --release -p dynaspa-scheduler --example tune_experiments_gpu -- MODEL DSM BACKEND [OPS] [SAMPLE] [SEEDS] [TRIALS] [HELD]
//! ```

use dynaspa_backends::gpu::sparse_conv_knobs::default_gemm;
use dynaspa_runtime::dispatch::Schedule;
use dynaspa_runtime::graph::sparse_detect::detect_sparse_regions;
use dynaspa_runtime::sparsity::{Granularity, MaskDataset};
use dynaspa_scheduler::cost_model::CostModel;
use dynaspa_scheduler::masks::MaskSet;
use dynaspa_scheduler::measure::{GpuMeasurer, Measurer};
use dynaspa_scheduler::polykernel::{greedy, objective};
use dynaspa_scheduler::rng::Rng;
use dynaspa_scheduler::search::{self, Candidates, SearchConfig};
use dynaspa_scheduler::space::{OpKind, Point};
use dynaspa_scheduler::stats::{kendall_tau, median};
use dynaspa_scheduler::tune::{pruned_points, space_for, spread, TuneConfig};
use dynaspa_scheduler::{devices, microbench};
use std::collections::HashMap;

/// Measurements of one op, cached by (schedule name, frame); `None` is the dense member.
struct Cache<'a> {
    m: &'a mut GpuMeasurer,
    op: usize,
    masks: &'a [dynaspa_runtime::sparsity::BitMask],
    t: HashMap<(String, usize), f64>,
}

impl Cache<'_> {
    fn get(&mut self, s: Option<&Schedule>, f: usize) -> dynaspa_runtime::Result<f64> {
        let key = (s.map_or("dense".to_string(), |s| s.name.clone()), f);
        if let Some(&v) = self.t.get(&key) {
            return Ok(v);
        }
        let v = self.m.measure(self.op, s, &self.masks[f])?;
        self.t.insert(key, v);
        Ok(v)
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (model, dsm, backend) = (args.get(1).ok_or("MODEL")?, args.get(2).ok_or("DSM")?, args.get(3).ok_or("BACKEND")?);
    let n_ops: usize = args.get(4).map_or(Ok(3), |s| s.parse())?;
    let sample: usize = args.get(5).map_or(Ok(150), |s| s.parse())?;
    let seeds: u64 = args.get(6).map_or(Ok(3), |s| s.parse())?;
    let trials: usize = args.get(7).map_or(Ok(24), |s| s.parse())?;
    let n_held: usize = args.get(8).map_or(Ok(4), |s| s.parse())?;
    let bytes = std::fs::read(model)?;
    let mut g = dynaspa_runtime::load::load_graph(&bytes, &Default::default(), &dynaspa_backends::cpu::CpuEvaluator)?;
    detect_sparse_regions(&mut g, &Default::default());
    let ds = MaskDataset::open(dsm)?;
    let (masks, _) = MaskSet::from_dataset(&ds, dsm, &g)?;
    let (info, timers) = dynaspa_backends::gpu_sparse_op_timers(backend, &Default::default(), &g)?;
    let mut m = GpuMeasurer::new(&info, &g, timers, 3)?;
    let mut dev = devices::from_device_info(&info);
    microbench::fit_gpu(&mut dev, &mut m, &masks)?;
    println!(
        "model {model}, masks {dsm}, {backend} on {}; fitted alpha {:.3e} s, gamma {:.3e} s, latency {:.3e} s",
        info.name, dev.alpha_s, dev.gamma_s, dev.latency_s
    );
    let cfg = TuneConfig::default();
    let (train, held) = masks.split(cfg.held_out);
    let tau_frames = spread(&train, 4);
    let held_frames = spread(&held, n_held);
    let eval_frames = spread(&train, 16);
    let ops = m.ops().to_vec();
    // Ops spread over the model (first, middle, last...), GEMM convs only: depthwise spaces
    // have 36 points and are measured whole by calibration anyway.
    let gemm: Vec<usize> = (0..ops.len())
        .filter(|&i| ops[i].geometry.as_ref().is_some_and(|g| g.kind == OpKind::Conv) && masks.ops.contains_key(&ops[i].node))
        .collect();
    let chosen: Vec<usize> =
        if gemm.len() <= n_ops { gemm.clone() } else { (0..n_ops).map(|j| gemm[j * (gemm.len() - 1) / (n_ops - 1).max(1)]).collect() };
    let mut reach: [Vec<f64>; 2] = [vec![], vec![]];
    let mut dump = match std::env::var_os("TX_DUMP") {
        Some(p) => {
            use std::io::Write;
            let mut w = std::io::BufWriter::new(std::fs::File::create(p)?);
            writeln!(w, "{}", serde_json::json!({ "device": dev }))?;
            Some(w)
        }
        None => None,
    };
    let mut taus = vec![];
    println!("\nop | valid | pruned | tau sample+pruned (pairs) | best pruned / best sampled | best pruned / calibration default | per-frame tau median");
    for &oi in &chosen {
        let o = &ops[oi];
        let geo = o.geometry.clone().ok_or("no geometry")?;
        let om = &masks.ops[&o.node];
        let space = space_for(geo.clone(), &dev);
        let all = space.points();
        let pruned = pruned_points(&space, &dev, om, &train, cfg.prune_fraction, cfg.min_keep);
        let mut cache = Cache { m: &mut m, op: oi, masks: om, t: HashMap::new() };

        // 1. Roofline against measurement on a random sample plus the pruned candidates.
        let mut rng = Rng::new(0x7a0 ^ oi as u64);
        let mut pts: Vec<Point> = (0..sample.min(all.len())).map(|_| all[rng.below(all.len())].clone()).collect();
        let n_sampled = pts.len();
        pts.extend(pruned.iter().cloned());
        let mut c = Candidates::new(&space, pts.clone(), &dev, om);
        let (mut est, mut meas) = (vec![], vec![]);
        let mut per_frame = vec![];
        let mut mean_meas = vec![0.0; pts.len()];
        for &f in &tau_frames {
            let (mut e1, mut m1) = (vec![], vec![]);
            for (i, p) in pts.iter().enumerate() {
                let t = cache.get(Some(&space.schedule(p)), f)?;
                if !t.is_finite() {
                    continue;
                }
                let (st, full) = c.estimate(i, f);
                let e = full.total;
                if let Some(w) = dump.as_mut() {
                    use std::io::Write;
                    let gr = space.granularity(p);
                    let k = space.gemm(p);
                    let row = serde_json::json!({
                        "op": o.node, "c_in": geo.c_in, "c_out": geo.c_out, "groups": geo.groups, "kh": geo.kh, "kw": geo.kw, "sh": geo.sh, "sw": geo.sw,
                        "h": geo.h, "w": geo.w, "images": geo.images, "sampled": i < n_sampled,
                        "schedule": space.schedule(p).name, "gh": gr.h, "gw": gr.w,
                        "tm": k.map(|k| k.tm), "tn": k.map(|k| k.tn), "tk": k.map(|k| k.tk),
                        "wm": k.map(|k| k.wm), "wn": k.map(|k| k.wn), "ks": k.map(|k| k.ks),
                        "frame": f, "tiles": st.tiles, "computed": st.computed, "active": st.active, "runs": st.runs,
                        "est_global": full.global, "est_local": full.local, "est_compute": full.compute, "est": e, "seconds": t,
                    });
                    writeln!(w, "{row}")?;
                }
                est.push(e);
                meas.push(t);
                e1.push(e);
                m1.push(t);
                mean_meas[i] += t / tau_frames.len() as f64;
            }
            per_frame.extend(kendall_tau(&e1, &m1));
        }
        if let Some(w) = dump.as_mut() {
            use std::io::Write;
            w.flush()?;
        }
        let tau = kendall_tau(&est, &meas).unwrap_or(f64::NAN);
        taus.push(tau);
        let best_of = |r: std::ops::Range<usize>| r.map(|i| mean_meas[i]).fold(f64::INFINITY, f64::min);
        let (best_sampled, best_pruned) = (best_of(0..n_sampled), best_of(n_sampled..pts.len()));
        // Calibration's member at 1x1 with its default knobs, on the same frames.
        let k = default_gemm(geo.c_out, geo.k_dim(), false, geo.h * geo.w, geo.images.max(1), dev.compute_units);
        let one = Granularity::new(1, 1);
        let calib = k.apply(Schedule::sparse("calibration-1x1", one));
        let mut calib_t = 0.0;
        for &f in &tau_frames {
            calib_t += cache.get(Some(&calib), f)? / tau_frames.len() as f64;
        }
        println!(
            "{} | {} | {} | {tau:.3} ({}) | {:.3} | {:.3} | {:.3}",
            o.node,
            all.len(),
            pruned.len(),
            est.len(),
            best_pruned / best_sampled,
            best_pruned / calib_t,
            median(&per_frame).unwrap_or(f64::NAN)
        );

        // 3. k = 6 from the training frames' times against the oracle on held-out frames.
        if !held_frames.is_empty() {
            let (mut train_t, mut held_t) = (Vec::with_capacity(pts.len()), Vec::with_capacity(pts.len()));
            for p in &pts {
                let s = space.schedule(p);
                let (mut a, mut b) = (vec![], vec![]);
                for &f in &tau_frames {
                    a.push(cache.get(Some(&s), f)?);
                }
                for &f in &held_frames {
                    b.push(cache.get(Some(&s), f)?);
                }
                train_t.push(a);
                held_t.push(b);
            }
            let (mut dense_train, mut dense_held) = (vec![], vec![]);
            for &f in &tau_frames {
                dense_train.push(cache.get(None, f)?);
            }
            for &f in &held_frames {
                dense_held.push(cache.get(None, f)?);
            }
            let sel = greedy(&train_t, &dense_train, 5);
            let poly = objective(&sel, &held_t, &dense_held);
            let oracle = (0..held_frames.len()).map(|j| held_t.iter().map(|t| t[j]).fold(dense_held[j], f64::min)).sum::<f64>()
                / held_frames.len() as f64;
            println!(
                "  k=6 (greedy on {} training frames) over {} held-out frames: {:.2} µs, oracle over {} schedules + dense {:.2} µs: {:.3}x the oracle",
                tau_frames.len(),
                held_frames.len(),
                poly * 1e6,
                pts.len(),
                oracle * 1e6,
                poly / oracle
            );
        }

        // 2. Pruning: live searches on the whole space and on the pruned candidates.
        let dense_eval: Vec<f64> = eval_frames.iter().map(|&f| cache.get(None, f)).collect::<Result<_, _>>()?;
        for seed in 1..=seeds {
            let mut curves: [Vec<(usize, f64)>; 2] = [vec![], vec![]];
            for (v, subset) in [&all, &pruned].into_iter().enumerate() {
                for t in 1..=trials.min(subset.len()) {
                    let mut cc = Candidates::new(&space, subset.clone(), &dev, om);
                    let scfg = SearchConfig { k: 6, trials: t, seed, ..Default::default() };
                    let mut model = CostModel::new(cfg.lambda);
                    let scheds: HashMap<usize, Schedule> = HashMap::new();
                    let scheds = std::cell::RefCell::new(scheds);
                    let mut meas = |p: Option<usize>, f: usize| -> dynaspa_runtime::Result<f64> {
                        match p {
                            None => cache.get(None, f),
                            Some(i) => {
                                let s = scheds.borrow_mut().entry(i).or_insert_with(|| space.schedule(&subset[i])).clone();
                                cache.get(Some(&s), f)
                            }
                        }
                    };
                    let out = search::run(&mut cc, &train, &scfg, &mut model, &mut meas, None, &mut || {})?;
                    let sel = search::select(&mut cc, &model, &out, 6);
                    let mut truth = vec![];
                    for &i in &sel {
                        let s = space.schedule(&subset[i]);
                        truth.push(eval_frames.iter().map(|&f| cache.get(Some(&s), f)).collect::<Result<Vec<f64>, _>>()?);
                    }
                    let idx: Vec<usize> = (0..sel.len()).collect();
                    curves[v].push((out.times.len() + out.dense.len(), objective(&idx, &truth, &dense_eval)));
                }
            }
            let target = curves[0].last().map_or(f64::NAN, |x| x.1) * 1.05;
            let hits: Vec<Option<usize>> = (0..2).map(|v| curves[v].iter().find(|x| x.1 <= target).map(|x| x.0)).collect();
            for v in 0..2 {
                reach[v].push(hits[v].map_or(f64::NAN, |h| h as f64));
            }
            let fin = |v: usize| curves[v].last().map_or(f64::NAN, |x| x.1 * 1e6);
            println!(
                "  seed {seed}: final objective unpruned {:.1} µs, pruned {:.1} µs; measurements to within 5% of unpruned's final: unpruned {:?}, pruned {:?}",
                fin(0),
                fin(1),
                hits[0],
                hits[1]
            );
        }
    }
    let summary = |v: &Vec<f64>| {
        let ok: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
        format!(
            "median {:.0}, mean {:.0}, {} never",
            median(&ok).unwrap_or(f64::NAN),
            ok.iter().sum::<f64>() / ok.len().max(1) as f64,
            v.len() - ok.len()
        )
    };
    println!("\nKendall tau per op: {:?}", taus.iter().map(|t| format!("{t:.3}")).collect::<Vec<_>>());
    println!(
        "measurements to within 5% of the unpruned search's final (ops x seeds): unpruned {}; pruned {}",
        summary(&reach[0]),
        summary(&reach[1])
    );
    Ok(())
}
