//! Every GPU backend against the CPU backend, op by op, at shapes that reach each kernel's
//! paths (large and small GEMM tiles, direct and tiled convolutions, work-group and per-item
//! reductions, broadcasting, views), with random inputs. GPU outputs are poisoned with NaN
//! before each kernel, so an element a kernel fails to write fails the comparison.

mod common;
use common::{seed, Rng};
#[path = "common/onnx_build.rs"]
#[allow(dead_code, unused_mut)]
mod onnx_build;

use dynaspa::backends::BackendOptions;
use dynaspa::runtime::graph::{Attention, Graph, Node, Op, ScoreScale, Value};
use dynaspa::runtime::onnx::proto::onnx::{AttributeProto, TensorProto};
use dynaspa::{DType, LoadOptions, Session, Tensor, TensorData};
use onnx_build::*;

impl Rng {
    fn tensor(&mut self, shape: &[usize]) -> Tensor {
        Tensor::from_f32(shape.to_vec(), self.vec(shape.iter().product())).unwrap()
    }
}

fn session(g: Graph, backend: &str, opts: &BackendOptions) -> Session {
    let b = dynaspa::backends::create_configured(backend, &BackendOptions { poison: true, ..opts.clone() })
        .unwrap_or_else(|e| panic!("{backend}: {e}"));
    Session::new(g, b.as_ref()).unwrap_or_else(|e| panic!("{backend}: {e}"))
}

/// Runs `g` on the CPU and on `backend` and compares every output.
fn compare(case: &str, g: &Graph, feeds: &[(String, Tensor)], backend: &str) {
    compare_with(case, g, feeds, backend, &BackendOptions::default())
}

/// `compare` with the GPU backend built with `opts` (poisoning on).
fn compare_with(case: &str, g: &Graph, feeds: &[(String, Tensor)], backend: &str, opts: &BackendOptions) {
    let run = |b: &str| session(g.clone(), b, opts).run(feeds.to_vec()).unwrap_or_else(|e| panic!("{case} on {b}: {e}"));
    let (want, got) = (run("cpu"), run(backend));
    for ((name, w), (_, o)) in want.iter().zip(&got) {
        assert_eq!((o.dtype(), o.shape()), (w.dtype(), w.shape()), "{case}: output {name}");
        match (o.data(), w.data()) {
            (TensorData::F32(a), TensorData::F32(b)) => {
                assert!(
                    a.iter().zip(b).all(|(x, y)| x.is_nan() == y.is_nan()),
                    "{case} on {backend}: output {name} has NaNs where the CPU has none"
                );
                let (fa, fb): (Vec<f32>, Vec<f32>) = a.iter().zip(b).filter(|(_, y)| !y.is_nan()).map(|(x, y)| (*x, *y)).unzip();
                let err = common::rel_l2(&fa, &fb);
                assert!(err <= 2e-5, "{case} on {backend}: output {name} relative L2 {err:.2e}");
            }
            _ => assert_eq!(o, w, "{case} on {backend}: output {name}"),
        }
    }
}

fn load(bytes: &[u8]) -> Graph {
    dynaspa::load_graph_bytes(bytes, &LoadOptions::default()).unwrap()
}

/// A one-node ONNX model: float inputs `xs` (name, shape), constant initialisers, one output per name.
fn one_node(op: &str, xs: &[(&str, &[usize])], inits: Vec<TensorProto>, attrs: Vec<AttributeProto>, outs: &[&str], opset: i64) -> Vec<u8> {
    let mut names: Vec<&str> = xs.iter().map(|x| x.0).collect();
    let init_names: Vec<String> = inits.iter().map(|t| t.name().to_string()).collect();
    names.extend(init_names.iter().map(String::as_str));
    let n = with_attrs(node(op, "op", &names, outs), attrs);
    let ins = xs.iter().map(|(name, s)| value_info(name, 1, &s.iter().map(|&d| d as i64).collect::<Vec<_>>())).collect();
    let o = outs.iter().map(|n| value_info(n, 1, &[])).collect();
    model_opset(opset, vec![n], ins, o, inits)
}

fn feeds(rng: &mut Rng, xs: &[(&str, &[usize])]) -> Vec<(String, Tensor)> {
    xs.iter().map(|(n, s)| (n.to_string(), rng.tensor(s))).collect()
}

fn check_onnx(backend: &str, case: &str, bytes: &[u8], feed: &[(String, Tensor)]) {
    compare(case, &load(bytes), feed, backend);
}

