//! Unit tests of `detect_sparse_regions` on IR graphs built in place: mask sources, halos through
//! resampling, idempotence, and generated graphs (the pass's verdict against the one known from
//! construction, and no panic on random or malformed graphs).

use super::*;
use crate::graph::op::*;
use crate::graph::{Graph, Node, Value};
use crate::tensor::{DType, Tensor, TensorData};
use std::sync::Arc;

#[derive(Default)]
struct B {
    g: Graph,
}

impl B {
    fn value(&mut self, name: &str, dtype: DType, shape: &[usize]) -> ValueId {
        self.g.values.push(Value { name: name.into(), dtype, shape: shape.to_vec(), constant: None });
        self.g.values.len() - 1
    }
    fn input(&mut self, name: &str, dtype: DType, shape: &[usize]) -> ValueId {
        let v = self.value(name, dtype, shape);
        self.g.inputs.push(v);
        v
    }
    fn konst(&mut self, name: &str, t: Tensor) -> ValueId {
        let v = self.value(name, t.dtype(), t.shape());
        self.g.values[v].constant = Some(Arc::new(t));
        v
    }
    fn scalar(&mut self, name: &str, x: f32) -> ValueId {
        self.konst(name, Tensor::scalar_f32(x))
    }
    fn weight(&mut self, name: &str, shape: &[usize]) -> ValueId {
        let n = shape.iter().product();
        let data = (0..n).map(|i| (i % 7) as f32 * 0.1 - 0.3).collect();
        self.konst(name, Tensor::from_f32(shape.to_vec(), data).unwrap())
    }
    fn node(&mut self, name: &str, op: Op, ins: &[ValueId], dtype: DType, shape: &[usize]) -> ValueId {
        let out = self.value(&format!("{name}_out"), dtype, shape);
        self.g.nodes.push(Node { name: name.into(), op, inputs: ins.iter().map(|&v| Some(v)).collect(), outputs: vec![out], sparse: None });
        out
    }
    fn f(&mut self, name: &str, op: Op, ins: &[ValueId], shape: &[usize]) -> ValueId {
        self.node(name, op, ins, DType::F32, shape)
    }
}

fn window(k: usize, s: usize, p: usize) -> Window {
    Window { kernel_shape: vec![k, k], strides: vec![s, s], pads: vec![p; 4], dilations: vec![1, 1], auto_pad: AutoPad::NotSet }
}

fn conv(k: usize, s: usize) -> Op {
    Op::Conv(Conv { window: window(k, s, k / 2), group: 1, fused_add: false, activation: None })
}

fn maxpool(k: usize, s: usize, p: usize) -> Op {
    Op::MaxPool(Pool { window: window(k, s, p), ceil_mode: false, count_include_pad: false })
}

const MUL: Op = Op::Binary(BinaryKind::Mul);

/// x [1,3,8,8]; a mask unit thresholded at 0 gives `m` [1,1,8,8].
fn with_mask_unit(b: &mut B) -> (ValueId, ValueId) {
    let x = b.input("x", DType::F32, &[1, 3, 8, 8]);
    let wu = b.weight("wu", &[1, 3, 1, 1]);
    let logit = b.f("unit", conv(1, 1), &[x, wu], &[1, 1, 8, 8]);
    let zero = b.scalar("zero", 0.0);
    let gt = b.node("gt", Op::Binary(BinaryKind::Greater), &[logit, zero], DType::Bool, &[1, 1, 8, 8]);
    let m = b.f("cast", Op::Cast { to: DType::F32 }, &[gt], &[1, 1, 8, 8]);
    (x, m)
}

fn run(b: &mut B) -> Vec<SparseRegionInfo> {
    detect_sparse_regions(&mut b.g, &SparseOptions::default())
}

