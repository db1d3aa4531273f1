//! The attention fusion on real models and on small built graphs: where it fires, what it
//! records, where it must not fire, and that fused graphs compute what the unfused ones do.
//! The A-ViT model is also run with its masked attentions on the active-token kernel and
//! compared with the ONNX Runtime goldens.

mod common;
#[path = "common/onnx_build.rs"]
#[allow(dead_code, unused_mut)]
mod onnx_build;

use dynaspa::backends::cpu::{attention_node_active, eval_op, CpuBackend, CpuEvaluator};
use dynaspa::io::npy;
use dynaspa::runtime::backend::TensorSpec;
use dynaspa::runtime::graph::{fold, fuse, Graph, Op};
use dynaspa::runtime::onnx::proto::onnx::TensorProto;
use dynaspa::runtime::onnx::{import, parse_model};
use dynaspa::{Session, Tensor};
use onnx_build::{f32_init, int_attr, model, node, value_info};
use std::sync::Arc;

/// Imported, inferred and folded, before the fusions.
fn unfused(bytes: &[u8]) -> Graph {
    let m = parse_model(bytes).unwrap();
    let mut g = import(&m, &Default::default()).unwrap();
    fold::infer_and_fold(&mut g, &CpuEvaluator).unwrap();
    g
}

fn fused(bytes: &[u8]) -> Graph {
    let mut g = unfused(bytes);
    fuse::optimise(&mut g);
    g
}

fn count(g: &Graph, name: &str) -> usize {
    g.nodes.iter().filter(|n| n.op.name() == name).count()
}

fn run(g: Graph, feeds: &[(&str, &Tensor)]) -> Vec<(String, Tensor)> {
    let backend = CpuBackend::new(Some(2)).unwrap();
    let mut s = Session::new(g, &backend).unwrap();
    s.run(feeds.iter().map(|(n, t)| (n.to_string(), (*t).clone())).collect()).unwrap()
}

fn rel_l2_outputs(a: &[(String, Tensor)], b: &[(String, Tensor)]) -> f64 {
    a.iter()
        .zip(b)
        .map(|((na, ta), (nb, tb))| {
            assert_eq!(na, nb);
            common::rel_l2(ta.as_f32().unwrap(), tb.as_f32().unwrap())
        })
        .fold(0.0, f64::max)
}

fn model_bytes(rel: &str) -> Vec<u8> {
    std::fs::read(common::repo_path(rel)).unwrap()
}

#[test]
fn avit_blocks_fuse_with_their_halting_masks() {
    let bytes = model_bytes("models/avit_small_d30.onnx");
    let before = unfused(&bytes);
    let g = fused(&bytes);
    assert_eq!(count(&before, "Softmax"), 6);
    assert_eq!(count(&g, "Attention"), 6, "one per block");
    assert_eq!(count(&g, "Softmax"), 0, "every softmax belongs to an attention");
    let mut masked = Vec::new();
    for n in g.nodes.iter().filter(|n| n.op.name() == "Attention") {
        let Op::Attention(a) = &n.op else { unreachable!() };
        assert_eq!(a.heads, 2);
        assert!(!a.k_transposed, "A-ViT transposes k explicitly");
        match a.key_mask {
            Some(km) => {
                assert_eq!(km.c, 1e4);
                assert_eq!(n.inputs.len(), 5);
                masked.push(g.values[n.inputs[4].unwrap()].name.clone());
            }
            None => assert_eq!(n.inputs.len(), 3, "block 0 is dense: no bias"),
        }
    }
    // Block l's keys are masked by mask_blocks_l, the mask its qkv is multiplied by.
    assert_eq!(masked, (1..=5).map(|l| format!("mask_blocks_{l}")).collect::<Vec<_>>());
    let input = npy::read(&common::repo_path("tests/goldens/avit_small_d30/input_1.npy")).unwrap();
    let err = rel_l2_outputs(&run(g, &[("input", &input)]), &run(before, &[("input", &input)]));
    assert!(err <= 1e-5, "fused vs unfused A-ViT: relative L2 {err:.2e}");
}

