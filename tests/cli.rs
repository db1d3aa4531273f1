//! The CLI as a user drives it: run writes every output, inspect reports the model, --help works.

mod common;
#[allow(dead_code)] // the shared builder has helpers only other test files use
#[path = "common/onnx_build.rs"]
mod onnx_build;

use dynaspa::io::npy;
use std::process::Command;

fn dynaspa(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_dynaspa")).args(args).output().expect("binary runs");
    (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn run_npy_input_writes_outputs_equal_to_golden() {
    let d = tempfile::tempdir().unwrap();
    let model = common::repo_path("models/cnn_small.onnx");
    let input = common::repo_path("tests/goldens/cnn_small/input_1.npy");
    let out = d.path().join("out");
    let (code, stdout, stderr) =
        dynaspa(&["run", model.to_str().unwrap(), "--input", &format!("input={}", input.display()), "--output-dir", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("run ") && stdout.contains(" ms"), "no timing line: {stdout}");
    let got = npy::read(&out.join("logits.npy")).unwrap();
    let want = npy::read(&common::repo_path("tests/goldens/cnn_small/logits_1.npy")).unwrap();
    assert!(common::rel_l2(got.as_f32().unwrap(), want.as_f32().unwrap()) < 1e-4);
}

#[test]
fn run_image_input_uses_model_normalisation() {
    let d = tempfile::tempdir().unwrap();
    let model = common::repo_path("models/cnn_small.onnx");
    let photo = common::repo_path("models/frames/photos/chelsea.png");
    let (code, _, stderr) =
        dynaspa(&["run", model.to_str().unwrap(), "--input", photo.to_str().unwrap(), "--output-dir", d.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    // The golden input came from the same photo through PIL's bilinear resize; ours resizes with
    // a triangle filter too, so the logits agree closely but not bit for bit.
    let got = npy::read(&d.path().join("logits.npy")).unwrap();
    let want = npy::read(&common::repo_path("tests/goldens/cnn_small/logits_1.npy")).unwrap();
    let err = common::rel_l2(got.as_f32().unwrap(), want.as_f32().unwrap());
    assert!(err < 0.05, "image path differs from the golden preprocessing: relative L2 {err}");
}

#[test]
fn output_names_are_sanitised_into_file_names() {
    use onnx_build::*;
    let d = tempfile::tempdir().unwrap();
    let m = model(
        vec![node("Relu", "r", &["x"], &["/head/out:0"])],
        vec![value_info("x", 1, &[2, 3])],
        vec![value_info("/head/out:0", 1, &[2, 3])],
        vec![],
    );
    let mp = d.path().join("m.onnx");
    std::fs::write(&mp, m).unwrap();
    let x = dynaspa::Tensor::from_f32(vec![2, 3], vec![1.0, -2.0, 3.0, -4.0, 5.0, -6.0]).unwrap();
    let xp = d.path().join("x.npy");
    std::fs::write(&xp, npy::encode(&x)).unwrap();
    let out = d.path().join("out");
    let (code, _, stderr) =
        dynaspa(&["run", mp.to_str().unwrap(), "--input", &format!("x={}", xp.display()), "--output-dir", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let y = npy::read(&out.join("_head_out_0.npy")).expect("sanitised file name");
    assert_eq!(y.as_f32().unwrap(), &[1.0, 0.0, 3.0, 0.0, 5.0, 0.0]);
}

#[test]
fn inspect_reports_model() {
    let model = common::repo_path("models/vit_small.onnx");
    let (code, stdout, stderr) = dynaspa(&["inspect", model.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let j: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(j["inputs"][0]["shape"], serde_json::json!([1, 3, 64, 64]));
    assert_eq!(j["outputs"][0]["name"], "logits");
    assert!(j["parameters"].as_u64().unwrap() > 100_000);
    assert!(j["ops"]["MatMul"].as_u64().unwrap() >= 8);
    assert!(j["ops"].get("Shape").is_none(), "shape arithmetic should be folded away");
    assert!(j["memory"]["peak_activation_bytes"].as_u64().unwrap() > 0);
    assert_eq!(j["sparse_ops"], serde_json::json!([]), "a dense ViT has no mask");
    let dynconv = common::repo_path("models/dynconv_small_d30.onnx");
    let (code, stdout, stderr) = dynaspa(&["inspect", dynconv.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let j: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    let sparse = j["sparse_ops"].as_array().expect("sparse_ops");
    assert_eq!((sparse.len(), j["compute_ops"].as_u64()), (12, Some(27)));
    let conv1 = sparse.iter().find(|s| s["node"] == "/layer1.0/conv1/Conv").expect("conv1 of layer1.0 is sparse");
    assert_eq!(conv1["op"], "Conv");
    assert_eq!(conv1["kind"], "spatial");
    assert_eq!(conv1["mask"], "mask_layer1_0_dil");
    assert_eq!(conv1["source"], serde_json::json!({"type": "in_graph", "node": "/layer1.0/Greater"}));
    assert_eq!(conv1["dilation"], serde_json::json!([1, 1]));
    assert_eq!(conv1["fill"], "zero");
    assert_eq!(conv1["fused_mul"], true);
    assert_eq!(conv1["output_shape"], serde_json::json!([1, 16, 18, 24]));
    let (code, text, _) = dynaspa(&["inspect", common::repo_path("models/sige_small.onnx").to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(text.contains("sparse ops: 10 of 10 compute ops"), "{text}");
    assert!(text.contains("/up1/ConvTranspose  ConvTranspose  spatial  mask mask_r1  source input (mask)"), "{text}");
    let (code, text, _) = dynaspa(&["inspect", common::repo_path("models/cnn_small.onnx").to_str().unwrap(), "--batch", "4"]);
    assert_eq!(code, 0);
    assert!(text.contains("[4, 3, 96, 96]"), "{text}");
    assert!(!text.lines().any(|l| l.trim_start().starts_with("BatchNormalization")), "BN should be folded into Conv: {text}");
}

#[test]
fn help_on_every_command() {
    for args in
        [vec!["--help"], vec!["run", "--help"], vec!["inspect", "--help"], vec!["profile", "--help"], vec!["bench", "--help"], vec!["help"]]
    {
        let (code, stdout, _) = dynaspa(&args);
        assert_eq!(code, 0, "{args:?}");
        assert!(stdout.contains("Usage"), "{args:?}: {stdout}");
    }
}

#[test]
fn version_names_the_backends_built_in() {
    let (code, stdout, _) = dynaspa(&["--version"]);
    assert_eq!(code, 0);
    // The features this test was built with are the binary's (the default builds all four).
    let built = [("cpu", true), ("cuda", cfg!(feature = "cuda")), ("opencl", cfg!(feature = "opencl")), ("wgpu", cfg!(feature = "wgpu"))];
    let names: Vec<&str> = built.iter().filter(|b| b.1).map(|b| b.0).collect();
    let want = format!("dynaspa {} (backends: {})", env!("CARGO_PKG_VERSION"), names.join(", "));
    assert_eq!(stdout.trim(), want);
}