#[test]
fn halting_source_is_a_sum_of_sigmoids_kept_below_a_limit() {
    let mut b = B::default();
    let x = b.input("x", DType::F32, &[1, 5, 4]);
    let h1 = b.input("h1", DType::F32, &[1, 5, 1]);
    let h2 = b.input("h2", DType::F32, &[1, 5, 1]);
    let w = b.weight("w", &[4, 3]);
    let p = b.f("mm", Op::MatMul, &[x, w], &[1, 5, 3]);
    let s1 = b.f("s1", Op::Unary(UnaryKind::Sigmoid), &[h1], &[1, 5, 1]);
    let s2 = b.f("s2", Op::Unary(UnaryKind::Sigmoid), &[h2], &[1, 5, 1]);
    let c = b.f("acc", Op::Binary(BinaryKind::Add), &[s1, s2], &[1, 5, 1]);
    let lim = b.scalar("lim", 0.99);
    let lt = b.node("lt", Op::Binary(BinaryKind::Less), &[c, lim], DType::Bool, &[1, 5, 1]);
    let m = b.f("cast", Op::Cast { to: DType::F32 }, &[lt], &[1, 5, 1]);
    let y = b.f("mul", MUL, &[p, m], &[1, 5, 3]);
    b.g.outputs = vec![y];
    let r = run(&mut b);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].kind, MaskKind::Token);
    assert_eq!(r[0].source, MaskSource::Halting { node: "lt".into() });
}

#[test]
fn a_sigmoid_gate_above_a_threshold_is_an_in_graph_mask_unit() {
    let mut b = B::default();
    let x = b.input("x", DType::F32, &[1, 3, 8, 8]);
    let wu = b.weight("wu", &[1, 3, 1, 1]);
    let logit = b.f("unit", conv(1, 1), &[x, wu], &[1, 1, 8, 8]);
    let gate = b.f("gate", Op::Unary(UnaryKind::Sigmoid), &[logit], &[1, 1, 8, 8]);
    let half = b.scalar("half", 0.5);
    let gt = b.node("gt", Op::Binary(BinaryKind::Greater), &[gate, half], DType::Bool, &[1, 1, 8, 8]);
    let m = b.f("cast", Op::Cast { to: DType::F32 }, &[gt], &[1, 1, 8, 8]);
    let w = b.weight("w", &[4, 3, 3, 3]);
    let p = b.f("p", conv(3, 1), &[x, w], &[1, 4, 8, 8]);
    let y = b.f("mul", MUL, &[p, m], &[1, 4, 8, 8]);
    b.g.outputs = vec![y];
    let r = run(&mut b);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].source, MaskSource::InGraph { node: "gt".into() });
    assert!(r[0].fused_mul);
}

#[test]
fn halo_survives_resampling_rounded_up() {
    // MaxPool 3x3/s1 (halo 1 at full resolution), then k = s = 2: still 1 at half resolution;
    // k = 4, s = 2, pad 1 reaches one more full-resolution cell on each side: ceil((1+1)/2) = 1;
    // 5x5/s1 on top adds 2.
    for (second, want) in [(maxpool(2, 2, 0), 1), (maxpool(4, 2, 1), 1)] {
        let mut b = B::default();
        let (x, m) = with_mask_unit(&mut b);
        let d = b.f("d", maxpool(3, 1, 1), &[m], &[1, 1, 8, 8]);
        let half = b.f("half", second, &[d], &[1, 1, 4, 4]);
        let wide = b.f("wide", maxpool(5, 1, 2), &[half], &[1, 1, 4, 4]);
        let w = b.weight("w", &[4, 3, 3, 3]);
        let p = b.f("p", conv(3, 2), &[x, w], &[1, 4, 4, 4]);
        let y = b.f("mul", MUL, &[wide, p], &[1, 4, 4, 4]);
        b.g.outputs = vec![y];
        let r = run(&mut b);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].dilation, [want + 2, want + 2]);
    }
}

#[test]
fn complement_of_a_threshold_is_a_mask_of_a_dilated_one_is_not() {
    for dilate in [false, true] {
        let mut b = B::default();
        let (x, m) = with_mask_unit(&mut b);
        let gt = b.g.find_value("gt_out").unwrap();
        let src = if dilate {
            let d = b.f("d", maxpool(3, 1, 1), &[m], &[1, 1, 8, 8]);
            b.node("tobool", Op::Cast { to: DType::Bool }, &[d], DType::Bool, &[1, 1, 8, 8])
        } else {
            gt
        };
        let not = b.node("not", Op::Unary(UnaryKind::Not), &[src], DType::Bool, &[1, 1, 8, 8]);
        let nm = b.f("cast2", Op::Cast { to: DType::F32 }, &[not], &[1, 1, 8, 8]);
        let w = b.weight("w", &[4, 3, 1, 1]);
        let p = b.f("p", conv(1, 1), &[x, w], &[1, 4, 8, 8]);
        let y = b.f("mul", MUL, &[p, nm], &[1, 4, 8, 8]);
        b.g.outputs = vec![y, m];
        assert_eq!(run(&mut b).len(), usize::from(!dilate), "dilated: {dilate}");
    }
}

