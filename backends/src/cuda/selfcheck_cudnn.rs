//! The cuDNN part of the GPU self-check: dense convs (3x3 stride 1 and 2, 1x1; bias, ReLU,
//! residual; batch 2, and the benchmarks' 40x40 256->256 at batch 1) through cuDNN (forced) against our own kernels and the CPU backend, and
//! sparse ops' dense members through cuDNN with zero and residual fills; random non-zero
//! inputs, every output poisoned with NaN before its kernels run. Relative L2 at most 1e-4:
//! the reductions are long enough (576 to 2304 terms) that TF32 tensor-core math would not pass.

use super::cudnn::stats;
use super::cudnn_lib;
use super::device::CudaDevice;
use super::selfcheck_kit::{rel_l2, Outcome, Rng};
use crate::cpu::CpuBackend;
use crate::gpu::{GpuExecutable, GpuOptions, VendorPolicy};
use crate::{ForceMember, SparseConfig};
use dynaspa_runtime::backend::{Backend, Executable};
use dynaspa_runtime::graph::{Activation, AutoPad, Conv, FillPolicy, Graph, MaskKind, MaskSource, Node, Op, SparseSpec, Value, Window};
use dynaspa_runtime::{DType, Tensor};
use std::sync::Arc;

struct Case {
    name: &'static str,
    n: usize,
    cin: usize,
    cout: usize,
    hw: usize,
    k: usize,
    s: usize,
    bias: bool,
    residual: bool,
    relu: bool,
    fill: Option<FillPolicy>,
}

const CASES: [Case; 8] = [
    Case { n: 2, name: "3x3 s1 bias+relu", cin: 64, cout: 96, hw: 24, k: 3, s: 1, bias: true, residual: false, relu: true, fill: None },
    Case {
        n: 2,
        name: "3x3 s1 bias+residual+relu",
        cin: 64,
        cout: 64,
        hw: 20,
        k: 3,
        s: 1,
        bias: true,
        residual: true,
        relu: true,
        fill: None,
    },
    Case { n: 2, name: "3x3 s2 bias", cin: 128, cout: 64, hw: 26, k: 3, s: 2, bias: true, residual: false, relu: false, fill: None },
    Case { n: 2, name: "1x1 residual", cin: 256, cout: 128, hw: 14, k: 1, s: 1, bias: false, residual: true, relu: false, fill: None },
    Case { n: 2, name: "1x1 plain", cin: 96, cout: 80, hw: 17, k: 1, s: 1, bias: false, residual: false, relu: false, fill: None },
    Case {
        n: 2,
        name: "3x3 s1 dense member, zero fill",
        cin: 64,
        cout: 96,
        hw: 24,
        k: 3,
        s: 1,
        bias: true,
        residual: false,
        relu: true,
        fill: Some(FillPolicy::Zero),
    },
    Case {
        n: 1,
        name: "3x3 s1 40x40 256->256 dense member",
        cin: 256,
        cout: 256,
        hw: 40,
        k: 3,
        s: 1,
        bias: true,
        residual: false,
        relu: true,
        fill: Some(FillPolicy::Zero),
    },
    Case {
        n: 2,
        name: "3x3 s1 dense member, residual fill",
        cin: 64,
        cout: 64,
        hw: 20,
        k: 3,
        s: 1,
        bias: true,
        residual: true,
        relu: true,
        fill: Some(FillPolicy::Residual),
    },
];

fn value(g: &mut Graph, name: &str, shape: Vec<usize>, constant: Option<Vec<f32>>) -> dynaspa_runtime::Result<usize> {
    let constant = match constant {
        Some(v) => Some(Arc::new(Tensor::from_f32(shape.clone(), v)?)),
        None => None,
    };
    g.values.push(Value { name: name.into(), dtype: DType::F32, shape, constant });
    Ok(g.values.len() - 1)
}

/// The case's conv as a one-node graph, and random inputs for it (a mask of about 40% for a
/// sparse case).
fn build(c: &Case, n: usize, rng: &mut Rng) -> dynaspa_runtime::Result<(Graph, Vec<Tensor>)> {
    let mut g = Graph { name: c.name.into(), opset: 17, ..Default::default() };
    let o = (c.hw + 2 * (c.k / 2) - c.k) / c.s + 1;
    let scale = 1.0 / ((c.cin * c.k * c.k) as f32).sqrt();
    let x = value(&mut g, "x", vec![n, c.cin, c.hw, c.hw], None)?;
    let w = value(&mut g, "w", vec![c.cout, c.cin, c.k, c.k], Some(rng.floats(c.cout * c.cin * c.k * c.k, -scale, scale)))?;
    let mut inputs = vec![Some(x), Some(w), None];
    g.inputs = vec![x];
    if c.bias {
        inputs[2] = Some(value(&mut g, "b", vec![c.cout], Some(rng.floats(c.cout, -0.5, 0.5)))?);
    }
    if c.residual {
        let r = value(&mut g, "r", vec![n, c.cout, o, o], None)?;
        g.inputs.push(r);
        inputs.push(Some(r));
    }
    let y = value(&mut g, "y", vec![n, c.cout, o, o], None)?;
    let sparse = match c.fill {
        Some(fill) => {
            let m = value(&mut g, "m", vec![n, 1, o, o], None)?;
            g.inputs.push(m);
            Some(SparseSpec {
                mask: m,
                kind: MaskKind::Spatial,
                source: MaskSource::ModelInput { name: "m".into() },
                dilation: [0, 0],
                fill,
                fused_mul: true,
            })
        }
        None => None,
    };
    let window = Window {
        kernel_shape: vec![c.k, c.k],
        strides: vec![c.s, c.s],
        pads: vec![c.k / 2; 4],
        dilations: vec![1, 1],
        auto_pad: AutoPad::NotSet,
    };
    let op = Op::Conv(Conv { window, group: 1, fused_add: c.residual, activation: c.relu.then_some(Activation::Relu) });
    g.nodes.push(Node { name: "conv".into(), op, inputs, outputs: vec![y], sparse });
    g.outputs = vec![y];
    let mut feeds = Vec::new();
    for &v in &g.inputs {
        let shape = g.values[v].shape.clone();
        let len: usize = shape.iter().product();
        let data = if g.values[v].name == "m" {
            (0..len).map(|_| (rng.unit() < 0.4) as u8 as f32).collect()
        } else {
            // Non-zero: [-1, -0.01] u [0.01, 1].
            rng.floats(len, -1.0, 1.0).into_iter().map(|f| if f.abs() < 0.01 { 0.5 } else { f }).collect()
        };
        feeds.push(Tensor::from_f32(shape, data)?);
    }
    Ok((g, feeds))
}

