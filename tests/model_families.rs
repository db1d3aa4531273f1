//! The DynConv / A-ViT / SIGE mask datasets (models/masks/*.dsm) against the models and goldens
//! they were made from: every dataset loads through `dynaspa_runtime::sparsity`, has at least 200
//! frames, names sparse ops that exist in its model with the mask sizes the model produces, and
//! holds the same masks as the goldens where both cover the same frame.

mod common;

use dynaspa::io::npy;
use dynaspa::runtime::onnx::parse_model;
use dynaspa::runtime::sparsity::{BitMask, MaskDataset};
use std::collections::HashMap;

fn datasets() -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(common::repo_path("models/masks"))
        .expect("models/masks")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "dsm"))
        .collect();
    v.sort();
    v
}

/// Static dims (batch excluded) of every graph input and output, and the node names -> op type.
struct ModelInfo {
    dims: HashMap<String, Vec<usize>>,
    nodes: HashMap<String, String>,
}

fn model_info(path: &std::path::Path) -> ModelInfo {
    let m = parse_model(&std::fs::read(path).unwrap()).unwrap();
    let mut dims = HashMap::new();
    for vi in m.graph.input.iter().chain(m.graph.output.iter()) {
        let d = vi.type_.tensor_type().shape.dim.iter().skip(1).map(|d| d.dim_value() as usize).collect();
        dims.insert(vi.name().to_string(), d);
    }
    let nodes = m.graph.node.iter().map(|n| (n.name().to_string(), n.op_type().to_string())).collect();
    ModelInfo { dims, nodes }
}

fn golden_mask(path: &std::path::Path, prefix: usize, h: usize, w: usize) -> BitMask {
    let t = npy::read(path).unwrap();
    let v = t.as_f32().unwrap();
    assert_eq!(v.len(), prefix + h * w, "{}", path.display());
    assert!(v[..prefix].iter().all(|&x| x == 1.0), "{}: prefix tokens not active", path.display());
    BitMask::from_bools(h, w, &v[prefix..].iter().map(|&x| x > 0.5).collect::<Vec<_>>()).unwrap()
}

#[test]
fn mask_datasets_load_and_fit_their_models() {
    let all = datasets();
    for fam in ["dynconv", "avit", "sige"] {
        assert!(all.iter().any(|p| p.file_name().unwrap().to_str().unwrap().starts_with(fam)), "no mask dataset for {fam} in models/masks");
    }
    for path in all {
        let d = MaskDataset::open(&path).unwrap_or_else(|e| panic!("{e}"));
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(d.n_frames() >= 200, "{name}: {} frames", d.n_frames());
        assert!(!d.ops().is_empty(), "{name}: no ops");
        let target = d.meta()["density_target"].as_f64().expect("density_target");
        // mean density over the ops and frames, as the producers report it
        let mut sum = 0.0;
        for f in 0..d.n_frames() {
            for (_, m) in d.frame_op_masks(f).unwrap() {
                sum += m.density();
            }
        }
        let mean = sum / (d.n_frames() * d.ops().len()) as f64;
        let model = common::repo_path(d.meta()["model"].as_str().unwrap());
        println!(
            "{name}: {} frames, {} maps, {} ops, mean op density {mean:.3} (target {target})",
            d.n_frames(),
            d.maps().len(),
            d.ops().len()
        );
        let base_mean: f64 = (0..d.n_frames())
            .flat_map(|f| (0..d.maps().len()).map(move |m| (f, m)))
            .map(|(f, m)| d.map_mask(f, m).unwrap().density())
            .sum::<f64>()
            / (d.n_frames() * d.maps().len()) as f64;
        assert!(
            (base_mean - target).abs() < 0.12 || (mean - target).abs() < 0.12,
            "{name}: densities {base_mean:.3}/{mean:.3}, target {target}"
        );
        if !model.exists() {
            println!("  ({} is not committed: op names not checked)", model.display());
            continue;
        }
        let info = model_info(&model);
        for op in d.ops() {
            let t = info.nodes.get(&op.name).unwrap_or_else(|| panic!("{name}: op {} not in {}", op.name, model.display()));
            assert!(["Conv", "ConvTranspose", "MatMul"].contains(&t.as_str()), "{name}: {} is a {t}", op.name);
        }
        for map in d.maps() {
            let dims = info.dims.get(&map.name).unwrap_or_else(|| panic!("{name}: map {} is no graph input/output", map.name));
            let spatial: usize = dims.iter().product();
            assert_eq!(spatial, map.prefix_tokens + map.height * map.width, "{name}: map {} vs model dims {dims:?}", map.name);
            if map.prefix_tokens == 0 {
                assert_eq!(&dims[dims.len() - 2..], &[map.height, map.width], "{name}: map {}", map.name);
            }
        }
    }
}

/// Golden frames that are also dataset frames: the dataset holds the golden's masks.
#[test]
fn mask_datasets_agree_with_goldens() {
    for (model, golden) in [("dynconv_small_d30", "dynconv_small_d30"), ("avit_small_d30", "avit_small_d30")] {
        let d = MaskDataset::open(common::repo_path(&format!("models/masks/{model}.dsm"))).unwrap();
        let dir = common::repo_path(&format!("tests/goldens/{golden}"));
        let meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap();
        let frames: Vec<&str> = d.meta()["frames"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        let mut matched = 0;
        for case in meta["cases"].as_array().unwrap() {
            let img = case["image"].as_str().unwrap();
            let Some(f) = frames.iter().position(|p| *p == img) else { continue };
            let i = case["index"].as_u64().unwrap();
            for (mi, map) in d.maps().iter().enumerate() {
                let want = golden_mask(&dir.join(format!("{}_{i}.npy", map.name)), map.prefix_tokens, map.height, map.width);
                assert_eq!(d.map_mask(f, mi).unwrap(), &want, "{model} frame {img} map {}", map.name);
            }
            for (oi, op) in d.ops().iter().enumerate() {
                if op.dilate > 1 {
                    let map = &d.maps()[op.map];
                    let p = dir.join(format!("{}_dil_{i}.npy", map.name));
                    let want = golden_mask(&p, 0, op.height, op.width);
                    assert_eq!(d.op_mask(f, oi).unwrap(), want, "{model} frame {img} op {}", op.name);
                }
            }
            matched += 1;
        }
        assert!(matched >= 2, "{model}: only {matched} golden frames are dataset frames");
        println!("{model}: {matched} golden frames found in the dataset with identical masks");
    }
}

/// SIGE: the per-resolution masks the graph computes from its mask input equal the loader's
/// transform of that input (max-pool by 2^r, then 3x3 dilation), on the golden edit pairs.
#[test]
fn sige_level_masks_follow_the_dataset_rule() {
    let d = MaskDataset::open(common::repo_path("models/masks/sige_small_d30.dsm")).unwrap();
    let dir = common::repo_path("tests/goldens/sige_small");
    let map = &d.maps()[0];
    for i in 0..4 {
        let base = golden_mask(&dir.join(format!("mask_{i}.npy")), 0, map.height, map.width);
        for (level, r) in [(0, 1), (1, 2), (2, 4)] {
            let want = golden_mask(&dir.join(format!("mask_r{level}_{i}.npy")), 0, map.height / r, map.width / r);
            assert_eq!(base.max_pool(r).unwrap().dilate(3).unwrap(), want, "case {i} level {level}");
        }
    }
    for op in d.ops() {
        assert_eq!(op.dilate, 3, "{}", op.name);
        assert!([1, 2, 4].contains(&op.reduce), "{}", op.name);
    }
}
