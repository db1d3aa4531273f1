//! Needed regions on graphs shaped the way research code writes them: a mask applied once, at a
//! block's output (DynConv's own code), found sparse back through the block's convs, with masks
//! made every way the exporters spell them. Each rewritten graph, lowered with garbage at every
//! skipped position, must compute what the original does.

mod common;
#[allow(dead_code)] // the shared builder has helpers only other test files use
#[path = "common/onnx_build.rs"]
mod onnx_build;
#[path = "common/sparse_check.rs"]
mod sparse_check;

use dynaspa::runtime::graph::sparse_detect::{detect, Detection, SparseOptions};
use dynaspa::runtime::graph::sparse_lower::lower_to_dense;
use dynaspa::runtime::graph::{FillPolicy, Graph, MaskSource};
use dynaspa::runtime::onnx::proto::onnx::{NodeProto, TensorProto};
use dynaspa::{LoadOptions, Tensor};
use onnx_build::{f32_init, i64_init, int_attr, ints_attr, model, node, str_attr, value_info, with_attrs};
use sparse_check::{assert_same_outputs, assert_well_formed, run_cpu};

const F32: i32 = 1;
const BOOL: i32 = 9;

struct Net {
    nodes: Vec<NodeProto>,
    inits: Vec<TensorProto>,
    rng: common::Rng,
}

impl Net {
    fn new(seed: u64) -> Net {
        Net { nodes: Vec::new(), inits: Vec::new(), rng: common::Rng(seed) }
    }
    fn init(&mut self, name: &str, dims: &[i64], scale: f32) {
        let n: i64 = dims.iter().product();
        let data: Vec<f32> = self.rng.vec(n as usize).into_iter().map(|v| v * scale).collect();
        self.inits.push(f32_init(name, dims, &data));
    }
    /// Conv `name` with weights [cout, cin, k, k] and a bias; `relu` appends a ReLU.
    fn conv(&mut self, name: &str, x: &str, cin: i64, cout: i64, k: i64, stride: i64, relu: bool) -> String {
        self.init(&format!("{name}.w"), &[cout, cin, k, k], (2.0 / (cin * k * k) as f32).sqrt());
        self.init(&format!("{name}.b"), &[cout], 0.1);
        let attrs = vec![ints_attr("kernel_shape", &[k, k]), ints_attr("strides", &[stride, stride]), ints_attr("pads", &[k / 2; 4])];
        let y = format!("{name}.y");
        self.nodes.push(with_attrs(node("Conv", name, &[x, &format!("{name}.w"), &format!("{name}.b")], &[&y]), attrs));
        if relu {
            let r = format!("{name}.relu");
            self.nodes.push(node("Relu", &format!("{name}/relu"), &[&y], &[&r]));
            return r;
        }
        y
    }
    fn op(&mut self, op: &str, name: &str, ins: &[&str]) -> String {
        let y = format!("{name}.y");
        self.nodes.push(node(op, name, ins, &[&y]));
        y
    }
    fn scalar(&mut self, name: &str, v: f32) -> String {
        self.inits.push(f32_init(name, &[], &[v]));
        name.to_string()
    }
    /// DynConv's mask unit: a 3x3 conv (with the block's stride) plus a linear map of the global
    /// average, broadcast-added: the logit [1, 1, H/s, W/s].
    fn mask_logit(&mut self, x: &str, c: i64, stride: i64) -> String {
        let z = self.conv("unit.conv", x, c, 1, 3, stride, false);
        let gap = self.op("GlobalAveragePool", "unit.gap", &[x]);
        let y = self.conv("unit.fc", &gap, c, 1, 1, 1, false);
        self.op("Add", "unit.add", &[&z, &y])
    }
}

