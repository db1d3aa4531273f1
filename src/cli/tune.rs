//! `dynaspa tune`: the offline tuner on a backend of this machine, or the roofline
//! alone for a device we cannot reach (`--predict`), writing a profile that `run` and `bench`
//! take with `--profile`.

use super::feed::Feeder;
use dynaspa::io::frames::FrameSource;
use dynaspa::runtime::graph::sparse_detect::{detect_sparse_regions, SparseOptions};
use dynaspa::runtime::sparsity::MaskDataset;
use dynaspa::{Backend, Error, Result};
use dynaspa_scheduler::masks::MaskSet;
use dynaspa_scheduler::measure::{CpuMeasurer, GpuMeasurer, LogHeader, MeasureLog, Measurer};
use dynaspa_scheduler::tune::{OpReport, Progress, TuneConfig};
use dynaspa_scheduler::{devices, microbench, predict};
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
#[command(after_help = "\
Per sparse op: the schedule space is pruned to the best --prune fraction by the roofline model
(at least 16 candidates), then searched in rounds: a mini-batch of masks, simulated annealing on
the learned cost model picks the schedules with the largest marginal gain over the current
selection, they are measured on the backend, the model is refitted. The k members (dense one
included) are chosen greedily and measured on frames spread over the tuning set for their
dispatch tables. The last --held-out share of the frames is never used.

On a GPU backend (--backend opencl|cuda|wgpu, --device SEL) the space is the GPU sparse conv
kernels' own knobs (granularity, TM TN TK WM WN KS; depthwise: the granularity), checked against
the device's limits as the executor checks a profile, and the roofline's constants are first
fitted to a few measurements of the default schedules. Ops the GPU runs dense are left out.

Every measurement is appended to OUTPUT with the extension .log.jsonl; running the same command
again replays it, so an interrupted tune resumes where it stopped. --predict DEVICE (orin,
xavier, adreno650) makes a roofline-only profile marked \"predicted\", measuring nothing.")]
pub struct TuneArgs {
    /// ONNX model file.
    model: PathBuf,
    /// Backend to measure on: cpu, opencl, cuda or wgpu (the GPU backends tune their sparse
    /// convs; ops they run dense are left out).
    #[arg(long, default_value = "cpu")]
    backend: Backend,
    /// GPU backends: which device (a number from `dynaspa devices`, or part of its name).
    #[arg(long, value_name = "SEL")]
    device: Option<String>,
    /// GPU backends: the precision the kernels are tuned at; a profile is used only at its own
    /// (f16: half storage, as `run --precision f16`).
    #[arg(long, default_value = "f32")]
    precision: dynaspa::Precision,
    /// A mask dataset (.dsm), or a directory holding one made for this model.
    #[arg(long, value_name = "FILE|DIR", conflicts_with = "frames", required_unless_present = "frames")]
    masks: Option<PathBuf>,
    /// Collect the masks by running the model on these frames (directory, video or camera).
    #[arg(long, value_name = "DIR|VIDEO")]
    frames: Option<PathBuf>,
    /// With --frames: inputs other than the frames, NAME=PATH.
    #[arg(long = "input", short = 'i', value_name = "NAME=PATH", requires = "frames")]
    inputs: Vec<String>,
    /// With --frames: the input frames feed.
    #[arg(long, value_name = "NAME", requires = "frames")]
    frame_input: Option<String>,
    /// With --frames: at most this many frames.
    #[arg(long, value_name = "N", default_value_t = 120, requires = "frames")]
    max_frames: usize,
    /// PolyKernel members per op, the dense one included (1-8).
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u8).range(1..=8))]
    k: u8,
    /// Schedules measured per op (each on one mini-batch of masks).
    #[arg(long, value_name = "N", default_value_t = 24)]
    trials: usize,
    /// Stop searching after this many seconds in all (members found so far are kept).
    #[arg(long, value_name = "SECS")]
    time_budget: Option<f64>,
    /// Masks per mini-batch.
    #[arg(long, default_value_t = 8)]
    batch: usize,
    /// Share of each op's space the roofline keeps before measuring.
    #[arg(long, default_value_t = 0.001)]
    prune: f64,
    /// Share of the frames held out of tuning (the last ones).
    #[arg(long, default_value_t = 0.25)]
    held_out: f64,
    /// CPU worker threads (default: all cores); part of the device fingerprint.
    #[arg(long)]
    threads: Option<usize>,
    /// Seed of the search (the same seed and log replay the same tune).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Predict a profile for a built-in device from the roofline alone: orin, xavier, adreno650.
    #[arg(long, value_name = "DEVICE")]
    predict: Option<String>,
    /// Output profile, e.g. profiles/<device>/<model>.json.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: PathBuf,
}

