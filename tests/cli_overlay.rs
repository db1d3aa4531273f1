//! `run --overlay` and `bench --overlay` on models without mask outputs: every frame's PNG shows
//! the runtime's own mask of the first sparse op, tinted exactly on the cells the executor
//! computed (their share is the density it reports for the op), with a text strip below.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

const GRID: [u8; 3] = [0, 255, 255];
/// Frames narrower than this are enlarged by a whole factor (the overlay's contract).
const MIN_WIDTH: u32 = 384;

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn dynaspa(args: &[&str]) -> Out {
    let o = Command::new(env!("CARGO_BIN_EXE_dynaspa")).args(args).output().expect("binary runs");
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// A temp dir holding the first `n` street-camera frames.
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

/// (h, w) of the drawn mask from the line `overlay: mask '...' of sparse op N (HxW map) -> DIR`.
fn mask_grid(stdout: &str) -> (usize, usize) {
    let line = stdout.lines().find(|l| l.starts_with("overlay: ")).unwrap_or_else(|| panic!("no overlay line: {stdout}"));
    let dims = line.split(" (").nth(1).and_then(|s| s.split(" map)").next()).unwrap_or_else(|| panic!("no map size: {line}"));
    let (h, w) = dims.split_once('x').unwrap_or_else(|| panic!("{line}"));
    (h.parse().unwrap(), w.parse().unwrap())
}

/// The number after `key` on `line`.
fn number_after(line: &str, key: &str) -> f64 {
    let rest = line.split(key).nth(1).unwrap_or_else(|| panic!("no '{key}' in '{line}'"));
    rest.split(|c: char| c == ',' || c.is_whitespace())
        .find(|s| !s.is_empty())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no number after '{key}' in '{line}'"))
}

/// Checks one overlay PNG against its frame: the frame enlarged by the whole factor, a strip
/// with text below, every active cell's centre tinted towards red and every inactive one
/// untouched; returns the share of tinted cells.
fn tinted_share(png: &Path, frame: &Path, (mh, mw): (usize, usize)) -> f64 {
    let bytes = std::fs::read(png).unwrap_or_else(|e| panic!("{}: {e}", png.display()));
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "{} is not a PNG", png.display());
    let drawn = image::load_from_memory_with_format(&bytes, image::ImageFormat::Png).expect("a PNG that decodes").to_rgb8();
    let plain = image::open(frame).unwrap().to_rgb8();
    let z = if plain.width() < MIN_WIDTH { MIN_WIDTH.div_ceil(plain.width()) } else { 1 };
    let (fw, fh) = (plain.width() * z, plain.height() * z);
    assert_eq!(drawn.width(), fw, "{}: the frame's width times {z}", png.display());
    assert!(
        drawn.height() > fh && drawn.height() <= fh + 64,
        "{}: {}x{} for a {fw}x{fh} frame and its strip",
        png.display(),
        drawn.width(),
        drawn.height()
    );
    let text = (fh..drawn.height())
        .flat_map(|y| (0..fw).map(move |x| (x, y)))
        .filter(|&(x, y)| drawn.get_pixel(x, y).0.iter().all(|&c| c > 200))
        .count();
    assert!(text > 100, "{}: the strip should hold text ({text} light pixels)", png.display());
    let mut tinted = 0;
    for cy in 0..mh {
        for cx in 0..mw {
            // Cell centres: tile outlines sit on cell borders.
            let x = ((2 * cx + 1) * fw as usize / (2 * mw)) as u32;
            let y = ((2 * cy + 1) * fh as usize / (2 * mh)) as u32;
            let (p, q) = (plain.get_pixel(x / z, y / z), drawn.get_pixel(x, y));
            assert_ne!(q.0, GRID, "{}: cell ({cy}, {cx}) centre lies on an outline", png.display());
            if p != q {
                tinted += 1;
                assert!(q[0] >= p[0] && q[2] <= p[2], "{}: tint pulls towards red: {p:?} -> {q:?}", png.display());
            }
        }
    }
    tinted as f64 / (mh * mw) as f64
}

