//! `detect_sparse_regions` on the three model families (what becomes sparse, with which mask,
//! source, halo and fill), on small hand-built graphs (what must stay dense), and the rewritten
//! models against the originals: the annotation lowered back to "dense, then multiply by the
//! mask", with garbage at the skipped positions, must give the same outputs on the CPU backend.

mod common;
#[allow(dead_code)] // the shared builder has helpers only other test files use
#[path = "common/onnx_build.rs"]
mod onnx_build;
#[path = "common/sparse_check.rs"]
mod sparse_check;

use dynaspa::runtime::graph::sparse_detect::{detect_sparse_regions, is_compute_op, SparseOptions, SparseRegionInfo};
use dynaspa::runtime::graph::sparse_lower::lower_to_dense;
use dynaspa::runtime::graph::{FillPolicy, Graph, MaskKind, MaskSource, Op};
use dynaspa::{LoadOptions, Tensor};
use sparse_check::{assert_same_outputs, assert_well_formed, run_cpu};
use std::collections::BTreeSet;

fn load(rel: &str) -> Graph {
    dynaspa::load_graph(common::repo_path(rel), &LoadOptions::default()).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn count_op(g: &Graph, name: &str) -> usize {
    g.nodes.iter().filter(|n| n.op.name() == name).count()
}

fn names(r: &[SparseRegionInfo]) -> BTreeSet<String> {
    r.iter().map(|s| s.node.clone()).collect()
}

// ---------------------------------------------------------------- the three families

#[test]
fn dynconv_small_sparse_convs_are_the_stride1_bottlenecks() {
    let mut g = load("models/dynconv_small_d30.onnx");
    let out_names = |g: &Graph| g.outputs.iter().map(|&i| g.values[i].name.clone()).collect::<Vec<_>>();
    let (muls, outputs) = (count_op(&g, "Mul"), out_names(&g));
    let r = detect_sparse_regions(&mut g, &SparseOptions::default());
    assert_well_formed(&g, "dynconv_small");
    let blocks = ["layer1.0", "layer1.1", "layer2.1", "layer3.1"];
    let want: BTreeSet<String> = blocks.iter().flat_map(|b| (1..=3).map(move |k| format!("/{b}/conv{k}/Conv"))).collect();
    assert_eq!(names(&r), want);
    assert_eq!(r.len(), 12);
    assert_eq!(g.nodes.iter().filter(|n| is_compute_op(&n.op)).count(), 27);
    for s in &r {
        let block = s.node.split('/').nth(1).unwrap();
        let mask = format!("mask_{}", block.replace('.', "_"));
        let conv1 = s.node.ends_with("conv1/Conv");
        assert_eq!(s.op, "Conv");
        assert_eq!(s.kind, MaskKind::Spatial);
        assert_eq!(s.mask, if conv1 { format!("{mask}_dil") } else { mask }, "{}", s.node);
        assert_eq!(s.dilation, if conv1 { [1, 1] } else { [0, 0] }, "{}", s.node);
        assert_eq!(s.source, MaskSource::InGraph { node: format!("/{block}/Greater") });
        let conv3 = s.node.ends_with("conv3/Conv");
        assert_eq!(s.fill, if conv3 { FillPolicy::Residual } else { FillPolicy::Zero }, "{}", s.node);
        assert!(s.fused_mul, "{}: nothing sits between the conv (ReLU fused) and its Mul", s.node);
        assert_eq!(s.output_shape.len(), 4);
    }
    // Every mask Mul was folded into its conv; the graph outputs are the same values.
    assert_eq!(muls, 12);
    assert_eq!(count_op(&g, "Mul"), 0);
    assert_eq!(out_names(&g), outputs);
    // conv3's Mul sits before the residual Add, which load-time fusion cannot cross; the sparse
    // pass then folds the join `ReLU(Mul(conv3, M) + identity)` into conv3 (fill Residual):
    // no Add or ReLU is left after it.
    for b in blocks {
        let i = g.nodes.iter().position(|n| n.name == format!("/{b}/conv3/Conv")).unwrap();
        let Op::Conv(c) = &g.nodes[i].op else { panic!("conv3 is a Conv") };
        assert!(c.fused_add && c.activation == Some(dynaspa::runtime::graph::Activation::Relu), "{b}: {c:?}");
        assert_eq!(g.nodes[i].inputs.len(), 4, "{b}: x, w, b, identity");
        let out = g.nodes[i].outputs[0];
        let readers: Vec<_> = g.nodes.iter().filter(|n| n.inputs.contains(&Some(out))).collect();
        assert!(readers.iter().all(|n| n.op.name() != "Add" && n.op.name() != "Relu"), "{b}");
    }
    assert_eq!(count_op(&g, "Add"), 0);
    assert_eq!(count_op(&g, "Relu"), 0);
    // Mask units and the stride-2 blocks stay dense.
    for n in &g.nodes {
        if n.name.contains("mask_unit") || n.name.starts_with("/layer2.0/") || n.name.starts_with("/layer3.0/") {
            assert!(n.sparse.is_none(), "{} should be dense", n.name);
        }
    }
}

#[test]
fn avit_small_blocks_1_to_5_are_token_sparse() {
    let mut g = load("models/avit_small_d30.onnx");
    let muls = count_op(&g, "Mul");
    let r = detect_sparse_regions(&mut g, &SparseOptions::default());
    assert_well_formed(&g, "avit_small");
    let want: BTreeSet<String> = (1..=5).flat_map(|l| ["qkv", "proj", "fc1", "fc2"].map(|op| format!("/blocks.{l}/{op}/MatMul"))).collect();
    // The MatMuls, plus the fused attentions of blocks 1-5 (their key masks feed proj).
    let attn: BTreeSet<String> = r.iter().filter(|s| s.op == "Attention").map(|s| s.node.clone()).collect();
    assert_eq!(attn.len(), 5, "{attn:?}");
    let r: Vec<_> = r.into_iter().filter(|s| s.op != "Attention").collect();
    assert_eq!(names(&r), want);
    assert_eq!(r.len(), 20);
    // 38 MatMul/Gemm before attention fusion; each of the 6 attentions fused 2 into 1.
    assert_eq!(g.nodes.iter().filter(|n| is_compute_op(&n.op)).count(), 32);
    for s in &r {
        let l: usize = s.node["/blocks.".len()..].split('/').next().unwrap().parse().unwrap();
        let less = if l == 1 { "/Less".to_string() } else { format!("/Less_{}", l - 1) };
        assert_eq!(s.op, "MatMul");
        assert_eq!(s.kind, MaskKind::Token);
        assert_eq!(s.mask, format!("/Unsqueeze_{l}_output_0"), "{}", s.node);
        assert_eq!(s.source, MaskSource::Halting { node: less }, "{}", s.node);
        assert_eq!(s.dilation, [0, 0]);
        let conv3 = s.node.ends_with("conv3/Conv");
        assert_eq!(s.fill, if conv3 { FillPolicy::Residual } else { FillPolicy::Zero }, "{}", s.node);
        // The bias Add (and fc1's exported GELU) sit between MatMul and Mul: the Mul stays. fc2
        // reads the masked GELU, so its rows are zero outside the mask and it writes those zeros.
        assert_eq!(s.fused_mul, s.node.ends_with("/fc2/MatMul"), "{}", s.node);
        assert_eq!(s.output_shape.len(), 3);
    }
    assert_eq!(count_op(&g, "Mul"), muls, "no Mul may be removed when an epilogue sits before it");
    assert!(g.nodes.iter().filter(|n| n.name.starts_with("/blocks.0/")).all(|n| n.sparse.is_none()));
}

#[test]
fn sige_small_every_conv_is_sparse_on_the_input_mask() {
    let g0 = load("models/sige_small.onnx");
    let mut g = g0.clone();
    let r = detect_sparse_regions(&mut g, &SparseOptions::default());
    assert_well_formed(&g, "sige_small");
    let by_mask = [
        ("mask_r0", vec!["/enc0/Conv", "/up2/ConvTranspose", "/out/Conv"]),
        ("mask_r1", vec!["/down1/Conv", "/up1/ConvTranspose"]),
        ("mask_r2", vec!["/down2/Conv", "/blocks.0/conv1/Conv", "/blocks.0/conv2/Conv", "/blocks.1/conv1/Conv", "/blocks.1/conv2/Conv"]),
    ];
    let want: BTreeSet<String> = by_mask.iter().flat_map(|(_, v)| v.iter().map(|s| s.to_string())).collect();
    assert_eq!(names(&r), want);
    assert_eq!(r.len(), 10);
    assert_eq!(g.nodes.iter().filter(|n| is_compute_op(&n.op)).count(), 10);
    for s in &r {
        let (mask, _) = by_mask.iter().find(|(_, v)| v.contains(&s.node.as_str())).unwrap();
        assert_eq!(&s.mask, mask, "{}", s.node);
        assert_eq!(s.kind, MaskKind::Spatial);
        assert_eq!(s.source, MaskSource::ModelInput { name: "mask".into() });
        // mask_r = MaxPool 3x3/s1 of MaxPool k = s = 2^r: a resampling, then a halo of 1.
        assert_eq!(s.dilation, [1, 1], "{}", s.node);
        assert_eq!(s.fill, FillPolicy::Zero, "the graph's own semantics unless cached fill is asked for");
        assert!(s.fused_mul, "{}", s.node);
    }
    let mut g = g0;
    let r = detect_sparse_regions(&mut g, &SparseOptions { cached_model_input_masks: true });
    assert_eq!(r.len(), 10);
    assert!(r.iter().all(|s| s.fill == FillPolicy::Cached));
}

/// Full-size exports are not committed (models/README.md); this checks them where they were
/// generated locally, and says so where not.
#[test]
fn full_size_models_when_present() {
    let cases: [(&str, usize, usize); 3] =
        [("models/dynconv_full_d30.onnx", 39, 67), ("models/avit_full_d30.onnx", 44 + 11, 74 - 12), ("models/sige_full.onnx", 24, 24)];
    for (rel, sparse, compute) in cases {
        if !common::repo_path(rel).exists() {
            eprintln!("{rel} not generated here; skipped");
            continue;
        }
        let mut g = load(rel);
        let r = detect_sparse_regions(&mut g, &SparseOptions::default());
        assert_well_formed(&g, rel);
        assert_eq!((r.len(), g.nodes.iter().filter(|n| is_compute_op(&n.op)).count()), (sparse, compute), "{rel}");
    }
}

// ---------------------------------------------------------------- hand-built graphs

use onnx_build::{f32_init, int_attr, ints_attr, model, node, value_info, with_attrs};

const F32: i32 = 1;

/// Deterministic, varied weights.
fn weights(name: &str, dims: &[i64]) -> dynaspa::runtime::onnx::proto::onnx::TensorProto {
    let n: i64 = dims.iter().product();
    let data: Vec<f32> = (0..n).map(|i| ((i * 7919 % 97) as f32 / 48.0 - 1.0) * 0.5).collect();
    f32_init(name, dims, &data)
}

/// x [1,3,8,8] -> conv `p` (4 channels, 1x1) -> `body` -> y; the mask unit is a 1x1 conv with
/// `mask_ch` output channels, thresholded at 0: `m` [1,mask_ch,8,8].
struct Built {
    nodes: Vec<dynaspa::runtime::onnx::proto::onnx::NodeProto>,
    inits: Vec<dynaspa::runtime::onnx::proto::onnx::TensorProto>,
    inputs: Vec<dynaspa::runtime::onnx::proto::onnx::ValueInfoProto>,
    outputs: Vec<dynaspa::runtime::onnx::proto::onnx::ValueInfoProto>,
}

fn conv_with_mask_unit(mask_ch: i64) -> Built {
    Built {
        nodes: vec![
            node("Conv", "p", &["x", "w", "b"], &["pout"]),
            node("Conv", "unit", &["x", "wu", "bu"], &["logit"]),
            node("Greater", "gt", &["logit", "zero"], &["gt_out"]),
            with_attrs(node("Cast", "cast", &["gt_out"], &["m"]), vec![int_attr("to", 1)]),
        ],
        inits: vec![
            weights("w", &[4, 3, 1, 1]),
            weights("b", &[4]),
            weights("wu", &[mask_ch, 3, 1, 1]),
            f32_init("bu", &[mask_ch], &vec![0.1; mask_ch as usize]),
            f32_init("zero", &[], &[0.0]),
        ],
        inputs: vec![value_info("x", F32, &[1, 3, 8, 8])],
        outputs: vec![value_info("y", F32, &[1, 4, 8, 8])],
    }
}

fn finish(b: Built) -> Vec<u8> {
    model(b.nodes, b.inputs, b.outputs, b.inits)
}

fn detect(bytes: &[u8], opts: &SparseOptions) -> (Graph, Graph, Vec<SparseRegionInfo>) {
    let g = dynaspa::load_graph_bytes(bytes, &LoadOptions::default()).expect("test model loads");
    let mut rewritten = g.clone();
    let r = detect_sparse_regions(&mut rewritten, opts);
    assert_well_formed(&rewritten, "hand-built");
    (g, rewritten, r)
}

fn x_feed() -> Vec<(String, Tensor)> {
    let v: Vec<f32> = (0..192).map(|i| ((i * 37 % 23) as f32 - 11.0) / 5.0).collect();
    vec![("x".into(), Tensor::from_f32(vec![1, 3, 8, 8], v).unwrap())]
}

/// The rewritten graph, lowered with garbage at skipped positions, against the original.
fn assert_same_function(g: &Graph, rewritten: &Graph, feeds: Vec<(String, Tensor)>) {
    let want = run_cpu(g.clone(), feeds.clone());
    let got = run_cpu(lower_to_dense(rewritten, Some(9.0)), feeds);
    assert_same_outputs(&got, &want, "hand-built");
}

#[test]
fn mask_as_first_operand_is_detected_and_folded() {
    let mut b = conv_with_mask_unit(1);
    b.nodes.push(node("Mul", "mul", &["m", "pout"], &["y"]));
    let (g, rw, r) = detect(&finish(b), &SparseOptions::default());
    assert_eq!(r.len(), 1);
    let s = &r[0];
    assert_eq!((s.node.as_str(), s.kind, s.fused_mul, s.dilation), ("p", MaskKind::Spatial, true, [0, 0]));
    assert_eq!(s.source, MaskSource::InGraph { node: "gt".into() });
    assert_eq!(s.mask, "m");
    assert_eq!(count_op(&rw, "Mul"), 0);
    let p = rw.nodes.iter().find(|n| n.name == "p").unwrap();
    assert_eq!(rw.values[p.outputs[0]].name, "y", "the conv now produces the graph output");
    assert_same_function(&g, &rw, x_feed());
}

#[test]
fn mask_computed_after_the_producer_is_moved_before_it() {
    // Node order puts "p" first (both it and the mask unit only read x), so the executor would
    // meet the sparse conv before its mask exists.
    let mut b = conv_with_mask_unit(1);
    b.nodes.push(node("Mul", "mul", &["pout", "m"], &["y"]));
    let (g, rw, r) = detect(&finish(b), &SparseOptions::default());
    let pos = |g: &Graph, n: &str| g.nodes.iter().position(|x| x.name == n).unwrap();
    assert!(pos(&g, "p") < pos(&g, "cast"), "the test needs p to come first in the loaded graph");
    assert_eq!(r.len(), 1);
    assert!(pos(&rw, "p") > pos(&rw, "cast"));
    assert_same_function(&g, &rw, x_feed());
}

#[test]
fn non_binary_map_is_not_a_mask() {
    let mut b = conv_with_mask_unit(1);
    b.nodes.push(node("Sigmoid", "soft", &["logit"], &["soft_m"]));
    b.nodes.push(node("Mul", "mul", &["pout", "soft_m"], &["y"]));
    let (_, rw, r) = detect(&finish(b), &SparseOptions::default());
    assert!(r.is_empty(), "{r:?}");
    assert_eq!(count_op(&rw, "Mul"), 1);
}

#[test]
fn producer_read_elsewhere_stays_dense() {
    // Another reader of the conv's result.
    let mut b = conv_with_mask_unit(1);
    b.nodes.push(node("Mul", "mul", &["pout", "m"], &["masked"]));
    b.nodes.push(node("Sigmoid", "side", &["pout"], &["side_out"]));
    b.nodes.push(node("Add", "sum", &["masked", "side_out"], &["y"]));
    let (_, _, r) = detect(&finish(b), &SparseOptions::default());
    assert!(r.is_empty(), "{r:?}");
    // The conv's result is itself a graph output.
    let mut b = conv_with_mask_unit(1);
    b.nodes.push(node("Mul", "mul", &["pout", "m"], &["y"]));
    b.outputs.push(value_info("pout", F32, &[1, 4, 8, 8]));
    let (_, _, r) = detect(&finish(b), &SparseOptions::default());
    assert!(r.is_empty(), "{r:?}");
}

#[test]
fn mask_with_channels_stays_dense() {
    let mut b = conv_with_mask_unit(4);
    b.nodes.push(node("Mul", "mul", &["pout", "m"], &["y"]));
    let (_, _, r) = detect(&finish(b), &SparseOptions::default());
    assert!(r.is_empty(), "a [1,4,H,W] map is not one bit per position: {r:?}");
}

#[test]
fn non_elementwise_epilogue_stays_dense() {
    for (op, attrs) in [("Softmax", vec![int_attr("axis", 3)]), ("Transpose", vec![ints_attr("perm", &[0, 1, 3, 2])])] {
        let mut b = conv_with_mask_unit(1);
        b.nodes.push(with_attrs(node(op, "mix", &["pout"], &["mixed"]), attrs));
        b.nodes.push(node("Mul", "mul", &["mixed", "m"], &["y"]));
        let (_, _, r) = detect(&finish(b), &SparseOptions::default());
        assert!(r.is_empty(), "{op} moves values between positions: {r:?}");
    }
}

#[test]
fn elementwise_epilogue_keeps_the_mul() {
    // Per-channel Add, Erf, scalar Mul: position-local, so the conv is sparse but the Mul stays.
    let mut b = conv_with_mask_unit(1);
    b.nodes.push(node("Add", "bias", &["pout", "chan"], &["t1"]));
    b.nodes.push(node("Erf", "erf", &["t1"], &["t2"]));
    b.nodes.push(node("Mul", "scale", &["t2", "half"], &["t3"]));
    b.nodes.push(node("Mul", "gate", &["t1", "t3"], &["t4"]));
    b.nodes.push(node("Mul", "mul", &["t4", "m"], &["y"]));
    b.inits.push(f32_init("chan", &[4, 1, 1], &[0.1, -0.2, 0.3, 0.4]));
    b.inits.push(f32_init("half", &[], &[0.5]));
    let bytes = finish(b);
    let (g, rw, r) = detect(&bytes, &SparseOptions::default());
    assert_eq!(r.len(), 1, "{r:?}");
    assert!(!r[0].fused_mul);
    assert_eq!(count_op(&rw, "Mul"), count_op(&g, "Mul"));
    assert_same_function(&g, &rw, x_feed());
}

#[test]
fn position_varying_constant_in_the_epilogue_is_still_position_local() {
    let mut b = conv_with_mask_unit(1);
    b.nodes.push(node("Add", "bias", &["pout", "ramp"], &["t1"]));
    b.nodes.push(node("Mul", "mul", &["t1", "m"], &["y"]));
    b.inits.push(f32_init("ramp", &[1, 1, 8, 8], &(0..64).map(|i| i as f32).collect::<Vec<_>>()));
    // Each output position adds its own constant: the Add still reads the conv at that position.
    let (g, rw, r) = detect(&finish(b), &SparseOptions::default());
    assert_eq!(r.len(), 1, "{r:?}");
    assert!(!r[0].fused_mul);
    assert_same_function(&g, &rw, x_feed());
}

#[test]
fn max_pool_halos_add_up() {
    let pool = |name: &str, i: &str, o: &str, k: i64, p: i64| {
        with_attrs(node("MaxPool", name, &[i], &[o]), vec![ints_attr("kernel_shape", &[k, k]), ints_attr("pads", &[p, p, p, p])])
    };
    let mut b = conv_with_mask_unit(1);
    b.nodes.push(pool("d1", "m", "m1", 3, 1));
    b.nodes.push(pool("d2", "m1", "m2", 5, 2));
    b.nodes.push(node("Mul", "mul", &["pout", "m2"], &["y"]));
    let (g, rw, r) = detect(&finish(b), &SparseOptions::default());
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].dilation, [3, 3]);
    assert_same_function(&g, &rw, x_feed());
}

