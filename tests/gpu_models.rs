//! Every shipped model (models/*.onnx) on every GPU backend agrees with the CPU backend within
//! relative L2 1e-4 on every output, on the golden inputs of the model where there are goldens
//! and on random inputs otherwise (their seed printed; `DYNASPA_TEST_SEED` replays it). GPU
//! outputs are poisoned with NaN before each kernel.

mod common;
#[path = "common/model_inputs.rs"]
mod model_inputs;

use model_inputs::input_sets;

const MAX_REL_L2: f64 = 1e-4;

backend_test!(every_shipped_model_agrees_with_the_cpu, gpus, |backend| every_shipped_model_agrees_with_the_cpu(backend));

fn every_shipped_model_agrees_with_the_cpu(backend: &str) {
    let models = model_inputs::shipped_models();
    let mut seed = common::seed();
    for model in &models {
        let name = model.file_name().unwrap().to_string_lossy().to_string();
        let mut cpu = common::open_on("cpu").open(model).unwrap();
        let sets = input_sets(model, cpu.graph(), &mut seed);
        let mut gpu = common::poisoned(backend).open(model).unwrap_or_else(|e| panic!("{name} on {backend}: {e}"));
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