backend_test!(convolutions_and_pools_match_the_cpu, gpus, |backend| convolutions_and_pools_match_the_cpu(backend));

fn convolutions_and_pools_match_the_cpu(backend: &str) {
    let mut rng = Rng(seed());
    let conv = |rng: &mut Rng, case: &str, x: &[usize], w: &[usize], attrs: Vec<_>, bias: bool| {
        let mut inits = vec![f32_init("w", &w.iter().map(|&d| d as i64).collect::<Vec<_>>(), &rng.vec(w.iter().product()))];
        if bias {
            inits.push(f32_init("b", &[w[0] as i64], &rng.vec(w[0])));
        }
        let xs = [("x", x)];
        check_onnx(backend, case, &one_node("Conv", &xs, inits, attrs, &["y"], 17), &feeds(rng, &xs));
    };
    // One and three output channels over a long reduction (a mask unit): a work-group per output.
    conv(&mut rng, "conv 1x1 to 1 channel, 300 inputs", &[2, 300, 7, 9], &[1, 300, 1, 1], vec![], true);
    conv(
        &mut rng,
        "conv 3x3 s2 to 3 channels, 40 inputs",
        &[1, 40, 11, 10],
        &[3, 40, 3, 3],
        vec![ints_attr("pads", &[1, 1, 1, 1]), ints_attr("strides", &[2, 2])],
        false,
    );
    // Two output channels per group of 32 inputs, batch 2, dilated and strided: lanes over
    // the channels of each group.
    conv(
        &mut rng,
        "conv 3x3 grouped to 2 channels per group",
        &[2, 64, 13, 15],
        &[4, 32, 3, 3],
        vec![int_attr("group", 2), ints_attr("strides", &[2, 1]), ints_attr("dilations", &[1, 2]), ints_attr("pads", &[1, 2, 1, 2])],
        true,
    );
    // 64 output channels x 420 positions: the large GEMM tile.
    conv(&mut rng, "conv 3x3 large tile", &[2, 16, 20, 21], &[64, 16, 3, 3], vec![ints_attr("pads", &[1, 1, 1, 1])], true);
    conv(
        &mut rng,
        "conv grouped strided dilated",
        &[1, 24, 17, 19],
        &[48, 12, 3, 3],
        vec![int_attr("group", 2), ints_attr("strides", &[2, 2]), ints_attr("dilations", &[2, 2]), ints_attr("pads", &[1, 2, 0, 1])],
        true,
    );
    conv(&mut rng, "depthwise 5x5", &[1, 32, 15, 16], &[32, 1, 5, 5], vec![int_attr("group", 32), ints_attr("pads", &[2, 2, 2, 2])], true);
    conv(&mut rng, "conv 1-D", &[2, 8, 30], &[16, 8, 5], vec![ints_attr("strides", &[2]), ints_attr("pads", &[2, 2])], false);
    conv(&mut rng, "conv 3-D", &[1, 8, 5, 6, 7], &[12, 8, 3, 3, 3], vec![ints_attr("pads", &[1, 1, 1, 1, 1, 1])], true);
    conv(
        &mut rng,
        "conv asymmetric same_upper",
        &[1, 9, 11, 13],
        &[10, 9, 4, 2],
        vec![str_attr("auto_pad", "SAME_UPPER"), ints_attr("strides", &[2, 3])],
        true,
    );

    // Conv -> Add(residual) -> Relu fuses into one conv with an epilogue.
    let (x, r) = ([1usize, 32, 9, 10], [1usize, 40, 9, 10]);
    let nodes =
        vec![node("Conv", "c", &["x", "w", "b"], &["c"]), node("Add", "a", &["c", "r"], &["s"]), node("Relu", "act", &["s"], &["y"])];
    let inits = vec![f32_init("w", &[40, 32, 1, 1], &rng.vec(40 * 32)), f32_init("b", &[40], &rng.vec(40))];
    let bytes =
        model(nodes, vec![value_info("x", 1, &[1, 32, 9, 10]), value_info("r", 1, &[1, 40, 9, 10])], vec![value_info("y", 1, &[])], inits);
    let g = load(&bytes);
    assert!(g.nodes.iter().any(|n| matches!(&n.op, Op::Conv(c) if c.fused_add && c.activation.is_some())), "the residual and ReLU fuse");
    check_onnx(backend, "conv + residual + relu", &bytes, &feeds(&mut rng, &[("x", &x), ("r", &r)]));

    for (case, x, w, group, attrs) in [
        (
            "conv transpose s2",
            vec![1usize, 16, 7, 9],
            vec![16usize, 8, 3, 3],
            1usize,
            vec![ints_attr("strides", &[2, 2]), ints_attr("pads", &[1, 1, 1, 1]), ints_attr("output_padding", &[1, 1])],
        ),
        (
            "conv transpose grouped",
            vec![2, 16, 5, 6],
            vec![16, 4, 4, 4],
            2,
            vec![int_attr("group", 2), ints_attr("strides", &[2, 2]), ints_attr("pads", &[1, 1, 1, 1])],
        ),
        // The phased GEMM's paths (conv.cl, convt_gemm_f32): a kernel under the stride (phases
        // no tap reaches hold the bias), uneven strides and pads, 1-D, 3-D, large tiles with
        // SIGE's upsampler geometry; dilations take the gather.
        ("conv transpose k2 s3", vec![1, 5, 6, 7], vec![5, 4, 2, 2], 1, vec![ints_attr("strides", &[3, 3])]),
        (
            "conv transpose strides 1x2, uneven pads",
            vec![2, 6, 9, 5],
            vec![6, 3, 3, 4],
            1,
            vec![ints_attr("strides", &[1, 2]), ints_attr("pads", &[0, 2, 1, 1])],
        ),
        (
            "conv transpose 1-D",
            vec![2, 8, 17],
            vec![8, 5, 5],
            1,
            vec![ints_attr("strides", &[2]), ints_attr("pads", &[2, 1]), ints_attr("output_padding", &[1])],
        ),
        (
            "conv transpose 3-D",
            vec![1, 4, 3, 5, 4],
            vec![4, 3, 3, 3, 2],
            1,
            vec![ints_attr("strides", &[2, 1, 2]), ints_attr("pads", &[1, 1, 0, 1, 0, 0])],
        ),
        (
            "conv transpose s2 large tiles",
            vec![1, 64, 14, 11],
            vec![64, 64, 3, 3],
            1,
            vec![ints_attr("strides", &[2, 2]), ints_attr("pads", &[1, 1, 1, 1]), ints_attr("output_padding", &[1, 1])],
        ),
        (
            "conv transpose dilated",
            vec![1, 6, 7, 8],
            vec![6, 4, 3, 3],
            1,
            vec![ints_attr("strides", &[2, 2]), ints_attr("dilations", &[2, 2]), ints_attr("pads", &[1, 1, 1, 1])],
        ),
    ] {
        let cout = w[1] * group;
        let inits = vec![
            f32_init("w", &w.iter().map(|&d| d as i64).collect::<Vec<_>>(), &rng.vec(w.iter().product())),
            f32_init("b", &[cout as i64], &rng.vec(cout)),
        ];
        let xs = [("x", x.as_slice())];
        // Both kernels on every backend: a device's default takes one (the gather on CPU devices).
        let g = load(&one_node("ConvTranspose", &xs, inits, attrs, &["y"], 17));
        let f = feeds(&mut rng, &xs);
        for gemm in [true, false] {
            let opts = BackendOptions { convt_gemm: Some(gemm), ..Default::default() };
            compare_with(&format!("{case} (phased GEMM {gemm})"), &g, &f, backend, &opts);
        }
    }

    let x: &[usize] = &[2, 5, 23, 29];
    let xs = [("x", x)];
    for (case, op, attrs) in [
        (
            "maxpool 3x3 s2 ceil",
            "MaxPool",
            vec![
                ints_attr("kernel_shape", &[3, 3]),
                ints_attr("strides", &[2, 2]),
                ints_attr("pads", &[1, 1, 1, 1]),
                int_attr("ceil_mode", 1),
            ],
        ),
        (
            "avgpool count pads",
            "AveragePool",
            vec![
                ints_attr("kernel_shape", &[5, 4]),
                ints_attr("strides", &[3, 2]),
                ints_attr("pads", &[2, 1, 2, 0]),
                int_attr("count_include_pad", 1),
            ],
        ),
        ("avgpool exclude pads", "AveragePool", vec![ints_attr("kernel_shape", &[3, 3]), ints_attr("pads", &[1, 1, 1, 1])]),
        ("global average pool", "GlobalAveragePool", vec![]),
    ] {
        check_onnx(backend, case, &one_node(op, &xs, vec![], attrs, &["y"], 17), &feeds(&mut rng, &xs));
    }
    // Few outputs over a mid-length reduction (a mask unit's pool): a work-group per channel.
    let xs = [("x", &[2usize, 100, 14, 14][..])];
    check_onnx(
        backend,
        "global average pool, 200 channels of 196",
        &one_node("GlobalAveragePool", &xs, vec![], vec![], &["y"], 17),
        &feeds(&mut rng, &xs),
    );
}