/// The hard mask from a logit, spelled as `how` does.
fn threshold(n: &mut Net, logit: &str, how: &str) -> String {
    let zero = n.scalar("zero", 0.0);
    let cast = |n: &mut Net, x: &str| -> String {
        n.nodes.push(with_attrs(node("Cast", "mask.cast", &[x], &["mask.f"]), vec![int_attr("to", 1)]));
        "mask.f".into()
    };
    match how {
        "ge" => {
            let b = n.op("GreaterOrEqual", "mask.ge", &[logit, &zero]);
            cast(n, &b)
        }
        "le" => {
            let neg = n.op("Neg", "mask.neg", &[logit]);
            let b = n.op("LessOrEqual", "mask.le", &[&neg, &zero]);
            cast(n, &b)
        }
        "sigmoid_gt" => {
            let s = n.op("Sigmoid", "mask.sigmoid", &[logit]);
            let half = n.scalar("half", 0.5);
            let b = n.op("Greater", "mask.gt", &[&s, &half]);
            cast(n, &b)
        }
        "round_sigmoid" => {
            let s = n.op("Sigmoid", "mask.sigmoid", &[logit]);
            n.op("Round", "mask.round", &[&s])
        }
        "clip_sign" => {
            let s = n.op("Sign", "mask.sign", &[logit]);
            let one = n.scalar("one", 1.0);
            n.op("Clip", "mask.clip", &[&s, &zero, &one])
        }
        "relu_sign" => {
            let s = n.op("Sign", "mask.sign", &[logit]);
            n.op("Relu", "mask.relu", &[&s])
        }
        "bool_cast" => {
            let r = n.op("Relu", "mask.relu", &[logit]);
            n.nodes.push(with_attrs(node("Cast", "mask.tobool", &[&r], &["mask.b"]), vec![int_attr("to", BOOL as i64)]));
            cast(n, "mask.b")
        }
        other => panic!("unknown threshold {other}"),
    }
}

/// x [1, c, 16, 16] through a bottleneck (1x1 -> 3x3 stride s -> 1x1) whose output alone is
/// multiplied by the mask, then added to the identity (a 1x1 projection when the shape changes).
fn bottleneck(n: &mut Net, x: &str, c: i64, stride: i64, mask: &str) -> String {
    let a = n.conv("conv1", x, c, 4, 1, 1, true);
    let b = n.conv("conv2", &a, 4, 4, 3, stride, true);
    let d = n.conv("conv3", &b, 4, c, 1, 1, false);
    let masked = n.op("Mul", "apply_mask", &[mask, &d]);
    let id = if stride == 1 { x.to_string() } else { n.conv("downsample", x, c, c, 1, stride, false) };
    let sum = n.op("Add", "residual", &[&id, &masked]);
    n.op("Relu", "out", &[&sum])
}

fn build(n: Net, inputs: &[(&str, i32, &[i64])], out: &str, out_shape: &[i64]) -> Vec<u8> {
    let mut nodes = n.nodes;
    nodes.push(node("Identity", "final", &[out], &["y"]));
    let ins = inputs.iter().map(|(name, t, s)| value_info(name, *t, s)).collect();
    model(nodes, ins, vec![value_info("y", F32, out_shape)], n.inits)
}

/// Loads, detects, checks the rewritten graph against the original with garbage at skipped
/// positions, and returns what was found.
fn detect_and_check(bytes: &[u8], feeds: Vec<(String, Tensor)>, opts: &SparseOptions) -> (Graph, Detection) {
    let g = dynaspa::load_graph_bytes(bytes, &LoadOptions::default()).expect("test model loads");
    let mut rw = g.clone();
    let found = detect(&mut rw, opts);
    assert_well_formed(&rw, "rewritten");
    let want = run_cpu(g.clone(), feeds.clone());
    for poison in [None, Some(9.0), Some(-2.5e3)] {
        let got = run_cpu(lower_to_dense(&rw, poison), feeds.clone());
        assert_same_outputs(&got, &want, &format!("poison {poison:?}"));
    }
    (rw, found)
}

fn image(rng: &mut common::Rng, name: &str, shape: &[usize]) -> (String, Tensor) {
    let n = shape.iter().product();
    (name.to_string(), Tensor::from_f32(shape.to_vec(), rng.vec(n)).unwrap())
}

