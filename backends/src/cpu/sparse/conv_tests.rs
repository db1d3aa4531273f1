//! SparseConv against the dense CPU Conv (`eval_op`), on random shapes and masks, both paths
//! (AVX-512 where present, portable always), outputs poisoned before every run.

use super::conv::{ConvKind, SparseConv};
use super::testkit::{blob_mask, check_masked, scattered_mask, POISONS};
use super::PhaseTimes;
use crate::cpu::eval_op;
use crate::cpu::test_util::{spec, Rng};
use dynaspa_runtime::graph::{Activation, AutoPad, Conv, Op, Window};
use dynaspa_runtime::sparsity::tiles::aligned_tiles_naive;
use dynaspa_runtime::sparsity::{BitMask, DisTile, Granularity, TileSet};
use dynaspa_runtime::Tensor;

#[derive(Clone, Debug)]
struct Case {
    c: usize,
    h: usize,
    w: usize,
    m: usize,
    group: usize,
    k: [usize; 2],
    s: [usize; 2],
    d: [usize; 2],
    /// top, left, bottom, right
    pads: [usize; 4],
    bias: bool,
    add: bool,
    act: Option<Activation>,
}

fn case(c: usize, hw: [usize; 2], m: usize, group: usize, k: [usize; 2], s: [usize; 2], pads: [usize; 4]) -> Case {
    Case { c, h: hw[0], w: hw[1], m, group, k, s, d: [1, 1], pads, bias: true, add: false, act: None }
}

fn conv_attrs(c: &Case) -> Conv {
    Conv {
        window: Window {
            kernel_shape: c.k.to_vec(),
            strides: c.s.to_vec(),
            pads: c.pads.to_vec(),
            dilations: c.d.to_vec(),
            auto_pad: AutoPad::NotSet,
        },
        group: c.group,
        fused_add: c.add,
        activation: c.act,
    }
}

fn out_hw(c: &Case) -> (usize, usize) {
    let side = |i: usize, n: usize| (n + c.pads[i] + c.pads[i + 2] - (c.k[i] - 1) * c.d[i] - 1) / c.s[i] + 1;
    (side(0, c.h), side(1, c.w))
}

/// Operands and the dense result of one case.
struct Prepared {
    x: Tensor,
    w: Tensor,
    b: Tensor,
    res: Tensor,
    dense: Vec<f32>,
    ho: usize,
    wo: usize,
}

fn prepare(c: &Case, seed: u64) -> Prepared {
    let mut rng = Rng::new(seed);
    let (ho, wo) = out_hw(c);
    let x = rng.tensor(&[1, c.c, c.h, c.w]);
    let w = rng.tensor(&[c.m, c.c / c.group, c.k[0], c.k[1]]);
    let b = rng.tensor(&[c.m]);
    let res = rng.tensor(&[1, c.m, ho, wo]);
    assert!(c.c == 0 || x.as_f32().unwrap().iter().any(|&v| v != 0.0));
    let ins = [Some(&x), Some(&w), c.bias.then_some(&b), c.add.then_some(&res)];
    let dense = eval_op(&Op::Conv(conv_attrs(c)), &ins, &[spec(&[1, c.m, ho, wo])]).unwrap().remove(0);
    Prepared { dense: dense.as_f32().unwrap().to_vec(), x, w, b, res, ho, wo }
}

fn paths() -> Vec<bool> {
    let mut v = vec![false];
    #[cfg(target_arch = "x86_64")]
    if super::micro::available() {
        v.push(true);
    }
    v
}

