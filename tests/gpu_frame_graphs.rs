//! Whole frames recorded as one graph and replayed (`GpuExecutable::set_frame_graphs`): every
//! shipped model, over frames that alternate between two input sets so the members its sparse
//! ops pick alternate too, equals the CPU on every frame, recorded, replayed or run launch by
//! launch. Outputs are poisoned with NaN before each step, and the poison fills are part of the
//! recorded frame, so a replay that skipped a step's work shows. CUDA must replay frames from
//! its graphs (and record every frame it tries); backends without graphs run every frame
//! launch by launch.

mod common;
#[path = "common/model_inputs.rs"]
mod model_inputs;

use dynaspa::backends::gpu::{GpuDevice, GpuExecutable, GpuOptions};
use dynaspa::backends::SparseConfig;
use dynaspa::runtime::backend::Executable;
use dynaspa::runtime::graph::sparse_detect::{detect_sparse_regions, SparseOptions};
use std::sync::Arc;

const MAX_REL_L2: f64 = 1e-4;
/// Frames per model: the first selects with exact counts; each set of picks is recorded the
/// second time it comes and replayed after, so eight frames replay at least three.
const FRAMES: usize = 8;

#[allow(dead_code)]
fn check<D: GpuDevice + 'static>(dev: Arc<D>, backend: &str) {
    let models = model_inputs::shipped_models();
    let mut seed = common::seed();
    for model in &models {
        let name = model.file_name().unwrap().to_string_lossy().to_string();
        let mut cpu = common::open_on("cpu").open(model).unwrap();
        let mut sets = model_inputs::input_sets(model, cpu.graph(), &mut seed);
        sets.truncate(2);
        let want: Vec<_> = sets.iter().map(|f| cpu.run(f.clone()).unwrap()).collect();
        let mut g = dynaspa::load_graph(model, &Default::default()).unwrap();
        detect_sparse_regions(&mut g, &SparseOptions::default());
        let opts = GpuOptions { poison: true, sparse: SparseConfig::from_env(), ..Default::default() };
        let mut exe = GpuExecutable::compile(dev.clone(), backend, &g, &opts).unwrap_or_else(|e| panic!("{name} on {backend}: {e}"));
        exe.set_frame_graphs(true);
        for f in 0..FRAMES {
            let s = f % sets.len();
            let inputs: Vec<_> = g
                .inputs
                .iter()
                .map(|&v| {
                    sets[s]
                        .iter()
                        .find(|(n, _)| *n == g.values[v].name)
                        .unwrap_or_else(|| panic!("{name}: input {}", g.values[v].name))
                        .1
                        .clone()
                })
                .collect();
            let got = exe.run(&inputs).unwrap_or_else(|e| panic!("{name} frame {f} on {backend}: {e}"));
            let how = if exe.last_report().unwrap().replayed { "replayed" } else { "launched" };
            for (o, (n, w)) in got.iter().zip(&want[s]) {
                let (o, w) = (o.as_f32().unwrap(), w.as_f32().unwrap());
                assert!(o.iter().all(|v| v.is_finite()), "{name} frame {f} ({how}) on {backend}: {n} has NaN or infinity");
                let err = common::rel_l2(o, w);
                assert!(err <= MAX_REL_L2, "{name} frame {f} ({how}) on {backend}: output {n} relative L2 {err:.2e} against the CPU");
            }
        }
        let st = exe.frame_graph_stats();
        println!("{name} [{backend}]: {st:?}");
        if backend == "cuda" {
            assert!(st.refused == 0 && st.recorded >= 1 && st.replayed >= 3, "{name} on cuda: {st:?}");
        } else {
            assert!(st.recorded == 0 && st.replayed == 0 && st.plain == FRAMES, "{name} on {backend}: {st:?}");
        }
    }
}

backend_test!(every_frame_equals_the_cpu_recorded_replayed_or_launch_by_launch, [opencl, cuda], |backend| {
    with_gpu_device!(backend, |dev| check(dev, backend))
});
