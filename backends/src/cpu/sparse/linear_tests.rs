//! SparseLinear against the dense CPU MatMul (`eval_op`) plus bias and activation, on random
//! shapes and token subsets, both paths, outputs poisoned before every run.

use super::linear::SparseLinear;
use super::PhaseTimes;
use crate::cpu::eval_op;
use crate::cpu::test_util::{spec, Rng};
use dynaspa_runtime::graph::{Activation, Op};
use dynaspa_runtime::sparsity::BitMask;

fn paths() -> Vec<bool> {
    let mut v = vec![false];
    #[cfg(target_arch = "x86_64")]
    if super::micro::available() {
        v.push(true);
    }
    v
}

/// `rows` (as a 1 x T mask) of `got` match `want`; all other rows still hold `poison`.
fn check_rows(got: &[f32], want: &[f32], t: usize, rows: &[u32], poison: f32, what: &str) {
    let mask = BitMask::from_fn(1, t, |_, i| rows.binary_search(&(i as u32)).is_ok());
    // Rows are whole planes of one token here: transpose to plane-major for check_masked.
    let n = want.len() / t.max(1);
    let tr = |v: &[f32]| (0..n * t).map(|i| v[(i % t) * n + i / t]).collect::<Vec<f32>>();
    super::testkit::check_masked(&tr(got), &tr(want), &mask, poison, 1e-5, what);
}

fn run_case(t: usize, k: usize, n: usize, density: f64, bias: bool, act: Option<Activation>, seed: u64) {
    let mut rng = Rng::new(seed);
    let x = rng.tensor(&[t, k]);
    let w = rng.tensor(&[k, n]);
    let b = rng.tensor(&[n]);
    let mm = eval_op(&Op::MatMul, &[Some(&x), Some(&w)], &[spec(&[t, n])]).unwrap().remove(0);
    let bd = b.as_f32().unwrap();
    let want: Vec<f32> = mm
        .as_f32()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let v = if bias { v + bd[i % n] } else { v };
            act.map_or(v, |a| a.apply(v))
        })
        .collect();
    let rows: Vec<u32> = (0..t as u32).filter(|_| (rng.below(1000) as f64) < density * 1000.0).collect();
    for simd in paths() {
        let lin = SparseLinear::build(&w, bias.then_some(&b), act, simd).unwrap();
        assert_eq!(lin.dims(), (k, n));
        for poison in [1e30, f32::NAN] {
            let mut out = vec![poison; t * n];
            lin.run(x.as_f32().unwrap(), t, &mut out, &rows).unwrap();
            let what = format!("T {t} K {k} N {n} density {density} bias {bias} {act:?} simd {simd}");
            check_rows(&out, &want, t, &rows, poison, &what);
        }
    }
}

#[test]
fn linear_vit_shapes() {
    // A-ViT: 197 tokens, qkv 384 -> 1152, MLP 384 -> 1536 -> 384.
    for (i, d) in [0.02, 0.3, 0.5, 1.0].into_iter().enumerate() {
        run_case(197, 384, 1152, d, true, None, 1 + i as u64);
        run_case(197, 384, 200, d, true, Some(Activation::Relu), 10 + i as u64);
    }
    run_case(50, 1536, 384, 0.4, true, None, 20);
}

#[test]
fn linear_odd_shapes_and_epilogues() {
    let acts = [None, Some(Activation::Relu), Some(Activation::Sigmoid), Some(Activation::Tanh), Some(Activation::HardSwish)];
    let mut rng = Rng::new(5);
    for i in 0..60 {
        let t = 1 + rng.below(70);
        let k = [1, 3, 17, 64, 130, 300][rng.below(6)];
        let n = [1, 5, 63, 64, 65, 129, 200][rng.below(7)];
        let d = [0.05, 0.3, 0.7, 1.0][rng.below(4)];
        run_case(t, k, n, d, rng.below(2) == 0, acts[rng.below(acts.len())], 100 + i);
    }
    // K = 0: the output rows are the bias.
    run_case(9, 0, 70, 0.5, true, None, 200);
}

#[test]
fn linear_thread_counts_and_no_rows() {
    for th in [1, 3] {
        rayon::ThreadPoolBuilder::new().num_threads(th).build().unwrap().install(|| {
            run_case(97, 96, 300, 0.5, true, Some(Activation::Relu), 300 + th as u64);
            run_case(20, 64, 40, 0.2, false, None, 310 + th as u64);
        });
    }
    let mut rng = Rng::new(7);
    let w = rng.tensor(&[8, 9]);
    let lin = SparseLinear::new(&w, None, None).unwrap();
    let mut out = vec![1e30; 5 * 9];
    lin.run(&rng.vec(5 * 8), 5, &mut out, &[]).unwrap();
    assert!(out.iter().all(|&v| v == 1e30));
    let times = PhaseTimes::default();
    lin.run_timed(&rng.vec(5 * 8), 5, &mut out, &[1, 3], Some(&times)).unwrap();
    assert!(times.secs()[2] > 0.0 && out[0] == 1e30 && out[9] != 1e30);
}

#[test]
fn linear_bad_inputs_are_errors() {
    let mut rng = Rng::new(8);
    let w = rng.tensor(&[4, 6]);
    let lin = SparseLinear::new(&w, Some(&rng.tensor(&[6])), None).unwrap();
    let x = rng.vec(3 * 4);
    let mut out = vec![0.0; 3 * 6];
    let msg = |r: dynaspa_runtime::Result<()>| r.unwrap_err().to_string();
    assert!(msg(lin.run(&x[1..], 3, &mut out, &[0])).contains("input has 11 values"));
    assert!(msg(lin.run(&x, 3, &mut out[1..], &[0])).contains("output has 17 values"));
    assert!(msg(lin.run(&x, 3, &mut out, &[1, 1])).contains("strictly increasing"));
    assert!(msg(lin.run(&x, 3, &mut out, &[2, 0])).contains("strictly increasing"));
    assert!(msg(lin.run(&x, 3, &mut out, &[0, 3])).contains("row 3 is out of range"));
    assert!(msg(lin.run(&x, usize::MAX, &mut out, &[0])).contains("input has"));
    let e = |r: dynaspa_runtime::Result<SparseLinear>| r.unwrap_err().to_string();
    assert!(e(SparseLinear::new(&rng.tensor(&[4, 6, 1]), None, None)).contains("[K, N]"));
    assert!(e(SparseLinear::new(&w, Some(&rng.tensor(&[5])), None)).contains("bias shape"));
}