/// Runs `c` on every mask and granularity given, on both paths, with both poisons.
fn check_case(c: &Case, seed: u64, masks: &[BitMask], grans: &[Granularity]) {
    let p = prepare(c, seed);
    for simd in paths() {
        let sc = SparseConv::build(&conv_attrs(c), &[1, c.c, c.h, c.w], &p.w, c.bias.then_some(&p.b), simd).unwrap();
        assert_eq!(sc.output_hw(), (p.ho, p.wo));
        let want_kind = if c.c / c.group == 1 { ConvKind::Depthwise } else { ConvKind::Gemm };
        assert_eq!(sc.kind(), want_kind);
        for (mi, mask) in masks.iter().enumerate() {
            for &g in grans {
                let tiles = aligned_tiles_naive(mask, g);
                let poison = POISONS[(mi + g.w as usize) % 2];
                let mut out = vec![poison; c.m * p.ho * p.wo];
                let res = c.add.then(|| p.res.as_f32().unwrap());
                sc.run(p.x.as_f32().unwrap(), &mut out, &tiles, mask, res).unwrap();
                let what = format!("{c:?} simd={simd} mask {mi} ({:.2}) gran {g}", mask.density());
                check_masked(&out, &p.dense, mask, poison, 1e-5, &what);
            }
            // The positions schedule computes the same columns as 1x1 tiles, bit for bit, unless
            // it runs the direct kernel (another summation order; checked against dense above).
            let mut pos = vec![f32::NAN; c.m * p.ho * p.wo];
            let mut one = vec![f32::NAN; c.m * p.ho * p.wo];
            let res = c.add.then(|| p.res.as_f32().unwrap());
            sc.run_positions(p.x.as_f32().unwrap(), &mut pos, mask, res).unwrap();
            sc.run(p.x.as_f32().unwrap(), &mut one, &aligned_tiles_naive(mask, Granularity::new(1, 1)), mask, res).unwrap();
            check_masked(&pos, &p.dense, mask, f32::NAN, 1e-5, &format!("{c:?} simd={simd} mask {mi} positions"));
            if !sc.has_direct() {
                assert!(pos.iter().zip(&one).all(|(a, b)| a.to_bits() == b.to_bits()), "positions vs 1x1 tiles");
            }
        }
    }
}

fn some_masks(rng: &mut Rng, h: usize, w: usize) -> Vec<BitMask> {
    let mut v = vec![BitMask::ones(h, w)];
    for d in [0.02, 0.1, 0.3, 0.5] {
        v.push(blob_mask(rng, h, w, d));
    }
    v.push(scattered_mask(rng, h, w, 0.2));
    v
}

const GRANS: [Granularity; 6] = [
    Granularity::new(1, 1),
    Granularity::new(2, 8),
    Granularity::new(4, 4),
    Granularity::new(3, 5),
    Granularity::new(7, 7),
    Granularity::new(8, 8),
];

#[test]
fn conv3x3_stride1_all_granularities() {
    let mut rng = Rng::new(1);
    // 40x40 with 3x5 and 7x7 tiles: neither divides the output.
    let c = case(24, [40, 40], 20, 1, [3, 3], [1, 1], [1; 4]);
    check_case(&c, 10, &some_masks(&mut rng, 40, 40), &GRANS);
    let c = case(9, [13, 17], 7, 1, [3, 3], [1, 1], [1; 4]);
    check_case(&c, 11, &some_masks(&mut rng, 13, 17), &GRANS);
}

#[test]
fn conv3x3_stride2() {
    let mut rng = Rng::new(2);
    let c = case(16, [40, 40], 13, 1, [3, 3], [2, 2], [1; 4]);
    check_case(&c, 20, &some_masks(&mut rng, 20, 20), &GRANS);
    // Odd input: the last output reads the right padding.
    let c = case(8, [21, 19], 70, 1, [3, 3], [2, 2], [1; 4]);
    check_case(&c, 21, &some_masks(&mut rng, 11, 10), &GRANS[..3]);
}

#[test]
fn conv1x1() {
    let mut rng = Rng::new(3);
    let c = case(64, [20, 24], 40, 1, [1, 1], [1, 1], [0; 4]);
    check_case(&c, 30, &some_masks(&mut rng, 20, 24), &GRANS);
    // A 1x1 with stride 2 and one with padding (the padded ring reads zeros).
    let c = case(12, [15, 15], 9, 1, [1, 1], [2, 2], [0; 4]);
    check_case(&c, 31, &some_masks(&mut rng, 8, 8), &GRANS[..3]);
    let c = case(5, [6, 7], 3, 1, [1, 1], [1, 1], [1, 0, 0, 2]);
    check_case(&c, 32, &some_masks(&mut rng, 7, 9), &GRANS[..3]);
}

#[test]
fn depthwise3x3_stride1_and_2() {
    let mut rng = Rng::new(4);
    let c = case(32, [20, 20], 32, 32, [3, 3], [1, 1], [1; 4]);
    check_case(&c, 40, &some_masks(&mut rng, 20, 20), &GRANS);
    let c = case(16, [20, 21], 16, 16, [3, 3], [2, 2], [1; 4]);
    check_case(&c, 41, &some_masks(&mut rng, 10, 11), &GRANS[..3]);
    // Channel multiplier 2, 5x5 with dilation.
    let mut c = case(6, [17, 12], 12, 6, [5, 5], [1, 1], [4; 4]);
    c.d = [2, 2];
    check_case(&c, 42, &some_masks(&mut rng, 17, 12), &GRANS[..3]);
    // Wider than the row-block kernel takes (9 > 8 columns): the gather-plan path at stride 1.
    let c = case(8, [10, 37], 8, 8, [1, 9], [1, 1], [0, 4, 0, 4]);
    check_case(&c, 43, &some_masks(&mut rng, 10, 37), &GRANS[..3]);
    // Rows wider than one 16-lane block, with the window hanging over both edges.
    let c = case(4, [9, 50], 4, 4, [3, 7], [1, 1], [1, 3, 1, 3]);
    check_case(&c, 44, &some_masks(&mut rng, 9, 50), &GRANS[..3]);
}

