//! `dynaspa inspect`: what a model is made of and what it will need.

use super::InspectArgs;
use dynaspa::runtime::graph::delta;
use dynaspa::runtime::graph::sparse_detect::{self, SparseOptions, SparseRegionInfo};
use dynaspa::runtime::graph::{FillPolicy, MaskKind, MaskSource};
use dynaspa::runtime::plan;
use dynaspa::LoadOptions;

fn mib(b: usize) -> String {
    format!("{:.2} MiB", b as f64 / (1024.0 * 1024.0))
}

pub fn inspect(a: InspectArgs) -> dynaspa::Result<()> {
    let opts = LoadOptions { batch: a.batch, ..Default::default() };
    let mut g = dynaspa::load_graph(&a.model, &opts)?;
    let found = match a.delta {
        // Delta mode's rewrite is what runs; the memory plan below includes what it caches.
        Some(_) => {
            let input = match &a.frame_input {
                Some(name) => name.clone(),
                None => delta::default_frame_input(&g).map_err(dynaspa::Error::Other)?,
            };
            let plan = delta::add_change_map(&mut g, &input, delta::Spread::Window).map_err(|e| dynaspa::Error::Other(format!("delta mode: {e}")))?;
            let reaches = |n: &dynaspa::runtime::graph::Node| n.sparse.is_some() || !sparse_detect::is_compute_op(&n.op);
            let dense = g
                .nodes
                .iter()
                .filter(|n| !reaches(n))
                .map(|n| sparse_detect::DenseOpInfo {
                    node: n.name.clone(),
                    op: n.op.name().to_string(),
                    reason: format!("the change map of '{}' does not reach it", plan.frame_input),
                })
                .collect();
            sparse_detect::Detection { sparse: sparse_detect::sparse_ops(&g), dense }
        }
        // The rest of the report describes the loaded graph, this part what detection makes sparse.
        None => sparse_detect::detect(&mut g.clone(), &SparseOptions::default()),
    };
    let sparse = &found.sparse;
    let compute_ops = g.nodes.iter().filter(|n| sparse_detect::is_compute_op(&n.op)).count();
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
            "stored_half": g.stored_half,
            "parameters_after_folding": g.parameter_count(),
            "memory": {
                "constant_bytes": mem.constant_bytes,
                "peak_activation_bytes": mem.peak_activation_bytes,
                "peak_total_bytes": mem.total_peak_bytes(),
                "peak_at_node": mem.peak_at_node,
                "cached_bytes": mem.cached_bytes,
            },
            "metadata": g.metadata,
            "compute_ops": compute_ops,
            "sparse_ops": sparse.iter().map(sparse_json).collect::<Vec<_>>(),
            "dense_ops": found.dense.iter().map(|d| serde_json::json!({"node": d.node, "op": d.op, "reason": d.reason})).collect::<Vec<_>>(),
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
    if g.stored_half {
        println!("precision  the file stores half-precision floats; computed in fp32 (inputs and outputs exchanged as FLOAT)");
    }
    println!(
        "memory  weights {}, peak activations {}, peak total {}{}",
        mib(mem.constant_bytes),
        mib(mem.peak_activation_bytes),
        mib(mem.total_peak_bytes()),
        if mem.cached_bytes > 0 { format!(" (cached between frames: {})", mib(mem.cached_bytes)) } else { String::new() }
    );
    println!("sparse ops: {} of {} compute ops", sparse.len(), compute_ops);
    for s in sparse {
        println!(
            "  {}  {}  {}  mask {}  source {}  dilation {}x{}  fill {}  {}  {:?}",
            s.node,
            s.op,
            kind_name(s.kind),
            s.mask,
            source_text(&s.source),
            s.dilation[0],
            s.dilation[1],
            fill_name(s.fill),
            if s.fused_mul { "fused" } else { "mul kept" },
            s.output_shape
        );
    }
    if !found.dense.is_empty() {
        println!("dense compute ops: {}", found.dense.len());
        for d in &found.dense {
            println!("  {}  {}  {}", d.node, d.op, d.reason);
        }
    }
    Ok(())
}

fn kind_name(k: MaskKind) -> &'static str {
    match k {
        MaskKind::Spatial => "spatial",
        MaskKind::Token => "token",
    }
}

fn fill_name(f: FillPolicy) -> &'static str {
    match f {
        FillPolicy::Zero => "zero",
        FillPolicy::Cached => "cached",
        FillPolicy::Residual => "residual",
        FillPolicy::Held => "held (whole frames)",
    }
}

fn source_text(s: &MaskSource) -> String {
    match s {
        MaskSource::InGraph { node } => format!("in-graph ({node})"),
        MaskSource::Halting { node } => format!("halting ({node})"),
        MaskSource::ModelInput { name } => format!("input ({name})"),
    }
}

fn sparse_json(s: &SparseRegionInfo) -> serde_json::Value {
    let source = match &s.source {
        MaskSource::InGraph { node } => serde_json::json!({"type": "in_graph", "node": node}),
        MaskSource::Halting { node } => serde_json::json!({"type": "halting", "node": node}),
        MaskSource::ModelInput { name } => serde_json::json!({"type": "model_input", "name": name}),
    };
    serde_json::json!({
        "node": s.node,
        "op": s.op,
        "kind": kind_name(s.kind),
        "mask": s.mask,
        "source": source,
        "dilation": s.dilation,
        "fill": fill_name(s.fill),
        "fused_mul": s.fused_mul,
        "output_shape": s.output_shape,
    })
}