backend_test!(matmuls_and_gemms_match_the_cpu, gpus, |backend| matmuls_and_gemms_match_the_cpu(backend));

fn matmuls_and_gemms_match_the_cpu(backend: &str) {
    let mut rng = Rng(seed());
    for (case, a, b) in [
        ("matmul batched, B broadcast", vec![2usize, 3, 37, 45], vec![45usize, 70]),
        ("matmul both broadcast", vec![3, 1, 20, 30], vec![1, 4, 30, 65]),
        ("matmul 1-D left", vec![45], vec![2, 45, 7]),
        ("matmul 1-D right", vec![5, 64, 33], vec![33]),
        ("matmul large tile", vec![130, 96], vec![96, 140]),
        // Few rows, long reductions: a work-group per output (gemm_reduce_f32).
        ("matmul few rows, batched", vec![2, 3, 300], vec![2, 300, 50]),
        ("matmul 1-D left, long", vec![700], vec![700, 9]),
    ] {
        let xs = [("a", a.as_slice()), ("b", b.as_slice())];
        check_onnx(backend, case, &one_node("MatMul", &xs, vec![], vec![], &["y"], 17), &feeds(&mut rng, &xs));
    }
    let gemm = |rng: &mut Rng, case: &str, a: &[usize], b: &[usize], c: &[usize], attrs: Vec<_>| {
        let xs = [("a", a), ("b", b), ("c", c)];
        check_onnx(backend, case, &one_node("Gemm", &xs, vec![], attrs, &["y"], 17), &feeds(rng, &xs));
    };
    gemm(
        &mut rng,
        "gemm transposed, row bias",
        &[64, 33],
        &[80, 64],
        &[80],
        vec![int_attr("transA", 1), int_attr("transB", 1), float_attr("alpha", 0.7), float_attr("beta", 1.3)],
    );
    gemm(&mut rng, "gemm large tile, column bias", &[128, 100], &[100, 130], &[128, 1], vec![]);
    gemm(&mut rng, "gemm scalar bias", &[7, 9], &[9, 3], &[], vec![float_attr("beta", -0.5)]);
    gemm(
        &mut rng,
        "gemm classifier at batch 1 (B transposed, row bias)",
        &[1, 2048],
        &[1000, 2048],
        &[1000],
        vec![int_attr("transB", 1), float_attr("alpha", 0.9)],
    );
    gemm(
        &mut rng,
        "gemm few rows, A transposed, full bias",
        &[260, 5],
        &[260, 30],
        &[5, 30],
        vec![int_attr("transA", 1), float_attr("beta", 0.5)],
    );
}

