//! Tests of the attention kernels: dense against an f64 reference and the unfused op chain,
//! the active-token kernel against dense, the zero-weight claim it rests on, bad input.
//! Inputs are fresh random per run; the seed is printed in every failure message
//! (`DYNASPA_TEST_SEED=<n>` replays one).

use super::attention::{attention_dense, AttnShape, ScoreBias};
use super::attention_active::{active_tokens, attention_active, attention_node_active};
use super::eval_op;
use super::test_util::*;
use dynaspa_runtime::graph::{Attention, BinaryKind, KeyMaskBias, Op, ScoreScale};
use dynaspa_runtime::Tensor;

fn seed() -> u64 {
    std::env::var("DYNASPA_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(7, |d| d.as_nanos() as u64))
}

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap()
}

/// Element (b, h, i, j) of a bias with padded dims `dims`.
fn bias_at(bias: &ScoreBias, b: usize, h: usize, i: usize, j: usize) -> f32 {
    let at = [b, h, i, j].iter().zip(&bias.dims).fold(0, |at, (&x, &d)| at * d + if d == 1 { 0 } else { x });
    bias.data[at]
}

/// softmax(scale(q k^T) + bias) v in f64, straight from the definition.
fn reference(s: &AttnShape, scale: ScoreScale, q: &[f32], k: &[f32], v: &[f32], bias: Option<&ScoreBias>) -> Vec<f32> {
    let &AttnShape { batch, heads, tq, tk, dk, dv, k_transposed } = s;
    let mut out = vec![0.0f32; batch * heads * tq * dv];
    for b in 0..batch {
        for h in 0..heads {
            let bh = b * heads + h;
            for i in 0..tq {
                let x: Vec<f64> = (0..tk)
                    .map(|j| {
                        let dot: f64 = (0..dk)
                            .map(|p| {
                                let kv = if k_transposed { k[(bh * dk + p) * tk + j] } else { k[(bh * tk + j) * dk + p] };
                                q[(bh * tq + i) * dk + p] as f64 * kv as f64
                            })
                            .sum();
                        let sc = match scale {
                            ScoreScale::Mul(f) => dot * f as f64,
                            ScoreScale::Div(d) => dot / d as f64,
                        };
                        sc + bias.map_or(0.0, |bb| bias_at(bb, b, h, i, j) as f64)
                    })
                    .collect();
                let max = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = x.iter().map(|&y| (y - max).exp()).collect();
                let sum: f64 = e.iter().sum();
                for c in 0..dv {
                    let o: f64 = (0..tk).map(|j| e[j] / sum * v[(bh * tk + j) * dv + c] as f64).sum();
                    out[(bh * tq + i) * dv + c] = o as f32;
                }
            }
        }
    }
    out
}

fn random_shape(rng: &mut Rng) -> AttnShape {
    let big = rng.below(4) == 0;
    AttnShape {
        batch: 1 + rng.below(2),
        heads: 1 + rng.below(4),
        tq: if big { 150 + rng.below(60) } else { 1 + rng.below(70) },
        tk: if big { 150 + rng.below(60) } else { 1 + rng.below(70) },
        dk: 1 + rng.below(70),
        dv: 1 + rng.below(40),
        k_transposed: rng.below(2) == 0,
    }
}

/// A bias shape among the broadcasts attention graphs use, or none.
fn random_bias_dims(rng: &mut Rng, s: &AttnShape) -> Option<[usize; 4]> {
    let (b, h, tq, tk) = (s.batch, s.heads, s.tq, s.tk);
    match rng.below(7) {
        0 => None,
        1 => Some([b, 1, 1, tk]),
        2 => Some([1, h, tq, tk]),
        3 => Some([1, 1, tq, tk]),
        4 => Some([1, 1, 1, tk]),
        5 => Some([b, h, tq, 1]),
        _ => Some([1, 1, 1, 1]),
    }
}

fn random_scale(rng: &mut Rng) -> ScoreScale {
    if rng.below(2) == 0 {
        ScoreScale::Mul(0.05 + rng.f32().abs())
    } else {
        ScoreScale::Div(1.0 + 8.0 * rng.f32().abs())
    }
}