fn sparse_names(d: &Detection) -> Vec<&str> {
    d.sparse.iter().map(|s| s.node.as_str()).collect()
}

#[test]
fn a_block_masked_at_its_output_runs_all_three_convs_sparse() {
    let seed = common::seed();
    for stride in [1, 2] {
        for how in ["ge", "le", "sigmoid_gt", "round_sigmoid", "clip_sign", "relu_sign", "bool_cast"] {
            let mut n = Net::new(seed);
            let logit = n.mask_logit("x", 8, stride);
            let m = threshold(&mut n, &logit, how);
            let y = bottleneck(&mut n, "x", 8, stride, &m);
            let side = 16 / stride;
            let bytes = build(n, &[("x", F32, &[1, 8, 16, 16])], &y, &[1, 8, side, side]);
            let mut rng = common::Rng(seed ^ 0x5bd1);
            let (rw, found) = detect_and_check(&bytes, vec![image(&mut rng, "x", &[1, 8, 16, 16])], &SparseOptions::default());
            let what = format!("stride {stride}, mask by {how}");
            assert_eq!(sparse_names(&found), ["conv1", "conv2", "conv3"], "{what}: {found:#?}");
            let [c1, c2, c3] = [0, 1, 2].map(|i| &found.sparse[i]);
            // conv1 runs where conv2's window reads: the mask spread by one position.
            assert_eq!(c1.dilation, [1, 1], "{what}");
            assert_eq!(c1.output_shape, [1, 4, 16, 16], "{what}");
            assert!(!c1.fused_mul && !c2.fused_mul, "{what}: nothing multiplies conv1 or conv2");
            assert_eq!((c2.dilation, c2.mask.as_str()), ([0, 0], m.as_str()), "{what}");
            assert!(c3.fused_mul, "{what}: conv3's multiplication folds in");
            // The residual join (identity or projection) folds into it too.
            assert_eq!(c3.fill, FillPolicy::Residual, "{what}");
            assert!(matches!(&c1.source, MaskSource::InGraph { node } if node.starts_with("mask.")), "{what}: {:?}", c1.source);
            // The mask unit and the projection stay dense, each with its reason.
            for d in &found.dense {
                assert!(d.node.starts_with("unit.") || d.node == "downsample", "{what}: {} dense: {}", d.node, d.reason);
                assert!(d.reason.contains("every position"), "{what}: {}: {}", d.node, d.reason);
            }
            assert_eq!(found.dense.len(), if stride == 1 { 2 } else { 3 }, "{what}");
            assert!(rw.nodes.iter().all(|n| n.op.name() != "Mul" || n.name.starts_with("needed_region/")), "{what}");
        }
    }
}

