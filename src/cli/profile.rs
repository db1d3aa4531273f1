//! `dynaspa profile`: DynaSpa's Table 4 overhead breakdown per sparse op, read from the
//! per-frame reports, and optionally the whole run as a Chrome trace.

use super::feed::FrameOpts;
use super::frames::{note_skipped, run_one};
use super::progress::Progress;
use super::stats;
use super::trace::Recorder;
use dynaspa::io::frames::FrameSource;
use dynaspa::io::write_atomic;
use dynaspa::runtime::report::{FrameReport, PhaseTimes, SparseOpRecord};
use dynaspa::{DebugOptions, Error, Result};
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(after_help = "\
Phases per sparse op (DynaSpa's Table 4): bitmask (mask tensor -> BitMask), tiles (DISTile counts
and indices), select (kernel selection from the dispatch tables), zero_fill (zeroing inactive
outputs), compute (the kernel). Each cell shows the phase's share of the op's time over all
measured frames and its median µs per frame. overhead = bitmask + tiles + select, which DynaSpa
keeps at or under 5% at mask density 0.3. Ops appear only when the backend reports them (a
backend or model without sparse ops prints the frame latencies only).")]
pub struct ProfileArgs {
    /// ONNX model file.
    model: PathBuf,
    #[command(flatten)]
    src: FrameOpts,
    /// Also write the run as a Chrome trace (Trace Event Format JSON: open it in
    /// https://ui.perfetto.dev or chrome://tracing); the runtime's spans become events.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    #[command(flatten)]
    profiles: super::open_session::ProfileOpts,
    /// Runs of the first frame before measuring (not counted).
    #[arg(long, value_name = "N", default_value_t = 3)]
    warmup: usize,
    /// Also print the N slowest nodes of the graph (dense and sparse) by median time per frame.
    /// On GPU backends the steps are timed on the device (queue timestamps, CUDA) beside the
    /// host's time to queue each, or with a wait for the device after every step where the
    /// device takes no timestamps; either way frames are not replayed as recorded graphs.
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "25")]
    nodes: Option<usize>,
}

const PHASES: [&str; 5] = ["bitmask", "tiles", "select", "zero_fill", "compute"];

fn micros(p: &PhaseTimes) -> [f64; 5] {
    [p.bitmask, p.tiles, p.select, p.zero_fill, p.compute].map(|d| d.as_secs_f64() * 1e6)
}

/// One line of the table: an op, or the sum over ops.
#[derive(Debug, PartialEq)]
pub struct Row {
    pub node: String,
    pub op: String,
    pub density: f64,
    pub kernels: String,
    /// Share of the row's time per phase (fractions summing to 1 unless the time is 0).
    pub share: [f64; 5],
    /// Median per frame per phase, µs.
    pub median_us: [f64; 5],
    pub median_total_us: f64,
    /// (bitmask + tiles + select) / all phases.
    pub overhead: f64,
    pub frames: usize,
}

fn make_row(node: String, op: String, recs: &[&SparseOpRecord], per_frame: &[[f64; 5]]) -> Row {
    let mut sums = [0.0; 5];
    for f in per_frame {
        for (s, v) in sums.iter_mut().zip(f) {
            *s += v;
        }
    }
    let total: f64 = sums.iter().sum();
    let frac = |x: f64| if total > 0.0 { x / total } else { 0.0 };
    let column = |i: usize| per_frame.iter().map(|f| f[i]).collect::<Vec<_>>();
    Row {
        node,
        op,
        density: stats::mean(&recs.iter().map(|r| r.density).collect::<Vec<_>>()).unwrap_or(0.0),
        kernels: stats::kernel_summary(recs.iter().copied()),
        share: sums.map(frac),
        median_us: [0, 1, 2, 3, 4].map(|i| stats::median(&column(i)).unwrap_or(0.0)),
        median_total_us: stats::median(&per_frame.iter().map(|f| f.iter().sum()).collect::<Vec<_>>()).unwrap_or(0.0),
        overhead: frac(sums[0] + sums[1] + sums[2]),
        frames: per_frame.len(),
    }
}