/// `run --overlay` with the default op on `model`: one valid PNG per frame whose tinted share
/// is the density the run reports for the drawn op.
fn overlays_follow_the_reported_masks(model: &str, n: usize) {
    let (d, names) = frames_dir(n);
    let work = tempfile::tempdir().unwrap();
    let ov = work.path().join("ov");
    let model = common::repo_path(model).display().to_string();
    let r = dynaspa(&["run", &model, "--frames", d.path().to_str().unwrap(), "--overlay", ov.to_str().unwrap(), "--threads", "2"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("overlay: mask '") && r.stdout.contains("of sparse op"), "the runtime's mask is drawn: {}", r.stdout);
    let grid = mask_grid(&r.stdout);
    let lines: Vec<&str> = r.stdout.lines().filter(|l| l.starts_with("frame ")).collect();
    assert_eq!(lines.len(), n, "{}", r.stdout);
    for (i, (name, line)) in names.iter().zip(&lines).enumerate() {
        let reported = number_after(line, "overlay density");
        assert!(reported > 0.0 && reported < 1.0, "a street frame's mask is neither empty nor full: {line}");
        let stem = Path::new(name).file_stem().unwrap().to_string_lossy().into_owned();
        let png: PathBuf = ov.join(format!("{i:05}_{stem}.png"));
        let share = tinted_share(&png, &d.path().join(name), grid);
        assert!((share - reported).abs() <= 0.001, "{name}: {share:.4} of the cells tinted, density {reported} reported: {line}");
    }
    let files = std::fs::read_dir(&ov).unwrap().count();
    assert_eq!(files, n, "one PNG per frame and nothing else in {}", ov.display());
}

#[test]
fn overlays_of_the_authors_dynconv_resnet50_show_the_runtimes_masks() {
    overlays_follow_the_reported_masks("models/authors/dynconv_resnet50_w025.onnx", 3);
}

#[test]
fn overlays_of_the_reduced_dynconv_show_the_runtimes_masks() {
    overlays_follow_the_reported_masks("models/dynconv_small_d30.onnx", 4);
}

#[test]
fn bench_writes_overlays_with_the_median_sparse_latency() {
    let (d, names) = frames_dir(2);
    let work = tempfile::tempdir().unwrap();
    let ov = work.path().join("ov");
    let model = common::repo_path("models/dynconv_small_d30.onnx").display().to_string();
    let r = dynaspa(&[
        "bench",
        &model,
        "--frames",
        d.path().to_str().unwrap(),
        "--rounds",
        "1",
        "--threads",
        "2",
        "--overlay",
        ov.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("overlays: 2 frames written to"), "{}", r.stdout);
    assert!(r.stdout.lines().last().is_some_and(|l| l.starts_with("speedup_vs_dense: ")), "{}", r.stdout);
    let grid = mask_grid(&r.stdout);
    for (i, name) in names.iter().enumerate() {
        let stem = Path::new(name).file_stem().unwrap().to_string_lossy().into_owned();
        let share = tinted_share(&ov.join(format!("{i:05}_{stem}.png")), &d.path().join(name), grid);
        assert!(share > 0.0 && share < 1.0, "{name}: {share}");
    }
}

#[test]
fn an_unknown_overlay_op_is_an_error_that_writes_nothing() {
    let (d, _) = frames_dir(1);
    let work = tempfile::tempdir().unwrap();
    let ov = work.path().join("ov");
    let model = common::repo_path("models/authors/dynconv_resnet50_w025.onnx").display().to_string();
    let r =
        dynaspa(&["run", &model, "--frames", d.path().to_str().unwrap(), "--overlay", ov.to_str().unwrap(), "--overlay-op", "/net/nope"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        r.stderr.contains("'/net/nope'") && r.stderr.contains("sparse ops: /net/layer1"),
        "names the op and lists the sparse ones: {}",
        r.stderr
    );
    assert!(r.stderr.contains("mask outputs: none"), "{}", r.stderr);
    assert!(!ov.exists(), "nothing written for a refused overlay");
}