backend_test!(normalisations_and_reductions_match_the_cpu, gpus, |backend| normalisations_and_reductions_match_the_cpu(backend));

fn normalisations_and_reductions_match_the_cpu(backend: &str) {
    let mut rng = Rng(seed());
    let simple = |rng: &mut Rng, case: &str, op: &str, x: &[usize], attrs: Vec<_>, opset: i64| {
        let xs = [("x", x)];
        check_onnx(backend, case, &one_node(op, &xs, vec![], attrs, &["y"], opset), &feeds(rng, &xs));
    };
    simple(&mut rng, "softmax rows", "Softmax", &[4, 7, 300], vec![int_attr("axis", -1)], 17);
    simple(&mut rng, "softmax columns", "Softmax", &[3, 50, 6], vec![int_attr("axis", 1)], 17);
    simple(&mut rng, "softmax legacy", "Softmax", &[3, 5, 6], vec![int_attr("axis", 1)], 11);
    simple(&mut rng, "reduce mean, work-group", "ReduceMean", &[3, 40, 5, 70], vec![ints_attr("axes", &[1, 3])], 17);
    simple(&mut rng, "reduce max, per item", "ReduceMax", &[50, 30, 2], vec![ints_attr("axes", &[0]), int_attr("keepdims", 0)], 17);
    simple(&mut rng, "reduce mean, all", "ReduceMean", &[6, 7, 8], vec![], 17);
    let xs: [(&str, &[usize]); 1] = [("x", &[4, 9, 33])];
    let axes = i64_init("axes", &[2], &[0, 2]);
    check_onnx(backend, "reduce sum, axes input", &one_node("ReduceSum", &xs, vec![axes], vec![], &["y"], 17), &feeds(&mut rng, &xs));

    let x: &[usize] = &[2, 9, 5, 96];
    for (case, scale, axis) in [("layer norm last axis", vec![96usize], -1i64), ("layer norm broadcast scale", vec![1, 96], -2)] {
        let inits = vec![
            f32_init("s", &scale.iter().map(|&d| d as i64).collect::<Vec<_>>(), &rng.vec(96)),
            f32_init("b", &scale.iter().map(|&d| d as i64).collect::<Vec<_>>(), &rng.vec(96)),
        ];
        let xs = [("x", x)];
        check_onnx(
            backend,
            case,
            &one_node("LayerNormalization", &xs, inits, vec![int_attr("axis", axis), float_attr("epsilon", 1e-3)], &["y"], 17),
            &feeds(&mut rng, &xs),
        );
    }
    let x: &[usize] = &[2, 6, 13, 11];
    let xs = [("x", x)];
    let inits = vec![f32_init("s", &[6], &rng.vec(6)), f32_init("b", &[6], &rng.vec(6))];
    check_onnx(backend, "instance norm", &one_node("InstanceNormalization", &xs, inits, vec![], &["y"], 17), &feeds(&mut rng, &xs));
    let inits = vec![f32_init("s", &[3], &rng.vec(3)), f32_init("b", &[3], &rng.vec(3))];
    check_onnx(
        backend,
        "group norm per group",
        &one_node("GroupNormalization", &xs, inits, vec![int_attr("num_groups", 3)], &["y"], 18),
        &feeds(&mut rng, &xs),
    );
    let inits = vec![f32_init("s", &[6], &rng.vec(6)), f32_init("b", &[6], &rng.vec(6))];
    check_onnx(
        backend,
        "group norm per channel",
        &one_node("GroupNormalization", &xs, inits, vec![int_attr("num_groups", 2)], &["y"], 21),
        &feeds(&mut rng, &xs),
    );
    let var: Vec<f32> = rng.vec(6).iter().map(|v| v.abs() + 0.1).collect();
    let mut inits: Vec<_> = ["s", "b", "m"].iter().map(|n| f32_init(n, &[6], &rng.vec(6))).collect();
    inits.push(f32_init("v", &[6], &var));
    check_onnx(backend, "batch norm", &one_node("BatchNormalization", &xs, inits, vec![], &["y"], 17), &feeds(&mut rng, &xs));
    let axis = i64_init("axis", &[], &[1]);
    check_onnx(
        backend,
        "cumsum reverse exclusive",
        &one_node("CumSum", &xs, vec![axis], vec![int_attr("exclusive", 1), int_attr("reverse", 1)], &["y"], 17),
        &feeds(&mut rng, &xs),
    );
}

