//! `dynaspa inspect`: what a model is made of and what it will need.

use super::InspectArgs;
use dynaspa::runtime::plan;
use dynaspa::LoadOptions;

fn mib(b: usize) -> String {
    format!("{:.2} MiB", b as f64 / (1024.0 * 1024.0))
}

pub fn inspect(a: InspectArgs) -> dynaspa::Result<()> {
    let opts = LoadOptions { batch: a.batch, ..Default::default() };
    let g = dynaspa::load_graph(&a.model, &opts)?;
    let mem = plan::plan(&g);
    let io = |ids: &[usize]| -> Vec<serde_json::Value> {
        ids.iter()
            .map(|&i| {
                let v = &g.values[i];
                serde_json::json!({"name": v.name, "dtype": v.dtype.to_string(), "shape": v.shape})
            })
            .collect()
    };
    let ops = g.op_histogram();
    if a.json {
        let j = serde_json::json!({
            "model": a.model.display().to_string(),
            "opset": g.opset,
            "inputs": io(&g.inputs),
            "outputs": io(&g.outputs),
            "nodes": g.nodes.len(),
            "ops": ops.iter().map(|(k, v)| (k.clone(), serde_json::json!(v))).collect::<serde_json::Map<_, _>>(),
            "parameters": g.onnx_parameters,
            "parameters_after_folding": g.parameter_count(),
            "memory": {
                "constant_bytes": mem.constant_bytes,
                "peak_activation_bytes": mem.peak_activation_bytes,
                "peak_total_bytes": mem.total_peak_bytes(),
                "peak_at_node": mem.peak_at_node,
            },
            "metadata": g.metadata,
        });
        println!("{}", serde_json::to_string_pretty(&j).unwrap_or_default());
        return Ok(());
    }
    println!("model   {} (opset {})", a.model.display(), g.opset);
    for (label, ids) in [("input ", &g.inputs), ("output", &g.outputs)] {
        for &i in ids.iter() {
            let v = &g.values[i];
            println!("{label}  {}  {} {:?}", v.name, v.dtype, v.shape);
        }
    }
    println!("nodes   {} after folding and fusion", g.nodes.len());
    for (op, n) in &ops {
        println!("  {op:<24}{n:>5}");
    }
    println!("params  {} ({} after BatchNormalization folding)", g.onnx_parameters, g.parameter_count());
    println!(
        "memory  weights {}, peak activations {}, peak total {}",
        mib(mem.constant_bytes),
        mib(mem.peak_activation_bytes),
        mib(mem.total_peak_bytes())
    );
    Ok(())
}
