//! `dynaspa bench`: the same frames through the sparse session and a dense session of the same
//! model, interleaved so that drift (clock, temperature, other load) hits both alike.

use super::feed::FrameOpts;
use super::frames::note_skipped;
use super::progress::Progress;
use super::stats;
use dynaspa::io::frames::FrameSource;
use dynaspa::{Error, OpenOptions, Result, Session, Tensor};
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
The warm-up outputs of both are compared and a warning is printed if they differ by more than
1e-4 relative L2. Frames are decoded once and kept in memory: at most --max-frames (default 30).")]
pub struct BenchArgs {
    /// ONNX model file.
    model: PathBuf,
    #[command(flatten)]
    src: FrameOpts,
    /// Timed passes over the frames per session.
    #[arg(long, value_name = "R", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    /// Tuned PolyKernels (`dynaspa tune`) for the sparse session, instead of calibrating.
    #[arg(long, value_name = "FILE")]
    profile: Option<PathBuf>,
}

/// ||a - b|| / ||b|| with `b` the reference; 0 when both are zero.
fn rel_l2(a: &[f32], b: &[f32]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| (*x as f64 - *y as f64).powi(2)).sum();
    let den: f64 = b.iter().map(|y| (*y as f64).powi(2)).sum();
    if num == 0.0 {
        0.0
    } else {
        (num / den.max(f64::MIN_POSITIVE)).sqrt()
    }
}

/// Largest difference over the outputs of one frame: (rel L2, output name).
fn compare(sparse: &[(String, Tensor)], dense: &[(String, Tensor)]) -> (f64, String) {
    let mut worst = (0.0, String::new());
    for ((name, s), (_, d)) in sparse.iter().zip(dense) {
        let e = match (s.as_f32(), d.as_f32()) {
            _ if s.shape() != d.shape() => f64::INFINITY,
            (Ok(s), Ok(d)) => rel_l2(s, d),
            _ if s == d => 0.0,
            _ => f64::INFINITY,
        };
        if e.is_nan() || e > worst.0 {
            worst = (e, name.clone());
        }
    }
    worst
}

fn time_run(session: &mut Session, feeds: &[(String, Tensor)]) -> Result<f64> {
    let t = Instant::now();
    session.run(feeds.to_vec())?;
    Ok(t.elapsed().as_secs_f64() * 1e3)
}

pub fn bench(a: BenchArgs) -> Result<()> {
    let sparse_cfg = super::sparse_config(a.profile.as_deref(), &a.src.backend)?;
    let open = |dense: bool| {
        let t = Instant::now();
        let sparse = if dense { None } else { sparse_cfg.clone() };
        let s = dynaspa::open(&a.model, &a.src.backend, &OpenOptions { threads: a.src.threads, dense, device: a.src.device.clone(), sparse, ..Default::default() })?;
        Ok::<_, Error>((s, t.elapsed().as_secs_f64() * 1e3))
    };
    let (mut sparse, sparse_load) = open(false)?;
    let (mut dense, dense_load) = open(true)?;
    let feeder = a.src.feeder(sparse.graph())?;
    let max = a.src.max_frames.map_or(DEFAULT_MAX_FRAMES, |n| n as usize);
    let source = FrameSource::open(&a.src.frames, feeder.input_size(), Some(max))?;
    note_skipped(&source);
    let desc = source.describe().to_string();
    let mut frames = Vec::new();
    for f in source {
        let f = f?;
        let feeds = feeder.feeds(&f.image).map_err(|e| Error::Other(format!("frame {} ({}): {e}", f.index, f.label)))?;
        frames.push((f.label, feeds));
    }
    if frames.is_empty() {
        return Err(Error::Other(format!("no frames could be read from {}", a.src.frames.display())));
    }
    let rounds = a.rounds as usize;
    println!(
        "bench {}: backend {}, {} frames from {desc}, {rounds} rounds interleaved after 1 warm-up pass (load: sparse {sparse_load:.1} ms, dense {dense_load:.1} ms)",
        a.model.display(),
        sparse.backend_name(),
        frames.len()
    );

    // Warm-up pass, which also supplies the outputs to compare.
    let mut worst = (0.0f64, String::new(), 0usize);
    for (i, (label, feeds)) in frames.iter().enumerate() {
        let ctx = |e: Error| Error::Other(format!("frame {i} ({label}): {e}"));
        let d = dense.run(feeds.clone()).map_err(ctx)?;
        let s = sparse.run(feeds.clone()).map_err(ctx)?;
        let (e, name) = compare(&s, &d);
        if e.is_nan() || e > worst.0 {
            worst = (e, name, i);
        }
    }

    let mut times = [vec![Vec::with_capacity(rounds); frames.len()], vec![Vec::with_capacity(rounds); frames.len()]];
    // Timed frames queued as one recorded graph (CUDA's frame graphs), per session.
    let mut replayed = [0usize; 2];
    let mut progress = Progress::new("bench");
    for r in 0..rounds {
        // Index 0 is dense, 1 sparse; odd rounds run sparse first.
        let order = if r % 2 == 0 { [0, 1] } else { [1, 0] };
        for which in order {
            let session = if which == 0 { &mut dense } else { &mut sparse };
            for (i, (label, feeds)) in frames.iter().enumerate() {
                let ms = time_run(session, feeds).map_err(|e| Error::Other(format!("frame {i} ({label}): {e}")))?;
                times[which][i].push(ms);
                replayed[which] += usize::from(session.last_report().is_some_and(|r| r.replayed));
            }
        }
        progress.tick(|| format!("round {}/{rounds}", r + 1));
    }

    println!("{:>5}  {:<24} {:>10} {:>10} {:>7}", "frame", "", "dense ms", "sparse ms", "ratio");
    let (mut med_d, mut med_s) = (Vec::new(), Vec::new());
    for (i, (label, _)) in frames.iter().enumerate() {
        let d = stats::median(&times[0][i]).unwrap_or(0.0);
        let s = stats::median(&times[1][i]).unwrap_or(0.0);
        println!("{i:>5}  {label:<24} {d:>10.3} {s:>10.3} {:>7.2}", d / s.max(1e-9));
        med_d.push(d);
        med_s.push(s);
    }
    let d = stats::median(&med_d).unwrap_or(0.0);
    let s = stats::median(&med_s).unwrap_or(0.0);
    println!("{:>5}  {:<24} {d:>10.3} {s:>10.3} {:>7.2}", "", "median", d / s.max(1e-9));
    if worst.0.is_finite() && worst.0 <= AGREE_REL_L2 {
        println!("outputs agree: max relative L2 {:.2e} over {} frames", worst.0, frames.len());
    } else {
        eprintln!(
            "warning: sparse and dense outputs differ: relative L2 {:.2e} on output '{}' of frame {} (limit {AGREE_REL_L2:.0e})",
            worst.0, worst.1, worst.2
        );
    }
    if replayed.iter().any(|&n| n > 0) {
        let n = frames.len() * rounds;
        println!("frames replayed from recorded graphs: dense {}/{n}, sparse {}/{n}", replayed[0], replayed[1]);
    }
    println!("speedup_vs_dense: {:.2}", d / s.max(1e-9));
    Ok(())
}
