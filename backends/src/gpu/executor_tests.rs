//! The executor's planning and poisoning, on the OpenCL device when the machine has one.

use super::*;
use dynaspa_runtime::graph::{BinaryKind, Node, Op, UnaryKind, Value};

pub(super) fn device() -> Option<Arc<crate::opencl::OpenClDevice>> {
    let required = std::env::var("DYNASPA_REQUIRE_BACKENDS").is_ok_and(|v| v.split(',').any(|b| b.trim() == "opencl"));
    match crate::opencl::shared_device(None, None) {
        Ok(d) => Some(d),
        Err(e) if required => panic!("opencl is required: {e}"),
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    }
}

fn value(g: &mut Graph, name: &str, shape: &[usize]) -> usize {
    g.values.push(Value { name: name.into(), dtype: DType::F32, shape: shape.to_vec(), constant: None });
    g.values.len() - 1
}

fn push(g: &mut Graph, op: Op, inputs: &[usize], output: usize) {
    let name = format!("n{}", g.nodes.len());
    g.nodes.push(Node { name, op, inputs: inputs.iter().map(|&i| Some(i)).collect(), outputs: vec![output], sparse: None });
}

/// x -> (Neg, Abs, Neg, ...) x `len` -> Reshape -> Add(x) -> y: a chain whose intermediates die young.
fn chain(len: usize) -> Graph {
    let mut g = Graph { name: "chain".into(), opset: 17, ..Default::default() };
    let x = value(&mut g, "x", &[4, 100]);
    g.inputs = vec![x];
    let mut cur = x;
    for i in 0..len {
        let v = value(&mut g, &format!("v{i}"), &[4, 100]);
        push(&mut g, Op::Unary(if i % 2 == 0 { UnaryKind::Neg } else { UnaryKind::Abs }), &[cur], v);
        cur = v;
    }
    let shape = g.values.len();
    g.values.push(Value {
        name: "shape".into(),
        dtype: DType::I64,
        shape: vec![2],
        constant: Some(Arc::new(Tensor::from_i64(vec![2], vec![4, 100]).unwrap())),
    });
    let r = value(&mut g, "r", &[4, 100]);
    g.nodes.push(Node {
        name: "reshape".into(),
        op: Op::Reshape { allowzero: false },
        inputs: vec![Some(cur), Some(shape)],
        outputs: vec![r],
        sparse: None,
    });
    let y = value(&mut g, "y", &[4, 100]);
    push(&mut g, Op::Binary(BinaryKind::Add), &[r, x], y);
    g.outputs = vec![y];
    g
}

#[test]
fn intermediates_share_buffers_and_views_alias() {
    let Some(dev) = device() else { return };
    let g = chain(12);
    let mut exe = GpuExecutable::compile(dev, "opencl", &g, &GpuOptions { poison: true, ..Default::default() }).unwrap();
    // Activation buffers: x, y and two the chain alternates between; plus the index table
    // placeholder. Without reuse it would be 15.
    let activations = exe.bufs.len();
    assert!(activations <= 6, "{activations} buffers for a 12-node chain");
    let x: Vec<f32> = (0..400).map(|i| (i as f32 - 200.5) * 0.25).collect();
    let out = exe.run(&[Tensor::from_f32(vec![4, 100], x.clone()).unwrap()]).unwrap();
    let want: Vec<f32> = x.iter().map(|v| v.abs() + v).collect();
    assert_eq!(out[0].as_f32().unwrap(), want.as_slice());
    // A second frame reuses everything.
    let x2: Vec<f32> = x.iter().map(|v| -v).collect();
    let out = exe.run(&[Tensor::from_f32(vec![4, 100], x2.clone()).unwrap()]).unwrap();
    let want: Vec<f32> = x2.iter().map(|v| v.abs() + v).collect();
    assert_eq!(out[0].as_f32().unwrap(), want.as_slice());
    assert!(exe.last_report().is_some_and(|r| r.total > std::time::Duration::ZERO));
}

#[test]
fn poisoning_exposes_an_output_no_kernel_wrote() {
    let Some(dev) = device() else { return };
    let g = chain(3);
    let mut exe = GpuExecutable::compile(dev, "opencl", &g, &GpuOptions { poison: true, ..Default::default() }).unwrap();
    let x = Tensor::from_f32(vec![4, 100], (0..400).map(|i| i as f32).collect()).unwrap();
    assert!(!exe.run(std::slice::from_ref(&x)).unwrap()[0].has_non_finite());
    // Drop the last node's kernels, as a kernel that forgets its output would.
    exe.steps.last_mut().unwrap().launches.clear();
    let out = exe.run(&[x]).unwrap();
    assert!(out[0].as_f32().unwrap().iter().all(|v| v.is_nan()), "the unwritten output must read NaN");
}

#[test]
fn unsupported_nodes_are_named_with_op_and_type() {
    let Some(dev) = device() else { return };
    let mut g = Graph { name: "f64".into(), opset: 17, ..Default::default() };
    g.values.push(Value { name: "x".into(), dtype: DType::F64, shape: vec![3], constant: None });
    g.values.push(Value { name: "y".into(), dtype: DType::F64, shape: vec![3], constant: None });
    g.values.push(Value { name: "z".into(), dtype: DType::F32, shape: vec![3], constant: None });
    g.inputs = vec![0];
    g.nodes.push(Node { name: "neg".into(), op: Op::Unary(UnaryKind::Neg), inputs: vec![Some(0)], outputs: vec![1], sparse: None });
    g.nodes.push(Node { name: "cast".into(), op: Op::Cast { to: DType::F32 }, inputs: vec![Some(1)], outputs: vec![2], sparse: None });
    g.outputs = vec![2];
    let e = GpuExecutable::compile(dev, "opencl", &g, &GpuOptions::default()).err().expect("DOUBLE is refused");
    let msg = e.to_string();
    assert!(matches!(e, Error::Unsupported(_)), "{msg}");
    assert!(msg.contains("'x'") && msg.contains("DOUBLE"), "{msg}");
    assert!(msg.contains("node 'neg' (Neg)") && msg.contains("node 'cast' (Cast)"), "{msg}");
}