/// A bar on a terminal, a line every few seconds otherwise; ETA from the rate so far.
struct Bar {
    t0: Instant,
    last: Instant,
    tty: bool,
}

impl Progress for Bar {
    fn update(&mut self, done: usize, total: usize, what: &str) {
        let every = if self.tty { Duration::from_millis(200) } else { Duration::from_secs(5) };
        if self.last.elapsed() < every && done < total {
            return;
        }
        self.last = Instant::now();
        let el = self.t0.elapsed().as_secs_f64();
        let frac = done as f64 / total.max(1) as f64;
        let eta = if done > 0 { el / done as f64 * (total - done.min(total)) as f64 } else { f64::NAN };
        let eta = if eta.is_finite() { format!("{}m{:02}s", (eta / 60.0) as u64, eta as u64 % 60) } else { "?".into() };
        let width = 28;
        let fill = (frac * width as f64).round() as usize;
        let line = format!(
            "tune [{}{}] {:>3.0}% {done}/{total}  ETA {eta}  {what}",
            "#".repeat(fill),
            " ".repeat(width - fill.min(width)),
            frac * 100.0
        );
        if self.tty {
            eprint!("\r{line:<110.110}");
            if done >= total {
                eprintln!();
            }
        } else {
            eprintln!("{line}");
        }
    }
}

fn model_stem(p: &Path) -> String {
    p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into())
}

/// The .dsm to use: the file given, or the one in a directory whose metadata names the model.
fn dataset_path(masks: &Path, model: &str) -> Result<PathBuf> {
    if masks.is_file() {
        return Ok(masks.to_path_buf());
    }
    let rd = std::fs::read_dir(masks).map_err(|e| Error::io(masks, e))?;
    let mut found = vec![];
    for e in rd.flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "dsm") {
            found.push(p);
        }
    }
    found.sort();
    for p in &found {
        if let Ok(d) = MaskDataset::open(p) {
            let m = d.meta().get("model").and_then(|v| v.as_str()).unwrap_or("");
            if m == model || Path::new(m).file_stem().is_some_and(|s| s == model) {
                return Ok(p.clone());
            }
        }
    }
    let names: Vec<String> = found.iter().filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned())).collect();
    Err(Error::Other(format!(
        "no mask dataset for model '{model}' in {} (found: {}); pass the .dsm file itself",
        masks.display(),
        if names.is_empty() { "none".into() } else { names.join(", ") }
    )))
}

/// Runs the model on the frames (every sparse op dense, so nothing is calibrated) with the
/// sparse ops' mask values as extra outputs, and keeps each op's mask per frame.
fn collect_masks(a: &TuneArgs, src: &Path, g: &dynaspa::runtime::graph::Graph) -> Result<MaskSet> {
    let mut g2 = g.clone();
    let mut node_of_mask: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for n in g.nodes.iter().filter(|n| n.sparse.is_some()) {
        let v = n.sparse.as_ref().map(|s| s.mask).unwrap_or_default();
        if g.inputs.contains(&v) {
            eprintln!(
                "warning: '{}' reads the model input '{}' as its mask; its masks are the same in every frame",
                n.name, g.values[v].name
            );
        }
        if !g2.outputs.contains(&v) {
            g2.outputs.push(v);
        }
        node_of_mask.entry(g.values[v].name.clone()).or_default().push(n.name.clone());
    }
    let sparse = dynaspa::backends::SparseConfig { cache_dir: None, force: Some(dynaspa::backends::ForceMember::Dense), profile: None };
    let b = dynaspa::backends::create_with("cpu", a.threads, sparse)?;
    let feeder = Feeder::new(g, a.frame_input.as_deref(), &a.inputs, None, None)?;
    let mut session = dynaspa::Session::new(g2, b.as_ref())?;
    let source = FrameSource::open(src, feeder.input_size(), Some(a.max_frames))?;
    let mut frames = vec![];
    for f in source {
        let f = f?;
        let outs = session.run(feeder.feeds(&f.image)?).map_err(|e| Error::Other(format!("frame {} ({}): {e}", f.index, f.label)))?;
        let mut per = BTreeMap::new();
        for (name, t) in outs {
            for node in node_of_mask.get(&name).into_iter().flatten() {
                per.insert(node.clone(), t.clone());
            }
        }
        frames.push(per);
    }
    MaskSet::from_tensors(g, &src.display().to_string(), &frames)
}

