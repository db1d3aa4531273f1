//! Models exported stock from their authors' code (models/authors/: DynConv, A-ViT, SIGE's dense
//! generators; random calibrated weights) against ONNX Runtime goldens (tests/goldens/<model>/)
//! on the CPU backend: relative L2 error at most 1e-4 per graph output.
//!
//! The in-graph masks these models compute are not graph outputs (the files are exported stock);
//! the goldens keep them as `mask_<k>_<case>.npy` for reference (meta.json `graph_masks`). Every
//! case's inputs were chosen with all thresholded values at least 1e-4 from their threshold, so a
//! correct runtime reproduces the masks and hence the outputs.
//!
//! A session runs what sparse detection finds sparsely, with NaN written over every value
//! before its kernel runs. Every model in models/authors/ is listed (models/authors/README.md,
//! "dynaspa today").

mod common;

use dynaspa::io::npy;

const MAX_REL_L2: f64 = 1e-4;

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array().expect("a list of names").iter().map(|s| s.as_str().expect("a name").to_string()).collect()
}

fn check_against_goldens(model: &str) {
    let dir = common::repo_path(&format!("tests/goldens/{model}"));
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).expect("meta.json")).expect("valid JSON");
    let (inputs, outputs) = (strings(&meta["inputs"]), strings(&meta["outputs"]));
    let cases = meta["cases"].as_array().expect("cases").len();
    assert!(cases >= 2, "{model}: only {cases} golden cases");
    let mut session =
        common::poisoned("cpu").open(common::repo_path(meta["model"].as_str().unwrap())).unwrap_or_else(|e| panic!("{model}: {e}"));
    let mut worst = 0f64;
    for i in 0..cases {
        let feeds = inputs.iter().map(|n| (n.clone(), npy::read(&dir.join(format!("{n}_{i}.npy"))).unwrap())).collect();
        let outs = session.run(feeds).unwrap_or_else(|e| panic!("{model} case {i}: {e}"));
        for o in &outputs {
            let got = &outs.iter().find(|(n, _)| n == o).unwrap_or_else(|| panic!("{model}: no output {o}")).1;
            let want = npy::read(&dir.join(format!("{o}_{i}.npy"))).unwrap();
            assert_eq!(got.shape(), want.shape(), "{model} case {i} output {o}");
            let err = common::rel_l2(got.as_f32().unwrap(), want.as_f32().unwrap());
            assert!(err <= MAX_REL_L2, "{model} case {i}: {o} relative L2 {err:.2e} > {MAX_REL_L2:.0e}");
            worst = worst.max(err);
        }
    }
    println!("authors' model {model} [cpu]: {cases} cases, worst relative L2 {worst:.2e}");
}

#[test]
fn gaugan_spade_generator_matches_onnxruntime() {
    check_against_goldens("sige_gaugan_ngf8");
}

#[test]
fn gan_compression_sub_mobile_generator_matches_onnxruntime() {
    check_against_goldens("sige_gc_gaugan_q");
}

#[test]
fn ddpm_unet_with_its_sinusoidal_timestep_embedding_matches_onnxruntime() {
    check_against_goldens("sige_ddpm_unet_c32");
}

#[test]
fn avit_token_halting_forward_matches_onnxruntime() {
    check_against_goldens("avit_act_e96");
}

#[test]
fn dynconv_resnet50_runs_sparse_and_matches_onnxruntime() {
    check_against_goldens("dynconv_resnet50_w025");
}

#[test]
fn dynconv_resnet18_runs_sparse_and_matches_onnxruntime() {
    check_against_goldens("dynconv_resnet18_w025");
}

#[test]
fn dynconv_pose_hourglass_runs_sparse_and_matches_onnxruntime() {
    check_against_goldens("dynconv_hourglass_f48");
}
