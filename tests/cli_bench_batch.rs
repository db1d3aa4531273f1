//! `dynaspa bench --batch N`: N consecutive frames stacked into one input per run give the same
//! outputs as the frames run one at a time (`run --frames`), and the flag's errors.

mod common;

use dynaspa::io::npy;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Reduced DynConv, symbolic batch, 96x72 (the shipped 224x168 frames are resized to it).
const MODEL: &str = "models/dynconv_small_d30.onnx";

fn dynaspa(args: &[&str]) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_dynaspa")).args(args).output().expect("binary runs");
    (o.status.success(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    v.sort();
    v
}

#[test]
fn batched_runs_equal_the_frames_run_one_at_a_time() {
    let model = common::repo_path(MODEL).display().to_string();
    let frames = common::repo_path("models/frames/vtest").display().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let batched = tmp.path().join("batched");
    let single = tmp.path().join("single");
    // 10 frames at batch 4: two runs, the last two frames left out.
    let (ok, out, err) = dynaspa(&[
        "bench",
        &model,
        "--frames",
        &frames,
        "--max-frames",
        "10",
        "--batch",
        "4",
        "--rounds",
        "1",
        "--threads",
        "2",
        "--output-dir",
        batched.to_str().unwrap(),
    ]);
    assert!(ok, "bench --batch failed:\n{out}\n{err}");
    assert!(out.contains("2 runs of 4 frames"), "{out}");
    assert!(err.contains("the last 2 frames do not fill a batch of 4"), "{err}");
    assert!(out.contains("speedup_vs_dense:"), "{out}");
    let (ok, out, err) =
        dynaspa(&["run", &model, "--frames", &frames, "--max-frames", "8", "--threads", "2", "--output-dir", single.to_str().unwrap()]);
    assert!(ok, "run --frames failed:\n{out}\n{err}");

    let runs = subdirs(&batched);
    let one = subdirs(&single);
    assert_eq!((runs.len(), one.len()), (2, 8));
    let mut names: Vec<String> =
        std::fs::read_dir(&runs[0]).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert!(names.contains(&"logits.npy".to_string()), "{names:?}");
    for (r, run) in runs.iter().enumerate() {
        for name in &names {
            let b = npy::read(&run.join(name)).unwrap();
            assert_eq!(b.shape()[0], 4, "{name}: {:?}", b.shape());
            let item = b.shape()[1..].iter().product::<usize>();
            let bv = b.as_f32().unwrap();
            for i in 0..4 {
                let s = npy::read(&one[4 * r + i].join(name)).unwrap();
                assert_eq!(&s.shape()[1..], &b.shape()[1..], "{name}");
                let e = common::rel_l2(&bv[i * item..(i + 1) * item], s.as_f32().unwrap());
                assert!(e <= 1e-4, "run {r} item {i} ({}), {name}: relative L2 {e:.2e}", one[4 * r + i].display());
            }
        }
    }
}

#[test]
fn batch_against_a_fixed_batch_model_is_refused() {
    let model = common::repo_path("models/authors/dynconv_resnet50_w025.onnx").display().to_string();
    let frames = common::repo_path("models/frames/vtest").display().to_string();
    let (ok, out, err) = dynaspa(&["bench", &model, "--frames", &frames, "--max-frames", "2", "--batch", "2", "--no-profile"]);
    assert!(!ok, "{out}");
    assert!(err.contains("--batch 2: the frame input 'input' has a fixed batch of 1"), "{err}");
}

#[test]
fn too_few_frames_for_one_batch_is_an_error() {
    let model = common::repo_path(MODEL).display().to_string();
    let frames = common::repo_path("models/frames/vtest").display().to_string();
    let (ok, out, err) = dynaspa(&["bench", &model, "--frames", &frames, "--max-frames", "3", "--batch", "4"]);
    assert!(!ok, "{out}");
    assert!(err.contains("no 4 frames for one batch could be read"), "{err}");
}