#[test]
fn general_fallback_shapes() {
    let mut rng = Rng::new(5);
    let cases = [
        // SIGE-style 7x7 stem-like conv.
        case(3, [30, 26], 8, 1, [7, 7], [1, 1], [3; 4]),
        case(4, [31, 29], 10, 1, [7, 7], [2, 2], [3; 4]),
        // Grouped, rectangular kernel, asymmetric pads and strides.
        case(8, [14, 15], 12, 4, [3, 3], [1, 1], [1; 4]),
        case(6, [16, 13], 4, 2, [5, 3], [2, 1], [2, 0, 1, 1]),
        case(10, [12, 12], 6, 1, [2, 2], [1, 1], [0; 4]),
        case(9, [11, 11], 5, 1, [4, 4], [3, 3], [0, 1, 2, 1]),
    ];
    for (i, c) in cases.iter().enumerate() {
        let (ho, wo) = out_hw(c);
        check_case(c, 50 + i as u64, &some_masks(&mut rng, ho, wo), &GRANS[..4]);
    }
    // No input channels: the output is the bias (and the epilogue) where the mask is set.
    let c0 = Case { act: Some(Activation::Sigmoid), ..case(0, [9, 9], 5, 1, [3, 3], [1, 1], [1; 4]) };
    check_case(&c0, 58, &some_masks(&mut rng, 9, 9), &GRANS[..2]);
    let mut c = case(7, [18, 16], 9, 1, [3, 3], [1, 2], [2, 1, 2, 3]);
    c.d = [2, 3];
    let (ho, wo) = out_hw(&c);
    check_case(&c, 59, &some_masks(&mut rng, ho, wo), &GRANS[..4]);
}

#[test]
fn epilogues_bias_residual_activations() {
    let mut rng = Rng::new(6);
    let acts = [
        None,
        Some(Activation::Relu),
        Some(Activation::LeakyRelu(0.1)),
        Some(Activation::Clip(-0.3, 0.4)),
        Some(Activation::Sigmoid),
        Some(Activation::HardSwish),
        Some(Activation::Tanh),
        Some(Activation::HardSigmoid(0.2, 0.5)),
    ];
    for (i, act) in acts.into_iter().enumerate() {
        for (bias, add) in [(true, true), (false, true), (true, false), (false, false)] {
            for (c, hw) in [
                (case(20, [12, 14], 14, 1, [3, 3], [1, 1], [1; 4]), (12, 14)),
                (case(16, [12, 14], 16, 16, [3, 3], [1, 1], [1; 4]), (12, 14)),
                (case(32, [9, 9], 8, 1, [1, 1], [1, 1], [0; 4]), (9, 9)),
                (case(8, [14, 16], 7, 1, [3, 3], [2, 2], [1; 4]), (7, 8)),
            ] {
                let c = Case { bias, add, act, ..c };
                let masks = [blob_mask(&mut rng, hw.0, hw.1, 0.3), scattered_mask(&mut rng, hw.0, hw.1, 0.5)];
                check_case(&c, 60 + i as u64, &masks, &[Granularity::new(1, 1), Granularity::new(4, 4)]);
            }
        }
    }
}

#[test]
fn empty_and_full_masks() {
    let c = Case { add: true, act: Some(Activation::Relu), ..case(12, [16, 16], 10, 1, [3, 3], [1, 1], [1; 4]) };
    let p = prepare(&c, 70);
    for simd in paths() {
        let sc = SparseConv::build(&conv_attrs(&c), &[1, 12, 16, 16], &p.w, Some(&p.b), simd).unwrap();
        let res = Some(p.res.as_f32().unwrap());
        // Empty mask, no tiles: nothing is written.
        let empty = BitMask::zeros(16, 16);
        let mut out = vec![1e30; 10 * 256];
        sc.run(p.x.as_f32().unwrap(), &mut out, &aligned_tiles_naive(&empty, Granularity::new(4, 4)), &empty, res).unwrap();
        assert!(out.iter().all(|&v| v == 1e30));
        // Tiles over an empty mask (a cached-fill caller may pass stale tiles): still no write.
        let full = BitMask::ones(16, 16);
        sc.run(p.x.as_f32().unwrap(), &mut out, &aligned_tiles_naive(&full, Granularity::new(4, 4)), &empty, res).unwrap();
        assert!(out.iter().all(|&v| v == 1e30));
        // Full mask: the dense result everywhere.
        sc.run(p.x.as_f32().unwrap(), &mut out, &aligned_tiles_naive(&full, Granularity::new(8, 8)), &full, res).unwrap();
        check_masked(&out, &p.dense, &full, 1e30, 1e-5, "full mask");
    }
}