#[test]
fn bool_model_input_is_a_mask() {
    let mut b = B::default();
    let x = b.input("x", DType::F32, &[1, 3, 8, 8]);
    let keep = b.input("keep", DType::Bool, &[1, 1, 8, 8]);
    let m = b.f("cast", Op::Cast { to: DType::F32 }, &[keep], &[1, 1, 8, 8]);
    let w = b.weight("w", &[4, 3, 1, 1]);
    let p = b.f("p", conv(1, 1), &[x, w], &[1, 4, 8, 8]);
    let y = b.f("mul", MUL, &[p, m], &[1, 4, 8, 8]);
    b.g.outputs = vec![y];
    let r = detect_sparse_regions(&mut b.g, &SparseOptions { cached_model_input_masks: true });
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].source, MaskSource::ModelInput { name: "keep".into() });
    assert_eq!(r[0].fill, FillPolicy::Cached);
}

#[test]
fn second_run_changes_nothing() {
    let mut b = B::default();
    let (x, m) = with_mask_unit(&mut b);
    let w = b.weight("w", &[4, 3, 1, 1]);
    let p = b.f("p", conv(1, 1), &[x, w], &[1, 4, 8, 8]);
    let e = b.f("erf", Op::Unary(UnaryKind::Erf), &[p], &[1, 4, 8, 8]);
    let y = b.f("mul", MUL, &[e, m], &[1, 4, 8, 8]);
    let z = b.f("mul2", MUL, &[y, m], &[1, 4, 8, 8]);
    b.g.outputs = vec![z];
    let first = run(&mut b);
    assert_eq!(first.len(), 1);
    let (nodes, values) = (b.g.nodes.len(), b.g.values.len());
    assert_eq!(run(&mut b), first);
    assert_eq!((b.g.nodes.len(), b.g.values.len()), (nodes, values));
}

#[test]
fn malformed_graphs_are_left_alone() {
    let mut b = B::default();
    let (x, m) = with_mask_unit(&mut b);
    let w = b.weight("w", &[4, 3, 1, 1]);
    let p = b.f("p", conv(1, 1), &[x, w], &[1, 4, 8, 8]);
    let y = b.f("mul", MUL, &[p, m], &[1, 4, 8, 8]);
    b.g.outputs = vec![y];
    let good = b.g.clone();
    // A dangling value id, then the Mul moved before its operands.
    b.g.nodes[0].inputs.push(Some(999));
    assert!(run(&mut b).is_empty());
    let mut g = good.clone();
    let mul = g.nodes.pop().unwrap();
    g.nodes.insert(0, mul);
    assert!(detect_sparse_regions(&mut g, &SparseOptions::default()).is_empty());
    let mut g = good;
    assert_eq!(detect_sparse_regions(&mut g, &SparseOptions::default()).len(), 1);
}

// ---------------------------------------------------------------- generated graphs

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// Values a node reads exist before it, as the executor needs.
fn well_formed(g: &Graph) -> bool {
    let mut ready: Vec<bool> = g.values.iter().map(|v| v.constant.is_some()).collect();
    for &i in &g.inputs {
        ready[i] = true;
    }
    for n in &g.nodes {
        for &v in n.inputs.iter().flatten().chain(n.sparse.as_ref().map(|s| &s.mask)) {
            if !ready.get(v).copied().unwrap_or(false) {
                return false;
            }
        }
        for &o in &n.outputs {
            ready[o] = true;
        }
    }
    g.outputs.iter().all(|&o| ready[o])
}

