//! The frame commands as a user drives them: `run --frames` (directories, video through ffmpeg,
//! overlays), `profile` (Table 4 breakdown, Chrome trace) and `bench` (sparse vs dense), and
//! their errors. Cases that need ffmpeg or Debian's vtest.avi skip with a printed reason.

mod common;

use dynaspa::io::npy;
use std::path::{Path, PathBuf};
use std::process::Command;

const MODEL: &str = "models/dynconv_small_d30.onnx";
const VTEST_AVI: &str = "/usr/share/doc/opencv-doc/examples/data/vtest.avi";

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn dynaspa_env(args: &[&str], env: &[(&str, &str)]) -> Out {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dynaspa"));
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().expect("binary runs");
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn dynaspa(args: &[&str]) -> Out {
    dynaspa_env(args, &[])
}

fn model() -> String {
    common::repo_path(MODEL).display().to_string()
}

/// A temp dir holding the first `n` street-camera frames (224 x 168 JPEGs).
fn frames_dir(n: usize) -> (tempfile::TempDir, Vec<String>) {
    let d = tempfile::tempdir().unwrap();
    let src = common::repo_path("models/frames/vtest");
    let mut names: Vec<String> = std::fs::read_dir(&src).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names.truncate(n);
    for name in &names {
        std::fs::copy(src.join(name), d.path().join(name)).unwrap();
    }
    (d, names)
}

fn ffmpeg_available() -> bool {
    Command::new("ffmpeg").arg("-version").output().is_ok_and(|o| o.status.success())
}

/// The lines `frame <index> ...` of `run --frames`, as (index, latency ms, density field).
fn frame_lines(stdout: &str) -> Vec<(usize, f64, String)> {
    stdout
        .lines()
        .filter(|l| l.starts_with("frame "))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let index = f[1].parse().unwrap_or_else(|_| panic!("frame index in '{l}'"));
            let ms_at = f.iter().position(|&x| x == "ms").unwrap_or_else(|| panic!("no 'ms' in '{l}'"));
            let ms = f[ms_at - 1].parse().unwrap_or_else(|_| panic!("latency in '{l}'"));
            let dens_at = f.iter().position(|&x| x == "density").unwrap_or_else(|| panic!("no density in '{l}'"));
            assert!(f.contains(&"kernels"), "no kernels in '{l}'");
            (index, ms, f[dens_at + 1].to_string())
        })
        .collect()
}

fn leftover_temp_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| rd.map(|e| e.unwrap().path()).filter(|p| p.file_name().unwrap().to_string_lossy().contains(".tmp")).collect())
        .unwrap_or_default()
}