#[test]
fn basic_blocks_and_masks_brought_up_from_a_lower_resolution() {
    // ResNet's basic block (3x3 -> 3x3), the mask made at half resolution and brought up by a
    // nearest Resize, a one-hot ConvTranspose, or an Expand over channels.
    let seed = common::seed();
    for up in ["resize", "convtranspose", "expand"] {
        let mut n = Net::new(seed);
        let stride = if up == "expand" { 1 } else { 2 };
        let logit = n.mask_logit("x", 8, stride);
        let zero = n.scalar("zero", 0.0);
        let b = n.op("Greater", "mask.gt", &[&logit, &zero]);
        n.nodes.push(with_attrs(node("Cast", "mask.cast", &[&b], &["mask.low"]), vec![int_attr("to", 1)]));
        let m = match up {
            "resize" => {
                n.inits.push(f32_init("scales", &[4], &[1.0, 1.0, 2.0, 2.0]));
                n.nodes.push(with_attrs(
                    node("Resize", "mask.up", &["mask.low", "", "scales"], &["mask.up.y"]),
                    vec![str_attr("mode", "nearest")],
                ));
                "mask.up.y".to_string()
            }
            "convtranspose" => {
                n.inits.push(f32_init("onehot", &[1, 1, 2, 2], &[1.0, 0.0, 0.0, 0.0]));
                let attrs = vec![ints_attr("kernel_shape", &[2, 2]), ints_attr("strides", &[2, 2])];
                n.nodes.push(with_attrs(node("ConvTranspose", "mask.up", &["mask.low", "onehot"], &["mask.up.y"]), attrs));
                "mask.up.y".to_string()
            }
            _ => {
                n.inits.push(i64_init("full", &[4], &[1, 8, 16, 16]));
                n.op("Expand", "mask.expand", &["mask.low", "full"])
            }
        };
        let a = n.conv("conv1", "x", 8, 8, 3, 1, true);
        let c = n.conv("conv2", &a, 8, 8, 3, 1, false);
        let masked = n.op("Mul", "apply_mask", &[&c, &m]);
        let sum = n.op("Add", "residual", &["x", &masked]);
        let y = n.op("Relu", "out", &[&sum]);
        let bytes = build(n, &[("x", F32, &[1, 8, 16, 16])], &y, &[1, 8, 16, 16]);
        let mut rng = common::Rng(seed ^ 0x77);
        let (_, found) = detect_and_check(&bytes, vec![image(&mut rng, "x", &[1, 8, 16, 16])], &SparseOptions::default());
        assert_eq!(sparse_names(&found), ["conv1", "conv2"], "{up}: {found:#?}");
        assert_eq!(found.sparse[0].dilation[0], found.sparse[1].dilation[0] + 1, "{up}: conv1 reaches one further");
    }
}

#[test]
fn where_selects_and_a_model_input_mask_reaches_back_through_a_chain() {
    // SIGE-style: the mask is an input, applied by Where after three convs; every conv is found,
    // the first two on the mask spread through the windows after them.
    let seed = common::seed();
    let mut n = Net::new(seed);
    let a = n.conv("c1", "x", 3, 8, 3, 1, true);
    let b = n.conv("c2", &a, 8, 8, 3, 1, true);
    let c = n.conv("c3", &b, 8, 3, 3, 1, false);
    n.inits.push(f32_init("zeros", &[1], &[0.0]));
    let y = n.op("Where", "select", &["edit", &c, "zeros"]);
    let bytes = build(n, &[("x", F32, &[1, 3, 16, 16]), ("edit", BOOL, &[1, 1, 16, 16])], &y, &[1, 3, 16, 16]);
    let mut rng = common::Rng(seed ^ 0x99);
    let x = image(&mut rng, "x", &[1, 3, 16, 16]);
    let bits: Vec<bool> = (0..256).map(|i| (i / 16 + i % 16) % 7 == 0 || rng.next() < 0.1).collect();
    let edit = ("edit".to_string(), Tensor::new(vec![1, 1, 16, 16], dynaspa::TensorData::Bool(bits)).unwrap());
    for cached in [false, true] {
        let opts = SparseOptions { cached_model_input_masks: cached };
        let (_, found) = detect_and_check(&bytes, vec![x.clone(), edit.clone()], &opts);
        assert_eq!(sparse_names(&found), ["c1", "c2", "c3"]);
        let halos: Vec<usize> = found.sparse.iter().map(|s| s.dilation[0]).collect();
        assert_eq!(halos, [2, 1, 0]);
        for s in &found.sparse {
            assert_eq!(s.source, MaskSource::ModelInput { name: "edit".into() });
            assert_eq!(s.fill, if cached { FillPolicy::Cached } else { FillPolicy::Zero });
        }
    }
}