fn dynaspa_i64(name: &str, v: &[i64]) -> dynaspa::runtime::onnx::proto::onnx::TensorProto {
    let mut t = dynaspa::runtime::onnx::proto::onnx::TensorProto::new();
    t.set_name(name.into());
    t.dims = vec![v.len() as i64];
    t.set_data_type(7);
    t.int64_data = v.to_vec();
    t
}

#[test]
fn masks_from_two_origins_intersect() {
    let mut b = conv_with_mask_unit(1);
    b.nodes.push(node("Conv", "unit2", &["x", "wu2", "bu"], &["logit2"]));
    b.nodes.push(node("Greater", "gt2", &["logit2", "zero"], &["gt2_out"]));
    b.nodes.push(with_attrs(node("Cast", "cast2", &["gt2_out"], &["m2"]), vec![int_attr("to", 1)]));
    b.nodes.push(node("Mul", "both", &["m", "m2"], &["m12"]));
    b.nodes.push(node("Mul", "mul", &["pout", "m12"], &["y"]));
    b.inits.push(weights("wu2", &[1, 3, 1, 1]));
    let (g, rw, r) = detect(&finish(b), &SparseOptions::default());
    // The product of two maps is a map; it reports the first threshold it was made from.
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!((r[0].node.as_str(), r[0].mask.as_str(), r[0].fused_mul), ("p", "m12", true));
    assert_eq!(r[0].source, MaskSource::InGraph { node: "gt".into() });
    assert_same_function(&g, &rw, x_feed());
}