#[test]
fn run_frames_from_a_directory_prints_frames_summary_and_writes_overlays() {
    let (d, names) = frames_dir(4);
    std::fs::write(d.path().join("README.txt"), "not a frame").unwrap();
    let work = tempfile::tempdir().unwrap();
    let (ov, out) = (work.path().join("ov"), work.path().join("out"));
    let r = dynaspa(&[
        "run",
        &model(),
        "--frames",
        d.path().to_str().unwrap(),
        "--overlay",
        ov.to_str().unwrap(),
        "--overlay-op",
        "/layer1.0/conv2/Conv",
        "--output-dir",
        out.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("README.txt"), "a skipped file should be noted: {}", r.stderr);
    let lines = frame_lines(&r.stdout);
    assert_eq!(lines.iter().map(|l| l.0).collect::<Vec<_>>(), vec![0, 1, 2, 3], "{}", r.stdout);
    for (_, ms, density) in &lines {
        assert!(*ms > 0.0 && ms.is_finite());
        // DynConv's 12 masked convs run sparse on the CPU backend, so every frame has a density.
        assert!(density.parse::<f64>().is_ok_and(|d| d > 0.0 && d <= 1.0), "density '{density}': {}", r.stdout);
    }
    assert!(r.stdout.lines().filter(|l| l.starts_with("frame ")).all(|l| !l.ends_with("kernels -")), "{}", r.stdout);
    assert!(r.stdout.contains("overlay: mask 'mask_layer1_0' of sparse op /layer1.0/conv2/Conv"), "{}", r.stdout);
    for name in &names {
        assert!(r.stdout.contains(name.as_str()), "frame {name} not named: {}", r.stdout);
    }
    let summary = r.stdout.lines().find(|l| l.starts_with("summary:")).expect("summary line");
    assert!(summary.contains("4 frames") && summary.contains("median") && summary.contains("p90"), "{summary}");

    // Overlays: the frame enlarged to at least 384 pixels wide with a strip below, tinted
    // exactly on the active cells of the mask the same run wrote (the op's mask is the graph
    // output mask_layer1_0), DISTile outlines in cyan.
    let mut active_cells = 0;
    let mut grid_pixels = 0;
    for (i, name) in names.iter().enumerate() {
        let stem = Path::new(name).file_stem().unwrap().to_string_lossy().into_owned();
        let base = format!("{i:05}_{stem}");
        let plain = image::open(d.path().join(name)).unwrap().to_rgb8();
        let drawn = image::open(ov.join(format!("{base}.png"))).expect("overlay PNG").to_rgb8();
        let z = 384u32.div_ceil(plain.width()).max(1);
        assert_eq!(drawn.width(), plain.width() * z, "overlay has the enlarged frame's width");
        assert!(drawn.height() > plain.height() * z, "a strip below the frame");
        let mask = npy::read(&out.join(&base).join("mask_layer1_0.npy")).expect("mask output written per frame");
        let [1, 1, mh, mw] = *mask.shape() else { panic!("mask shape {:?}", mask.shape()) };
        let m = mask.as_f32().unwrap();
        let (fw, fh) = ((plain.width() * z) as usize, (plain.height() * z) as usize);
        for cy in 0..mh {
            for cx in 0..mw {
                // Centre pixel of the cell, far from any tile outline (those sit on cell borders).
                let (x, y) = (((2 * cx + 1) * fw / (2 * mw)) as u32, ((2 * cy + 1) * fh / (2 * mh)) as u32);
                let (p, q) = (plain.get_pixel(x / z, y / z), drawn.get_pixel(x, y));
                if m[cy * mw + cx] > 0.5 {
                    active_cells += 1;
                    assert_ne!(p, q, "{name}: active cell ({cy}, {cx}) not tinted");
                    assert!(q[0] >= p[0] && q[2] <= p[2], "{name}: tint should pull towards red: {p:?} -> {q:?}");
                } else {
                    assert_eq!(p, q, "{name}: inactive cell ({cy}, {cx}) changed");
                }
            }
        }
        assert!(npy::read(&out.join(&base).join("logits.npy")).is_ok());
        let cyan = |img: &image::RgbImage| img.pixels().filter(|p| p.0 == [0, 255, 255]).count();
        grid_pixels += cyan(&drawn).saturating_sub(cyan(&plain) * (z * z) as usize);
    }
    assert!(active_cells > 0, "the masks of 4 street frames should have active cells");
    assert!(grid_pixels > 0, "the DISTile grid of the reported granularity should be drawn");
    assert!(leftover_temp_files(&ov).is_empty());

    let r = dynaspa(&["run", &model(), "--frames", d.path().to_str().unwrap(), "--max-frames", "2"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(frame_lines(&r.stdout).len(), 2, "--max-frames 2: {}", r.stdout);
}

#[test]
fn run_frames_from_a_video_through_ffmpeg() {
    if !ffmpeg_available() {
        common::skip_tool("run_frames_from_a_video_through_ffmpeg", "ffmpeg", "ffmpeg is not on PATH");
        return;
    }
    if !Path::new(VTEST_AVI).exists() {
        common::skip_tool(
            "run_frames_from_a_video_through_ffmpeg",
            "opencv-doc",
            &format!("{VTEST_AVI} missing (Debian package opencv-doc)"),
        );
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let ov = work.path().join("ov");
    let r = dynaspa(&["run", &model(), "--frames", VTEST_AVI, "--max-frames", "3", "--overlay", ov.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines = frame_lines(&r.stdout);
    assert_eq!(lines.iter().map(|l| l.0).collect::<Vec<_>>(), vec![0, 1, 2], "{}", r.stdout);
    assert!(r.stdout.contains("summary: 3 frames"), "{}", r.stdout);
    for i in 0..3 {
        // Video frames are decoded at the model's input size, and enlarged 4 times to 384 wide.
        let img = image::open(ov.join(format!("frame_{i:05}.png"))).expect("overlay of a video frame").to_rgb8();
        assert_eq!(img.width(), 384);
        assert!(img.height() > 288, "the frame and its strip: {:?}", img.dimensions());
    }
    assert!(!ov.join("frame_00003.png").exists());
}

#[test]
fn broken_video_reports_ffmpeg_stderr() {
    if !ffmpeg_available() {
        common::skip_tool("broken_video_reports_ffmpeg_stderr", "ffmpeg", "ffmpeg is not on PATH");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let clip = d.path().join("clip.avi");
    std::fs::write(&clip, b"RIFF but not really a video").unwrap();
    let r = dynaspa(&["run", &model(), "--frames", clip.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("ffmpeg failed to decode") && r.stderr.contains("clip.avi"), "{}", r.stderr);
    assert!(r.stderr.lines().count() >= 2, "ffmpeg's own message should follow: {}", r.stderr);
}

#[test]
fn missing_ffmpeg_is_a_clear_error() {
    let d = tempfile::tempdir().unwrap();
    let clip = d.path().join("clip.mp4");
    std::fs::write(&clip, b"\x00\x00\x00\x18ftypmp42").unwrap();
    let empty = tempfile::tempdir().unwrap();
    // PATH without ffmpeg (an empty directory) for the child only.
    let r = dynaspa_env(&["run", &model(), "--frames", clip.to_str().unwrap()], &[("PATH", empty.path().to_str().unwrap())]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("ffmpeg not found on PATH"), "{}", r.stderr);
    assert!(r.stderr.contains("clip.mp4") && r.stderr.contains("directory of images"), "{}", r.stderr);
    let r = dynaspa_env(&["run", &model(), "--frames", clip.to_str().unwrap()], &[("PATH", "")]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("ffmpeg not found on PATH"), "{}", r.stderr);
}

#[test]
fn corrupt_frame_names_the_file_and_leaves_no_overlay_for_it() {
    let (d, names) = frames_dir(2);
    // Sorted between the two good frames.
    let bad = format!("{}_corrupt.png", Path::new(&names[0]).file_stem().unwrap().to_string_lossy());
    std::fs::write(d.path().join(&bad), b"\x89PNG\r\n\x1a\n this is not the rest of a PNG").unwrap();
    let work = tempfile::tempdir().unwrap();
    let ov = work.path().join("ov");
    let r = dynaspa(&["run", &model(), "--frames", d.path().to_str().unwrap(), "--overlay", ov.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(r.stderr.contains(&bad), "error should name {bad}: {}", r.stderr);
    assert_eq!(frame_lines(&r.stdout).len(), 1, "only the frame before the bad one ran: {}", r.stdout);
    let written: Vec<String> = std::fs::read_dir(&ov).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(written.len(), 1, "exactly the first frame's overlay: {written:?}");
    assert!(written[0].starts_with("00000_"), "{written:?}");
    assert!(!written.iter().any(|w| w.contains("corrupt")));
}

#[test]
fn bad_sources_and_inputs_are_errors() {
    let r = dynaspa(&["run", &model(), "--frames", "/nonexistent/frames"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("/nonexistent/frames") && r.stderr.contains("does not exist"), "{}", r.stderr);

    let empty = tempfile::tempdir().unwrap();
    let r = dynaspa(&["profile", &model(), "--frames", empty.path().to_str().unwrap()]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("no images"), "{}", r.stderr);

    let (d, _) = frames_dir(1);
    let frames = d.path().to_str().unwrap();
    // SIGE's second input (the edit mask) is not a frame: it must come from --input.
    let sige = common::repo_path("models/sige_small.onnx").display().to_string();
    let r = dynaspa(&["run", &sige, "--frames", frames]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("--input mask=PATH"), "{}", r.stderr);
    let r = dynaspa(&["run", &model(), "--frames", frames, "--frame-input", "nope"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("nope") && r.stderr.contains("input"), "{}", r.stderr);
    let r = dynaspa(&["run", &model(), "--frames", frames, "--overlay", empty.path().join("ov").to_str().unwrap(), "--overlay-op", "nope"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("nope") && r.stderr.contains("mask_layer1_0"), "should list the mask outputs: {}", r.stderr);

    // Usage errors exit 2.
    for args in [
        vec!["run", "m.onnx", "--overlay", "x"],
        vec!["bench", "m.onnx"],
        vec!["bench", "m.onnx", "--frames", "d", "--rounds", "0"],
        vec!["run", "m.onnx", "--frames", "d", "--repeat", "3"],
        vec!["run", "m.onnx", "--frames", "d", "--max-frames", "0"],
        vec!["profile", "m.onnx", "--frames", "d", "--warmup", "x"],
    ] {
        assert_eq!(dynaspa(&args).code, 2, "{args:?}");
    }
}

#[test]
fn run_frames_feeds_sige_with_a_fixed_mask_input() {
    let (d, _) = frames_dir(2);
    let sige = common::repo_path("models/sige_small.onnx").display().to_string();
    let mask = common::repo_path("tests/goldens/sige_small/mask_0.npy");
    let r = dynaspa(&["run", &sige, "--frames", d.path().to_str().unwrap(), "--input", &format!("mask={}", mask.display())]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(frame_lines(&r.stdout).len(), 2, "{}", r.stdout);
    assert!(r.stdout.contains("into input 'input'"), "{}", r.stdout);
}

fn num(v: &serde_json::Value, what: &str) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("{what} is not a number: {v}"))
}

#[test]
fn profile_prints_the_breakdown_and_writes_a_chrome_trace() {
    let (d, _) = frames_dir(3);
    let work = tempfile::tempdir().unwrap();
    let trace = work.path().join("trace.json");
    let r = dynaspa(&["profile", &model(), "--frames", d.path().to_str().unwrap(), "--warmup", "1", "--trace", trace.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.lines().any(|l| l.starts_with("frames: 3,") && l.contains("median")), "{}", r.stdout);
    assert!(r.stdout.contains("Table 4 breakdown"), "{}", r.stdout);
    let header = r.stdout.lines().find(|l| l.starts_with("node ")).expect("table header");
    for col in ["bitmask", "tiles", "select", "zero_fill", "compute", "overhead"] {
        assert!(header.contains(col), "{header}");
    }
    // One row per sparse op (12 in this model) and a total row; phase shares add up to 100%.
    let rows: Vec<&str> = r.stdout.lines().filter(|l| l.starts_with("/layer") || l.starts_with("total ")).collect();
    assert_eq!(rows.len(), 13, "{}", r.stdout);
    for row in &rows {
        let pcts: Vec<f64> = row.split_whitespace().filter_map(|w| w.strip_suffix('%')?.parse().ok()).collect();
        assert_eq!(pcts.len(), 6, "5 phase shares and the overhead: {row}");
        let sum: f64 = pcts[..5].iter().sum();
        assert!((sum - 100.0).abs() < 0.5 || sum == 0.0, "shares sum to {sum}: {row}");
        let overhead = pcts[0] + pcts[1] + pcts[2];
        assert!((overhead - pcts[5]).abs() < 0.2, "overhead = bitmask + tiles + select: {row}");
    }
    let line = r.stdout.lines().find(|l| l.starts_with("overhead")).expect("overhead line");
    let pct: f64 = line.split_whitespace().find_map(|w| w.strip_suffix('%')?.parse().ok()).expect("a percentage");
    assert!(pct > 0.0 && pct < 100.0, "{line}");
    assert!(r.stdout.contains("trace:"), "{}", r.stdout);

    let j: serde_json::Value = serde_json::from_slice(&std::fs::read(&trace).expect("trace written")).expect("valid JSON");
    let events = j["traceEvents"].as_array().expect("traceEvents array");
    assert!(!events.is_empty());
    for e in events {
        assert!(e["name"].is_string() && e["cat"].is_string(), "{e}");
        assert_eq!(e["ph"], "X", "{e}");
        assert!(num(&e["ts"], "ts") >= 0.0 && num(&e["dur"], "dur") >= 0.0, "{e}");
        assert!(e["pid"].is_u64() && e["tid"].is_u64(), "{e}");
        assert!(e["args"].is_object(), "{e}");
    }
    let span = |e: &serde_json::Value| (num(&e["ts"], "ts"), num(&e["ts"], "ts") + num(&e["dur"], "dur"));
    fn named<'a>(events: &'a [serde_json::Value], n: &'a str) -> impl Iterator<Item = &'a serde_json::Value> + 'a {
        events.iter().filter(move |e| e["name"] == n)
    }
    assert_eq!(named(events, "frame").count(), 3, "one frame span per measured frame");
    let runs: Vec<(f64, f64)> = named(events, "frame").chain(named(events, "warmup")).map(span).collect();
    let nodes: Vec<&serde_json::Value> = named(events, "node").collect();
    // 62 nodes per run, 4 runs.
    assert!(nodes.len() >= 4 * 20, "{} node events", nodes.len());
    const EPS: f64 = 0.01; // µs, float rounding of the recorded times
    for n in &nodes {
        assert!(n["args"]["name"].is_string() && n["args"]["op"].is_string(), "node fields become args: {n}");
        let (s, e) = span(n);
        assert!(runs.iter().any(|&(rs, re)| rs <= s + EPS && e <= re + EPS), "node outside every frame: {n}");
    }
    // Dispatch counts DISTiles only for members that could win, and this model's ops pick the
    // 1x1 member (its count is the popcount, its kernel reads the mask): `tiles` spans may be
    // absent here, so they are required below, in a run with a tiled member forced.
    assert_phases_in_nodes(events, &["bitmask", "select", "zero_fill", "kernel"]);
    let forced = work.path().join("forced.json");
    let r = dynaspa_env(
        &["profile", &model(), "--frames", d.path().to_str().unwrap(), "--warmup", "1", "--trace", forced.to_str().unwrap()],
        &[("DYNASPA_FORCE_MEMBER", "4x4")],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let total = r.stdout.lines().find(|l| l.starts_with("total ")).expect("total row");
    assert!(!total.contains("tiles1x1") && total.contains("tiles"), "a tiled member should run: {total}");
    let j: serde_json::Value = serde_json::from_slice(&std::fs::read(&forced).expect("trace written")).expect("valid JSON");
    assert_phases_in_nodes(j["traceEvents"].as_array().expect("traceEvents array"), &["bitmask", "tiles", "select", "zero_fill", "kernel"]);
    assert!(leftover_temp_files(work.path()).is_empty());
}

/// Every phase in `required` has spans in the trace, and every phase span (of any phase) lies
/// inside a node span of its thread.
fn assert_phases_in_nodes(events: &[serde_json::Value], required: &[&str]) {
    const EPS: f64 = 0.01; // µs, float rounding of the recorded times
    let span = |e: &serde_json::Value| (num(&e["ts"], "ts"), num(&e["ts"], "ts") + num(&e["dur"], "dur"));
    let nodes: Vec<&serde_json::Value> = events.iter().filter(|e| e["name"] == "node").collect();
    for phase in required {
        assert!(events.iter().any(|e| e["name"] == *phase), "no '{phase}' spans in the trace");
    }
    for p in events.iter().filter(|e| ["bitmask", "tiles", "select", "zero_fill", "kernel"].iter().any(|n| e["name"] == *n)) {
        let (s, e) = span(p);
        assert!(
            nodes.iter().any(|n| n["tid"] == p["tid"] && {
                let (ns, ne) = span(n);
                ns <= s + EPS && e <= ne + EPS
            }),
            "phase outside its node span: {p}"
        );
    }
}

#[test]
fn bench_compares_sparse_with_dense() {
    let (d, _) = frames_dir(3);
    let r = dynaspa(&["bench", &model(), "--frames", d.path().to_str().unwrap(), "--rounds", "2"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let last = r.stdout.lines().last().unwrap_or_default();
    let x: f64 = last
        .strip_prefix("speedup_vs_dense: ")
        .unwrap_or_else(|| panic!("last line should be the speedup: {}", r.stdout))
        .parse()
        .expect("a number");
    assert!(x > 0.0 && x.is_finite(), "{x}");
    let rows = r.stdout.lines().filter(|l| l.split_whitespace().next().is_some_and(|w| w.parse::<usize>().is_ok())).count();
    assert_eq!(rows, 3, "one row per frame: {}", r.stdout);
    let header = r.stdout.lines().find(|l| l.trim_start().starts_with("frame")).expect("a header row");
    assert!(header.ends_with("density"), "the rows give each frame's mask density: {header}");
    assert!(r.stdout.contains("outputs agree"), "sparse and dense outputs must match: {}\n{}", r.stdout, r.stderr);
}

#[test]
fn help_describes_the_frame_commands() {
    for (args, want) in [
        (vec!["run", "--help"], vec!["--frames", "--overlay", "--overlay-op", "--max-frames", "--frame-input", "mask"]),
        (vec!["profile", "--help"], vec!["--trace", "--warmup", "--frames", "bitmask", "5%"]),
        (vec!["bench", "--help"], vec!["--rounds", "--max-frames", "speedup_vs_dense"]),
        (vec!["--help"], vec!["profile", "bench"]),
    ] {
        let r = dynaspa(&args);
        assert_eq!(r.code, 0, "{args:?}");
        for w in want {
            assert!(r.stdout.contains(w), "{args:?} help lacks {w}: {}", r.stdout);
        }
    }
}

#[test]
fn profile_of_a_dense_model_says_there_is_no_breakdown() {
    let (d, _) = frames_dir(2);
    let cnn = common::repo_path("models/cnn_small.onnx").display().to_string();
    let r = dynaspa(&["profile", &cnn, "--frames", d.path().to_str().unwrap(), "--warmup", "0"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("frames: 2,"), "{}", r.stdout);
    assert!(r.stdout.contains("no sparse ops reported") && !r.stdout.contains("Table 4"), "{}", r.stdout);
    let r = dynaspa(&["run", &cnn, "--frames", d.path().to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(frame_lines(&r.stdout).iter().all(|l| l.2 == "-"), "no density without sparse ops: {}", r.stdout);
}

#[test]
fn delta_mode_runs_checks_and_benches_on_street_frames() {
    // cnn_small has no masks of its own: delta mode is its only sparsity.
    let m = common::repo_path("models/cnn_small.onnx").display().to_string();
    let (dir, _) = frames_dir(5);
    let frames = dir.path().display().to_string();
    let o = dynaspa(&["run", &m, "--frames", &frames, "--backend", "cpu", "--threads", "2", "--delta", "0", "--check"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let lines: Vec<&str> = o.stdout.lines().filter(|l| l.starts_with("frame ")).collect();
    assert_eq!(lines.len(), 5, "{}", o.stdout);
    assert!(lines[0].contains("changed 1.000"), "the first frame is whole: {}", lines[0]);
    for l in &lines {
        let e: f64 = l.rsplit("rel L2 ").next().unwrap().trim().parse().unwrap_or_else(|_| panic!("no error in {l}"));
        assert!(e <= 1e-5, "threshold 0 must equal dense: {l}");
    }
    assert!(o.stdout.contains("mean changed fraction") && o.stdout.contains("relative L2 against dense: max"), "{}", o.stdout);

    let o = dynaspa(&["bench", &m, "--frames", &frames, "--backend", "cpu", "--threads", "2", "--rounds", "1", "--delta", "0.3"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("delta ms") && o.stdout.contains("relative L2 ") && o.stdout.contains("speedup_vs_dense:"), "{}", o.stdout);

    let o = dynaspa(&["run", &m, "-i", &format!("{frames}/vtest_000.jpg"), "--backend", "cpu", "--delta", "0"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("--delta needs --frames"), "{}", o.stderr);
    let o = dynaspa(&["run", &m, "--frames", &frames, "--backend", "cpu", "--delta", "nan"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("threshold"), "{}", o.stderr);
}

#[test]
fn an_edit_runs_against_its_reference() {
    let m = common::repo_path("models/cnn_small.onnx").display().to_string();
    let original = common::repo_path("models/frames/vtest/vtest_120.jpg").display().to_string();
    let edited = common::repo_path("models/frames/edits/vtest120_person_pasted_edited.png").display().to_string();
    let o =
        dynaspa(&["run", &m, "--reference", &original, "-i", &edited, "--backend", "cpu", "--threads", "2", "--check", "--repeat", "2"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let last = o.stdout.lines().last().unwrap_or_default();
    assert!(last.contains("reference") && last.contains("(whole)") && last.contains("edit"), "{last}");
    let changed: f64 = last.split("changed ").nth(1).and_then(|r| r.split_whitespace().next()).and_then(|v| v.parse().ok()).expect(last);
    assert!(changed > 0.0 && changed < 1.0, "{last}");
    let e: f64 = last.rsplit("relative L2 against dense ").next().unwrap().trim().parse().expect(last);
    assert!(e <= 1e-5, "threshold 0: the edit equals its dense run: {last}");
    // SIGE's spread, with the edit's slowest nodes and the members its sparse ops ran.
    let args = ["run", &m, "--reference", &original, "-i", &edited, "--backend", "cpu", "--threads", "2"];
    let o = dynaspa(&[&args[..], &["--delta-spread", "stride", "--nodes", "5", "--repeat", "2"]].concat());
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("sparse ops of the edit by member:") && o.stdout.contains("per node"), "{}", o.stdout);
    let rows = o.stdout.lines().skip_while(|l| !l.starts_with("node ")).skip(1).take_while(|l| !l.starts_with('(')).count();
    assert_eq!(rows, 5, "{}", o.stdout);
    let o = dynaspa(&[&args[..], &["--delta-spread", "nearest"]].concat());
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("window or stride"), "{}", o.stderr);
    let o = dynaspa(&["run", &m, "-i", &edited, "--backend", "cpu", "--check"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("--check compares"), "{}", o.stderr);
}