/// Conv -> random epilogue -> Mul by a random mask chain, with the verdict known from how it
/// was built.
#[test]
fn generated_regions_match_the_expected_verdict() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut sparse, mut dense) = (0, 0);
    for case in 0..2000 {
        let mut b = B::default();
        let mut expect = true;
        let (x, unit_mask) = with_mask_unit(&mut b);
        let s = [1, 4, 8, 8];
        let w = b.weight("w", &[4, 3, 3, 3]);
        let p = b.f("p", conv(3, 1), &[x, w], &s);
        let mut a = p;
        let steps = rng.below(4);
        for i in 0..steps {
            let name = format!("f{i}");
            a = match rng.below(7) {
                0 => b.f(&name, Op::Unary(UnaryKind::Relu), &[a], &s),
                1 => b.f(&name, Op::Unary(UnaryKind::Erf), &[a], &s),
                2 => {
                    let c = b.weight(&format!("{name}_c"), &[4, 1, 1]);
                    b.f(&name, Op::Binary(BinaryKind::Add), &[c, a], &s)
                }
                // Still position-local: a constant that differs per position, a softmax over channels.
                3 => {
                    let c = b.weight(&format!("{name}_c"), &[1, 1, 8, 8]);
                    b.f(&name, Op::Binary(BinaryKind::Add), &[a, c], &s)
                }
                4 => b.f(&name, Op::Softmax { axis: 1, legacy: false }, &[a], &s),
                5 => {
                    expect = false;
                    b.f(&name, Op::Transpose { perm: vec![0, 1, 3, 2] }, &[a], &s)
                }
                _ => {
                    let c = b.scalar(&format!("{name}_c"), 0.5);
                    b.f(&name, MUL, &[a, c], &s)
                }
            };
        }
        let ms = [1, 1, 8, 8];
        let mut m = match rng.below(3) {
            0 => unit_mask,
            1 => b.input("edit", DType::F32, &ms),
            _ => {
                expect = false;
                let logit = b.g.find_value("unit_out").unwrap();
                b.f("soft", Op::Unary(UnaryKind::Sigmoid), &[logit], &ms)
            }
        };
        let mut halo = 0;
        for i in 0..rng.below(3) {
            let name = format!("m{i}");
            m = match rng.below(3) {
                0 => {
                    halo += 1;
                    b.f(&name, maxpool(3, 1, 1), &[m], &ms)
                }
                1 => {
                    let c = b.konst(&format!("{name}_c"), Tensor::new(ms.to_vec(), TensorData::F32(vec![1.0; 64])).unwrap());
                    b.f(&name, MUL, &[c, m], &ms)
                }
                _ => b.f(&name, Op::Identity, &[m], &ms),
            };
        }
        let ins = if rng.chance(50) { [a, m] } else { [m, a] };
        let y = b.f("mul", MUL, &ins, &s);
        b.g.outputs = vec![y];
        if rng.chance(15) {
            expect = false;
            b.g.outputs.push(p);
        }
        let fused = steps == 0;
        let r = run(&mut b);
        assert!(well_formed(&b.g), "case {case}");
        if expect {
            assert_eq!(r.len(), 1, "case {case}: expected sparse");
            assert_eq!((r[0].fused_mul, r[0].dilation), (fused, [halo, halo]), "case {case}");
            sparse += 1;
        } else {
            assert!(r.is_empty(), "case {case}: expected dense, got {r:?}");
            dense += 1;
        }
    }
    assert!(sparse > 200 && dense > 200, "{sparse} sparse, {dense} dense cases");
}

fn random_op(rng: &mut Rng) -> Op {
    let k = 1 + rng.below(3);
    let w = Window {
        kernel_shape: vec![k; rng.below(3)],
        strides: vec![rng.below(3); 2],
        pads: vec![rng.below(3); 2 + rng.below(3)],
        dilations: vec![1 + rng.below(2); 2],
        auto_pad: AutoPad::NotSet,
    };
    let binary = [
        BinaryKind::Add,
        BinaryKind::Sub,
        BinaryKind::Mul,
        BinaryKind::Div,
        BinaryKind::Greater,
        BinaryKind::Less,
        BinaryKind::Equal,
        BinaryKind::And,
    ];
    let unary = [UnaryKind::Relu, UnaryKind::Sigmoid, UnaryKind::Erf, UnaryKind::Not, UnaryKind::Tanh, UnaryKind::Exp];
    match rng.below(16) {
        0 => Op::Conv(Conv { window: w, group: 1, fused_add: rng.chance(20), activation: None }),
        1 => Op::ConvTranspose(ConvTranspose { window: w, group: 1, output_padding: vec![], output_shape: None }),
        2 => Op::MatMul,
        3 => Op::Gemm { alpha: 1.0, beta: 1.0, trans_a: rng.chance(30), trans_b: rng.chance(50) },
        4..=6 => Op::Binary(binary[rng.below(binary.len())]),
        7..=8 => Op::Unary(unary[rng.below(unary.len())]),
        9 => Op::Cast { to: [DType::F32, DType::Bool, DType::I64][rng.below(3)] },
        10 => Op::MaxPool(Pool { window: w, ceil_mode: rng.chance(30), count_include_pad: false }),
        11 => Op::Transpose { perm: vec![0, 2, 1] },
        12 => Op::Where,
        13 => Op::BatchNormalization { epsilon: 1e-5 },
        14 => Op::Reshape { allowzero: false },
        _ => Op::Softmax { axis: -1, legacy: false },
    }
}