backend_test!(data_movement_matches_the_cpu, gpus, |backend| data_movement_matches_the_cpu(backend));

fn data_movement_matches_the_cpu(backend: &str) {
    let mut rng = Rng(seed());
    let x: &[usize] = &[2, 3, 17, 19];
    let xs = [("x", x)];
    let one = |rng: &mut Rng, case: &str, op: &str, inits: Vec<_>, attrs: Vec<_>, outs: &[&str], opset: i64| {
        check_onnx(backend, case, &one_node(op, &xs, inits, attrs, outs, opset), &feeds(rng, &xs));
    };
    one(&mut rng, "transpose", "Transpose", vec![], vec![ints_attr("perm", &[0, 2, 3, 1])], &["y"], 17);
    one(&mut rng, "transpose reverse", "Transpose", vec![], vec![], &["y"], 17);
    let sl =
        vec![i64_init("s", &[2], &[-2, 15]), i64_init("e", &[2], &[0, 1]), i64_init("a", &[2], &[1, 3]), i64_init("st", &[2], &[-1, -3])];
    one(&mut rng, "slice negative steps", "Slice", sl, vec![], &["y"], 17);
    one(&mut rng, "split uneven", "Split", vec![i64_init("sp", &[3], &[5, 2, 10])], vec![int_attr("axis", 2)], &["y0", "y1", "y2"], 17);
    one(
        &mut rng,
        "gather negative indices",
        "Gather",
        vec![i64_init("i", &[2, 3], &[0, -1, 5, 16, 3, -17])],
        vec![int_attr("axis", 2)],
        &["y"],
        17,
    );
    one(&mut rng, "expand", "Expand", vec![i64_init("sh", &[5], &[4, 2, 3, 1, 19])], vec![], &["y"], 17);
    for mode in ["constant", "reflect", "edge", "wrap"] {
        let inits = vec![i64_init("p", &[8], &[0, 1, 2, 3, 1, 0, 4, 2]), f32_init("v", &[], &[0.25])];
        one(&mut rng, &format!("pad {mode}"), "Pad", inits, vec![str_attr("mode", mode)], &["y"], 19);
    }
    one(
        &mut rng,
        "resize linear up",
        "Resize",
        vec![f32_init("roi", &[0], &[]), f32_init("sc", &[4], &[1.0, 1.0, 2.0, 1.5])],
        vec![str_attr("mode", "linear")],
        &["y"],
        19,
    );
    one(
        &mut rng,
        "resize linear antialiased down",
        "Resize",
        vec![f32_init("roi", &[0], &[]), f32_init("sc", &[4], &[1.0, 1.0, 0.4, 0.6])],
        vec![str_attr("mode", "linear"), int_attr("antialias", 1)],
        &["y"],
        19,
    );
    one(
        &mut rng,
        "resize nearest sizes",
        "Resize",
        vec![f32_init("roi", &[0], &[]), f32_init("sc", &[0], &[]), i64_init("sz", &[4], &[2, 3, 40, 9])],
        vec![str_attr("mode", "nearest"), str_attr("coordinate_transformation_mode", "asymmetric"), str_attr("nearest_mode", "floor")],
        &["y"],
        19,
    );
    one(
        &mut rng,
        "resize tf crop",
        "Resize",
        vec![f32_init("roi", &[8], &[0.0, 0.0, -0.2, 0.1, 1.0, 1.0, 0.9, 1.3]), f32_init("sc", &[4], &[1.0, 1.0, 1.2, 0.8])],
        vec![
            str_attr("mode", "linear"),
            str_attr("coordinate_transformation_mode", "tf_crop_and_resize"),
            float_attr("extrapolation_value", 7.5),
        ],
        &["y"],
        19,
    );

    // Concat of three inputs along a middle axis, behind a view.
    let nodes = vec![
        with_attrs(node("Concat", "c", &["a", "b", "c"], &["y"]), vec![int_attr("axis", 1)]),
        node("Reshape", "r", &["y", "shape"], &["z"]),
        node("Relu", "act", &["z"], &["w"]),
    ];
    let ins = vec![value_info("a", 1, &[2, 3, 4]), value_info("b", 1, &[2, 5, 4]), value_info("c", 1, &[2, 1, 4])];
    let bytes = model(nodes, ins, vec![value_info("w", 1, &[]), value_info("y", 1, &[])], vec![i64_init("shape", &[2], &[-1, 8])]);
    check_onnx(backend, "concat, reshape, relu", &bytes, &feeds(&mut rng, &[("a", &[2, 3, 4]), ("b", &[2, 5, 4]), ("c", &[2, 1, 4])]));
}