#[test]
fn overlapping_tiles_and_partial_cover() {
    let c = case(10, [12, 12], 8, 1, [3, 3], [1, 1], [1; 4]);
    let p = prepare(&c, 80);
    let mask = BitMask::from_fn(12, 12, |y, x| (2..9).contains(&y) && (3..11).contains(&x));
    // Per-component style: tiles overlap and are not on a grid.
    let tiles = TileSet {
        granularity: Granularity::new(5, 5),
        height: 12,
        width: 12,
        tiles: vec![DisTile { y: 2, x: 3 }, DisTile { y: 2, x: 7 }, DisTile { y: 4, x: 6 }, DisTile { y: 7, x: 3 }, DisTile { y: 7, x: 8 }],
    };
    for simd in paths() {
        let sc = SparseConv::build(&conv_attrs(&c), &[1, 10, 12, 12], &p.w, Some(&p.b), simd).unwrap();
        let mut out = vec![f32::NAN; 8 * 144];
        sc.run(p.x.as_f32().unwrap(), &mut out, &tiles, &mask, None).unwrap();
        check_masked(&out, &p.dense, &mask, f32::NAN, 1e-5, "overlapping tiles");
        // Tiles covering only part of the mask: only covered active positions are written.
        let part = TileSet { tiles: tiles.tiles[..2].to_vec(), ..tiles.clone() };
        let covered = BitMask::from_fn(12, 12, |y, x| mask.get(y, x) && (2..7).contains(&y) && (3..12).contains(&x));
        let mut out = vec![1e30; 8 * 144];
        sc.run(p.x.as_f32().unwrap(), &mut out, &part, &mask, None).unwrap();
        check_masked(&out, &p.dense, &covered, 1e30, 1e-5, "partial cover");
    }
}

#[test]
fn thread_counts_and_timed_runs() {
    let mut rng = Rng::new(9);
    let c = case(32, [24, 24], 50, 1, [3, 3], [1, 1], [1; 4]);
    let masks = some_masks(&mut rng, 24, 24);
    for t in [1, 2, 3, 5] {
        rayon::ThreadPoolBuilder::new().num_threads(t).build().unwrap().install(|| {
            check_case(&c, 90, &masks, &GRANS[..3]);
            let d = case(24, [20, 20], 24, 24, [3, 3], [1, 1], [1; 4]);
            check_case(&d, 91, &[blob_mask(&mut Rng::new(t as u64), 20, 20, 0.3)], &GRANS[..2]);
        });
    }
    // Timed runs give the same result and account every phase.
    let p = prepare(&c, 92);
    let sc = SparseConv::new(&conv_attrs(&c), &[1, 32, 24, 24], &p.w, Some(&p.b)).unwrap();
    let times = PhaseTimes::default();
    let mut out = vec![1e30; 50 * 576];
    let tiles = aligned_tiles_naive(&masks[2], Granularity::new(2, 8));
    sc.run_timed(p.x.as_f32().unwrap(), &mut out, &tiles, &masks[2], None, Some(&times)).unwrap();
    check_masked(&out, &p.dense, &masks[2], 1e30, 1e-5, "timed");
    assert!(times.secs().iter().all(|&s| s > 0.0), "{:?}", times.secs());
}

#[test]
fn random_configs() {
    let mut rng = Rng::new(11);
    for i in 0..120 {
        let group = [1, 1, 1, 2, 3][rng.below(5)];
        let dw = rng.below(5) == 0;
        let cg = if dw { 1 } else { 1 + rng.below(3) + [0, 0, 12][rng.below(3)] };
        let c_in = group * cg;
        let m = group * (1 + rng.below(3) + [0, 7][rng.below(2)]);
        let k = [1 + rng.below(4), 1 + rng.below(4)];
        let s = [1 + rng.below(2), 1 + rng.below(3)];
        let d = [1 + rng.below(2), 1 + rng.below(2)];
        let pads = [rng.below(3), rng.below(3), rng.below(3), rng.below(3)];
        let h = (k[0] - 1) * d[0] + 1 + rng.below(20);
        let w = (k[1] - 1) * d[1] + 1 + rng.below(30);
        let mut c = case(c_in, [h, w], m, group, k, s, pads);
        c.d = d;
        c.bias = rng.below(2) == 0;
        c.add = rng.below(2) == 0;
        c.act = [None, Some(Activation::Relu), Some(Activation::Sigmoid)][rng.below(3)];
        let (ho, wo) = out_hw(&c);
        let density = [0.02, 0.1, 0.3, 0.6, 1.0][rng.below(5)];
        let masks = [blob_mask(&mut rng, ho, wo, density), scattered_mask(&mut rng, ho, wo, density)];
        let g = Granularity::new(1 + rng.below(8) as u16, 1 + rng.below(8) as u16);
        check_case(&c, 1000 + i, &masks, &[g, Granularity::new(1, 1)]);
    }
}