/// Random ops, wiring, shapes and constants, now and then malformed: the pass must not panic,
/// and must leave a well-formed graph well formed.
#[test]
fn random_graphs_never_panic() {
    let shapes: [&[usize]; 9] = [&[1, 4, 6, 6], &[1, 1, 6, 6], &[1, 6, 4], &[1, 6, 1], &[4], &[], &[1, 4, 1, 1], &[6, 4], &[4, 3]];
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut annotated = 0;
    for _ in 0..5000 {
        // A third of the graphs start from a valid region that the random nodes may then spoil
        // (read the conv's result, the mask...), so the rewriting code runs too.
        let (mut g, mut ready) = if rng.chance(33) {
            let mut b = B::default();
            let (x, m) = with_mask_unit(&mut b);
            let w = b.weight("w", &[4, 3, 1, 1]);
            let p = b.f("p", conv(1, 1), &[x, w], &[1, 4, 8, 8]);
            let y = b.f("mul", MUL, &[p, m], &[1, 4, 8, 8]);
            b.g.outputs = vec![y];
            let all = (0..b.g.values.len()).collect();
            (b.g, all)
        } else {
            (Graph::default(), Vec::new())
        };
        for i in 0..2 + rng.below(8) {
            let shape = shapes[rng.below(shapes.len())].to_vec();
            let n: usize = shape.iter().product();
            let (dtype, constant) = match rng.below(4) {
                0 => (DType::F32, None),
                1 => (DType::Bool, None),
                2 => {
                    (DType::F32, Some(Tensor::new(shape.clone(), TensorData::F32((0..n).map(|_| rng.below(2) as f32).collect())).unwrap()))
                }
                _ => (DType::F32, Some(Tensor::new(shape.clone(), TensorData::F32((0..n).map(|j| j as f32 * 0.3).collect())).unwrap())),
            };
            let is_input = constant.is_none();
            g.values.push(Value { name: format!("v{i}"), dtype, shape, constant: constant.map(Arc::new) });
            if is_input {
                g.inputs.push(g.values.len() - 1);
            }
            ready.push(g.values.len() - 1);
        }
        for k in 0..rng.below(14) {
            let op = random_op(&mut rng);
            let inputs = (0..1 + rng.below(3))
                .map(|_| match rng.below(40) {
                    0 => None,
                    1 => Some(g.values.len() + 5),
                    _ => Some(ready[rng.below(ready.len())]),
                })
                .collect();
            let shape = if rng.chance(50) {
                g.values[ready[rng.below(ready.len())]].shape.clone()
            } else {
                shapes[rng.below(shapes.len())].to_vec()
            };
            let dtype = if rng.chance(20) { DType::Bool } else { DType::F32 };
            let out = if rng.chance(3) && !ready.is_empty() {
                ready[rng.below(ready.len())]
            } else {
                g.values.push(Value { name: format!("n{k}"), dtype, shape, constant: None });
                g.values.len() - 1
            };
            g.nodes.push(Node { name: format!("node{k}"), op, inputs, outputs: vec![out], sparse: None });
            ready.push(out);
        }
        g.outputs = (0..1 + rng.below(2)).map(|_| ready[rng.below(ready.len())]).collect();
        let was_well_formed = Links::new(&g).is_some();
        for cached in [false, true] {
            let mut h = g.clone();
            let r = detect_sparse_regions(&mut h, &SparseOptions { cached_model_input_masks: cached });
            annotated += r.len();
            if was_well_formed {
                assert!(Links::new(&h).is_some(), "the pass broke a well-formed graph");
            }
        }
    }
    // Not a target, a sign the generator reaches the rewriting code at all.
    assert!(annotated > 0, "no random graph had a sparse region");
}