#[test]
fn model_input_mask_fill_follows_the_option() {
    let mut b = conv_with_mask_unit(1);
    b.nodes.truncate(1);
    b.inputs.push(value_info("m", F32, &[1, 1, 8, 8]));
    b.nodes.push(node("Mul", "mul", &["pout", "m"], &["y"]));
    let bytes = finish(b);
    let (_, _, r) = detect(&bytes, &SparseOptions::default());
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].source, MaskSource::ModelInput { name: "m".into() });
    assert_eq!(r[0].fill, FillPolicy::Zero);
    let (_, _, r) = detect(&bytes, &SparseOptions { cached_model_input_masks: true });
    assert_eq!(r[0].fill, FillPolicy::Cached);
}

#[test]
fn image_input_is_not_taken_for_a_mask() {
    // A one-channel input that a Conv also reads is data, even though it has a mask's shape.
    let mut b = conv_with_mask_unit(1);
    b.nodes = vec![node("Conv", "p", &["g", "w1", "b"], &["pout"]), node("Mul", "mul", &["pout", "g"], &["y"])];
    b.inputs = vec![value_info("g", F32, &[1, 1, 8, 8])];
    b.inits.push(weights("w1", &[4, 1, 3, 3]));
    b.nodes[0].attribute = vec![ints_attr("pads", &[1, 1, 1, 1])];
    let (_, _, r) = detect(&finish(b), &SparseOptions::default());
    assert!(r.is_empty(), "{r:?}");
}

