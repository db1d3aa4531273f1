//! `dynaspa run --frames`: one line per frame (latency, mask density, kernels), a summary at
//! the end, optional per-frame outputs and overlays.

use super::feed::Feeder;
use super::overlay::{frame_base, Overlay};
use super::run::{write_outputs, RunArgs};
use super::stats;
use dynaspa::io::frames::{Frame, FrameSource};
use dynaspa::runtime::graph::Graph;
use dynaspa::{Error, Result, Session, SessionBuilder};
use std::path::Path;
use std::time::Instant;

/// Prints a note per directory entry the source passed over, so a typo'd extension is visible.
pub fn note_skipped(source: &FrameSource) {
    for p in source.skipped() {
        let why = if p.is_dir() { "a directory" } else { "not a png/jpg/bmp image" };
        eprintln!("note: skipping {} ({why})", p.display());
    }
}

/// Runs one frame and times `Session::run` alone (decoding and layout are not part of it).
pub fn run_one(session: &mut Session, feeder: &Feeder, frame: &Frame) -> Result<(Vec<(String, dynaspa::Tensor)>, f64)> {
    let feeds = feeder.feeds(&frame.image).map_err(|e| Error::Other(format!("frame {} ({}): {e}", frame.index, frame.label)))?;
    let t = Instant::now();
    let outs = session.run(feeds).map_err(|e| Error::Other(format!("frame {} ({}): {e}", frame.index, frame.label)))?;
    Ok((outs, t.elapsed().as_secs_f64() * 1e3))
}

/// Runs every frame of `src` through a session opened on `g` (the model with its sparse ops
/// found); `t0` is when loading began.
pub fn run_frames(a: &RunArgs, src: &Path, g: Graph, builder: SessionBuilder, t0: Instant) -> Result<()> {
    let feeder = Feeder::new(&g, a.frame_input.as_deref(), &a.inputs, a.mean.as_deref(), a.std.as_deref())?;
    let (w, h) = feeder.input_size();
    let mut overlay = match &a.overlay {
        Some(dir) => Some(Overlay::new(&g, a.overlay_op.as_deref(), (h as usize, w as usize), dir.clone())?),
        None => None,
    };
    let builder =
        builder.fetch(overlay.as_ref().map(Overlay::fetches).unwrap_or_default()).delta(a.delta.options(Some(&feeder.frame_input)));
    let mut dense = if a.check { Some(builder.clone().dense(true).open_graph(g.clone(), Some(&a.model))?) } else { None };
    let mut session = super::open_session::open(builder, &a.profiles, g, &a.model)?;
    let load_ms = t0.elapsed().as_secs_f64() * 1e3;
    let source = FrameSource::open(src, (w, h), a.max_frames.map(|n| n as usize))?;
    note_skipped(&source);
    println!(
        "{}: backend {}, load {:.1} ms, frames from {} into input '{}' {:?}",
        a.model.display(),
        session.backend_name(),
        load_ms,
        source.describe(),
        feeder.frame_input,
        feeder.shape
    );
    if let Some(o) = &overlay {
        println!("{}", o.describe());
    }

    let mut latencies = Vec::new();
    let mut densities = Vec::new();
    let mut errors = Vec::new();
    // Frames queued as one recorded graph (CUDA), and the host's time to queue each (GPU).
    let mut replayed = 0usize;
    let mut queued = Vec::new();
    for frame in source {
        let frame = frame?;
        let (outs, ms) = run_one(&mut session, &feeder, &frame)?;
        let report = session.last_report();
        let delta = session.last_changed_fraction();
        let density = delta.or_else(|| stats::frame_density(report));
        let check = match dense.as_mut() {
            Some(d) => {
                let (want, _) = run_one(d, &feeder, &frame)?;
                let (e, _) = stats::compare(&outs, &want);
                errors.push(e);
                format!("  rel L2 {e:.2e}")
            }
            None => String::new(),
        };
        replayed += usize::from(report.is_some_and(|r| r.replayed));
        queued.extend(report.map(|r| r.queued.as_secs_f64() * 1e3).filter(|&ms| ms > 0.0));
        let kernels = stats::kernel_summary(report.into_iter().flat_map(|r| r.sparse_ops.iter()));
        let base = frame_base(frame.index, frame.path.as_deref());
        if let Some(dir) = &a.output_dir {
            write_outputs(&dir.join(&base), &outs)?;
        }
        let drawn = match overlay.as_mut() {
            Some(o) => {
                let mask = o.fetches().first().and_then(|v| session.fetched(v));
                Some(o.write(&frame.image, &base, mask, &outs, report, ms)?)
            }
            None => None,
        };
        let drawn = drawn.map_or_else(String::new, |d| {
            let tiles = d.tiles.map_or_else(String::new, |(n, g)| format!(", {n} tiles {g}"));
            format!("  overlay density {}{tiles}", stats::fmt_density(d.op_density))
        });
        println!(
            "frame {:>5}  {:<24} {:>9.3} ms  {} {:>5}  kernels {kernels}{drawn}{check}",
            frame.index,
            frame.label,
            ms,
            if delta.is_some() { "changed" } else { "density" },
            stats::fmt_density(density)
        );
        latencies.push(ms);
        densities.extend(density);
    }
    if latencies.is_empty() {
        return Err(Error::Other(format!("no frames could be read from {}", src.display())));
    }
    println!(
        "summary: {} frames, latency median {:.3} ms, p90 {:.3} ms, mean {} {}{}{}{}",
        latencies.len(),
        stats::median(&latencies).unwrap_or(0.0),
        stats::percentile(&latencies, 90.0).unwrap_or(0.0),
        if a.delta.delta.is_some() { "changed fraction" } else { "density" },
        stats::fmt_density(stats::mean(&densities)),
        errors.iter().copied().reduce(f64::max).map_or_else(String::new, |e| format!(", relative L2 against dense: max {e:.2e}")),
        match stats::median(&queued) {
            Some(q) => format!(
                ", host queueing median {q:.3} ms{}",
                if replayed > 0 { format!(", {replayed} replayed from recorded graphs") } else { String::new() }
            ),
            None => String::new(),
        },
        a.output_dir.as_ref().map_or_else(String::new, |d| format!(", outputs in {}", d.display()))
    );
    Ok(())
}