backend_test!(elementwise_types_and_broadcasts_match_the_cpu, gpus, |backend| elementwise_types_and_broadcasts_match_the_cpu(backend));

fn elementwise_types_and_broadcasts_match_the_cpu(backend: &str) {
    let mut rng = Rng(seed());
    // Greater -> Where -> Cast(int) -> Mul(int) -> Cast(float), with broadcasting throughout.
    let nodes = vec![
        node("Greater", "gt", &["a", "b"], &["m"]),
        node("Where", "w", &["m", "a", "half"], &["s"]),
        with_attrs(node("Cast", "ci", &["s"], &["i"]), vec![int_attr("to", 6)]),
        node("Mul", "mi", &["i", "three"], &["j"]),
        with_attrs(node("Cast", "cf", &["j"], &["f"]), vec![int_attr("to", 1)]),
        node("Clip", "cl", &["a", "lo", "hi"], &["c"]),
        node("Pow", "p", &["b", "two"], &["q"]),
        node("Div", "d", &["q", "b"], &["r"]),
        node("Sqrt", "sq", &["q"], &["t"]),
        with_attrs(node("LeakyRelu", "lr", &["a"], &["u"]), vec![float_attr("alpha", 0.2)]),
        node("Erf", "e", &["a"], &["v"]),
        node("Not", "n", &["m"], &["nm"]),
    ];
    let mut three = i64_init("three", &[], &[3]);
    three.set_data_type(6);
    three.int64_data.clear();
    three.int32_data = vec![3];
    let inits = vec![
        f32_init("half", &[1], &[0.5]),
        three,
        f32_init("lo", &[], &[-0.3]),
        f32_init("hi", &[], &[0.6]),
        f32_init("two", &[], &[2.0]),
    ];
    let outs: Vec<_> = ["f", "c", "r", "t", "u", "v", "nm", "m"].iter().map(|n| value_info(n, 1, &[])).collect();
    let bytes = model(nodes, vec![value_info("a", 1, &[3, 1, 40]), value_info("b", 1, &[5, 1])], outs, inits);
    let mut f = feeds(&mut rng, &[("a", &[3, 1, 40]), ("b", &[5, 1])]);
    f[1].1.as_f32_mut().unwrap().iter_mut().for_each(|v| *v = v.abs() + 0.05);
    check_onnx(backend, "compare, where, casts, int math, clip, pow", &bytes, &f);
}

