//! Every GPU backend against the CPU backend on the shipped models (the goldens' models, so the
//! three sparse families and the dense CNN and ViT): relative L2 at most 1e-4 per output. Inputs
//! are the goldens' frames with random noise added (binary inputs such as SIGE's edit mask stay
//! as they are), so the test does not only replay the golden cases. GPU outputs are poisoned
//! with NaN before each kernel. Masks are compared first, as in goldens.rs: a thresholded mask
//! can flip where a logit is within rounding of the threshold, which changes what follows it.

mod common;

use dynaspa::io::npy;
use dynaspa::Tensor;

const MAX_REL_L2: f64 = 1e-4;
const MAX_FLIP_RATE: f64 = 1e-3;
const FLIPPED_REL_L2: f64 = 5e-2;

fn names(meta: &serde_json::Value, plural: &str, singular: &str) -> Vec<String> {
    match meta[plural].as_array() {
        Some(a) => a.iter().map(|v| v.as_str().expect("names are strings").to_string()).collect(),
        None => vec![meta[singular].as_str().expect("meta.json names its inputs and outputs").to_string()],
    }
}

/// Adds uniform noise of 5% of the tensor's largest magnitude to a non-binary float tensor.
fn perturb(t: Tensor, state: &mut u64) -> Tensor {
    let Ok(v) = t.as_f32() else { return t };
    if v.iter().all(|&x| x == 0.0 || x == 1.0) {
        return t;
    }
    let amp = 0.05 * v.iter().fold(0f32, |m, x| m.max(x.abs())).max(1e-3);
    let noisy = v
        .iter()
        .map(|&x| {
            *state ^= *state << 13;
            *state ^= *state >> 7;
            *state ^= *state << 17;
            x + amp * (((*state >> 11) as f64 / (1u64 << 53) as f64) as f32 * 2.0 - 1.0)
        })
        .collect();
    Tensor::from_f32(t.shape().to_vec(), noisy).expect("same shape")
}

fn check(model: &str) {
    let gpus: Vec<String> = common::backends().into_iter().filter(|b| b != "cpu").collect();
    if gpus.is_empty() {
        println!("gpu models {model}: no GPU backend in this build/machine");
        return;
    }
    let dir = common::repo_path(&format!("tests/goldens/{model}"));
    let meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).expect("meta.json")).expect("JSON");
    let (inputs, outputs) = (names(&meta, "inputs", "input"), names(&meta, "outputs", "output"));
    let masks: Vec<String> = meta["masks"].as_array().map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect()).unwrap_or_default();
    let path = common::repo_path(meta["model"].as_str().expect("model path"));
    let mut cpu = dynaspa::open(&path, "cpu", &Default::default()).unwrap_or_else(|e| panic!("{model} on cpu: {e}"));
    let cases = meta["cases"].as_array().map_or(0, |c| c.len()).min(3);
    assert!(cases > 0, "{model}: no golden cases");
    for backend in gpus {
        let opts = dynaspa::OpenOptions { poison: true, ..Default::default() };
        let mut gpu = dynaspa::open(&path, &backend, &opts).unwrap_or_else(|e| panic!("{model} on {backend}: {e}"));
        let (mut worst, mut flips, mut cells) = (0f64, 0usize, 0usize);
        let mut state = 0x9e3779b97f4a7c15u64;
        for i in 0..cases {
            let feeds: Vec<(String, Tensor)> =
                inputs.iter().map(|n| (n.clone(), perturb(npy::read(&dir.join(format!("{n}_{i}.npy"))).unwrap(), &mut state))).collect();
            let want = cpu.run(feeds.clone()).unwrap_or_else(|e| panic!("{model} case {i} on cpu: {e}"));
            let got = gpu.run(feeds).unwrap_or_else(|e| panic!("{model} case {i} on {backend}: {e}"));
            let get = |outs: &[(String, Tensor)], n: &str| outs.iter().find(|(o, _)| o == n).unwrap_or_else(|| panic!("{model}: no output {n}")).1.clone();
            let mut case_flips = 0;
            for m in &masks {
                let (g, w) = (get(&got, m), get(&want, m));
                case_flips += g.as_f32().unwrap().iter().zip(w.as_f32().unwrap()).filter(|(a, b)| a != b).count();
                cells += w.len();
            }
            flips += case_flips;
            for o in outputs.iter().filter(|o| !masks.contains(o)) {
                let (g, w) = (get(&got, o), get(&want, o));
                assert_eq!(g.shape(), w.shape(), "{model} case {i} output {o}");
                let err = common::rel_l2(g.as_f32().unwrap(), w.as_f32().unwrap());
                let limit = if case_flips == 0 { MAX_REL_L2 } else { FLIPPED_REL_L2 };
                if case_flips == 0 {
                    worst = worst.max(err);
                }
                assert!(err <= limit, "{model} case {i}: {backend} vs cpu, {o} relative L2 {err:.2e} > {limit:.0e} ({case_flips} mask flips)");
            }
        }
        let rate = if cells > 0 { flips as f64 / cells as f64 } else { 0.0 };
        println!("gpu models {model} [{backend} vs cpu]: {cases} noisy cases, {flips} of {cells} mask positions flipped, worst relative L2 {worst:.2e}");
        assert!(rate <= MAX_FLIP_RATE, "{model}: {backend} vs cpu mask flip rate {rate:.2e}");
    }
}

#[test]
fn cnn_small_gpu_matches_cpu() {
    check("cnn_small");
}

#[test]
fn vit_small_gpu_matches_cpu() {
    check("vit_small");
}

#[test]
fn dynconv_small_gpu_matches_cpu() {
    check("dynconv_small_d30");
}

#[test]
fn avit_small_gpu_matches_cpu() {
    check("avit_small_d30");
}

#[test]
fn sige_small_gpu_matches_cpu() {
    check("sige_small");
}