#[test]
fn dense_matches_reference_on_random_shapes() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    for threads in [1, 2] {
        pool(threads).install(|| {
            for case in 0..24 {
                let s = random_shape(&mut rng);
                let scale = random_scale(&mut rng);
                let n = |a: usize, b: usize| s.batch * s.heads * a * b;
                // Scores of a few units, as after LayerNorm and a 1/sqrt(d) scale.
                let q: Vec<f32> = rng.vec(n(s.tq, s.dk)).iter().map(|x| 3.0 * x).collect();
                let k = rng.vec(n(s.tk, s.dk));
                let v = rng.vec(n(s.tk, s.dv));
                let dims = random_bias_dims(&mut rng, &s);
                let bdata = dims.map(|d| rng.vec(d.iter().product::<usize>()).iter().map(|x| 4.0 * x).collect::<Vec<f32>>());
                let bias = dims.zip(bdata.as_deref()).map(|(dims, data)| ScoreBias { data, dims });
                let mut out = vec![f32::NAN; n(s.tq, s.dv)];
                attention_dense(&s, scale, &q, &k, &v, bias, &mut out).unwrap();
                let want = reference(&s, scale, &q, &k, &v, bias.as_ref());
                let what = format!("seed {seed} threads {threads} case {case}: {s:?} {scale:?} bias {dims:?}");
                assert_close(&out, &want, 2e-5, &what);
            }
        });
    }
}

/// Runs `op` through `eval_op` with the output shape it infers to.
fn run(op: &Op, ins: &[&Tensor], shape: &[usize]) -> Tensor {
    let ins: Vec<Option<&Tensor>> = ins.iter().map(|t| Some(*t)).collect();
    eval_op(op, &ins, &[spec(shape)]).unwrap().remove(0)
}

/// The graph the pass fuses: Transpose(k), MatMul, Mul|Div, Add, Softmax(-1), MatMul.
fn unfused(scale: ScoreScale, q: &Tensor, k: &Tensor, v: &Tensor, bias: Option<&Tensor>) -> (Tensor, Tensor) {
    let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
    let kt = run(&Op::Transpose { perm: vec![0, 1, 3, 2] }, &[k], &[ks[0], ks[1], ks[3], ks[2]]);
    let ss = [qs[0], qs[1], qs[2], ks[2]];
    let sc = run(&Op::MatMul, &[q, &kt], &ss);
    let x = match scale {
        ScoreScale::Mul(f) => run(&Op::Binary(BinaryKind::Mul), &[&sc, &Tensor::scalar_f32(f)], &ss),
        ScoreScale::Div(d) => run(&Op::Binary(BinaryKind::Div), &[&sc, &Tensor::scalar_f32(d)], &ss),
    };
    let x = match bias {
        Some(b) => run(&Op::Binary(BinaryKind::Add), &[&x, b], &ss),
        None => x,
    };
    let p = run(&Op::Softmax { axis: -1, legacy: false }, &[&x], &ss);
    let y = run(&Op::MatMul, &[&p, v], &[qs[0], qs[1], qs[2], vs[3]]);
    (y, p)
}

fn tensor(shape: &[usize], v: Vec<f32>) -> Tensor {
    Tensor::from_f32(shape.to_vec(), v).unwrap()
}

/// A-ViT's inputs: q, k, v `[B, H, T, dh]` with the rows of halted tokens zero (qkv is
/// multiplied by the mask), the mask `[B, T]` and the bias `(M - 1) * 1e4` as `[B, 1, 1, T]`.
struct AvitCase {
    s: AttnShape,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    mask: Vec<f32>,
    bias: Vec<f32>,
}

