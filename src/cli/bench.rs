//! `dynaspa bench`: the same frames through the sparse session and a dense session of the same
//! model, interleaved so that drift (clock, temperature, other load) hits both alike.

use super::delta_opts::DeltaOpts;
use super::feed::FrameOpts;
use super::frames::note_skipped;
use super::open_session::{self, ProfileOpts};
use super::overlay::{frame_base, Overlay};
use super::progress::Progress;
use super::run::write_outputs;
use super::stats;
use dynaspa::io::frames::FrameSource;
use dynaspa::runtime::report::FrameReport;
use dynaspa::{Error, LoadOptions, Result, Session, Tensor};
use image::RgbImage;
use std::path::PathBuf;
use std::time::Instant;

/// Frames kept in memory when --max-frames is not given (bench replays them every round).
const DEFAULT_MAX_FRAMES: usize = 30;
/// Largest relative L2 difference between sparse and dense outputs that counts as agreement.
const AGREE_REL_L2: f64 = 1e-4;

#[derive(clap::Args)]
#[command(after_help = "\
Opens the model twice: sparse (ops found by detect_sparse_regions run on DISTiles) and dense (the
same graph with every op dense). After one warm-up pass on each, every round runs all frames on
one session and then on the other, alternating which goes first. Per frame the median over
rounds is taken; the last line is 'speedup_vs_dense: X.XX' = median dense / median sparse.
Each frame's row also gives the mean mask density of its sparse ops ('-' where none ran sparse);
the median row gives the mean over frames. The warm-up outputs of both are compared and a
warning is printed if they differ by more than 1e-4 relative L2. Frames are decoded once and
kept in memory: at most --max-frames (default 30).

--batch N feeds N consecutive frames as one [N, 3, H, W] input per run (a symbolic first input
dimension becomes N; a fixed one must be N already); rows and medians are then per run of N
frames, --max-frames still counts frames (default 30 runs), and a last group shorter than N is
left out. Without --batch every run takes one frame, copied into each item of a fixed batch.
--output-dir writes the sparse warm-up pass's outputs of run i as DIR/i/<output>.npy.

