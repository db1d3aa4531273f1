//! The tuner's measurements for benches/RESULTS.md ("Offline tuner"), on the CPU backend:
//!
//! 1. every schedule of each sparse conv's space (and dense) timed on tuning and held-out
//!    frames: medians of interleaved rounds (the dev VM is shared and noisy);
//! 2. Kendall tau between the roofline estimate and those times;
//! 3. the tuned k-member PolyKernel on held-out frames against the oracle (best measured
//!    schedule per frame);
//! 4. roofline pruning: measurements until the search is within 5% of the unpruned search's
//!    best, pruned against unpruned, replaying the measured times.
//!
//! ```sh
//! cargo run --release -p dynaspa-scheduler --example tune_experiments -- MODEL DSM [THREADS] [ROUNDS]
//! ```

use dynaspa_runtime::graph::sparse_detect::detect_sparse_regions;
use dynaspa_runtime::sparsity::MaskDataset;
use dynaspa_scheduler::cost_model::CostModel;
use dynaspa_scheduler::masks::MaskSet;
use dynaspa_scheduler::measure::{CpuMeasurer, MeasureLog, Measurer};
use dynaspa_scheduler::polykernel::objective;
use dynaspa_scheduler::roofline::prune;
use dynaspa_scheduler::search::{self, Candidates, SearchConfig};
use dynaspa_scheduler::stats::{kendall_tau, median};
use dynaspa_scheduler::tune::{self, spread, NoProgress, TuneConfig};
use dynaspa_scheduler::{devices, microbench};
use std::collections::HashMap;
use std::sync::Arc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (model, dsm) = (args.get(1).ok_or("MODEL")?, args.get(2).ok_or("DSM")?);
    let threads: usize = args.get(3).map_or(Ok(2), |s| s.parse())?;
    let rounds: usize = args.get(4).map_or(Ok(5), |s| s.parse())?;
    let bytes = std::fs::read(model)?;
    let mut g = dynaspa_runtime::load::load_graph(&bytes, &Default::default(), &dynaspa_backends::cpu::CpuEvaluator)?;
    detect_sparse_regions(&mut g, &Default::default());
    let ds = MaskDataset::open(dsm)?;
    let (masks, _) = MaskSet::from_dataset(&ds, dsm, &g)?;
    let backend = dynaspa_backends::cpu::CpuBackend::new(Some(threads))?;
    let flush = std::env::var("FLUSH").map_or(true, |v| v != "0");
    let mut m = CpuMeasurer::new(&backend, Arc::new(g), 3)?.flush_caches(flush);
    let mut dev = devices::cpu(threads);
    microbench::fit_cpu(&mut dev, threads)?;
    println!("cache flush between runs: {flush}");
    println!(
        "model {model}, masks {dsm}, {threads} threads, {rounds} rounds; alpha {:.3e} s gamma {:.3e} s bw {:.1} GB/s",
        dev.alpha_s, dev.gamma_s, dev.mem_bandwidth_gbs
    );

    // The tuned profile, as `dynaspa tune` makes it (default settings, k = 6).
    let cfg = TuneConfig::default();
    let t0 = std::time::Instant::now();
    let tuned = tune::tune(&mut m, &dev, &masks, "exp", &cfg, &mut MeasureLog::memory(), &mut NoProgress)?;
    println!("tune: {:.1} s", t0.elapsed().as_secs_f64());
    let (train, held) = masks.split(cfg.held_out);
    let (tr, ho) = (spread(&train, 24), spread(&held, 16));
    let ops = m.ops().to_vec();
    let (mut poly_sum, mut oracle_sum, mut dense_sum, mut best_single_sum) = (0.0, 0.0, 0.0, 0.0);
    let mut taus = vec![];
    let mut within_taus = vec![];
    let mut reach = [vec![], vec![]];
    println!("\nop | space | tau (all pairs) | tau within mask (median) | held-out dense µs | PolyKernel µs | oracle µs | poly/oracle | best single µs");
    for (oi, o) in ops.iter().enumerate() {
        let Some(geo) = o.geometry.clone() else { continue };
        let Some(om) = masks.ops.get(&o.node) else { continue };
        if geo.is_token() {
            continue;
        }
        let space = tune::space_for(geo, &dev);
        let points = space.points();
        let scheds: Vec<_> = points.iter().map(|p| space.schedule(p)).collect();
        let frames: Vec<usize> = tr.iter().chain(&ho).copied().collect();
        // Interleaved rounds: every round walks all frames and schedules once.
        let mut t: HashMap<(Option<usize>, usize), Vec<f64>> = HashMap::new();
        for _ in 0..rounds {
            for &f in &frames {
                let s = m.measure(oi, None, &om[f])?;
                t.entry((None, f)).or_default().push(s * 1e6);
                for (i, sc) in scheds.iter().enumerate() {
                    let s = m.measure(oi, Some(sc), &om[f])?;
                    t.entry((Some(i), f)).or_default().push(s * 1e6);
                }
            }
        }
        let med: HashMap<(Option<usize>, usize), f64> = t.into_iter().map(|(k, v)| (k, median(&v).unwrap_or(f64::NAN))).collect();
        // Roofline against measurement.
        let mut c = Candidates::new(&space, points.clone(), &dev, om);
        let (mut est, mut meas) = (vec![], vec![]);
        let mut op_within = vec![];
        for &f in &frames {
            let (mut e1, mut m1) = (vec![], vec![]);
            for i in 0..points.len() {
                let e = c.estimate(i, f).1.total;
                est.push(e);
                meas.push(med[&(Some(i), f)]);
                e1.push(e);
                m1.push(med[&(Some(i), f)]);
            }
            if let Some(tw) = kendall_tau(&e1, &m1) {
                op_within.push(tw);
            }
        }
        let tau = kendall_tau(&est, &meas).unwrap_or(f64::NAN);
        taus.push(tau);
        let tw = median(&op_within).unwrap_or(f64::NAN);
        within_taus.extend(op_within);
        // The tuned PolyKernel on held-out frames: dispatch's pick at its measured time.
        let poly = &tuned.profile.ops.iter().find(|p| p.node == o.node).ok_or("op not tuned")?.poly;
        let idx_of = |name: &str| scheds.iter().position(|s| s.name == name);
        let (mut ps, mut os, mut ds_, mut singles) = (0.0, 0.0, 0.0, vec![0.0; points.len()]);
        for &f in &ho {
            let counts = poly.member_counts(&om[f].count_tiles_many(poly.granularities()))?;
            let pick = poly.select(&counts);
            let name = &poly.members()[pick].schedule.name;
            let pt =
                if pick == poly.dense_index() { med[&(None, f)] } else { med[&(idx_of(name).ok_or("member not in space")?.into(), f)] };
            let all = (0..points.len()).map(|i| med[&(Some(i), f)]).fold(med[&(None, f)], f64::min);
            ps += pt;
            os += all;
            ds_ += med[&(None, f)];
            for (i, s) in singles.iter_mut().enumerate() {
                *s += med[&(Some(i), f)].min(med[&(None, f)]);
            }
        }
        let n = ho.len() as f64;
        let best_single = singles.iter().copied().fold(f64::INFINITY, f64::min) / n;
        println!(
            "{} | {} | {tau:.3} | {tw:.3} | {:.1} | {:.1} | {:.1} | {:.3} | {:.1}",
            o.node,
            points.len(),
            ds_ / n,
            ps / n,
            os / n,
            ps / os,
            best_single
        );
        poly_sum += ps / n;
        oracle_sum += os / n;
        dense_sum += ds_ / n;
        best_single_sum += best_single;

        // Pruning: replay the search on the tuning frames' measured times.
        let dense_tr: Vec<f64> = tr.iter().map(|&f| med[&(None, f)]).collect();
        let truth: Vec<Vec<f64>> = (0..points.len()).map(|i| tr.iter().map(|&f| med[&(Some(i), f)]).collect()).collect();
        let kept = {
            let sample = spread(&tr, 8);
            let scores: Vec<f64> = (0..points.len()).map(|i| c.roofline_score(i, &sample)).collect();
            prune(&scores, cfg.prune_fraction, cfg.min_keep)
        };
        for seed in 1..=5u64 {
            // curve[j] = true objective after the j-th trial, per variant.
            let mut curves: [Vec<(usize, f64)>; 2] = [vec![], vec![]];
            for (v, subset) in [(0..points.len()).collect::<Vec<_>>(), kept.clone()].into_iter().enumerate() {
                let sub_pts: Vec<_> = subset.iter().map(|&i| points[i].clone()).collect();
                for trials in 1..=subset.len() {
                    let mut cc = Candidates::new(&space, sub_pts.clone(), &dev, om);
                    let scfg = SearchConfig { k: 6, trials, seed, ..Default::default() };
                    let mut model = CostModel::new(cfg.lambda);
                    let mut meas = |p: Option<usize>, f: usize| -> dynaspa_runtime::Result<f64> {
                        Ok(match p {
                            None => med[&(None, f)],
                            Some(i) => med[&(Some(subset[i]), f)],
                        } * 1e-6)
                    };
                    let out = search::run(&mut cc, &tr, &scfg, &mut model, &mut meas, None, &mut || {})?;
                    let sel: Vec<usize> = search::select(&mut cc, &model, &out, 6).into_iter().map(|i| subset[i]).collect();
                    curves[v].push((out.times.len(), objective(&sel, &truth, &dense_tr)));
                }
            }
            let target = curves[0].last().map_or(f64::NAN, |x| x.1) * 1.05;
            for v in 0..2 {
                let hit = curves[v].iter().find(|x| x.1 <= target).map(|x| x.0);
                reach[v].push(hit.map_or(f64::NAN, |h| h as f64));
            }
        }
    }
    println!(
        "\nsum over ops (held-out means): dense {dense_sum:.1} µs, PolyKernel {poly_sum:.1} µs, oracle {oracle_sum:.1} µs, poly/oracle {:.3}, best single schedule {best_single_sum:.1} µs",
        poly_sum / oracle_sum
    );
    println!(
        "Kendall tau roofline vs measured, per op: median {:.3} (min {:.3}, max {:.3}); within a mask: median {:.3}",
        median(&taus).unwrap_or(f64::NAN),
        taus.iter().copied().fold(f64::INFINITY, f64::min),
        taus.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        median(&within_taus).unwrap_or(f64::NAN)
    );
    let miss = |v: &Vec<f64>| v.iter().filter(|x| x.is_nan()).count();
    println!(
        "measurements to reach within 5% of the unpruned search's best (ops x 5 seeds): unpruned median {:.0} (mean {:.0}, {} never), pruned median {:.0} (mean {:.0}, {} never)",
        median(&reach[0].iter().copied().filter(|x| !x.is_nan()).collect::<Vec<_>>()).unwrap_or(f64::NAN),
        reach[0].iter().filter(|x| !x.is_nan()).sum::<f64>() / (reach[0].len() - miss(&reach[0])).max(1) as f64,
        miss(&reach[0]),
        median(&reach[1].iter().copied().filter(|x| !x.is_nan()).collect::<Vec<_>>()).unwrap_or(f64::NAN),
        reach[1].iter().filter(|x| !x.is_nan()).sum::<f64>() / (reach[1].len() - miss(&reach[1])).max(1) as f64,
        miss(&reach[1]),
    );
    Ok(())
}