fn avit_case(rng: &mut Rng, batch: usize, heads: usize, t: usize, dh: usize, density: f64, zero_halted: bool) -> AvitCase {
    let s = AttnShape { batch, heads, tq: t, tk: t, dk: dh, dv: dh, k_transposed: false };
    let mask: Vec<f32> = (0..batch * t)
        .map(|i| {
            // Token 0 is the class token, which never halts.
            let on = i % t == 0 || ((rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < density;
            on as u8 as f32
        })
        .collect();
    let n = batch * heads * t * dh;
    let mut gen = |amp: f32| -> Vec<f32> {
        let mut x: Vec<f32> = rng.vec(n).iter().map(|x| amp * x).collect();
        if zero_halted {
            for (r, row) in x.chunks_mut(dh).enumerate() {
                let (b, tok) = (r / (heads * t), r % t);
                row.iter_mut().for_each(|y| *y *= mask[b * t + tok]);
            }
        }
        x
    };
    let (q, k, v) = (gen(2.0), gen(2.0), gen(1.0));
    let bias = mask.iter().map(|&m| (m - 1.0) * 1e4).collect();
    AvitCase { s, q, k, v, mask, bias }
}

#[test]
fn dense_node_matches_unfused_chain() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    for case in 0..8 {
        let mut s = random_shape(&mut rng);
        s.k_transposed = false;
        let scale = random_scale(&mut rng);
        let (qs, ks, vs) = ([s.batch, s.heads, s.tq, s.dk], [s.batch, s.heads, s.tk, s.dk], [s.batch, s.heads, s.tk, s.dv]);
        let q = tensor(&qs, rng.vec(qs.iter().product()).iter().map(|x| 3.0 * x).collect());
        let (k, v) = (rng.tensor(&ks), rng.tensor(&vs));
        let bias = (case % 2 == 0).then(|| rng.tensor(&[s.batch, 1, 1, s.tk]));
        let op = Op::Attention(Attention { heads: s.heads, scale, k_transposed: false, key_mask: None });
        let mut ins = vec![&q, &k, &v];
        ins.extend(bias.as_ref());
        let got = run(&op, &ins, &[s.batch, s.heads, s.tq, s.dv]);
        let (want, _) = unfused(scale, &q, &k, &v, bias.as_ref());
        let what = format!("seed {seed} case {case}: {s:?}");
        assert_close(got.as_f32().unwrap(), want.as_f32().unwrap(), 1e-5, &what);
    }
}

/// The claim the active-token kernel rests on, checked on the unfused graph itself: with the
/// bias (M - 1) * 1e4, every halted key's softmax weight is exactly 0.0 in f32 whenever the
/// row has an active key, whether or not the halted keys' vectors are zero.
#[test]
fn halted_keys_get_exactly_zero_weight_in_the_dense_graph() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    for (case, &(density, zero_halted)) in [(0.02, true), (0.3, true), (0.3, false), (0.7, false)].iter().enumerate() {
        let c = avit_case(&mut rng, 2, 3, 109, 32, density, zero_halted);
        let t = c.s.tk;
        let sh = [2, 3, t, 32];
        let (q, k, v) = (tensor(&sh, c.q.clone()), tensor(&sh, c.k.clone()), tensor(&sh, c.v.clone()));
        let bias = tensor(&[2, 1, 1, t], c.bias.clone());
        let (_, p) = unfused(ScoreScale::Mul(32f32.powf(-0.5)), &q, &k, &v, Some(&bias));
        let p = p.as_f32().unwrap();
        let mut halted = 0;
        for (r, row) in p.chunks(t).enumerate() {
            let b = r / (3 * t);
            for (j, &w) in row.iter().enumerate() {
                if c.mask[b * t + j] == 0.0 {
                    assert_eq!(w, 0.0, "seed {seed} case {case}: row {r} key {j}: weight {w} of a halted key");
                    halted += 1;
                }
            }
        }
        assert!(halted > 0, "seed {seed} case {case}: the mask halted nothing");
    }
}

