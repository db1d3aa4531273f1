//! Inputs to run a shipped model on: its golden cases, or random draws.

use super::common;
use dynaspa::io::npy;
use dynaspa::runtime::graph::{Graph, MaskSource};
use dynaspa::Tensor;

/// The shipped models (models/*.onnx), sorted; at least five.
pub fn shipped_models() -> Vec<std::path::PathBuf> {
    let mut models: Vec<_> = std::fs::read_dir(common::repo_path("models"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    models.sort();
    assert!(models.len() >= 5, "only {} shipped models", models.len());
    models
}

/// Input sets of a model: the golden cases that name it, else three random draws.
pub fn input_sets(model: &std::path::Path, g: &Graph, seed: &mut u64) -> Vec<Vec<(String, Tensor)>> {
    let rel = model.strip_prefix(common::repo_path("")).unwrap().to_string_lossy().to_string();
    for dir in std::fs::read_dir(common::repo_path("tests/goldens")).unwrap().map(|e| e.unwrap().path()) {
        let Ok(text) = std::fs::read_to_string(dir.join("meta.json")) else {
            continue;
        };
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