#[test]
fn a_value_also_read_whole_keeps_its_producer_dense_and_says_by_whom() {
    let seed = common::seed();
    let mut n = Net::new(seed);
    let logit = n.mask_logit("x", 8, 1);
    let m = threshold(&mut n, &logit, "ge");
    let a = n.conv("conv1", "x", 8, 8, 3, 1, true);
    let b = n.conv("conv2", &a, 8, 8, 3, 1, false);
    let masked = n.op("Mul", "apply_mask", &[&b, &m]);
    // conv1's result also feeds a global average: it is needed everywhere.
    let pooled = n.op("GlobalAveragePool", "side", &[&a]);
    let y = n.op("Add", "join", &[&masked, &pooled]);
    let bytes = build(n, &[("x", F32, &[1, 8, 16, 16])], &y, &[1, 8, 16, 16]);
    let mut rng = common::Rng(seed);
    let (_, found) = detect_and_check(&bytes, vec![image(&mut rng, "x", &[1, 8, 16, 16])], &SparseOptions::default());
    assert_eq!(sparse_names(&found), ["conv2"]);
    let conv1 = found.dense.iter().find(|d| d.node == "conv1").expect("conv1 listed dense");
    assert!(conv1.reason.contains("GlobalAveragePool 'side'"), "{}", conv1.reason);
}

#[test]
fn a_result_that_makes_its_own_mask_stays_dense() {
    // conv2's one channel is thresholded into the map that multiplies it.
    let seed = common::seed();
    let mut n = Net::new(seed);
    let a = n.conv("conv1", "x", 8, 8, 3, 1, true);
    let b = n.conv("conv2", &a, 8, 1, 3, 1, false);
    let m = threshold(&mut n, &b, "ge");
    let masked = n.op("Mul", "apply_mask", &[&b, &m]);
    let y = n.op("Add", "join", &[&masked, "x"]);
    let bytes = build(n, &[("x", F32, &[1, 8, 16, 16])], &y, &[1, 8, 16, 16]);
    let mut rng = common::Rng(seed);
    let (_, found) = detect_and_check(&bytes, vec![image(&mut rng, "x", &[1, 8, 16, 16])], &SparseOptions::default());
    assert!(found.sparse.is_empty(), "{found:#?}");
    let conv2 = found.dense.iter().find(|d| d.node == "conv2").expect("conv2 listed dense");
    assert!(conv2.reason.contains("mask"), "{}", conv2.reason);
}

/// The stock exports of the authors' DynConv code (models/authors/): every masked block's convs
/// are found, the first on the mask spread through the window after it, and the rewritten graph
/// with garbage at skipped positions computes the goldens' function.
#[test]
fn the_authors_dynconv_runs_every_masked_block_sparse() {
    for (model, convs_per_block, blocks) in [("dynconv_resnet50_w025", 3, 16), ("dynconv_resnet18_w025", 2, 8)] {
        let g = dynaspa::load_graph(common::repo_path(&format!("models/authors/{model}.onnx")), &LoadOptions::default()).unwrap();
        let mut rw = g.clone();
        let found = detect(&mut rw, &SparseOptions::default());
        assert_well_formed(&rw, model);
        assert_eq!(found.sparse.len(), convs_per_block * blocks, "{model}: {:#?}", found.sparse);
        let branch = |n: &str| n.contains("/layer") && ["/conv1/Conv", "/conv2/Conv", "/conv3/Conv"].iter().any(|c| n.ends_with(c));
        for s in &found.sparse {
            assert!(branch(&s.node), "{model}: {}", s.node);
            let is_first = s.node.ends_with("/conv1/Conv");
            assert_eq!(s.dilation[0] > 0, is_first, "{model}: {} halo {:?}", s.node, s.dilation);
            assert!(matches!(&s.source, MaskSource::InGraph { node } if node.contains("GreaterOrEqual")), "{model}: {:?}", s.source);
            // The block's last conv takes in the multiplication by the mask (expanded over the
            // channels in the export) and the residual join after it.
            let last = s.node.ends_with(if convs_per_block == 3 { "/conv3/Conv" } else { "/conv2/Conv" });
            assert_eq!((s.fused_mul, s.fill == FillPolicy::Residual), (last, last), "{model}: {}", s.node);
        }
        assert!(!rw.nodes.iter().any(|n| n.op.name() == "Expand" && !n.name.contains("masker")), "{model}: unread Expands left");
        assert!(found.dense.iter().all(|d| !branch(&d.node)), "{model}: {:?}", found.dense);
        let dir = common::repo_path(&format!("tests/goldens/{model}"));
        let x = dynaspa::io::npy::read(&dir.join("input_0.npy")).unwrap();
        let feeds = vec![("input".to_string(), x)];
        let want = run_cpu(g.clone(), feeds.clone());
        let got = run_cpu(lower_to_dense(&rw, Some(-7.5)), feeds);
        assert_same_outputs(&got, &want, model);
    }
}

