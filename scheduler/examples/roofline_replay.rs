//! The GPU roofline re-run on measurements taken elsewhere: reads the pairs
//! `tune_experiments_gpu` dumps with `TX_DUMP` (device descriptor first, then one line per
//! (schedule, frame) with the op's geometry, the knobs, the frame's tile statistics and the
//! measured seconds), estimates each pair with this build's model, and reports per op how the
//! estimate ranks the measured times: Kendall tau over all pairs and within a frame, and how
//! good the measured best of the model's top fraction is (what pruning keeps).
//!
//! ```sh
//! cargo run --release -p dynaspa-scheduler --example roofline_replay -- PAIRS.jsonl [TOP_FRACTION]
//! ```

use dynaspa_backends::gpu::sparse_conv_knobs::GemmKnobs;
use dynaspa_runtime::sparsity::Granularity;
use dynaspa_scheduler::devices::DeviceDesc;
use dynaspa_scheduler::microbench::{fit_constants, Sample};
use dynaspa_scheduler::roofline::{gemm, TileStats};
use dynaspa_scheduler::space::{OpGeometry, OpKind};
use dynaspa_scheduler::stats::{kendall_tau, median};
use serde_json::Value;
use std::collections::BTreeMap;

struct Pair {
    op: OpGeometry,
    knobs: GemmKnobs,
    g: Granularity,
    st: TileStats,
    schedule: String,
    frame: u64,
    est: f64,
    seconds: f64,
    parts: [f64; 3],
}

fn field(v: &Value, k: &str) -> Result<u64, String> {
    v[k].as_u64().ok_or_else(|| format!("line without a whole number '{k}': {v}"))
}