#[test]
fn token_rows_of_a_constant_weight_matmul() {
    // x [1,6,8] @ W [8,5] + bias, times a [1,6,1] token mask from a comparison.
    let build = |mask_dims: &[i64], weight_is_input: bool| {
        let mut nodes = vec![
            node("MatMul", "mm", &["x", "W"], &["h"]),
            node("Add", "bias", &["h", "bb"], &["hb"]),
            node("ReduceMean", "score", &["x", "last"], &["s"]),
            node("Less", "lt", &["s", "zero"], &["keep"]),
            with_attrs(node("Cast", "cast", &["keep"], &["m"]), vec![int_attr("to", 1)]),
            node("Mul", "mul", &["hb", "m"], &["y"]),
        ];
        let mut inputs = vec![value_info("x", F32, &[1, 6, 8])];
        let mut inits = vec![weights("bb", &[5]), f32_init("zero", &[], &[0.0]), dynaspa_i64("last", &[-1])];
        if mask_dims != [1, 6, 1] {
            // Broadcast the per-token score over the last axis too.
            nodes.insert(4, node("Expand", "wide", &["keep", "wshape"], &["keep_w"]));
            nodes[5].input[0] = "keep_w".into();
            inits.push(dynaspa_i64("wshape", mask_dims));
        }
        if weight_is_input {
            inputs.push(value_info("W", F32, &[8, 5]));
        } else {
            inits.push(weights("W", &[8, 5]));
        }
        model(nodes, inputs, vec![value_info("y", F32, &[1, 6, 5])], inits)
    };
    let (g, rw, r) = detect(&build(&[1, 6, 1], false), &SparseOptions::default());
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!((r[0].kind, r[0].fused_mul), (MaskKind::Token, false));
    assert_eq!(r[0].source, MaskSource::InGraph { node: "lt".into() });
    let x: Vec<f32> = (0..48).map(|i| ((i * 13 % 17) as f32 - 8.0) / 4.0).collect();
    let feeds = vec![("x".to_string(), Tensor::from_f32(vec![1, 6, 8], x).unwrap())];
    assert_same_function(&g, &rw, feeds);
    let (_, _, r) = detect(&build(&[1, 6, 5], false), &SparseOptions::default());
    assert!(r.is_empty(), "a mask over channels as well is not a token mask: {r:?}");
    let (_, _, r) = detect(&build(&[1, 6, 1], true), &SparseOptions::default());
    assert!(r.is_empty(), "a runtime weight: {r:?}");
}