#[test]
fn a_projection_of_masked_tokens_runs_on_the_mask_even_when_read_whole() {
    // A-ViT multiplies tokens by the halting mask before its projections and then reads every
    // row of the result: rows outside the mask are zero, so only the mask's rows are computed.
    // A bias between the projections ends that: the second one stays dense.
    let seed = common::seed();
    for bias_between in [false, true] {
        let mut n = Net::new(seed);
        n.init("score.w", &[16, 1], 0.5);
        let score = n.op("MatMul", "score", &["x", "score.w"]);
        let m = threshold(&mut n, &score, "ge");
        let masked = n.op("Mul", "apply_mask", &["x", &m]);
        n.init("p1.w", &[16, 24], 0.3);
        n.init("p2.w", &[24, 16], 0.3);
        let mut h = n.op("MatMul", "p1", &[&masked, "p1.w"]);
        if bias_between {
            n.init("p1.b", &[24], 0.2);
            h = n.op("Add", "p1/bias", &[&h, "p1.b"]);
        }
        let a = n.op("Relu", "act", &[&h]);
        let p2 = n.op("MatMul", "p2", &[&a, "p2.w"]);
        n.init("p2.b", &[16], 0.2);
        let y = n.op("Add", "p2/bias", &[&p2, "p2.b"]);
        let bytes = build(n, &[("x", F32, &[1, 12, 16])], &y, &[1, 12, 16]);
        let mut rng = common::Rng(seed ^ 0x5a);
        let (_, found) = detect_and_check(&bytes, vec![image(&mut rng, "x", &[1, 12, 16])], &SparseOptions::default());
        let want: &[&str] = if bias_between { &["p1"] } else { &["p1", "p2"] };
        assert_eq!(sparse_names(&found), want, "bias between: {bias_between}");
        assert!(found.sparse.iter().all(|s| s.fused_mul && s.fill == FillPolicy::Zero), "{found:#?}");
        if bias_between {
            let p2 = found.dense.iter().find(|d| d.node == "p2").expect("p2 listed dense");
            assert!(p2.reason.contains("graph output"), "{}", p2.reason);
        }
    }
}

#[test]
fn the_authors_avit_computes_only_the_tokens_still_running() {
    // Every block after the first multiplies its normalised tokens by the halting mask before
    // qkv and fc1 (and, with the exported zero fc1 biases, before fc2): those projections run on
    // the tokens still running. Block 0 runs before any token halts.
    let model = "avit_act_e96";
    let g = dynaspa::load_graph(common::repo_path(&format!("models/authors/{model}.onnx")), &LoadOptions::default()).unwrap();
    let mut rw = g.clone();
    let found = detect(&mut rw, &SparseOptions::default());
    assert_well_formed(&rw, model);
    let names = sparse_names(&found);
    // The attention and its output projection run on the tokens still running too: a halted
    // token's score is already past the threshold, so its halting score (read from the block
    // output) cannot change the masks.
    for l in 1..12 {
        let ops = ["/attn/qkv_{l}/MatMul", "/attn_{l}/MatMul_1", "/attn/proj_{l}/MatMul", "/mlp/fc1_{l}/MatMul", "/mlp/fc2_{l}/MatMul"];
        for op in ops.map(|o| o.replace("{l}", &l.to_string())) {
            let s = found.sparse.iter().find(|s| s.node == op).unwrap_or_else(|| panic!("{op} not sparse: {names:?}"));
            assert_eq!(s.kind, dynaspa::runtime::graph::MaskKind::Token, "{op}");
        }
    }
    assert!(names.iter().all(|n| !n.contains("qkv/") && !n.contains("fc1/") && !n.contains("fc2/")), "{names:?}");
    let dir = common::repo_path(&format!("tests/goldens/{model}"));
    let feeds = vec![("input".to_string(), dynaspa::io::npy::read(&dir.join("input_0.npy")).unwrap())];
    let want = run_cpu(g.clone(), feeds.clone());
    let got = run_cpu(lower_to_dense(&rw, Some(-7.5)), feeds);
    assert_same_outputs(&got, &want, model);
}

