//! Stock exports of common vision models (torchvision, timm, a plain U-Net) from both PyTorch
//! exporters load and match ONNX Runtime on the CPU backend: relative L2 error at most 1e-4 on a
//! real frame.
//!
//! tests/classic/<model>/ holds each export's graph with its large weights as external data in
//! `weights.bin`, which is not committed: `recipe.json` regenerates it (splitmix64, as in
//! tests/classic/make.py, which also wrote the goldens). Each test writes the weights and a copy of
//! the graph into a temporary folder and loads from there, so external data is read for real.

#[path = "common/classic.rs"]
mod classic;
mod common;

use classic::{generate, json, prepare, uniform};
use dynaspa::io::{image, npy};

const MAX_REL_L2: f64 = 1e-4;

fn check(model: &str, file: &str) {
    let p = prepare(model, file, true);
    let mut s = common::poisoned("cpu").open(&p.model).unwrap_or_else(|e| panic!("{model} {file}: {e}"));
    let floats = |k: &str| p.meta[k].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect::<Vec<_>>();
    let frame = common::repo_path(p.meta["frame"].as_str().unwrap());
    let x = image::load_for_input(&frame, &[1, 3, 224, 224], &floats("mean"), &floats("std")).unwrap();
    let input = p.export["input"].as_str().unwrap().to_string();
    let outs = s.run(vec![(input, x)]).unwrap_or_else(|e| panic!("{model} {file}: {e}"));
    let want = npy::read(&p.dir.join(p.export["golden"].as_str().unwrap())).unwrap();
    let name = p.export["output"].as_str().unwrap();
    let got = &outs.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{model} {file}: no output {name}")).1;
    assert_eq!(got.shape(), want.shape(), "{model} {file}");
    let (g, w) = (got.as_f32().unwrap(), want.as_f32().unwrap());
    let err = common::rel_l2(g, w);
    println!("{model} {file} (opset {}): rel L2 {err:.2e}", p.export["opset"]);
    assert!(err <= MAX_REL_L2, "{model} {file}: rel L2 {err:.3e} > {MAX_REL_L2:e}");
}

