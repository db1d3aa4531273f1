//! Real models against ONNX Runtime outputs committed as goldens (tests/goldens/), on every
//! backend: relative L2 error at most 1e-4 per output (or the tolerance in meta.json).
//!
//! meta.json names the model's inputs and outputs (`inputs` / `outputs`, or the single `input` /
//! `output` of the first format) and which outputs are binary masks (`masks`). Files are
//! `<name>_<case>.npy`. Masks are compared first and their flip rate is reported: a threshold
//! can flip where a logit is within rounding of it (the goldens pick frames with a margin, so
//! none is expected). With flips, the other outputs of that case are only held to
//! `FLIPPED_REL_L2` (a flip changes everything downstream of it); without, to the tolerance.

mod common;

use dynaspa::io::npy;

const MAX_REL_L2: f64 = 1e-4;
const MAX_FLIP_RATE: f64 = 1e-3;
const FLIPPED_REL_L2: f64 = 5e-2;

fn names(meta: &serde_json::Value, plural: &str, singular: &str) -> Vec<String> {
    match meta[plural].as_array() {
        Some(a) => a.iter().map(|v| v.as_str().expect("names are strings").to_string()).collect(),
        None => vec![meta[singular].as_str().unwrap_or_else(|| panic!("meta.json lacks '{plural}'/'{singular}'")).to_string()],
    }
}

fn check_model(model: &str, backend: &str) {
    let dir = common::repo_path(&format!("tests/goldens/{model}"));
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).expect("meta.json")).expect("valid JSON");
    let inputs = names(&meta, "inputs", "input");
    let outputs = names(&meta, "outputs", "output");
    let masks: Vec<String> =
        meta["masks"].as_array().map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect()).unwrap_or_default();
    let tol = meta["tolerance_rel_l2"].as_f64().unwrap_or(MAX_REL_L2);
    let cases = meta["cases"].as_array().expect("cases").len();
    assert!(cases >= 4, "{model}: only {cases} golden cases");
    let mut s = common::poisoned(backend)
        .open(common::repo_path(meta["model"].as_str().unwrap()))
        .unwrap_or_else(|e| panic!("{model} on {backend}: {e}"));
    let (mut worst, mut flips, mut cells) = (0f64, 0usize, 0usize);
    for i in 0..cases {
        let feeds = inputs.iter().map(|n| (n.clone(), npy::read(&dir.join(format!("{n}_{i}.npy"))).unwrap())).collect();
        let outs = s.run(feeds).unwrap_or_else(|e| panic!("{model} case {i}: {e}"));
        let get = |n: &str| &outs.iter().find(|(o, _)| o == n).unwrap_or_else(|| panic!("{model}: no output {n}")).1;
        let mut case_flips = 0;
        for m in &masks {
            let (got, want) = (get(m), npy::read(&dir.join(format!("{m}_{i}.npy"))).unwrap());
            assert_eq!(got.shape(), want.shape(), "{model} case {i} mask {m}");
            let (g, w) = (got.as_f32().unwrap(), want.as_f32().unwrap());
            assert!(g.iter().all(|&v| v == 0.0 || v == 1.0), "{model} case {i}: mask {m} is not binary");
            case_flips += g.iter().zip(w).filter(|(a, b)| a != b).count();
            cells += g.len();
        }
        flips += case_flips;
        for o in outputs.iter().filter(|o| !masks.contains(o)) {
            let (got, want) = (get(o), npy::read(&dir.join(format!("{o}_{i}.npy"))).unwrap());
            assert_eq!(got.shape(), want.shape(), "{model} case {i} output {o}");
            let err = common::rel_l2(got.as_f32().unwrap(), want.as_f32().unwrap());
            let limit = if case_flips == 0 { tol } else { FLIPPED_REL_L2 };
            if case_flips == 0 {
                worst = worst.max(err);
            } else {
                println!("golden {model} case {i} [{backend}]: {case_flips} mask positions flipped; {o} relative L2 {err:.2e}");
            }
            assert!(err <= limit, "{model} case {i} on {backend}: {o} relative L2 {err:.2e} > {limit:.0e} ({case_flips} mask flips)");
        }
    }
    let rate = if cells > 0 { flips as f64 / cells as f64 } else { 0.0 };
    println!(
        "golden {model} [{backend}]: {cases} cases, masks {flips} of {cells} positions flipped ({rate:.1e}), worst relative L2 {worst:.2e}"
    );
    assert!(rate <= MAX_FLIP_RATE, "{model} on {backend}: mask flip rate {rate:.2e} > {MAX_FLIP_RATE:.0e}");
}

backend_test!(cnn_small_matches_onnxruntime, |backend| check_model("cnn_small", backend));
backend_test!(vit_small_matches_onnxruntime, |backend| check_model("vit_small", backend));
backend_test!(dynconv_small_matches_onnxruntime, |backend| check_model("dynconv_small_d30", backend));
backend_test!(avit_small_matches_onnxruntime, |backend| check_model("avit_small_d30", backend));
backend_test!(sige_small_matches_onnxruntime, |backend| check_model("sige_small", backend));