/// With every token halted the bias shifts all scores by -1e4 alike: the dense graph still
/// has a softmax (not zeros) and the fused kernel computes the same; the active-token kernel
/// has no row to write.
#[test]
fn all_halted_rows_match_the_dense_graph() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    let mut c = avit_case(&mut rng, 1, 2, 40, 16, 0.5, false);
    c.mask.iter_mut().for_each(|m| *m = 0.0);
    c.bias.iter_mut().for_each(|b| *b = -1e4);
    let sh = [1, 2, 40, 16];
    let (q, k, v) = (tensor(&sh, c.q.clone()), tensor(&sh, c.k.clone()), tensor(&sh, c.v.clone()));
    let bias = tensor(&[1, 1, 1, 40], c.bias.clone());
    let (want, p) = unfused(ScoreScale::Mul(0.25), &q, &k, &v, Some(&bias));
    assert!(p.as_f32().unwrap().iter().all(|&w| w > 0.0), "seed {seed}: all-halted rows are a plain softmax");
    let op = Op::Attention(Attention { heads: 2, scale: ScoreScale::Mul(0.25), k_transposed: false, key_mask: None });
    let got = run(&op, &[&q, &k, &v, &bias], &sh);
    assert_close(got.as_f32().unwrap(), want.as_f32().unwrap(), 1e-5, &format!("seed {seed}"));
    let mut out = vec![f32::NAN; c.q.len()];
    let redone = attention_active(&c.s, ScoreScale::Mul(0.25), 1e4, &c.q, &c.k, &c.v, &[&[]], &mut out).unwrap();
    assert_eq!(redone, 0);
    assert!(out.iter().all(|x| x.is_nan()), "seed {seed}: no active token, nothing may be written");
}

const POISON: f32 = -7.77e33;

/// Active rows within `tol` of dense relative to the row's magnitude; inactive rows still
/// hold the poison bit for bit.
fn check_active_rows(got: &[f32], dense: &[f32], c: &AvitCase, tol: f32, what: &str) {
    let (t, dv, heads) = (c.s.tk, c.s.dv, c.s.heads);
    for (r, (g, w)) in got.chunks(dv).zip(dense.chunks(dv)).enumerate() {
        let (b, tok) = (r / (heads * t), r % t);
        if c.mask[b * t + tok] == 1.0 {
            let scale = w.iter().fold(0f32, |m, x| m.max(x.abs()));
            for (j, (&x, &y)) in g.iter().zip(w).enumerate() {
                assert!((x - y).abs() <= tol * y.abs().max(scale), "{what}: row {r} (token {tok}) [{j}]: {x} vs dense {y}");
            }
        } else {
            assert!(g.iter().all(|x| x.to_bits() == POISON.to_bits()), "{what}: inactive row {r} (token {tok}) was written");
        }
    }
}

fn lists(c: &AvitCase) -> Vec<Vec<u32>> {
    active_tokens(&c.mask, c.s.batch, c.s.tk).unwrap()
}

fn dense_of(c: &AvitCase, scale: ScoreScale) -> Vec<f32> {
    let mut d = vec![0.0; c.q.len() / c.s.dk * c.s.dv];
    let bias = ScoreBias { data: &c.bias, dims: [c.s.batch, 1, 1, c.s.tk] };
    attention_dense(&c.s, scale, &c.q, &c.k, &c.v, Some(bias), &mut d).unwrap();
    d
}

#[test]
fn active_kernel_matches_dense_at_every_density() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    for threads in [1, 2] {
        pool(threads).install(|| {
            for &(batch, heads, t, dh) in &[(1, 6, 197, 64), (2, 2, 109, 32), (1, 3, 50, 24)] {
                for &density in &[0.02, 0.05, 0.1, 0.3, 0.5, 0.8, 1.0] {
                    for zero_halted in [true, false] {
                        let c = avit_case(&mut rng, batch, heads, t, dh, density, zero_halted);
                        let scale = ScoreScale::Mul((dh as f32).powf(-0.5));
                        let dense = dense_of(&c, scale);
                        let l = lists(&c);
                        let refs: Vec<&[u32]> = l.iter().map(|x| x.as_slice()).collect();
                        let mut out = vec![POISON; dense.len()];
                        let redone = attention_active(&c.s, scale, 1e4, &c.q, &c.k, &c.v, &refs, &mut out).unwrap();
                        let what = format!(
                            "seed {seed} threads {threads} B{batch} H{heads} T{t} dh{dh} density {density} zero_halted {zero_halted}"
                        );
                        assert_eq!(redone, 0, "{what}: ordinary activations must not need the all-keys fallback");
                        check_active_rows(&out, &dense, &c, 1e-5, &what);
                    }
                }
            }
        });
    }
}