macro_rules! classic {
    ($($(#[$attr:meta])* $test:ident: $model:literal, $file:literal;)*) => {
        $(
            #[test]
            $(#[$attr])*
            fn $test() {
                check($model, $file);
            }
        )*
    };
}

classic! {
    resnet18_from_torchscript_at_opset_17_matches_onnx_runtime: "resnet18", "torchscript17.onnx";
    resnet18_from_torchscript_at_opset_13_matches_onnx_runtime: "resnet18", "torchscript13.onnx";
    resnet18_from_dynamo_matches_onnx_runtime: "resnet18", "dynamo.onnx";
    resnet50_from_torchscript_at_opset_17_matches_onnx_runtime: "resnet50", "torchscript17.onnx";
    resnet50_from_torchscript_at_opset_13_matches_onnx_runtime: "resnet50", "torchscript13.onnx";
    resnet50_from_dynamo_matches_onnx_runtime: "resnet50", "dynamo.onnx";
    mobilenet_v2_from_torchscript_at_opset_17_matches_onnx_runtime: "mobilenet_v2", "torchscript17.onnx";
    mobilenet_v2_from_torchscript_at_opset_13_matches_onnx_runtime: "mobilenet_v2", "torchscript13.onnx";
    mobilenet_v2_from_dynamo_matches_onnx_runtime: "mobilenet_v2", "dynamo.onnx";
    mobilenet_v3_large_from_torchscript_at_opset_17_matches_onnx_runtime: "mobilenet_v3_large", "torchscript17.onnx";
    mobilenet_v3_large_from_torchscript_at_opset_13_matches_onnx_runtime: "mobilenet_v3_large", "torchscript13.onnx";
    mobilenet_v3_large_from_dynamo_matches_onnx_runtime: "mobilenet_v3_large", "dynamo.onnx";
    efficientnet_b0_from_torchscript_at_opset_17_matches_onnx_runtime: "efficientnet_b0", "torchscript17.onnx";
    efficientnet_b0_from_torchscript_at_opset_13_matches_onnx_runtime: "efficientnet_b0", "torchscript13.onnx";
    efficientnet_b0_from_dynamo_matches_onnx_runtime: "efficientnet_b0", "dynamo.onnx";
    convnext_tiny_from_torchscript_at_opset_17_matches_onnx_runtime: "convnext_tiny", "torchscript17.onnx";
    convnext_tiny_from_torchscript_at_opset_13_matches_onnx_runtime: "convnext_tiny", "torchscript13.onnx";
    convnext_tiny_from_dynamo_matches_onnx_runtime: "convnext_tiny", "dynamo.onnx";
    regnet_y_400mf_from_torchscript_at_opset_17_matches_onnx_runtime: "regnet_y_400mf", "torchscript17.onnx";
    regnet_y_400mf_from_torchscript_at_opset_13_matches_onnx_runtime: "regnet_y_400mf", "torchscript13.onnx";
    regnet_y_400mf_from_dynamo_matches_onnx_runtime: "regnet_y_400mf", "dynamo.onnx";
    deit_small_from_torchscript_at_opset_17_matches_onnx_runtime: "deit_small", "torchscript17.onnx";
    deit_small_from_torchscript_at_opset_14_matches_onnx_runtime: "deit_small", "torchscript14.onnx";
    deit_small_from_dynamo_matches_onnx_runtime: "deit_small", "dynamo.onnx";
    swin_tiny_from_torchscript_at_opset_17_matches_onnx_runtime: "swin_tiny", "torchscript17.onnx";
    swin_tiny_from_torchscript_at_opset_13_matches_onnx_runtime: "swin_tiny", "torchscript13.onnx";
    swin_tiny_from_dynamo_matches_onnx_runtime: "swin_tiny", "dynamo.onnx";
    unet_from_torchscript_at_opset_17_matches_onnx_runtime: "unet", "torchscript17.onnx";
    unet_from_torchscript_at_opset_13_matches_onnx_runtime: "unet", "torchscript13.onnx";
    unet_from_dynamo_matches_onnx_runtime: "unet", "dynamo.onnx";
}

/// A FLOAT16 export (tests/classic/half/, make_half.py): loads widened to fp32 on the CPU and
/// matches ONNX Runtime on the same graph widened in Python.
fn check_half(file: &str) {
    let dir = common::repo_path("tests/classic/half");
    let meta = json(&dir.join("meta.json"));
    let export = meta["exports"].as_array().unwrap().iter().find(|e| e["file"] == file).unwrap_or_else(|| panic!("no export {file}"));
    let mut s = common::poisoned("cpu").open(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    assert!(s.graph().stored_half, "{file}: the graph does not record that the file stores FLOAT16");
    let input = export["input"].as_str().unwrap().to_string();
    let iv = s.graph().find_value(&input).unwrap_or_else(|| panic!("{file}: no input {input}"));
    assert_eq!(s.graph().values[iv].dtype, dynaspa::DType::F32, "{file}: a FLOAT16 input is exchanged as FLOAT");
    let frame = common::repo_path(meta["frame"].as_str().unwrap());
    let (mean, std) = ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]);
    let x = image::load_for_input(&frame, &[1, 3, 224, 224], &mean, &std).unwrap();
    let outs = s.run(vec![(input, x)]).unwrap_or_else(|e| panic!("{file}: {e}"));
    let want = npy::read(&dir.join(export["golden"].as_str().unwrap())).unwrap();
    let name = export["output"].as_str().unwrap();
    let got = &outs.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{file}: no output {name}")).1;
    assert_eq!(got.shape(), want.shape(), "{file}");
    let err = common::rel_l2(got.as_f32().unwrap(), want.as_f32().unwrap());
    println!("half {file}: rel L2 {err:.2e}");
    assert!(err <= MAX_REL_L2, "{file}: rel L2 {err:.3e} > {MAX_REL_L2:e}");
}

macro_rules! half {
    ($($test:ident: $model:literal, $file:literal;)*) => {
        $(
            #[test]
            fn $test() {
                check_half($file);
            }
        )*
    };
}

half! {
    mobilenet_v2_stored_in_float16_loads_and_matches_onnx_runtime: "half", "mobilenet_v2_w035_torchscript.onnx";
    unet_stored_in_float16_from_torchscript_loads_and_matches_onnx_runtime: "half", "unet_torchscript.onnx";
    unet_stored_in_float16_from_dynamo_loads_and_matches_onnx_runtime: "half", "unet_dynamo.onnx";
}

#[test]
fn every_committed_export_has_a_test() {
    let src = std::fs::read_to_string(common::repo_path("tests/classic_models.rs")).unwrap();
    for entry in std::fs::read_dir(common::repo_path("tests/classic")).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.join("meta.json").exists() {
            continue;
        }
        let model = dir.file_name().unwrap().to_str().unwrap().to_string();
        for e in json(&dir.join("meta.json"))["exports"].as_array().unwrap() {
            let pair = format!("\"{model}\", {};", e["file"]);
            assert!(src.contains(&pair), "tests/classic/{model}/{} has no test", e["file"]);
        }
    }
}

#[test]
fn a_missing_weights_file_is_an_error_naming_the_tensor_and_the_file() {
    let p = prepare("unet", "dynamo.onnx", false);
    let e = dynaspa::load_graph(&p.model, &Default::default()).err().expect("loads without its weights");
    let msg = e.to_string();
    assert!(msg.contains("initializer '") && msg.contains("weights.bin") && msg.contains("cannot open"), "{msg}");
}

#[test]
fn a_model_with_external_data_given_as_bytes_is_refused() {
    let p = prepare("unet", "torchscript17.onnx", true);
    let bytes = std::fs::read(&p.model).unwrap();
    let msg = dynaspa::load_graph_bytes(&bytes, &Default::default()).err().expect("loads from bytes").to_string();
    assert!(msg.contains("given as bytes") && msg.contains("weights.bin"), "{msg}");
    // The same bytes load once told where the data is.
    let opts = dynaspa::LoadOptions { model_dir: Some(p.model.parent().unwrap().to_path_buf()), ..Default::default() };
    dynaspa::load_graph_bytes(&bytes, &opts).unwrap();
}

#[test]
fn the_weight_generator_matches_the_python_one() {
    // splitmix64 outputs 1 and 2 of seed 0 are 0xE220A8397B1DCDAF and 0x6E789E6AA1B965F4 (the
    // generator's published reference values); their top 24 bits give u = 0xE220A8 / 2^24, ...
    let v: Vec<f32> = uniform(0, 2).collect();
    assert_eq!(v, vec![0xE220A8 as f32 / 8_388_608.0 - 1.0, 0x6E789E as f32 / 8_388_608.0 - 1.0]);
    let w = generate(&serde_json::json!({"seed": 0, "count": 4, "mean": 0.5, "half": [1.0, 0.0]}));
    assert_eq!(w, vec![0.5 + v[0], 0.5 + v[1], 0.5, 0.5], "one half-width per row");
}