#[test]
fn the_authors_avit_blocks_fuse_with_key_masks_spelled_one_minus_m() {
    // NVlabs/A-ViT adds `(1 - M) * -1000` (M reshaped to [B, 1, 1, T]) to the scores of every
    // block after the first, M being the halting mask cast from a comparison.
    let bytes = model_bytes("models/authors/avit_act_e96.onnx");
    let before = unfused(&bytes);
    let g = fused(&bytes);
    assert_eq!(count(&g, "Attention"), 12);
    assert_eq!(count(&g, "Softmax"), 0);
    let mut masked = 0;
    for n in g.nodes.iter().filter(|n| n.op.name() == "Attention") {
        let Op::Attention(a) = &n.op else { unreachable!() };
        if let Some(km) = a.key_mask {
            assert_eq!(km.c, 1000.0, "{}", n.name);
            let m = &g.values[n.inputs[4].unwrap()];
            assert_eq!(m.shape, [1, 197], "{}: the mask is the halting mask itself", n.name);
            masked += 1;
        }
    }
    assert_eq!(masked, 11, "every block after the first");
    // Twelve blocks of halting arithmetic amplify summation order: the goldens' own limit.
    let input = npy::read(&common::repo_path("tests/goldens/avit_act_e96/input_0.npy")).unwrap();
    let err = rel_l2_outputs(&run(g, &[("input", &input)]), &run(before, &[("input", &input)]));
    assert!(err <= 1e-4, "fused vs unfused A-ViT: relative L2 {err:.2e}");
}

#[test]
fn vit_attention_without_bias_fuses() {
    let bytes = model_bytes("models/vit_small.onnx");
    let before = unfused(&bytes);
    let g = fused(&bytes);
    let blocks = count(&before, "Softmax");
    assert!(blocks >= 2);
    assert_eq!(count(&g, "Attention"), blocks);
    assert_eq!(count(&g, "Softmax"), 0);
    for n in g.nodes.iter().filter(|n| n.op.name() == "Attention") {
        let Op::Attention(a) = &n.op else { unreachable!() };
        assert!(a.key_mask.is_none() && n.inputs.len() == 3, "{}: the dense ViT has no bias", n.name);
    }
    let input = npy::read(&common::repo_path("tests/goldens/vit_small/input_0.npy")).unwrap();
    let err = rel_l2_outputs(&run(g, &[("input", &input)]), &run(before, &[("input", &input)]));
    assert!(err <= 1e-5, "fused vs unfused ViT: relative L2 {err:.2e}");
}

/// Runs `g` node by node, the attentions that carry a key mask on the active-token kernel
/// (their inactive rows come back as zeros).
fn run_with_active_attention(g: &Graph, feeds: &[(&str, Tensor)]) -> (Vec<(String, Tensor)>, usize) {
    let mut vals: Vec<Option<Arc<Tensor>>> = g.values.iter().map(|v| v.constant.clone()).collect();
    for (name, t) in feeds {
        vals[g.find_value(name).unwrap()] = Some(Arc::new(t.clone()));
    }
    let mut sparse_nodes = 0;
    for n in &g.nodes {
        let ins: Vec<Option<&Tensor>> = n.inputs.iter().map(|i| i.and_then(|i| vals[i].as_deref())).collect();
        let specs: Vec<TensorSpec> =
            n.outputs.iter().map(|&o| TensorSpec { dtype: g.values[o].dtype, shape: g.values[o].shape.clone() }).collect();
        let outs = match &n.op {
            Op::Attention(a) if a.key_mask.is_some() => {
                sparse_nodes += 1;
                let (t, redone) = attention_node_active(a, &ins, &specs[0]).unwrap();
                assert_eq!(redone, 0, "{}: A-ViT rows need no all-keys fallback", n.name);
                vec![t]
            }
            op => eval_op(op, &ins, &specs).unwrap(),
        };
        for (&o, t) in n.outputs.iter().zip(outs) {
            vals[o] = Some(Arc::new(t));
        }
    }
    let outs = g.outputs.iter().map(|&o| (g.values[o].name.clone(), (*vals[o].clone().unwrap()).clone())).collect();
    (outs, sparse_nodes)
}

/// The contract of the active-token kernel holds in A-ViT: rows of halted tokens are
/// don't-care, so the model's outputs with them zeroed still match ONNX Runtime.
#[test]
fn avit_on_the_active_token_kernel_matches_the_goldens() {
    let g = fused(&model_bytes("models/avit_small_d30.onnx"));
    let dir = common::repo_path("tests/goldens/avit_small_d30");
    for case in 0..4 {
        let input = npy::read(&dir.join(format!("input_{case}.npy"))).unwrap();
        let (outs, sparse_nodes) = run_with_active_attention(&g, &[("input", input)]);
        assert_eq!(sparse_nodes, 5);
        for (name, t) in &outs {
            let want = npy::read(&dir.join(format!("{name}_{case}.npy"))).unwrap();
            let err = common::rel_l2(t.as_f32().unwrap(), want.as_f32().unwrap());
            if name.starts_with("mask_") {
                assert_eq!(t.as_f32().unwrap(), want.as_f32().unwrap(), "case {case}: {name} differs");
            } else {
                assert!(err <= 1e-4, "case {case}: {name} relative L2 {err:.2e} against ONNX Runtime");
            }
        }
    }
}