fn pair(v: &Value, dev: &DeviceDesc) -> Result<(String, Pair), String> {
    let u = |k: &str| field(v, k).map(|x| x as usize);
    let op = OpGeometry {
        kind: OpKind::Conv,
        images: u("images")?,
        c_in: u("c_in")?,
        c_out: u("c_out")?,
        groups: u("groups")?,
        kh: u("kh")?,
        kw: u("kw")?,
        sh: u("sh")?,
        sw: u("sw")?,
        h: u("h")?,
        w: u("w")?,
        heads: 0,
        head_dim: 0,
    };
    let k32 = |k: &str| field(v, k).map(|x| x as u32);
    let knobs =
        GemmKnobs { tm: k32("tm")?, tn: k32("tn")?, tk: k32("tk")?, wm: k32("wm")?, wn: k32("wn")?, ks: k32("ks")?, wk: 1, et: false };
    let g = Granularity::new(field(v, "gh")? as u16, field(v, "gw")? as u16);
    let st = TileStats { tiles: u("tiles")?, computed: u("computed")?, active: u("active")?, runs: u("runs")?, h: op.h, w: op.w };
    let e = gemm(&op, Some(g), &knobs, &st, dev);
    let seconds = v["seconds"].as_f64().ok_or("line without 'seconds'")?;
    let name = v["op"].as_str().ok_or("line without 'op'")?.to_string();
    let schedule = v["schedule"].as_str().unwrap_or("?").to_string();
    Ok((name, Pair { op, knobs, g, st, schedule, frame: field(v, "frame")?, est: e.total, seconds, parts: [e.global, e.local, e.compute] }))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).ok_or("usage: roofline_replay PAIRS.jsonl [TOP_FRACTION]")?;
    let top: f64 = args.get(2).map_or(Ok(0.1), |s| s.parse())?;
    let text = std::fs::read_to_string(path)?;
    let mut lines = text.lines();
    let first: Value = serde_json::from_str(lines.next().ok_or("empty file")?)?;
    let mut dev: DeviceDesc =
        serde_json::from_value(first["device"].clone()).map_err(|e| format!("first line is not a device descriptor: {e}"))?;
    if dev.serial_op_s == 0.0 {
        // Dumps from before the serial-operation term: its spec value.
        dev.serial_op_s = 16.0 / (dev.clock_ghz * 1e9);
    }
    let mut ops: BTreeMap<String, Vec<Pair>> = BTreeMap::new();
    let body: Vec<&str> = lines.collect();
    for (n, l) in body.iter().enumerate() {
        let v: Value = match serde_json::from_str(l) {
            Ok(v) => v,
            // A dump cut off by its time limit ends in half a line.
            Err(e) if n + 1 == body.len() => {
                eprintln!("last line unreadable ({e}), left out");
                break;
            }
            Err(e) => return Err(format!("line {}: {e}", n + 2).into()),
        };
        if v["tm"].is_null() || !v["seconds"].as_f64().is_some_and(f64::is_finite) {
            continue;
        }
        let (op, p) = pair(&v, &dev).map_err(|e| format!("line {}: {e}", n + 2))?;
        ops.entry(op).or_default().push(p);
    }
    if std::env::var_os("REPLAY_FIT").is_some() {
        dev = fit(&dev, &ops);
        for p in ops.values_mut().flatten() {
            let e = gemm(&p.op, Some(p.g), &p.knobs, &p.st, &dev);
            p.est = e.total;
            p.parts = [e.global, e.local, e.compute];
        }
    }
    println!("{} on {} ({} ops); top fraction {top}", path, dev.name, ops.len());
    println!("op | pairs | tau all | tau per frame (median) | best of model's top / best measured | model's pick / best measured");
    let mut taus = vec![];
    for (op, pairs) in &ops {
        let est: Vec<f64> = pairs.iter().map(|p| p.est).collect();
        let meas: Vec<f64> = pairs.iter().map(|p| p.seconds).collect();
        let tau = kendall_tau(&est, &meas).unwrap_or(f64::NAN);
        taus.push(tau);
        let mut frames: BTreeMap<u64, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
        for p in pairs {
            let f = frames.entry(p.frame).or_default();
            f.0.push(p.est);
            f.1.push(p.seconds);
        }
        let per_frame: Vec<f64> = frames.values().filter_map(|(e, m)| kendall_tau(e, m)).collect();
        // Per schedule, the mean over frames of estimate and measurement: what pruning ranks.
        let mut by: BTreeMap<&str, (f64, f64, f64, [f64; 3])> = BTreeMap::new();
        for p in pairs {
            let s = by.entry(&p.schedule).or_default();
            s.0 += p.est;
            s.1 += p.seconds;
            s.2 += 1.0;
            for i in 0..3 {
                s.3[i] += p.parts[i];
            }
        }
        let mut sched: Vec<(&str, f64, f64, [f64; 3])> =
            by.into_iter().map(|(k, v)| (k, v.0 / v.2, v.1 / v.2, v.3.map(|x| x / v.2))).collect();
        sched.sort_by(|a, b| a.1.total_cmp(&b.1));
        let best = sched.iter().map(|s| s.2).fold(f64::INFINITY, f64::min);
        let keep = ((sched.len() as f64 * top).ceil() as usize).max(1);
        let best_top = sched[..keep].iter().map(|s| s.2).fold(f64::INFINITY, f64::min);
        println!(
            "{op} | {} | {tau:.3} | {:.3} | {:.3} | {:.3}",
            pairs.len(),
            median(&per_frame).unwrap_or(f64::NAN),
            best_top / best,
            sched[0].2 / best
        );
        if std::env::var_os("REPLAY_VERBOSE").is_some() {
            let mut by_meas = sched.clone();
            by_meas.sort_by(|a, b| a.2.total_cmp(&b.2));
            let show = |tag: &str, s: &(&str, f64, f64, [f64; 3])| {
                println!(
                    "    {tag:<9} {:<40} est {:7.2} µs (global {:6.2} local {:6.2} compute {:6.2}) measured {:7.2} µs",
                    s.0,
                    s.1 * 1e6,
                    s.3[0] * 1e6,
                    s.3[1] * 1e6,
                    s.3[2] * 1e6,
                    s.2 * 1e6
                )
            };
            for s in sched.iter().take(4) {
                show("model", s);
            }
            for s in by_meas.iter().take(4) {
                show("measured", s);
            }
        }
    }
    println!("median tau over ops: {:.3}", median(&taus).unwrap_or(f64::NAN));
    Ok(())
}

/// The device constants as `dynaspa tune` fits them (`microbench::fit_constants`), but on
/// every pair of the dump: the best this model's form can do on these measurements.
fn fit(dev: &DeviceDesc, ops: &BTreeMap<String, Vec<Pair>>) -> DeviceDesc {
    let samples: Vec<Sample> = ops.values().flatten().map(|p| (p.op.clone(), Some((p.g, Some(p.knobs))), p.st, p.seconds)).collect();
    let (err, d) = fit_constants(dev, &samples);
    println!(
        "fitted: alpha {:.3e} s, gamma {:.3e} s, latency {:.3e} s, serial op {:.3e} s; rms log error {:.3}",
        d.alpha_s,
        d.gamma_s,
        d.latency_s,
        d.serial_op_s,
        (err / samples.len().max(1) as f64).sqrt()
    );
    d
}