#[test]
fn bad_inputs_are_errors() {
    let c = Case { add: true, ..case(4, [6, 6], 3, 1, [3, 3], [1, 1], [1; 4]) };
    let p = prepare(&c, 100);
    let attrs = conv_attrs(&c);
    let sc = SparseConv::new(&attrs, &[1, 4, 6, 6], &p.w, Some(&p.b)).unwrap();
    let x = p.x.as_f32().unwrap();
    let res = p.res.as_f32().unwrap();
    let mask = BitMask::ones(6, 6);
    let tiles = aligned_tiles_naive(&mask, Granularity::new(2, 2));
    let mut out = vec![0.0; 3 * 36];
    let msg = |r: dynaspa_runtime::Result<()>| r.unwrap_err().to_string();
    assert!(msg(sc.run(&x[1..], &mut out, &tiles, &mask, Some(res))).contains("input has 143 values"));
    assert!(msg(sc.run(x, &mut out[1..], &tiles, &mask, Some(res))).contains("output has 107 values"));
    assert!(msg(sc.run(x, &mut out, &tiles, &mask, None)).contains("no residual"));
    assert!(msg(sc.run(x, &mut out, &tiles, &mask, Some(&res[1..]))).contains("residual has 107"));
    let m5 = BitMask::ones(5, 6);
    assert!(msg(sc.run(x, &mut out, &tiles, &m5, Some(res))).contains("mask is 5x6"));
    assert!(msg(sc.run_positions(x, &mut out, &m5, Some(res))).contains("mask is 5x6"));
    assert!(msg(sc.run_positions(x, &mut out, &mask, None)).contains("no residual"));
    let t5 = aligned_tiles_naive(&m5, Granularity::new(2, 2));
    assert!(msg(sc.run(x, &mut out, &t5, &mask, Some(res))).contains("tile set was made for a 5x6"));
    let plain = SparseConv::new(&Conv { fused_add: false, ..attrs.clone() }, &[4, 6, 6], &p.w, None).unwrap();
    assert!(msg(plain.run(x, &mut out, &tiles, &mask, Some(res))).contains("without fused_add"));
    // Preparation.
    let e = |r: dynaspa_runtime::Result<SparseConv>| r.unwrap_err().to_string();
    assert!(e(SparseConv::new(&attrs, &[4, 36], &p.w, None)).contains("input shape"));
    assert!(e(SparseConv::new(&attrs, &[1, 5, 6, 6], &p.w, None)).contains("group 1 does not fit"));
    assert!(e(SparseConv::new(&Conv { group: 0, ..attrs.clone() }, &[1, 4, 6, 6], &p.w, None)).contains("group 0"));
    let w3 = Rng::new(1).tensor(&[3, 4, 3]);
    assert!(e(SparseConv::new(&attrs, &[1, 4, 6, 6], &w3, None)).contains("2 spatial axes"));
    assert!(e(SparseConv::new(&attrs, &[1, 4, 6, 6], &p.w, Some(&Rng::new(1).tensor(&[4])))).contains("bias shape"));
    assert!(e(SparseConv::new(&attrs, &[1, 4, 0, 6], &p.w, None)).contains("does not fit"));
    let ks = Conv { window: Window { kernel_shape: vec![5, 5], ..attrs.window.clone() }, ..attrs.clone() };
    assert!(e(SparseConv::new(&ks, &[1, 4, 6, 6], &p.w, None)).contains("kernel_shape"));
    let st = Conv { window: Window { strides: vec![0, 1], ..attrs.window.clone() }, ..attrs.clone() };
    assert!(SparseConv::new(&st, &[1, 4, 6, 6], &p.w, None).is_err());
    let wi = Tensor::from_i64(vec![3, 4, 3, 3], vec![1; 108]).unwrap();
    assert!(e(SparseConv::new(&attrs, &[1, 4, 6, 6], &wi, None)).contains("FLOAT"));
}