--delta T times delta mode (the sparse session recomputes only where the frame changed; the
model's own masks are not used) against dense on the frames in camera order; every round starts
with a whole frame. The density column then gives each frame's changed fraction, and a
'relative L2' line the largest and median error against dense over the warm-up pass.

--overlay writes each frame as `run --overlay` does, from the sparse warm-up pass's mask and
report, with the frame's median sparse latency; the sparse session then keeps that mask as an
extra output. The sparse session uses the shipped profile for this device and model unless
--profile or --no-profile says otherwise (the first line says which).")]
pub struct BenchArgs {
    /// ONNX model file.
    model: PathBuf,
    #[command(flatten)]
    src: FrameOpts,
    /// Timed passes over the frames per session.
    #[arg(long, value_name = "R", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    #[command(flatten)]
    profiles: ProfileOpts,
    /// Write each frame as PNG here, with a sparse op's mask tinted over it, its DISTiles
    /// outlined and a strip with the frame's sparse latency and mask density.
    #[arg(long, value_name = "DIR")]
    overlay: Option<PathBuf>,
    /// Which mask to draw: a sparse op's name (default: the first sparse op) or a mask
    /// output's name.
    #[arg(long, value_name = "NAME", requires = "overlay")]
    overlay_op: Option<String>,
    /// Frames per run, stacked into one [N, 3, H, W] input (see below).
    #[arg(long, value_name = "N", conflicts_with = "overlay", value_parser = clap::value_parser!(u32).range(1..))]
    batch: Option<u32>,
    /// Write the sparse session's outputs of each run (warm-up pass) as DIR/<run>/<name>.npy.
    #[arg(long, value_name = "DIR")]
    output_dir: Option<PathBuf>,
    #[command(flatten)]
    delta: DeltaOpts,
}

/// What the sparse warm-up pass keeps of a frame for its overlay.
struct Kept {
    mask: Option<Tensor>,
    outputs: Vec<(String, Tensor)>,
    report: Option<FrameReport>,
}

/// Wall time of one run, from the caller's tensors to the outputs on the host. The copy of the
/// feeds a run consumes is made before the clock starts: an application hands over its frame.
fn time_run(session: &mut Session, feeds: &[(String, Tensor)]) -> Result<f64> {
    let feeds = feeds.to_vec();
    let t = Instant::now();
    session.run(feeds)?;
    Ok(t.elapsed().as_secs_f64() * 1e3)
}

pub fn bench(a: BenchArgs) -> Result<()> {
    let per_run = a.batch.map_or(1, |n| n as usize);
    let base = open_session::builder(a.src.backend, a.src.device.as_deref(), a.src.threads, a.src.precision)
        .load_options(LoadOptions { batch: per_run, ..Default::default() })
        .delta(a.delta.options(None));
    let t = Instant::now();
    let g = base.load(&a.model)?;
    let load_graph_ms = t.elapsed().as_secs_f64() * 1e3;
    let feeder = a.src.feeder(&g)?;
    let base = base.delta(a.delta.options(Some(&feeder.frame_input)));
    let delta = a.delta.delta.is_some();
    if a.batch.is_some() && feeder.shape[0] != per_run {
        return Err(Error::Other(format!(
            "--batch {per_run}: the frame input '{}' has a fixed batch of {} ({:?})",
            feeder.frame_input, feeder.shape[0], feeder.shape
        )));
    }
    let (w, h) = feeder.input_size();
    let mut overlay = match &a.overlay {
        Some(dir) => Some(Overlay::new(&g, a.overlay_op.as_deref(), (h as usize, w as usize), dir.clone())?),
        None => None,
    };
    let fetch = overlay.as_ref().map(Overlay::fetches).unwrap_or_default();
    let t = Instant::now();
    let mut sparse = open_session::open(base.clone().fetch(fetch.clone()), &a.profiles, g, &a.model)?;
    let sparse_load = load_graph_ms + t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let mut dense = base.dense(true).open(&a.model)?;
    let dense_load = t.elapsed().as_secs_f64() * 1e3;
    let max = a.src.max_frames.map_or(DEFAULT_MAX_FRAMES * per_run, |n| n as usize);
    let source = FrameSource::open(&a.src.frames, feeder.input_size(), Some(max))?;
    note_skipped(&source);
    let desc = source.describe().to_string();
    // One entry per run: its label and feeds (with --batch, N consecutive frames).
    let mut frames = Vec::new();
    let mut images = Vec::new();
    let mut group = Vec::with_capacity(per_run);
    for f in source {
        let f = f?;
        if a.batch.is_none() {
            let feeds = feeder.feeds(&f.image).map_err(|e| Error::Other(format!("frame {} ({}): {e}", f.index, f.label)))?;
            if overlay.is_some() {
                images.push((f.image, frame_base(f.index, f.path.as_deref())));
            }
            frames.push((f.label, feeds));
            continue;
        }
        group.push(f);
        if group.len() == per_run {
            let imgs: Vec<&RgbImage> = group.iter().map(|f| &f.image).collect();
            let feeds =
                feeder.feeds_batch(&imgs).map_err(|e| Error::Other(format!("frames {}.. ({}): {e}", group[0].index, group[0].label)))?;
            let label = if per_run == 1 { group[0].label.clone() } else { format!("{}+{}", group[0].label, per_run - 1) };
            frames.push((label, feeds));
            group.clear();
        }
    }
    if frames.is_empty() {
        return Err(Error::Other(format!(
            "no {} could be read from {}",
            if per_run == 1 { "frames".to_string() } else { format!("{per_run} frames for one batch") },
            a.src.frames.display()
        )));
    }
    if !group.is_empty() {
        eprintln!("note: the last {} frames do not fill a batch of {per_run} and are left out", group.len());
    }
    let rounds = a.rounds as usize;
    let what = if a.batch.is_some() { format!("{} runs of {per_run} frames", frames.len()) } else { format!("{} frames", frames.len()) };
    println!(
        "bench {}: backend {}, {what} from {desc}, {rounds} rounds interleaved after 1 warm-up pass (load: sparse {sparse_load:.1} ms, dense {dense_load:.1} ms)",
        a.model.display(),
        sparse.backend_name(),
    );
    if let Some(o) = &overlay {
        println!("{}", o.describe());
    }

    // Warm-up pass, which also supplies the outputs to compare and each frame's mask density
    // (a property of the frame: every round computes the same masks).
    let mut worst = (0.0f64, String::new(), 0usize);
    let mut errors = Vec::with_capacity(frames.len());
    let mut densities = Vec::with_capacity(frames.len());
    let mut kept = Vec::new();
    for (i, (label, feeds)) in frames.iter().enumerate() {
        let ctx = |e: Error| Error::Other(format!("frame {i} ({label}): {e}"));
        let d = dense.run(feeds.clone()).map_err(ctx)?;
        let s = sparse.run(feeds.clone()).map_err(ctx)?;
        densities.push(if delta { sparse.last_changed_fraction() } else { stats::frame_density(sparse.last_report()) });
        if let Some(dir) = &a.output_dir {
            write_outputs(&dir.join(i.to_string()), &s)?;
        }
        if overlay.is_some() {
            let mask = fetch.first().and_then(|v| sparse.fetched(v)).cloned();
            kept.push(Kept { mask, outputs: s.clone(), report: sparse.last_report().cloned() });
        }
        let (e, name) = stats::compare(&s, &d);
        errors.push(e);
        if e.is_nan() || e > worst.0 {
            worst = (e, name, i);
        }
    }

    let mut times = [vec![Vec::with_capacity(rounds); frames.len()], vec![Vec::with_capacity(rounds); frames.len()]];
    // Timed frames queued as one recorded graph (CUDA's frame graphs), per session.
    let mut replayed = [0usize; 2];
    // Per session: the device's time of each timed run and the host's time to queue it (GPU).
    let (mut device_ms, mut queued_ms) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    let mut progress = Progress::new("bench");
    for r in 0..rounds {
        // Index 0 is dense, 1 sparse; odd rounds run sparse first.
        let order = if r % 2 == 0 { [0, 1] } else { [1, 0] };
        for which in order {
            let session = if which == 0 { &mut dense } else { &mut sparse };
            // Delta mode replays the clip: its first frame is computed whole every round.
            session.refresh();
            for (i, (label, feeds)) in frames.iter().enumerate() {
                let ms = time_run(session, feeds).map_err(|e| Error::Other(format!("frame {i} ({label}): {e}")))?;
                times[which][i].push(ms);
                let report = session.last_report();
                replayed[which] += usize::from(report.is_some_and(|r| r.replayed));
                device_ms[which].extend(report.and_then(|r| r.device).map(|d| d.as_secs_f64() * 1e3));
                queued_ms[which].extend(report.map(|r| r.queued.as_secs_f64() * 1e3).filter(|&ms| ms > 0.0));
            }
        }
        progress.tick(|| format!("round {}/{rounds}", r + 1));
    }

    let unit = if a.batch.is_some() { "run" } else { "frame" };
    let (label, col) = if delta { ("delta ms", "changed") } else { ("sparse ms", "density") };
    println!("{unit:>5}  {:<24} {:>10} {label:>10} {:>7} {col:>8}", "", "dense ms", "ratio");
    let (mut med_d, mut med_s) = (Vec::new(), Vec::new());
    for (i, (label, _)) in frames.iter().enumerate() {
        let d = stats::median(&times[0][i]).unwrap_or(0.0);
        let s = stats::median(&times[1][i]).unwrap_or(0.0);
        println!("{i:>5}  {label:<24} {d:>10.3} {s:>10.3} {:>7.2} {:>8}", d / s.max(1e-9), stats::fmt_density(densities[i]));
        med_d.push(d);
        med_s.push(s);
    }
    let d = stats::median(&med_d).unwrap_or(0.0);
    let s = stats::median(&med_s).unwrap_or(0.0);
    let mean_density = stats::mean(&densities.iter().flatten().copied().collect::<Vec<_>>());
    println!("{:>5}  {:<24} {d:>10.3} {s:>10.3} {:>7.2} {:>8}", "", "median", d / s.max(1e-9), stats::fmt_density(mean_density));
    if delta {
        let median = stats::median(&errors).unwrap_or(f64::NAN);
        println!(
            "relative L2 {:.2e} (largest, on output '{}' of {unit} {}), median {median:.2e}, against dense",
            worst.0, worst.1, worst.2
        );
    } else if worst.0.is_finite() && worst.0 <= AGREE_REL_L2 {
        println!("outputs agree: max relative L2 {:.2e} over {} {unit}s", worst.0, frames.len());
    } else {
        eprintln!(
            "warning: sparse and dense outputs differ: relative L2 {:.2e} on output '{}' of {unit} {} (limit {AGREE_REL_L2:.0e})",
            worst.0, worst.1, worst.2
        );
    }
    if replayed.iter().any(|&n| n > 0) {
        let n = frames.len() * rounds;
        println!("frames replayed from recorded graphs: dense {}/{n}, sparse {}/{n}", replayed[0], replayed[1]);
    }
    for (what, ms) in [("device time", &device_ms), ("host queueing", &queued_ms)] {
        if let (Some(d), Some(s)) = (stats::median(&ms[0]), stats::median(&ms[1])) {
            println!("{what} per {unit} (median): dense {d:.3} ms, sparse {s:.3} ms");
        }
    }
    if let Some(o) = overlay.as_mut() {
        for (i, ((image, base), k)) in images.iter().zip(&kept).enumerate() {
            let ms = stats::median(&times[1][i]).unwrap_or(0.0);
            o.write(image, base, k.mask.as_ref(), &k.outputs, k.report.as_ref(), ms)
                .map_err(|e| Error::Other(format!("frame {i} ({}): {e}", frames[i].0)))?;
        }
        println!("overlays: {} frames written to {}", kept.len(), o.dir().display());
    }
    println!("speedup_vs_dense: {:.2}", d / s.max(1e-9));
    Ok(())
}
