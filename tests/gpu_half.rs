//! fp16 on the GPU backends (`Precision::F16`: weights and activations stored as IEEE half,
//! arithmetic in f32): every shipped model, a torchvision MobileNetV2 and a U-Net (both stored in
//! FLOAT16) agree with the CPU's f32 within relative L2 1e-2 (two models measured above it:
//! `MEASURED_ABOVE` says which and why), GPU outputs poisoned with NaN before each kernel (half
//! NaN in half tensors). Where a model computes its masks in the graph, the fraction of mask positions that
//! differ from the f32 masks (the flip rate) is printed and outputs are compared only where no
//! mask flipped. The CPU and wgpu refuse fp16 with an error naming it.

mod common;
#[path = "common/model_inputs.rs"]
mod model_inputs;

use dynaspa::Precision;
use model_inputs::input_sets;

const MAX_REL_L2: f64 = 1e-2;
/// Models measured above `MAX_REL_L2` on PoCL, and their bound: both sit on the floor of half
/// storage itself (`benches/half_floor.py`: ONNX Runtime with every weight and activation
/// rounded to half, RESULTS.md "fp16 on the GPU backends"). The narrow MobileNetV2 (width 0.35,
/// random weights) on random inputs, 1.2e-2 against a floor of 6.8e-3..7.8e-3: 52 layers of
/// half storage on logits that are small differences of large activations. A-ViT, 1.2e-2 with
/// its halting chain kept in f32 (`gpu/wide.rs`), against a floor of up to 1.3e-2 from its
/// activations alone.
const MEASURED_ABOVE: [(&str, f64); 2] = [("mobilenet_v2_w035", 2e-2), ("avit_small", 2e-2)];

backend_test!(every_shipped_model_agrees_with_the_cpu_in_fp16, [opencl, cuda], |backend| shipped_models_in_fp16(backend));
backend_test!(fp16_is_refused_where_it_is_not_computed, [cpu, wgpu], |backend| refused(backend));

fn half(backend: &str) -> dynaspa::SessionBuilder {
    common::poisoned(backend).precision(Precision::F16)
}

fn shipped_models_in_fp16(backend: &str) {
    let mut seed = common::seed();
    let mut failed = Vec::new();
    let mut models = model_inputs::shipped_models();
    // A torchvision MobileNetV2 and a U-Net, both stored in FLOAT16 (loaded widened, computed in
    // fp16 here).
    models.push(common::repo_path("tests/classic/half/mobilenet_v2_w035_torchscript.onnx"));
    models.push(common::repo_path("tests/classic/half/unet_torchscript.onnx"));
    for model in &models {
        let name = model.strip_prefix(common::repo_path("")).unwrap_or(model).display().to_string();
        let g = common::open_on("cpu").load(model).unwrap_or_else(|e| panic!("{name}: {e}"));
        let masks = {
            let mut m: Vec<String> = g.nodes.iter().filter_map(|n| n.sparse.as_ref()).map(|sp| g.values[sp.mask].name.clone()).collect();
            m.sort();
            m.dedup();
            m
        };
        let mut cpu = common::open_on("cpu").fetch(masks.clone()).open(model).unwrap();
        let mut gpu = half(backend).fetch(masks.clone()).open(model).unwrap_or_else(|e| panic!("{name} fp16 on {backend}: {e}"));
        let sets = input_sets(model, &g, &mut seed);
        let (mut worst, mut flips, mut positions, mut compared) = (0f64, 0usize, 0usize, 0usize);
        for (i, feeds) in sets.iter().enumerate() {
            let want = cpu.run(feeds.clone()).unwrap();
            let got = gpu.run(feeds.clone()).unwrap_or_else(|e| panic!("{name} set {i} fp16 on {backend}: {e}"));
            let mut flipped = 0;
            for m in &masks {
                let (w, o) = (cpu.fetched(m).unwrap().as_f32().unwrap(), gpu.fetched(m).unwrap().as_f32().unwrap());
                flipped += w.iter().zip(o).filter(|(a, b)| (**a != 0.0) != (**b != 0.0)).count();
                positions += w.len();
            }
            flips += flipped;
            for ((n, w), (_, o)) in want.iter().zip(&got) {
                assert_eq!(o.shape(), w.shape(), "{name} {n}");
                let (o, w) = (o.as_f32().unwrap(), w.as_f32().unwrap());
                assert!(o.iter().all(|v| v.is_finite()), "{name} set {i} fp16 on {backend}: {n} has NaN or infinity");
                if flipped > 0 {
                    continue;
                }
                let err = common::rel_l2(o, w);
                let bound = MEASURED_ABOVE.iter().find(|(m, _)| name.contains(m)).map_or(MAX_REL_L2, |m| m.1);
                if err > bound {
                    failed.push(format!("{name} set {i} fp16 on {backend}: output {n} relative L2 {err:.2e} against the CPU's f32"));
                }
                worst = worst.max(err);
                compared += 1;
            }
        }
        assert!(compared > 0, "{name} fp16 on {backend}: a mask flipped on every input set, nothing compared");
        let rate = if positions == 0 { "no masks".to_string() } else { format!("mask flip rate {:.2e}", flips as f64 / positions as f64) };
        println!("{name} fp16 [{backend}]: {} input sets, worst relative L2 against the CPU's f32 {worst:.2e}, {rate}", sets.len());
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

fn refused(backend: &str) {
    let model = common::repo_path("models/cnn_small.onnx");
    let e = half(backend).open(&model).err().unwrap_or_else(|| panic!("fp16 on {backend} opened"));
    let text = e.to_string();
    assert!(text.contains("f32") && (text.contains("fp16") || text.contains("f16")), "{backend}: {text}");
    // The same builder at f32 opens: the refusal is the precision's.
    let s = common::open_on(backend).precision(Precision::F32).open(&model);
    assert!(s.is_ok(), "{backend} at f32: {:?}", s.err());
}