/// Output of `g` on the device under `policy` (poisoned outputs, dense member forced), and the
/// dense member's vendor label for a sparse op.
fn run_gpu(dev: &Arc<CudaDevice>, g: &Graph, feeds: &[Tensor], policy: VendorPolicy) -> Result<(Vec<f32>, Option<String>), String> {
    let sparse = SparseConfig { cache_dir: None, force: Some(ForceMember::Dense), profile: None };
    let opts = GpuOptions { poison: true, sparse, vendor_convs: Some(policy), ..Default::default() };
    let mut exe = GpuExecutable::compile(dev.clone(), "cuda", g, &opts).map_err(|e| e.to_string())?;
    let out = exe.run(feeds).map_err(|e| e.to_string())?;
    let label = exe.sparse_ops().first().and_then(|o| o.dense_vendor.clone());
    Ok((out[0].as_f32().map_err(|e| e.to_string())?.to_vec(), label))
}

/// Every case through cuDNN against our kernels and the CPU. Without cuDNN: a pass saying why,
/// unless `DYNASPA_REQUIRE_BACKENDS` names `cudnn`.
pub fn check_cudnn_conv(ordinal: usize, rng: &mut Rng) -> Outcome {
    if let Err(e) = cudnn_lib::load() {
        let required = std::env::var("DYNASPA_REQUIRE_BACKENDS").is_ok_and(|v| v.split(',').any(|b| b.trim() == "cudnn"));
        return if required { Err(format!("DYNASPA_REQUIRE_BACKENDS names cudnn, but: {e}")) } else { Ok(format!("skipped: {e}")) };
    }
    let dev = Arc::new(CudaDevice::new(ordinal).map_err(|e| e.to_string())?);
    let version = dev.cudnn_status()?;
    let cpu = CpuBackend::new(None).map_err(|e| e.to_string())?;
    let mut notes = Vec::new();
    for c in &CASES {
        let (g, feeds) = build(c, c.n, rng).map_err(|e| e.to_string())?;
        let before = stats().launches;
        let (via_cudnn, label) = run_gpu(&dev, &g, &feeds, VendorPolicy::Always).map_err(|e| format!("{}: {e}", c.name))?;
        if stats().launches <= before {
            return Err(format!("{}: cuDNN forced, but no cuDNN call ran", c.name));
        }
        if c.fill.is_some() && label.is_none() {
            return Err(format!("{}: the dense member is not the cuDNN one", c.name));
        }
        if let Some(i) = via_cudnn.iter().position(|v| !v.is_finite()) {
            return Err(format!("{}: output {i} is {} (never written?)", c.name, via_cudnn[i]));
        }
        let (ours, _) = run_gpu(&dev, &g, &feeds, VendorPolicy::Never).map_err(|e| format!("{} (our kernels): {e}", c.name))?;
        let want = cpu.compile(Arc::new(g.clone())).and_then(|mut e| e.run(&feeds)).map_err(|e| format!("{} on the CPU: {e}", c.name))?;
        let want = want[0].as_f32().map_err(|e| e.to_string())?;
        if via_cudnn.len() != want.len() || ours.len() != want.len() {
            return Err(format!("{}: {} outputs through cuDNN, {} ours, {} on the CPU", c.name, via_cudnn.len(), ours.len(), want.len()));
        }
        let (e_cpu, e_ours) = (rel_l2(&via_cudnn, want), rel_l2(&via_cudnn, &ours));
        if e_cpu > 1e-4 || e_ours > 1e-4 {
            return Err(format!("{}: relative L2 {e_cpu:.2e} against the CPU, {e_ours:.2e} against our kernels", c.name));
        }
        // Bit-identical outputs are common: cuDNN's implicit GEMMs, our kernels and the CPU's
        // all accumulate the reduction in order with FMAs.
        let same = via_cudnn.iter().zip(want).filter(|(a, b)| a.to_bits() == b.to_bits()).count();
        notes.push(format!(
            "{}: rel L2 {e_cpu:.1e} vs CPU ({same}/{} identical), {e_ours:.1e} vs ours{}",
            c.name,
            want.len(),
            label.map(|l| format!(" ({l})")).unwrap_or_default()
        ));
    }
    let s = stats();
    let engines = match (s.engine_plans, dev.cudnn_engine_note()) {
        (0, Some(why)) => format!("no backend-API engine plan ({why})"),
        (n, _) => format!("{n} on backend-API engines"),
    };
    Ok(format!(
        "cuDNN {}.{}.{}: {}; {} plans ({engines}), {} searches",
        version.0,
        version.1,
        version.2,
        notes.join(", "),
        s.plans,
        s.searches
    ))
}