/// Rows whose halted keys cannot be proven to vanish are recomputed over all keys, so the
/// kernel agrees with dense even where the zero-weight claim is false.
#[test]
fn unprovable_rows_fall_back_to_all_keys() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    // Huge halted keys: their scores exceed the active ones by more than c.
    let mut c = avit_case(&mut rng, 1, 2, 60, 16, 0.4, false);
    // Whole numbers: every score (16 products below 4e5, the -1e4 bias, / 4) is exact in f32
    // in any summation order, so both paths see the same scores. Scores near 1e5 rounded
    // differently moved softmax weights by up to 1% (seed 431951036).
    c.k.iter_mut().for_each(|x| *x = (*x * 2000.0).round());
    c.q.iter_mut().for_each(|x| *x = (*x * 50.0).round());
    let scale = ScoreScale::Div(4.0);
    let dense = dense_of(&c, scale);
    let l = lists(&c);
    let mut out = vec![POISON; dense.len()];
    let redone = attention_active(&c.s, scale, 1e4, &c.q, &c.k, &c.v, &[&l[0]], &mut out).unwrap();
    assert!(redone > 0, "seed {seed}: huge scores must trigger the fallback");
    check_active_rows(&out, &dense, &c, 1e-5, &format!("seed {seed} huge keys"));

    // A small factor c: halted keys keep real weight for every row.
    let mut c = avit_case(&mut rng, 1, 2, 60, 16, 0.4, false);
    c.bias = c.mask.iter().map(|&m| (m - 1.0) * 3.0).collect();
    let dense = dense_of(&c, ScoreScale::Mul(0.25));
    let l = lists(&c);
    let mut out = vec![POISON; dense.len()];
    let redone = attention_active(&c.s, ScoreScale::Mul(0.25), 3.0, &c.q, &c.k, &c.v, &[&l[0]], &mut out).unwrap();
    assert_eq!(redone, 2 * l[0].len(), "seed {seed}: every active row needs all keys when c = 3");
    check_active_rows(&out, &dense, &c, 1e-5, &format!("seed {seed} c = 3"));

    // A NaN in a halted key poisons every row of that head in the dense graph.
    let mut c = avit_case(&mut rng, 1, 1, 30, 8, 0.5, true);
    let halted = c.mask.iter().position(|&m| m == 0.0).unwrap();
    c.k[halted * 8 + 3] = f32::NAN;
    let dense = dense_of(&c, ScoreScale::Mul(0.3));
    let l = lists(&c);
    let mut out = vec![POISON; dense.len()];
    attention_active(&c.s, ScoreScale::Mul(0.3), 1e4, &c.q, &c.k, &c.v, &[&l[0]], &mut out).unwrap();
    for &tok in &l[0] {
        let row = &out[tok as usize * 8..(tok as usize + 1) * 8];
        assert!(row.iter().all(|x| x.is_nan()), "seed {seed}: row {tok} must be NaN as in the dense graph");
        assert!(dense[tok as usize * 8].is_nan());
    }
}

#[test]
fn transposed_keys_give_the_same_rows() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    let c = avit_case(&mut rng, 1, 2, 45, 12, 0.3, true);
    let (t, dk) = (45, 12);
    let mut kt = vec![0.0; c.k.len()];
    for h in 0..2 {
        for j in 0..t {
            for p in 0..dk {
                kt[(h * dk + p) * t + j] = c.k[(h * t + j) * dk + p];
            }
        }
    }
    let s = AttnShape { k_transposed: true, ..c.s };
    let dense = dense_of(&c, ScoreScale::Mul(0.3));
    let l = lists(&c);
    let mut out = vec![POISON; dense.len()];
    attention_active(&s, ScoreScale::Mul(0.3), 1e4, &c.q, &kt, &c.v, &[&l[0]], &mut out).unwrap();
    check_active_rows(&out, &dense, &c, 1e-5, &format!("seed {seed} k transposed"));
}

fn key_mask_op(heads: usize) -> Attention {
    Attention { heads, scale: ScoreScale::Mul(0.125), k_transposed: false, key_mask: Some(KeyMaskBias { c: 1e4 }) }
}