fn i64_init(name: &str, data: &[i64]) -> TensorProto {
    let mut t = TensorProto::new();
    t.set_name(name.into());
    t.dims = vec![data.len() as i64];
    t.set_data_type(7);
    t.int64_data = data.to_vec();
    t
}

fn perm_attr(perm: &[i64]) -> dynaspa::runtime::onnx::proto::onnx::AttributeProto {
    onnx_build::ints_attr("perm", perm)
}

const B: i64 = 2;
const H: i64 = 3;
const T: i64 = 11;
const D: i64 = 8;

/// Variations of one attention graph over inputs q, k (or kT), v and a token source x.
#[derive(Clone, Copy, Default)]
struct Variant {
    /// Scale as Div(scores, 4) instead of Mul(scores, 0.35); operands swapped where commutative.
    div_scale: bool,
    swapped: bool,
    /// k comes in as [B, H, D, T], no Transpose node.
    k_pre_transposed: bool,
    /// Bias (M - 1) * 1e4 with M = Cast(Less(x, 0.2)) (binary) or M = x itself (not provably so).
    bias: Option<bool>,
    softmax_axis: i64,
    softmax_is_output: bool,
}

fn attention_model(v: Variant) -> Vec<u8> {
    let mut nodes = Vec::new();
    let mut inits = vec![f32_init("s", &[], &[if v.div_scale { 4.0 } else { 0.35 }])];
    let kt_in = if v.k_pre_transposed {
        "k"
    } else {
        nodes.push({
            let mut n = node("Transpose", "kt", &["k"], &["kt"]);
            n.attribute.push(perm_attr(&[0, 1, 3, 2]));
            n
        });
        "kt"
    };
    nodes.push(node("MatMul", "qk", &["q", kt_in], &["scores"]));
    let scaled = match (v.div_scale, v.swapped) {
        (true, _) => node("Div", "scale", &["scores", "s"], &["scaled"]),
        (false, false) => node("Mul", "scale", &["scores", "s"], &["scaled"]),
        (false, true) => node("Mul", "scale", &["s", "scores"], &["scaled"]),
    };
    nodes.push(scaled);
    let mut logits = "scaled";
    if let Some(binary) = v.bias {
        inits.push(f32_init("thr", &[], &[0.2]));
        inits.push(f32_init("one", &[], &[1.0]));
        inits.push(f32_init("big", &[], &[1e4]));
        inits.push(i64_init("axes", &[1, 2]));
        let m = if binary {
            nodes.push(node("Less", "less", &["x", "thr"], &["halted"]));
            nodes.push({
                let mut n = node("Cast", "cast", &["halted"], &["m"]);
                n.attribute.push(int_attr("to", 1));
                n
            });
            "m"
        } else {
            "x"
        };
        nodes.push(node("Unsqueeze", "unsq", &[m, "axes"], &["m4"]));
        nodes.push(node("Sub", "sub", &["m4", "one"], &["m1"]));
        nodes.push(node("Mul", "mulc", &["m1", "big"], &["bias"]));
        let add = if v.swapped { ["bias", "scaled"] } else { ["scaled", "bias"] };
        nodes.push(node("Add", "add", &add, &["biased"]));
        logits = "biased";
    }
    nodes.push({
        let mut n = node("Softmax", "softmax", &[logits], &["p"]);
        n.attribute.push(int_attr("axis", v.softmax_axis));
        n
    });
    nodes.push(node("MatMul", "pv", &["p", "v"], &["y"]));
    let f = 1;
    let kshape = if v.k_pre_transposed { [B, H, D, T] } else { [B, H, T, D] };
    let mut inputs = vec![value_info("q", f, &[B, H, T, D]), value_info("k", f, &kshape), value_info("v", f, &[B, H, T, D])];
    if v.bias.is_some() {
        inputs.push(value_info("x", f, &[B, T]));
    }
    let mut outputs = vec![value_info("y", f, &[B, H, T, D])];
    if v.softmax_is_output {
        outputs.push(value_info("p", f, &[B, H, T, T]));
    }
    model(nodes, inputs, outputs, inits)
}