backend_test!(mask_unit_ops_match_the_cpu, gpus, |backend| mask_unit_ops_match_the_cpu(backend));

/// The ops mask and halting units threshold and combine with: inclusive comparisons, Or/Xor,
/// Sign/Round/Floor/Ceil, Reciprocal/Log/Softplus, and Min/Max over one, two and three
/// broadcast inputs, on floats and integers.
fn mask_unit_ops_match_the_cpu(backend: &str) {
    let mut rng = Rng(seed());
    let nodes = vec![
        node("GreaterOrEqual", "ge", &["a", "zero"], &["ge"]),
        node("LessOrEqual", "le", &["a", "b"], &["le"]),
        node("Or", "or", &["ge", "le"], &["or"]),
        node("Xor", "xor", &["ge", "le"], &["xor"]),
        node("Mul", "m4", &["a", "four"], &["a4"]),
        node("Sign", "sg", &["a"], &["sg"]),
        node("Round", "rd", &["a4"], &["rd"]),
        node("Floor", "fl", &["a4"], &["fl"]),
        node("Ceil", "ce", &["a4"], &["ce"]),
        node("Reciprocal", "rc", &["b"], &["rc"]),
        node("Log", "lg", &["b"], &["lg"]),
        node("Softplus", "sp", &["a4"], &["sp"]),
        node("Max", "max3", &["a", "b", "c"], &["max3"]),
        node("Min", "min2", &["b", "a"], &["min2"]),
        node("Max", "max1", &["a"], &["max1"]),
        with_attrs(node("Cast", "ci", &["a4"], &["ai"]), vec![int_attr("to", 6)]),
        node("Min", "mini", &["ai", "two", "ai"], &["mini"]),
        node("Max", "maxi", &["ai", "two"], &["maxi"]),
        node("Sign", "sgi", &["ai"], &["sgi"]),
    ];
    let mut two = i64_init("two", &[1], &[2]);
    two.set_data_type(6);
    two.int64_data.clear();
    two.int32_data = vec![2];
    let inits = vec![f32_init("zero", &[], &[0.0]), f32_init("four", &[], &[4.0]), two];
    let out_names = ["ge", "le", "or", "xor", "sg", "rd", "fl", "ce", "rc", "lg", "sp", "max3", "min2", "max1", "mini", "maxi", "sgi"];
    let outs: Vec<_> = out_names.iter().map(|n| value_info(n, 1, &[])).collect();
    let ins = vec![value_info("a", 1, &[3, 1, 40]), value_info("b", 1, &[5, 1]), value_info("c", 1, &[40])];
    let bytes = model(nodes, ins, outs, inits);
    let mut f = feeds(&mut rng, &[("a", &[3, 1, 40]), ("b", &[5, 1]), ("c", &[40])]);
    f[1].1.as_f32_mut().unwrap().iter_mut().for_each(|v| *v = v.abs() + 0.05);
    check_onnx(backend, "mask unit ops", &bytes, &f);
}

backend_test!(round_takes_halves_to_even_on_every_backend, |backend| round_takes_halves_to_even_on_every_backend(backend));

/// Round takes halves to the even integer on every backend (the node suite's case has none).
fn round_takes_halves_to_even_on_every_backend(backend: &str) {
    let x = [-2.5f32, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999997, -3.7, 8388607.5, 1e30];
    let want = [-2.0f32, -2.0, -0.0, 0.0, 2.0, 2.0, 4.0, 0.0, -4.0, 8388608.0, 1e30];
    let bytes = one_node("Round", &[("x", &[x.len()])], vec![], vec![], &["y"], 13);
    let feed = vec![("x".to_string(), Tensor::from_f32(vec![x.len()], x.to_vec()).unwrap())];
    let out = session(load(&bytes), backend, &BackendOptions::default()).run(feed.clone()).unwrap();
    let got = out[0].1.as_f32().unwrap();
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(got), bits(&want), "Round on {backend}: {got:?}");
}