fn summary(reports: &[OpReport]) {
    println!(
        "{:<28} {:<34} {:>6} {:>5} {:>5} {:>10} {:>10} {:>7}  members",
        "op", "signature", "space", "cand", "meas", "dense µs", "poly µs", "speedup"
    );
    let (mut d, mut p) = (0.0, 0.0);
    for r in reports {
        println!(
            "{:<28.28} {:<34.34} {:>6} {:>5} {:>5} {:>10.1} {:>10.1} {:>7.2}  {}",
            r.node,
            r.signature,
            r.space,
            r.candidates,
            r.schedules_measured,
            r.dense_us,
            r.poly_mean_us,
            r.dense_us / r.poly_mean_us.max(1e-9),
            r.members.join(" ")
        );
        d += r.dense_us;
        p += r.poly_mean_us;
    }
    println!("{:<28} {:<34} {:>6} {:>5} {:>5} {:>10.1} {:>10.1} {:>7.2}", "all ops", "", "", "", "", d, p, d / p.max(1e-9));
}

pub fn tune(a: TuneArgs) -> Result<()> {
    let stem = model_stem(&a.model);
    let mut g = dynaspa::load_graph(&a.model, &Default::default())?;
    detect_sparse_regions(&mut g, &SparseOptions::default());
    if !g.nodes.iter().any(|n| n.sparse.is_some()) {
        return Err(Error::Other(format!("{}: no sparse ops found; nothing to tune", a.model.display())));
    }
    if !(0.0..1.0).contains(&a.prune) || a.prune == 0.0 {
        return Err(Error::Other(format!("--prune {}: must be in (0, 1)", a.prune)));
    }
    let masks = match (&a.masks, &a.frames) {
        (Some(m), _) => {
            let p = dataset_path(m, &stem)?;
            let ds = MaskDataset::open(&p)?;
            let (set, missing) = MaskSet::from_dataset(&ds, &p.display().to_string(), &g)?;
            if !missing.is_empty() {
                eprintln!("warning: {} has no masks for {} (they keep calibration)", p.display(), missing.join(", "));
            }
            set
        }
        (None, Some(f)) => collect_masks(&a, f, &g)?,
        (None, None) => return Err(Error::Other("give --masks FILE|DIR or --frames DIR".into())),
    };
    let mut cfg = TuneConfig {
        prune_fraction: a.prune,
        held_out: a.held_out,
        time_budget: a.time_budget.map(Duration::from_secs_f64),
        ..Default::default()
    };
    cfg.search.k = a.k as usize;
    cfg.search.trials = a.trials.max(1);
    cfg.search.batch = a.batch.max(1);
    cfg.search.seed = a.seed;
    let t0 = Instant::now();

    if let Some(dev_id) = &a.predict {
        let dev = devices::builtin(dev_id).ok_or_else(|| {
            Error::Other(format!("--predict '{dev_id}': no built-in device of that name; there are: {}", devices::BUILTIN_IDS.join(", ")))
        })?;
        let ops = predict::graph_ops(&g, &dev);
        if !ops.iter().any(|o| o.geometry.is_some() && masks.ops.contains_key(&o.node)) {
            return Err(Error::Other(format!(
                "{}: no sparse op of this model runs sparsely on {} (its {} backend's PolyKernel ops are 2-D convs, one group with constant weights or depthwise, and token projections over in-graph masks); nothing to predict",
                a.model.display(),
                dev.name,
                dev.backend
            )));
        }
        let (profile, reports) = predict::predict(&dev, &ops, &masks, &stem, &cfg)?;
        profile.save(&a.output)?;
        summary(&reports);
        println!(
            "predicted profile for {} ({} ops, roofline only) written to {} in {:.1} s",
            dev.name,
            profile.ops.len(),
            a.output.display(),
            t0.elapsed().as_secs_f64()
        );
        return Ok(());
    }
    let (mut measurer, mut dev, threads): (Box<dyn Measurer>, _, _) = match a.backend {
        Backend::Cpu if a.precision != dynaspa::Precision::F32 => {
            return Err(Error::Other(format!("--precision {}: the CPU backend computes in f32 only; tune it at f32", a.precision)))
        }
        Backend::Cpu => {
            let threads = a.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            let backend = dynaspa::backends::cpu::CpuBackend::new(Some(threads))?
                .with_sparse_config(dynaspa::backends::SparseConfig { cache_dir: None, force: Some(dynaspa::backends::ForceMember::Dense), profile: None });
            let m = CpuMeasurer::new(&backend, Arc::new(g), 3)?.flush_caches(true);
            (Box::new(m), devices::cpu(threads), Some(threads))
        }
        Backend::OpenCl | Backend::Cuda | Backend::Wgpu => {
            let opts = dynaspa::backends::BackendOptions {
                precision: a.precision,
                device: a.device.clone(),
                sparse: Some(dynaspa::backends::SparseConfig { cache_dir: dynaspa::backends::cache_dir::cache_root(), force: None, profile: None }),
                ..Default::default()
            };
            let (info, timers) = dynaspa::backends::gpu_sparse_op_timers(a.backend.name(), &opts, &g)?;
            if timers.is_empty() || !timers.iter().any(|t| masks.ops.contains_key(t.node())) {
                return Err(Error::Other(format!(
                    "{}: no sparse op of this model runs sparsely on the {} backend (its PolyKernel ops are 2-D convs, one group with constant weights or depthwise, and token projections over in-graph masks); nothing to tune",
                    a.model.display(),
                    a.backend
                )));
            }
            let m = GpuMeasurer::new(&info, &g, timers, 3)?.with_fingerprint(dynaspa::backends::gpu::fingerprint_at(&info, a.precision));
            (Box::new(m), devices::from_device_info(&info), None)
        }
        Backend::Auto => {
            return Err(Error::Other("--backend auto: tuning measures one backend; name it: cpu, opencl, cuda or wgpu (or --predict DEVICE for a roofline-only profile)".into()))
        }
    };
    let device = measurer.device();
    let header = LogHeader {
        log: "dynaspa-tune".into(),
        // 2: runs timed with the private caches flushed; logs of version 1 are set aside.
        version: 2,
        fingerprint: device.fingerprint.clone(),
        model: stem.clone(),
        masks: masks.checksum(),
        seed: a.seed,
    };
    let log_path = a.output.with_extension("log.jsonl");
    let mut log = MeasureLog::open(&log_path, &header)?;
    if log.replayed > 0 {
        eprintln!("resuming: {} measurements from {}", log.replayed, log_path.display());
    }
    // The fitted constants steer pruning and the search, so a resumed tune must reuse the
    // ones it started with to retrace its steps: they are logged like measurements.
    let fitted = ["alpha_s", "gamma_s", "bandwidth_gbs"].map(|k| log.get("#device", k, 0));
    if let [Some(al), Some(ga), Some(bw)] = fitted {
        (dev.alpha_s, dev.gamma_s, dev.mem_bandwidth_gbs, dev.alpha_source) = (al, ga, bw, "fitted".into());
        // Logs of CPU tunes before GPU tuning have no latency (the CPU model does not use it).
        dev.latency_s = log.get("#device", "latency_s", 0).unwrap_or(dev.latency_s);
        dev.serial_op_s = log.get("#device", "serial_op_s", 0).unwrap_or(dev.serial_op_s);
    } else {
        match threads {
            Some(t) => microbench::fit_cpu(&mut dev, t)?,
            None => microbench::fit_gpu(&mut dev, measurer.as_mut(), &masks)?,
        }
        for (k, v) in [
            ("alpha_s", dev.alpha_s),
            ("gamma_s", dev.gamma_s),
            ("bandwidth_gbs", dev.mem_bandwidth_gbs),
            ("latency_s", dev.latency_s),
            ("serial_op_s", dev.serial_op_s),
        ] {
            log.record("#device", k, 0, v)?;
        }
    }
    let workers = threads.map_or_else(|| format!("{} backend", a.backend), |t| format!("{t} threads"));
    eprintln!(
        "tuning {} on {} ({workers}; roofline alpha {:.3e} s, gamma {:.3e} s {}, {:.1} GB/s), masks {} ({} frames)",
        stem, device.name, dev.alpha_s, dev.gamma_s, dev.alpha_source, dev.mem_bandwidth_gbs, masks.source, masks.frames
    );
    let mut bar = Bar { t0: Instant::now(), last: Instant::now() - Duration::from_secs(60), tty: std::io::stderr().is_terminal() };
    let out = dynaspa_scheduler::tune::tune(measurer.as_mut(), &dev, &masks, &stem, &cfg, &mut log, &mut bar)?;
    out.profile.save(&a.output)?;
    summary(&out.reports);
    println!(
        "profile written to {} ({} ops; {} measurements taken, {} replayed from {}) in {:.1} s",
        a.output.display(),
        out.profile.ops.len(),
        out.measured,
        out.replayed,
        log_path.display(),
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}