/// Rows per sparse op in first-seen order, and the total row (per frame, the sum over ops);
/// `None` for the total when no report had a sparse op.
pub fn breakdown(reports: &[FrameReport]) -> (Vec<Row>, Option<Row>) {
    let mut order: Vec<(String, String)> = Vec::new();
    let mut recs: Vec<Vec<&SparseOpRecord>> = Vec::new();
    let mut frames: Vec<Vec<[f64; 5]>> = Vec::new();
    let (mut all_recs, mut all_frames) = (Vec::new(), Vec::new());
    for r in reports {
        if r.sparse_ops.is_empty() {
            continue;
        }
        let mut frame_sum = [0.0; 5];
        // An op recorded twice in one frame (e.g. run per batch item) counts as one frame's time.
        let mut this_frame: Vec<(usize, [f64; 5])> = Vec::new();
        for rec in &r.sparse_ops {
            let i = match order.iter().position(|(n, _)| *n == rec.node) {
                Some(i) => i,
                None => {
                    order.push((rec.node.clone(), rec.op.clone()));
                    recs.push(Vec::new());
                    frames.push(Vec::new());
                    order.len() - 1
                }
            };
            recs[i].push(rec);
            all_recs.push(rec);
            let us = micros(&rec.phases);
            match this_frame.iter_mut().find(|(j, _)| *j == i) {
                Some((_, acc)) => acc.iter_mut().zip(&us).for_each(|(a, b)| *a += b),
                None => this_frame.push((i, us)),
            }
            frame_sum.iter_mut().zip(&us).for_each(|(a, b)| *a += b);
        }
        for (i, us) in this_frame {
            frames[i].push(us);
        }
        all_frames.push(frame_sum);
    }
    let rows = order.into_iter().enumerate().map(|(i, (node, op))| make_row(node, op, &recs[i], &frames[i])).collect();
    let total = (!all_frames.is_empty()).then(|| make_row("total".into(), String::new(), &all_recs, &all_frames));
    (rows, total)
}

fn print_table(rows: &[Row], total: &Row) {
    let node_w = rows.iter().map(|r| r.node.len()).max().unwrap_or(5).clamp(5, 40);
    let mut head = format!("{:<node_w$}  {:<10} {:>7}", "node", "op", "density");
    for p in PHASES {
        head.push_str(&format!("  {p:>15}"));
    }
    head.push_str(&format!("  {:>10}  {:>8}  kernels", "op µs", "overhead"));
    println!("{head}");
    for r in rows.iter().chain(std::iter::once(total)) {
        let mut line = format!("{:<node_w$}  {:<10} {:>7.3}", r.node, r.op, r.density);
        for i in 0..5 {
            line.push_str(&format!("  {:>5.1}% {:>8.1}", r.share[i] * 100.0, r.median_us[i]));
        }
        line.push_str(&format!("  {:>10.1}  {:>7.2}%  {}", r.median_total_us, r.overhead * 100.0, r.kernels));
        println!("{line}");
    }
}