backend_test!(sin_and_cos_are_accurate_on_every_backend, |backend| sin_and_cos_are_accurate_on_every_backend(backend));

/// Sin and Cos within 2e-6 of the exact value on every backend, from small arguments to the
/// thousands (a diffusion U-Net's timestep embedding takes them of t * frequency, t up to 1000);
/// NaN and infinities give NaN.
fn sin_and_cos_are_accurate_on_every_backend(backend: &str) {
    let mut rng = Rng(seed());
    let mut x: Vec<f32> = vec![0.0, -0.0, 1e-30, std::f32::consts::PI, -std::f32::consts::FRAC_PI_2, 12867.0];
    for scale in [1.0f32, 4.0, 100.0, 1000.0, 10000.0] {
        x.extend(rng.vec(200).into_iter().map(|v| v * scale));
    }
    let n = x.len();
    x.extend([f32::NAN, f32::INFINITY, f32::NEG_INFINITY]);
    let feed = vec![("x".to_string(), Tensor::from_f32(vec![x.len()], x.clone()).unwrap())];
    for (op, exact) in [("Sin", f64::sin as fn(f64) -> f64), ("Cos", f64::cos)] {
        let bytes = one_node(op, &[("x", &[x.len()])], vec![], vec![], &["y"], 17);
        let mut s = session(load(&bytes), backend, &BackendOptions::default());
        s.check_finite = false; // NaN and infinities are fed on purpose
        let out = s.run(feed.clone()).unwrap();
        let got = out[0].1.as_f32().unwrap();
        for (i, (&v, &y)) in x.iter().zip(got).enumerate() {
            if i >= n {
                assert!(y.is_nan(), "{op}({v}) on {backend}: {y}, not NaN");
                continue;
            }
            let err = (y as f64 - exact(v as f64)).abs();
            assert!(err <= 2e-6, "{op}({v}) on {backend}: {y}, off by {err:.2e}");
        }
    }
}

backend_test!(fused_attention_matches_the_cpu, gpus, |backend| fused_attention_matches_the_cpu(backend));

/// Attention built in the IR: bias broadcast per key and per query row, k stored transposed,
/// and a `Div` scale.
fn fused_attention_matches_the_cpu(backend: &str) {
    let mut rng = Rng(seed());
    for (k_transposed, bias_shape, scale, tk) in [
        (false, Some(vec![2usize, 1, 1, 70]), ScoreScale::Mul(0.125), 70usize),
        (true, Some(vec![1, 3, 33, 70]), ScoreScale::Div(8.0), 70),
        (false, None, ScoreScale::Mul(1.0), 300),
    ] {
        let (b, h, tq, d) = (2usize, 3usize, 33usize, 16usize);
        let kshape = if k_transposed { vec![b, h, d, tk] } else { vec![b, h, tk, d] };
        let mut shapes = vec![("q", vec![b, h, tq, d]), ("k", kshape), ("v", vec![b, h, tk, 24])];
        if let Some(bs) = &bias_shape {
            shapes.push(("bias", bs.clone()));
        }
        let mut g = Graph { name: "attention".into(), opset: 17, ..Default::default() };
        for (n, s) in &shapes {
            g.values.push(Value { name: n.to_string(), dtype: DType::F32, shape: s.clone(), constant: None });
        }
        g.inputs = (0..shapes.len()).collect();
        g.values.push(Value { name: "y".into(), dtype: DType::F32, shape: vec![b, h, tq, 24], constant: None });
        let y = g.values.len() - 1;
        g.outputs = vec![y];
        let op = Op::Attention(Attention { heads: h, scale, k_transposed, key_mask: None });
        g.nodes.push(Node { name: "attn".into(), op, inputs: (0..shapes.len()).map(Some).collect(), outputs: vec![y], sparse: None });
        let f: Vec<(String, Tensor)> = shapes.iter().map(|(n, s)| (n.to_string(), rng.tensor(s))).collect();
        compare(&format!("attention k_transposed={k_transposed} bias={bias_shape:?} tk={tk}"), &g, &f, backend);
    }
}
