//! tests/classic/: stock exports whose large weights are regenerated from a recipe
//! (splitmix64, as tests/classic/make.py does) into a temporary folder the test loads from.
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};

pub fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `count` values uniform in [-1, 1) from splitmix64 outputs 1..=count of `seed` (their top 24
/// bits, exact in f32), the same arithmetic as make.py's numpy code.
pub fn uniform(seed: u64, count: usize) -> impl Iterator<Item = f32> {
    (1..=count as u64).map(move |i| {
        let mut z = seed.wrapping_add(i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let u = (z >> 40) as f32 * (1.0 / 16_777_216.0);
        u * 2.0 - 1.0
    })
}

/// A recipe tensor's values, `mean + half * v`; `half` is one number or one per row (first
/// dimension), rows being of equal length.
pub fn generate(t: &Value) -> Vec<f32> {
    let count = t["count"].as_u64().unwrap() as usize;
    let mean = t["mean"].as_f64().unwrap() as f32;
    let halves: Vec<f32> = match &t["half"] {
        Value::Array(a) => a.iter().map(|h| h.as_f64().unwrap() as f32).collect(),
        h => vec![h.as_f64().expect("half is a number or a list") as f32],
    };
    assert_eq!(count % halves.len(), 0, "{t}: rows of unequal length");
    let row = count / halves.len();
    uniform(t["seed"].as_u64().unwrap(), count).enumerate().map(|(i, v)| mean + halves[i / row] * v).collect()
}

/// Writes the model's weights file into `dir` from its recipe.
fn write_weights(model_dir: &Path, size: usize, dir: &Path) {
    let recipe = json(&model_dir.join("recipe.json"));
    let mut bytes = vec![0u8; size];
    for t in recipe["tensors"].as_array().expect("tensors") {
        let (offset, count) = (t["offset"].as_u64().unwrap() as usize, t["count"].as_u64().unwrap() as usize);
        let out = &mut bytes[offset..offset + 4 * count];
        for (c, v) in out.chunks_exact_mut(4).zip(generate(t)) {
            c.copy_from_slice(&v.to_le_bytes());
        }
    }
    std::fs::write(dir.join(recipe["file"].as_str().unwrap()), bytes).unwrap();
}

pub struct Prepared {
    _tmp: tempfile::TempDir,
    pub model: PathBuf,
    pub export: Value,
    pub meta: Value,
    pub dir: PathBuf,
}

pub fn prepare(model: &str, file: &str, with_weights: bool) -> Prepared {
    let dir = crate::common::repo_path(&format!("tests/classic/{model}"));
    let meta = json(&dir.join("meta.json"));
    let export = meta["exports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["file"] == file)
        .unwrap_or_else(|| panic!("{model}: no export {file} in meta.json"))
        .clone();
    let tmp = tempfile::tempdir().unwrap();
    if with_weights {
        write_weights(&dir, meta["weights_bytes"].as_u64().unwrap() as usize, tmp.path());
    }
    let copy = tmp.path().join(file);
    std::fs::copy(dir.join(file), &copy).unwrap();
    Prepared { _tmp: tmp, model: copy, export, meta, dir }
}
