//! Bad input gets a clear error naming the problem, exit status 1, no panic, and no
//! half-written output.

mod common;
#[allow(dead_code)] // the shared builder has helpers only other test files use
#[path = "common/onnx_build.rs"]
mod onnx_build;

use dynaspa::io::npy;
use dynaspa::Tensor;
use onnx_build::*;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Outcome {
    code: i32,
    stderr: String,
}

fn dynaspa(args: &[&str]) -> Outcome {
    let out = Command::new(env!("CARGO_BIN_EXE_dynaspa")).args(args).output().expect("binary runs");
    Outcome { code: out.status.code().unwrap_or(-1), stderr: String::from_utf8_lossy(&out.stderr).into_owned() }
}

/// Runs `dynaspa run` and checks it fails cleanly with `needle` in the message.
fn expect_error(model: &Path, inputs: &[String], needle: &str) {
    let outdir = tempfile::tempdir().unwrap();
    let mut args = vec!["run".to_string(), model.display().to_string()];
    for i in inputs {
        args.push("--input".into());
        args.push(i.clone());
    }
    args.push("--output-dir".into());
    args.push(outdir.path().join("out").display().to_string());
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = dynaspa(&a);
    assert_eq!(o.code, 1, "expected exit 1 for {needle:?}, got {} with stderr:\n{}", o.code, o.stderr);
    assert!(!o.stderr.contains("panicked"), "panic: {}", o.stderr);
    assert!(o.stderr.contains(needle), "stderr lacks {needle:?}:\n{}", o.stderr);
    let left: Vec<_> = std::fs::read_dir(outdir.path().join("out")).map(|d| d.flatten().collect()).unwrap_or_default();
    assert!(left.is_empty(), "files left behind after an error: {left:?}");
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn cnn() -> PathBuf {
    common::repo_path("models/cnn_small.onnx")
}

fn photo() -> String {
    common::repo_path("models/frames/photos/astronaut.png").display().to_string()
}

/// A valid two-input model: out = relu(a + b), both [1, 4].
fn two_input_model() -> Vec<u8> {
    model(
        vec![node("Add", "add", &["a", "b"], &["s"]), node("Relu", "relu", &["s"], &["out"])],
        vec![value_info("a", 1, &[1, 4]), value_info("b", 1, &[1, 4])],
        vec![value_info("out", 1, &[1, 4])],
        vec![],
    )
}

#[test]
fn empty_file() {
    let d = tempfile::tempdir().unwrap();
    expect_error(&write(d.path(), "empty.onnx", b""), &[photo()], "the file is empty");
}

#[test]
fn truncated_file() {
    let d = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(cnn()).unwrap();
    let p = write(d.path(), "trunc.onnx", &bytes[..bytes.len() / 2]);
    expect_error(&p, &[photo()], "not a valid ONNX protobuf");
}

#[test]
fn random_bytes() {
    let d = tempfile::tempdir().unwrap();
    let mut x = 0x9e3779b97f4a7c15u64 ^ std::process::id() as u64;
    let bytes: Vec<u8> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let o = {
        let p = write(d.path(), "random.onnx", &bytes);
        dynaspa(&["inspect", p.to_str().unwrap()])
    };
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(!o.stderr.contains("panicked"));
    assert!(o.stderr.contains("cannot read ONNX model"), "{}", o.stderr);
}

#[test]
fn deeply_nested_protobuf() {
    let d = tempfile::tempdir().unwrap();
    let p = write(d.path(), "nested.onnx", &deeply_nested(100_000));
    expect_error(&p, &[photo()], "not a valid ONNX protobuf");
}

#[test]
fn dangling_node_input() {
    let d = tempfile::tempdir().unwrap();
    let m = model(
        vec![node("Relu", "relu1", &["x"], &["y"]), node("Add", "add1", &["y", "ghost"], &["z"])],
        vec![value_info("x", 1, &[1, 4])],
        vec![value_info("z", 1, &[1, 4])],
        vec![],
    );
    let p = write(d.path(), "dangling.onnx", &m);
    expect_error(&p, &["x=unused.npy".into()], "node 'add1' (Add): input 'ghost' is not produced");
}

#[test]
fn initializer_length_mismatch() {
    let d = tempfile::tempdir().unwrap();
    let m = model(
        vec![node("Add", "add1", &["x", "w"], &["z"])],
        vec![value_info("x", 1, &[1, 4])],
        vec![value_info("z", 1, &[1, 4])],
        vec![f32_init("w", &[1, 4], &[1.0, 2.0, 3.0])],
    );
    let p = write(d.path(), "badinit.onnx", &m);
    expect_error(&p, &["x=unused.npy".into()], "initializer 'w': shape [1, 4] needs 4 elements");
}

#[test]
fn unsupported_ops_are_all_listed() {
    let d = tempfile::tempdir().unwrap();
    let mut custom = node("MyOp", "custom1", &["y"], &["z"]);
    custom.set_domain("com.example".into());
    let m = model(
        vec![node("TopK", "topk1", &["x", "k"], &["y", "idx"]), custom, node("NonZero", "nz1", &["z"], &["out"])],
        vec![value_info("x", 1, &[1, 4]), value_info("k", 7, &[1])],
        vec![value_info("out", 7, &[2, 4])],
        vec![],
    );
    let p = write(d.path(), "unsupported.onnx", &m);
    let o = dynaspa(&["inspect", p.to_str().unwrap()]);
    assert_eq!(o.code, 1);
    for needle in ["node 'topk1' (op TopK, domain '', opset 17)", "node 'custom1' (op MyOp, domain 'com.example'", "node 'nz1' (op NonZero"]
    {
        assert!(o.stderr.contains(needle), "missing {needle:?} in:\n{}", o.stderr);
    }
}

#[test]
fn input_npy_of_wrong_shape_or_dtype() {
    let d = tempfile::tempdir().unwrap();
    let wrong_shape = Tensor::from_f32(vec![1, 3, 32, 32], vec![0.5; 3 * 32 * 32]).unwrap();
    let p = write(d.path(), "shape.npy", &npy::encode(&wrong_shape));
    expect_error(&cnn(), &[format!("input={}", p.display())], "expected FLOAT [1, 3, 96, 96], got FLOAT [1, 3, 32, 32]");
    let wrong_type = Tensor::new(vec![1, 3, 96, 96], dynaspa::TensorData::F64(vec![0.25; 3 * 96 * 96])).unwrap();
    let p = write(d.path(), "dtype.npy", &npy::encode(&wrong_type));
    expect_error(&cnn(), &[format!("input={}", p.display())], "expected FLOAT [1, 3, 96, 96], got DOUBLE");
}

#[test]
fn missing_and_unknown_input_names() {
    let d = tempfile::tempdir().unwrap();
    let p = write(d.path(), "two.onnx", &two_input_model());
    let a = write(d.path(), "a.npy", &npy::encode(&Tensor::from_f32(vec![1, 4], vec![1.0, -2.0, 3.0, -4.0]).unwrap()));
    expect_error(&p, &[format!("a={}", a.display())], "input 'b': required input not given");
    expect_error(&p, &[format!("a={}", a.display()), format!("c={}", a.display())], "input 'c': the model has no such input");
}

#[test]
fn nan_frame() {
    let d = tempfile::tempdir().unwrap();
    let mut v = vec![0.5f32; 3 * 96 * 96];
    v[1234] = f32::NAN;
    let p = write(d.path(), "nan.npy", &npy::encode(&Tensor::from_f32(vec![1, 3, 96, 96], v).unwrap()));
    expect_error(&cnn(), &[format!("input={}", p.display())], "contains NaN or infinite values");
}

#[test]
fn undecodable_image_and_missing_file() {
    let d = tempfile::tempdir().unwrap();
    let p = write(d.path(), "broken.png", b"\x89PNG\r\n\x1a\nnot really");
    expect_error(&cnn(), &[p.display().to_string()], "cannot decode image");
    expect_error(&cnn(), &[d.path().join("absent.npy").display().to_string()], "absent.npy");
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(dynaspa(&["run"]).code, 2);
    assert_eq!(dynaspa(&["frobnicate"]).code, 2);
    assert_eq!(dynaspa(&["inspect", "--no-such-flag", "x.onnx"]).code, 2);
}