#[test]
fn a_halted_tokens_score_is_not_recomputed() {
    // A-ViT's halting: c2 = c1 + step(x2[:, :, 0]) and a token runs while c < 0.6. Where c1 has
    // reached 0.6 so has c2, whatever the step, as long as it cannot be negative (a sigmoid):
    // the projection behind x2 is needed only on the tokens c1 left running. A tanh step can be
    // negative, so there the projection is needed at every token.
    let seed = common::seed();
    for (step, sparse) in [("Sigmoid", true), ("Tanh", false)] {
        let mut n = Net::new(seed);
        n.inits.push(i64_init("channel0", &[], &[0]));
        n.inits.push(i64_init("column", &[3], &[1, 6, 1]));
        let t = n.scalar("t", 0.6);
        let pick = |n: &mut Net, x: &str, name: &str| -> String {
            let y = format!("{name}.y");
            n.nodes.push(with_attrs(node("Gather", name, &[x, "channel0"], &[&y]), vec![int_attr("axis", 2)]));
            y
        };
        let running = |n: &mut Net, c: &str, k: u32| -> String {
            let l = n.op("Less", &format!("running{k}"), &[c, &t]);
            let name = format!("running{k}/cast");
            n.nodes.push(with_attrs(node("Cast", &name, &[&l], &[&format!("{name}.y")]), vec![int_attr("to", 1)]));
            n.op("Reshape", &format!("running{k}/column"), &[&format!("{name}.y"), "column"])
        };
        let s1 = pick(&mut n, "x", "pick1");
        let c1 = n.op("Sigmoid", "score1", &[&s1]);
        let m1 = running(&mut n, &c1, 1);
        let x1 = n.op("Mul", "halt1", &["x", &m1]);
        n.init("proj.w", &[8, 8], 0.3);
        n.init("proj.b", &[8], 0.1);
        let p = n.op("MatMul", "proj", &["x", "proj.w"]);
        let pb = n.op("Add", "proj/bias", &[&p, "proj.b"]);
        let x2 = n.op("Add", "residual", &[&x1, &pb]);
        let s2 = pick(&mut n, &x2, "pick2");
        let h2 = n.op(step, "step2", &[&s2]);
        let c2 = n.op("Add", "score2", &[&c1, &h2]);
        let m2 = running(&mut n, &c2, 2);
        let y = n.op("Mul", "halt2", &[&x2, &m2]);
        let bytes = build(n, &[("x", F32, &[1, 6, 8])], &y, &[1, 6, 8]);
        let mut rng = common::Rng(seed ^ 0x4a17);
        let x = image(&mut rng, "x", &[1, 6, 8]);
        let (_, found) = detect_and_check(&bytes, vec![x], &SparseOptions::default());
        if sparse {
            assert_eq!(sparse_names(&found), ["proj"], "{step}: {found:#?}");
            assert!(found.sparse[0].mask.contains("running1") || found.sparse[0].mask.starts_with("needed_region/"), "{found:#?}");
        } else {
            let d = found.dense.iter().find(|d| d.node == "proj").unwrap_or_else(|| panic!("{step}: {found:#?}"));
            assert!(d.reason.contains("every position"), "{}", d.reason);
        }
    }
}