struct Feeds {
    q: Tensor,
    k: Tensor,
    kt: Tensor,
    v: Tensor,
    x: Tensor,
}

fn feeds(seed: u64) -> Feeds {
    let mut s = seed | 1;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    };
    let n = (B * H * T * D) as usize;
    let mut vecn = |n: usize, amp: f32| (0..n).map(|_| amp * next()).collect::<Vec<f32>>();
    let (q, k, v) = (vecn(n, 2.0), vecn(n, 2.0), vecn(n, 1.0));
    // Token 0 always active, the others about half.
    let x: Vec<f32> = vecn((B * T) as usize, 1.0).iter().enumerate().map(|(i, &u)| if i % T as usize == 0 { 1.0 } else { u }).collect();
    let (b, h, t, d) = (B as usize, H as usize, T as usize, D as usize);
    let mut kt = vec![0.0; n];
    for bh in 0..b * h {
        for j in 0..t {
            for p in 0..d {
                kt[(bh * d + p) * t + j] = k[(bh * t + j) * d + p];
            }
        }
    }
    let t4 = |v: Vec<f32>, s: [usize; 4]| Tensor::from_f32(s.to_vec(), v).unwrap();
    Feeds {
        q: t4(q, [b, h, t, d]),
        k: t4(k, [b, h, t, d]),
        kt: t4(kt, [b, h, d, t]),
        v: t4(v, [b, h, t, d]),
        x: Tensor::from_f32(vec![b, t], x).unwrap(),
    }
}

fn check_variant(v: Variant, expect_fused: bool, expect_key_mask: bool) {
    let bytes = attention_model(v);
    let (before, g) = (unfused(&bytes), fused(&bytes));
    let what = format!(
        "div {} swapped {} kT {} bias {:?} axis {} softmax out {}",
        v.div_scale, v.swapped, v.k_pre_transposed, v.bias, v.softmax_axis, v.softmax_is_output
    );
    assert_eq!(count(&g, "Attention"), expect_fused as usize, "{what}");
    assert_eq!(count(&g, "Softmax"), !expect_fused as usize, "{what}");
    if expect_fused {
        let n = g.nodes.iter().find(|n| n.op.name() == "Attention").unwrap();
        let Op::Attention(a) = &n.op else { unreachable!() };
        assert_eq!(a.key_mask.is_some(), expect_key_mask, "{what}");
        assert_eq!(a.k_transposed, v.k_pre_transposed, "{what}");
        assert_eq!(count(&g, "Transpose"), 0, "{what}: the k transpose goes with the fusion");
    }
    let seed = common::seed();
    let f = feeds(seed);
    let k = if v.k_pre_transposed { &f.kt } else { &f.k };
    let mut inputs = vec![("q", &f.q), ("k", k), ("v", &f.v)];
    if v.bias.is_some() {
        inputs.push(("x", &f.x));
    }
    let err = rel_l2_outputs(&run(g, &inputs), &run(before, &inputs));
    assert!(err <= 1e-5, "{what} (seed {seed}): fused vs unfused relative L2 {err:.2e}");
}

#[test]
fn built_attention_graphs_fuse_in_every_accepted_form() {
    let base = Variant { softmax_axis: -1, ..Default::default() };
    check_variant(base, true, false);
    check_variant(Variant { div_scale: true, ..base }, true, false);
    check_variant(Variant { swapped: true, k_pre_transposed: true, ..base }, true, false);
    check_variant(Variant { bias: Some(true), ..base }, true, true);
    check_variant(Variant { bias: Some(true), swapped: true, div_scale: true, ..base }, true, true);
    check_variant(Variant { softmax_axis: 3, bias: Some(true), k_pre_transposed: true, ..base }, true, true);
    // A float input is not provably binary: the bias is fused as a plain bias.
    check_variant(Variant { bias: Some(false), ..base }, true, false);
}

#[test]
fn attention_is_not_fused_where_it_would_change_or_hide_something() {
    let base = Variant { softmax_axis: -1, ..Default::default() };
    check_variant(Variant { softmax_is_output: true, ..base }, false, false);
    check_variant(Variant { softmax_is_output: true, bias: Some(true), ..base }, false, false);
    check_variant(Variant { softmax_axis: 2, ..base }, false, false);
    check_variant(Variant { softmax_axis: -2, bias: Some(true), ..base }, false, false);
}