#[test]
fn node_level_active_kernel_zero_fills_inactive_rows() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    let c = avit_case(&mut rng, 2, 3, 70, 16, 0.3, true);
    let sh = [2, 3, 70, 16];
    let (q, k, v) = (tensor(&sh, c.q.clone()), tensor(&sh, c.k.clone()), tensor(&sh, c.v.clone()));
    let bias = tensor(&[2, 1, 1, 70], c.bias.clone());
    let mask = tensor(&[2, 70], c.mask.clone());
    let op = key_mask_op(3);
    let ins = [Some(&q), Some(&k), Some(&v), Some(&bias), Some(&mask)];
    let dense = eval_op(&Op::Attention(op.clone()), &ins, &[spec(&sh)]).unwrap().remove(0);
    let (got, redone) = attention_node_active(&op, &ins, &spec(&sh)).unwrap();
    assert_eq!(redone, 0);
    let (g, d) = (got.as_f32().unwrap(), dense.as_f32().unwrap());
    for (r, (gr, dr)) in g.chunks(16).zip(d.chunks(16)).enumerate() {
        let (b, tok) = (r / (3 * 70), r % 70);
        if c.mask[b * 70 + tok] == 1.0 {
            assert_close(gr, dr, 1e-5, &format!("seed {seed} row {r}"));
        } else {
            assert!(gr.iter().all(|&x| x == 0.0), "seed {seed}: inactive row {r} must be zero");
        }
    }
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let mut rng = Rng::new(5);
    let c = avit_case(&mut rng, 1, 2, 20, 8, 0.5, true);
    let l = lists(&c);
    let sc = ScoreScale::Mul(0.3);
    let mut out = vec![0.0; c.q.len()];
    let e = |r: dynaspa_runtime::Result<usize>| r.unwrap_err().to_string();
    assert!(e(attention_active(&c.s, sc, 1e4, &c.q[1..], &c.k, &c.v, &[&l[0]], &mut out)).contains("q has"));
    assert!(e(attention_active(&c.s, sc, 1e4, &c.q, &c.k, &c.v, &[&[3, 2]], &mut out)).contains("strictly increasing"));
    assert!(e(attention_active(&c.s, sc, 1e4, &c.q, &c.k, &c.v, &[&[0, 20]], &mut out)).contains("out of range"));
    assert!(e(attention_active(&c.s, sc, 1e4, &c.q, &c.k, &c.v, &[&l[0], &l[0]], &mut out)).contains("lists"));
    assert!(e(attention_active(&c.s, sc, 0.0, &c.q, &c.k, &c.v, &[&l[0]], &mut out)).contains("positive"));
    assert!(e(attention_active(&c.s, sc, f32::NAN, &c.q, &c.k, &c.v, &[&l[0]], &mut out)).contains("positive"));
    let cross = AttnShape { tq: 10, ..c.s };
    let mut o2 = vec![0.0; 2 * 10 * 8];
    assert!(e(attention_active(&cross, sc, 1e4, &c.q[..160], &c.k, &c.v, &[&l[0]], &mut o2)).contains("as many queries"));
    let huge = AttnShape { batch: usize::MAX, ..c.s };
    assert!(attention_dense(&huge, sc, &c.q, &c.k, &c.v, None, &mut out).is_err());
    let bad_bias = ScoreBias { data: &c.bias, dims: [1, 1, 2, 20] };
    assert!(attention_dense(&c.s, sc, &c.q, &c.k, &c.v, Some(bad_bias), &mut out).unwrap_err().to_string().contains("broadcast"));
    let short_bias = ScoreBias { data: &c.bias[1..], dims: [1, 1, 1, 20] };
    assert!(attention_dense(&c.s, sc, &c.q, &c.k, &c.v, Some(short_bias), &mut out).is_err());

    assert!(active_tokens(&[1.0, 0.5], 1, 2).unwrap_err().to_string().contains("not 0 or 1"));
    assert!(active_tokens(&[1.0, 0.0, 1.0], 2, 2).is_err());
    assert_eq!(active_tokens(&[1.0, 0.0, 0.0, 1.0], 2, 2).unwrap(), vec![vec![0], vec![1]]);

    let sh = [1, 2, 20, 8];
    let (q, k, v) = (tensor(&sh, c.q.clone()), tensor(&sh, c.k.clone()), tensor(&sh, c.v.clone()));
    let mask = tensor(&[1, 20], c.mask.clone());
    let mut wrong = c.bias.clone();
    wrong[l[0][1] as usize] = -5.0;
    let wrong = tensor(&[1, 1, 1, 20], wrong);
    let op = key_mask_op(2);
    let err = attention_node_active(&op, &[Some(&q), Some(&k), Some(&v), Some(&wrong), Some(&mask)], &spec(&sh)).unwrap_err();
    assert!(err.to_string().contains("not (M - 1)"), "{err}");
    let bias = tensor(&[1, 1, 1, 20], c.bias.clone());
    let no_mask = Attention { key_mask: None, ..op.clone() };
    assert!(attention_node_active(&no_mask, &[Some(&q), Some(&k), Some(&v), Some(&bias)], &spec(&sh)).is_err());
    assert!(attention_node_active(&op, &[Some(&q), Some(&k), Some(&v), Some(&bias)], &spec(&sh)).is_err());
    let dense_op = Op::Attention(op);
    assert!(eval_op(&dense_op, &[Some(&q), Some(&k)], &[spec(&sh)]).unwrap_err().to_string().contains("input 2"));
    assert!(eval_op(&dense_op, &[Some(&q), Some(&k), Some(&v)], &[spec(&[1, 2, 20, 9])]).is_err());
    let i64t = Tensor::from_i64(sh.to_vec(), vec![1; 320]).unwrap();
    assert!(eval_op(&dense_op, &[Some(&q), Some(&i64t), Some(&v)], &[spec(&sh)]).unwrap_err().to_string().contains("FLOAT"));
}

