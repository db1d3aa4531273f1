//! Real models against ONNX Runtime outputs committed as goldens (tests/goldens/), on every
//! backend: relative L2 error at most 1e-4 per output.

mod common;

use dynaspa::io::npy;

const MAX_REL_L2: f64 = 1e-4;

fn check_model(model: &str) {
    let dir = common::repo_path(&format!("tests/goldens/{model}"));
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).expect("meta.json")).expect("valid JSON");
    let (input, output) = (meta["input"].as_str().unwrap(), meta["output"].as_str().unwrap());
    let cases = meta["cases"].as_array().expect("cases").len();
    assert!(cases >= 4, "{model}: only {cases} golden cases");
    for backend in common::backends() {
        let mut s = dynaspa::open(common::repo_path(meta["model"].as_str().unwrap()), &backend, &Default::default())
            .unwrap_or_else(|e| panic!("{model} on {backend}: {e}"));
        let mut worst = 0f64;
        for i in 0..cases {
            let x = npy::read(&dir.join(format!("input_{i}.npy"))).unwrap();
            let want = npy::read(&dir.join(format!("{output}_{i}.npy"))).unwrap();
            let outs = s.run(vec![(input.to_string(), x)]).unwrap_or_else(|e| panic!("{model} case {i}: {e}"));
            let got = &outs.iter().find(|(n, _)| n == output).expect("output present").1;
            assert_eq!(got.shape(), want.shape(), "{model} case {i}");
            let err = common::rel_l2(got.as_f32().unwrap(), want.as_f32().unwrap());
            worst = worst.max(err);
            assert!(err <= MAX_REL_L2, "{model} case {i} on {backend}: relative L2 {err:.2e} > {MAX_REL_L2:.0e}");
        }
        println!("golden {model} [{backend}]: {cases} cases, worst relative L2 {worst:.2e}");
    }
}

#[test]
fn cnn_small_matches_onnxruntime() {
    check_model("cnn_small");
}

#[test]
fn vit_small_matches_onnxruntime() {
    check_model("vit_small");
}