// ---------------------------------------------------------------- robustness

/// Loads a node-suite case the way tests/onnx_node.rs does: where shape-deciding values are
/// graph inputs, every input but the first float one is frozen to the case's first data set.
fn load_node_case(dir: &std::path::Path) -> Option<Graph> {
    let bytes = std::fs::read(dir.join("model.onnx")).ok()?;
    let mut opts = LoadOptions::default();
    match dynaspa::load_graph_bytes(&bytes, &opts) {
        Ok(g) => Some(g),
        Err(e) if e.to_string().contains("computed at run time") => {
            let names = dynaspa::runtime::onnx::input_names(&bytes).ok()?;
            let set = dir.join("test_data_set_0");
            let tensors: Vec<Tensor> = (0..names.len())
                .map(|i| {
                    let p = set.join(format!("input_{i}.pb"));
                    let b = std::fs::read(&p).ok()?;
                    dynaspa::runtime::onnx::tensor_proto::decode_bytes(&b, &p.display().to_string()).ok()
                })
                .collect::<Option<_>>()?;
            let data = tensors.iter().position(|t| t.dtype().is_float());
            for (i, (n, t)) in names.iter().zip(tensors).enumerate() {
                if Some(i) != data {
                    opts.constants.insert(n.clone(), t);
                }
            }
            dynaspa::load_graph_bytes(&bytes, &opts).ok()
        }
        Err(_) => None,
    }
}

#[test]
fn never_panics_on_the_onnx_node_suite() {
    let dir = common::repo_path("tests/onnx_node");
    let mut loaded = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let case = e.unwrap().path();
        let Some(g) = load_node_case(&case) else { continue };
        loaded += 1;
        for cached in [false, true] {
            let mut rw = g.clone();
            let r = detect_sparse_regions(&mut rw, &SparseOptions { cached_model_input_masks: cached });
            assert_well_formed(&rw, &case.display().to_string());
            for s in &r {
                let n = rw.nodes.iter().find(|n| n.name == s.node).unwrap();
                assert!(is_compute_op(&n.op), "{}: {} annotated", case.display(), n.op.name());
            }
        }
    }
    assert!(loaded > 380, "only {loaded} node-suite models loaded");
}
