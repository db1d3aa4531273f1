//! Every shipped model (models/*.onnx) on every GPU backend agrees with the CPU backend within
//! relative L2 1e-4 on every output, on the golden inputs of the model where there are goldens
//! and on random inputs otherwise. GPU outputs are poisoned with NaN before each kernel.

mod common;

use dynaspa::io::npy;
use dynaspa::runtime::graph::MaskSource;
use dynaspa::{OpenOptions, Tensor};

const MAX_REL_L2: f64 = 1e-4;

/// Input sets of a model: the golden cases that name it, else three random draws.
fn input_sets(model: &std::path::Path, s: &dynaspa::Session, seed: &mut u64) -> Vec<Vec<(String, Tensor)>> {
    let rel = model.strip_prefix(common::repo_path("")).unwrap().to_string_lossy().to_string();
    for dir in std::fs::read_dir(common::repo_path("tests/goldens")).unwrap().map(|e| e.unwrap().path()) {
        let Ok(text) = std::fs::read_to_string(dir.join("meta.json")) else { continue };
        let meta: serde_json::Value = serde_json::from_str(&text).unwrap();
        if meta["model"].as_str() != Some(rel.as_str()) {
            continue;
        }
        let inputs: Vec<String> = match meta["inputs"].as_array() {
            Some(a) => a.iter().map(|v| v.as_str().unwrap().to_string()).collect(),
            None => vec![meta["input"].as_str().unwrap().to_string()],
        };
        let cases = meta["cases"].as_array().unwrap().len();
        return (0..cases)
            .map(|i| inputs.iter().map(|n| (n.clone(), npy::read(&dir.join(format!("{n}_{i}.npy"))).unwrap())).collect())
            .collect();
    }
    // No goldens: random inputs, binary where the input is a mask source.
    let g = s.graph();
    let masks: Vec<&str> = g
        .nodes
        .iter()
        .filter_map(|n| match n.sparse.as_ref().map(|sp| &sp.source) {
            Some(MaskSource::ModelInput { name }) => Some(name.as_str()),
            _ => None,
        })
        .collect();
    let mut next = move || {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        (*seed >> 11) as f64 / (1u64 << 53) as f64
    };
    (0..3)
        .map(|_| {
            g.inputs
                .iter()
                .map(|&v| {
                    let val = &g.values[v];
                    let n: usize = val.shape.iter().product();
                    let data: Vec<f32> = if masks.contains(&val.name.as_str()) {
                        (0..n).map(|_| (next() < 0.3) as u8 as f32).collect()
                    } else {
                        (0..n).map(|_| (next() * 2.0 - 1.0) as f32).collect()
                    };
                    (val.name.clone(), Tensor::from_f32(val.shape.clone(), data).unwrap())
                })
                .collect()
        })
        .collect()
}

#[test]
fn every_shipped_model_agrees_with_the_cpu() {
    let gpus: Vec<String> = common::backends().into_iter().filter(|b| b != "cpu").collect();
    let mut models: Vec<_> = std::fs::read_dir(common::repo_path("models"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    models.sort();
    assert!(models.len() >= 5, "only {} shipped models", models.len());
    let mut seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1;
    for model in &models {
        let name = model.file_name().unwrap().to_string_lossy().to_string();
        let mut cpu = dynaspa::open(model, "cpu", &OpenOptions::default()).unwrap();
        let sets = input_sets(model, &cpu, &mut seed);
        for backend in &gpus {
            let opts = OpenOptions { poison: true, ..Default::default() };
            let mut gpu = dynaspa::open(model, backend, &opts).unwrap_or_else(|e| panic!("{name} on {backend}: {e}"));
            let mut worst = 0f64;
            for (i, feeds) in sets.iter().enumerate() {
                let want = cpu.run(feeds.clone()).unwrap();
                let got = gpu.run(feeds.clone()).unwrap_or_else(|e| panic!("{name} set {i} on {backend}: {e}"));
                for ((n, w), (_, o)) in want.iter().zip(&got) {
                    assert_eq!(o.shape(), w.shape(), "{name} {n}");
                    let (o, w) = (o.as_f32().unwrap(), w.as_f32().unwrap());
                    assert!(o.iter().all(|v| v.is_finite()), "{name} set {i} on {backend}: {n} has NaN or infinity");
                    let err = common::rel_l2(o, w);
                    assert!(err <= MAX_REL_L2, "{name} set {i} on {backend}: output {n} relative L2 {err:.2e} against the CPU");
                    worst = worst.max(err);
                }
            }
            println!("{name} [{backend}]: {} input sets, worst relative L2 against the CPU {worst:.2e}", sets.len());
        }
    }
}