/// Random small shapes (zeros included), op fields, output specs, input counts and token
/// lists, consistent or not: always a result, never a panic.
#[test]
fn kernels_never_panic_on_garbage() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    for case in 0..3000 {
        let dims = |rng: &mut Rng, lo: usize, spread: usize| -> Vec<usize> {
            let rank = lo + rng.below(spread);
            (0..rank).map(|_| rng.below(5)).collect()
        };
        let (q, k, v) = (dims(&mut rng, 3, 3), dims(&mut rng, 3, 3), dims(&mut rng, 3, 3));
        let (b, m, out) = (dims(&mut rng, 0, 6), dims(&mut rng, 1, 3), dims(&mut rng, 3, 3));
        let (qt, kt, vt, bt) = (rng.tensor(&q), rng.tensor(&k), rng.tensor(&v), rng.tensor(&b));
        let mt = Tensor::from_f32(m.clone(), (0..m.iter().product()).map(|_| rng.below(3) as f32 * 0.5).collect()).unwrap();
        let op = Attention {
            heads: rng.below(5),
            scale: random_scale(&mut rng),
            k_transposed: rng.below(2) == 0,
            key_mask: (rng.below(2) == 0).then_some(KeyMaskBias { c: [1e4, 0.0, -1.0][rng.below(3)] }),
        };
        let all = [Some(&qt), Some(&kt), Some(&vt), Some(&bt), Some(&mt)];
        let ins = &all[..rng.below(6)];
        let lists: Vec<Vec<u32>> = (0..rng.below(3)).map(|_| (0..rng.below(4)).map(|_| rng.below(6) as u32).collect()).collect();
        let refs: Vec<&[u32]> = lists.iter().map(|l| l.as_slice()).collect();
        let s = AttnShape {
            batch: rng.below(3),
            heads: rng.below(3),
            tq: rng.below(5),
            tk: rng.below(5),
            dk: rng.below(4),
            dv: rng.below(4),
            k_transposed: rng.below(2) == 0,
        };
        let r = std::panic::catch_unwind(|| {
            let _ = super::attention::attention(&op, ins, &spec(&out));
            let _ = attention_node_active(&op, ins, &spec(&out));
            let mut o = vec![0.0; out.iter().product()];
            let (qd, kd, vd) = (qt.as_f32().unwrap(), kt.as_f32().unwrap(), vt.as_f32().unwrap());
            let _ = attention_dense(&s, op.scale, qd, kd, vd, None, &mut o);
            let _ = attention_active(&s, op.scale, 1e4, qd, kd, vd, &refs, &mut o);
        });
        assert!(r.is_ok(), "seed {seed} case {case}: q {q:?} k {k:?} v {v:?} bias {b:?} mask {m:?} out {out:?} {op:?} {s:?} {lists:?}");
    }
}