pub fn profile(a: ProfileArgs, recorder: Option<Recorder>) -> Result<()> {
    // Frames replayed from a recorded graph queue nothing per op: the phase table needs each
    // frame queued op by op.
    // Per-node times on a GPU backend wait for the device after every node (`--nodes`).
    let step_times = a.nodes.is_some();
    let builder = super::open_session::builder(a.src.backend, a.src.device.as_deref(), a.src.threads, a.src.precision)
        .frame_graphs(false)
        .debug(DebugOptions { step_times, ..Default::default() });
    let g = builder.load(&a.model)?;
    let mut session = super::open_session::open(builder, &a.profiles, g, &a.model)?;
    let feeder = a.src.feeder(session.graph())?;
    let mut source = FrameSource::open(&a.src.frames, feeder.input_size(), a.src.max_frames.map(|n| n as usize))?;
    note_skipped(&source);
    println!(
        "profile {}: backend {}, frames from {}, {} warm-up run(s) of the first frame",
        a.model.display(),
        session.backend_name(),
        source.describe(),
        a.warmup
    );
    let first = source.next().ok_or_else(|| Error::Other(format!("no frames could be read from {}", a.src.frames.display())))??;
    for i in 0..a.warmup {
        let _s = tracing::info_span!("warmup", run = i).entered();
        run_one(&mut session, &feeder, &first)?;
    }

    let mut latencies = Vec::new();
    let mut reports = Vec::new();
    let mut frame_ms_in_reports = 0.0;
    let mut progress = Progress::new("profile");
    for frame in std::iter::once(Ok(first)).chain(source) {
        let frame = frame?;
        let _s = tracing::info_span!("frame", index = frame.index, label = %frame.label).entered();
        let (_, ms) = run_one(&mut session, &feeder, &frame)?;
        latencies.push(ms);
        if let Some(r) = session.last_report() {
            frame_ms_in_reports += r.total.as_secs_f64() * 1e3;
            reports.push(r.clone());
        }
        progress.tick(|| format!("{} frames", latencies.len()));
    }

    println!(
        "frames: {}, latency median {:.3} ms, p90 {:.3} ms",
        latencies.len(),
        stats::median(&latencies).unwrap_or(0.0),
        stats::percentile(&latencies, 90.0).unwrap_or(0.0)
    );
    let (rows, total) = breakdown(&reports);
    match total {
        None => println!(
            "no sparse ops reported: backend {} ran {} without sparse kernels, so there is no breakdown",
            session.backend_name(),
            a.model.display()
        ),
        Some(total) => {
            println!("Table 4 breakdown: per phase, share of the op's time and median µs per frame");
            print_table(&rows, &total);
            let sparse_ms: f64 = reports.iter().map(|r| r.sparse_time().as_secs_f64() * 1e3).sum();
            println!(
                "overhead (bitmask + tiles + select): {:.2}% of sparse-op time at mean density {:.3} (DynaSpa's goal: <= 5% at 0.3)",
                total.overhead * 100.0,
                total.density
            );
            if frame_ms_in_reports > 0.0 {
                println!("sparse ops: {:.1}% of frame time", 100.0 * sparse_ms / frame_ms_in_reports);
            }
            if reports.iter().any(|r| r.phases_queued) {
                println!(
                    "note: backend {} runs asynchronously; these phases are the host's time to queue them, not the device's. \
                     The device's dispatch cost per op is the mask launch gpu_sparse_bench times (benches/RESULTS.md)",
                    session.backend_name()
                );
            }
        }
    }

    if let Some(n) = a.nodes {
        super::node_table::print_nodes(session.graph(), &reports, n);
    }

    if let (Some(path), Some(rec)) = (&a.trace, recorder) {
        let mut about = serde_json::Map::new();
        about.insert("model".into(), a.model.display().to_string().into());
        about.insert("backend".into(), session.backend_name().into());
        about.insert("frames".into(), latencies.len().into());
        let bytes = rec.to_json(about);
        write_atomic(path, &bytes).map_err(|e| Error::io(path, e))?;
        let (n, dropped) = rec.counts();
        let more = if dropped > 0 { format!(" ({dropped} more past the limit were dropped)") } else { String::new() };
        println!("trace: {n} events{more} written to {} (open in https://ui.perfetto.dev or chrome://tracing)", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use dynaspa::runtime::sparsity::Granularity;
    use std::time::Duration;

    fn rec(node: &str, density: f64, us: [u64; 5]) -> SparseOpRecord {
        let d = Duration::from_micros;
        SparseOpRecord {
            node: node.into(),
            op: "Conv".into(),
            density,
            member: "conv3x3".into(),
            granularity: Some(Granularity::new(4, 8)),
            tiles: 7,
            phases: PhaseTimes { bitmask: d(us[0]), tiles: d(us[1]), select: d(us[2]), zero_fill: d(us[3]), compute: d(us[4]) },
        }
    }

    #[test]
    fn shares_medians_and_overhead() {
        let frame = |a: [u64; 5], b: [u64; 5]| FrameReport {
            total: Duration::from_millis(1),
            sparse_ops: vec![rec("a", 0.2, a), rec("b", 0.4, b)],
            node_times: vec![],
            step_times: vec![],
            phases_queued: false,
            replayed: false,
            queued: Duration::ZERO,
            device: None,
        };
        let reports = vec![
            frame([1, 1, 0, 2, 96], [0, 0, 0, 0, 10]),
            frame([3, 1, 0, 2, 94], [0, 0, 0, 0, 30]),
            frame([2, 1, 1, 2, 94], [0, 0, 0, 0, 20]),
            FrameReport::default(),
        ];
        let (rows, total) = breakdown(&reports);
        assert_eq!(rows.len(), 2);
        let a = &rows[0];
        assert_eq!((a.node.as_str(), a.frames), ("a", 3));
        assert_eq!(a.median_us, [2.0, 1.0, 0.0, 2.0, 94.0]);
        assert!((a.share.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!((a.overhead - 10.0 / 300.0).abs() < 1e-12, "{}", a.overhead);
        assert_eq!(rows[1].overhead, 0.0);
        assert_eq!(rows[1].median_total_us, 20.0);
        let t = total.expect("total row");
        assert_eq!(t.frames, 3);
        assert!((t.density - 0.3).abs() < 1e-12);
        assert!((t.overhead - 10.0 / 360.0).abs() < 1e-12);
        assert_eq!(t.kernels, "conv3x3:4x8 ×6");
        assert_eq!(breakdown(&[FrameReport::default()]), (vec![], None));
    }
}
