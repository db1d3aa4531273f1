//! Attention on the CPU: the active-token kernel against the dense fused kernel at A-ViT's real
//! token densities (the `.dsm` mask datasets) and at fixed densities, and the fused dense
//! kernel against the unfused op chain it replaces.
//!
//! ```sh
//! cargo run --release -p dynaspa-backends --example attention_bench [-- --runs 31 --frames 16 --threads 2 --sweep]
//! ```
//!
//! Inputs are A-ViT-like: q, k, v `[1, H, T, dh]` uniform in [-2, 2] with the rows of halted
//! tokens zero (qkv is multiplied by the mask), the bias `(M - 1) * 1e4`, scale dh^-1/2. Both
//! kernels write into preallocated outputs; the sparse time includes listing the active tokens
//! from the float mask. Each sample times `reps` calls (cycling over the frames' masks), sparse
//! and dense samples are interleaved, and the table shows medians of `runs` samples after a
//! warm-up, on a 2-thread pool. The machine is shared with other builds: figures move by
//! 10-20% between runs (2x when another build takes a core), so run it more than once; the
//! speedup column pairs neighbouring samples to cancel most of that. `--sweep` adds random
//! masks of density 0.6-1.0, where the sparse kernel's overhead shows.

use dynaspa_backends::cpu::{active_tokens, attention_active, attention_dense, eval_op, AttnShape, ScoreBias};
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::graph::{Attention, BinaryKind, Op, ScoreScale};
use dynaspa_runtime::sparsity::MaskDataset;
use dynaspa_runtime::{DType, Tensor};
use std::time::Instant;

struct Config {
    name: &'static str,
    heads: usize,
    dh: usize,
    dataset: &'static str,
}

/// xorshift64, seeded per configuration so runs are comparable.
struct Rng(u64);

impl Rng {
    fn f32(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
    fn unit(&mut self) -> f64 {
        (self.f32() as f64 + 1.0) / 2.0
    }
}

/// One token mask per frame: the class token (always active) then the patch grid.
fn dataset_masks(ds: &MaskDataset, map: usize, frames: usize) -> Vec<Vec<f32>> {
    let n = ds.n_frames();
    (0..frames)
        .map(|i| {
            let m = ds.map_mask(i * n / frames, map).expect("frame in range");
            let mut v = vec![1.0; ds.maps()[map].prefix_tokens];
            v.extend(m.to_bools().iter().map(|&b| b as u8 as f32));
            v
        })
        .collect()
}

fn random_masks(rng: &mut Rng, t: usize, density: f64, frames: usize) -> Vec<Vec<f32>> {
    (0..frames).map(|_| (0..t).map(|i| (i == 0 || rng.unit() < density) as u8 as f32).collect()).collect()
}

/// A-ViT-like q, k, v for one mask.
struct Operands {
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    bias: Vec<f32>,
}

fn operands(rng: &mut Rng, heads: usize, dh: usize, mask: &[f32]) -> Operands {
    let t = mask.len();
    let mut gen = || -> Vec<f32> { (0..heads * t * dh).map(|i| 2.0 * rng.f32() * mask[(i / dh) % t]).collect() };
    let (q, k, v) = (gen(), gen(), gen());
    Operands { q, k, v, bias: mask.iter().map(|&m| (m - 1.0) * 1e4).collect() }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Medians (seconds per call) of `a` and `b`, sampled alternately, and the median of the
/// ratios a/b of adjacent samples: neighbours in time see the same load from other processes,
/// so the ratio is steadier than either median when the machine is shared.
fn interleaved(runs: usize, reps: usize, mut a: impl FnMut(usize), mut b: impl FnMut(usize)) -> (f64, f64, f64) {
    for i in 0..3 * reps {
        a(i);
        b(i);
    }
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let t0 = Instant::now();
        (0..reps).for_each(&mut a);
        ta.push(t0.elapsed().as_secs_f64() / reps as f64);
        let t0 = Instant::now();
        (0..reps).for_each(&mut b);
        tb.push(t0.elapsed().as_secs_f64() / reps as f64);
    }
    let ratios = ta.iter().zip(&tb).map(|(x, y)| x / y).collect();
    (median(ta), median(tb), median(ratios))
}

struct Row {
    label: String,
    density: f64,
    dense_us: f64,
    sparse_us: f64,
    /// Median over adjacent sample pairs of dense / sparse.
    speedup: f64,
}

fn sparse_vs_dense(cfg: &Config, label: String, masks: &[Vec<f32>], runs: usize, rng: &mut Rng) -> Row {
    let t = masks[0].len();
    let s = AttnShape { batch: 1, heads: cfg.heads, tq: t, tk: t, dk: cfg.dh, dv: cfg.dh, k_transposed: false };
    let scale = ScoreScale::Mul((cfg.dh as f32).powf(-0.5));
    let ops: Vec<Operands> = masks.iter().map(|m| operands(rng, cfg.heads, cfg.dh, m)).collect();
    let mut out_d = vec![0.0f32; cfg.heads * t * cfg.dh];
    let mut out_s = out_d.clone();
    let density = masks.iter().map(|m| m.iter().sum::<f32>() as f64 / t as f64).sum::<f64>() / masks.len() as f64;
    // About 1 ms of dense work per sample, so pairs are close in time.
    let flops = 4.0 * (cfg.heads * t * t * cfg.dh) as f64;
    let reps = ((1e-3 * 60e9 / flops) as usize).clamp(1, 400);
    let (dense, sparse, speedup) = interleaved(
        runs,
        reps,
        |i| {
            let o = &ops[i % ops.len()];
            let bias = ScoreBias { data: &o.bias, dims: [1, 1, 1, t] };
            attention_dense(&s, scale, &o.q, &o.k, &o.v, Some(bias), &mut out_d).unwrap();
        },
        |i| {
            let (o, m) = (&ops[i % ops.len()], &masks[i % ops.len()]);
            let lists = active_tokens(m, 1, t).unwrap();
            let redone = attention_active(&s, scale, 1e4, &o.q, &o.k, &o.v, &[&lists[0]], &mut out_s).unwrap();
            assert_eq!(redone, 0, "A-ViT-like rows never need the all-keys path");
        },
    );
    Row { label, density, dense_us: dense * 1e6, sparse_us: sparse * 1e6, speedup }
}

fn spec(shape: &[usize]) -> TensorSpec {
    TensorSpec { dtype: DType::F32, shape: shape.to_vec() }
}

fn eval(op: &Op, ins: &[&Tensor], shape: &[usize]) -> Tensor {
    let ins: Vec<Option<&Tensor>> = ins.iter().map(|t| Some(*t)).collect();
    eval_op(op, &ins, &[spec(shape)]).unwrap().remove(0)
}

/// Fused dense Attention node against Transpose(k), MatMul, Mul, Add, Softmax, MatMul, each
/// through `eval_op` (both allocate their outputs, as the executor does).
fn fused_vs_unfused(cfg: &Config, t: usize, runs: usize, rng: &mut Rng) -> (f64, f64, f64) {
    let (h, d) = (cfg.heads, cfg.dh);
    let mask: Vec<f32> = (0..t).map(|i| (i == 0 || rng.unit() < 0.5) as u8 as f32).collect();
    let o = operands(rng, h, d, &mask);
    let qs = [1, h, t, d];
    let q = Tensor::from_f32(qs.to_vec(), o.q).unwrap();
    let k = Tensor::from_f32(qs.to_vec(), o.k).unwrap();
    let v = Tensor::from_f32(qs.to_vec(), o.v).unwrap();
    let bias = Tensor::from_f32(vec![1, 1, 1, t], o.bias).unwrap();
    let sc = (d as f32).powf(-0.5);
    let att = Op::Attention(Attention { heads: h, scale: ScoreScale::Mul(sc), k_transposed: false, key_mask: None });
    let s_t = Tensor::scalar_f32(sc);
    let ss = [1, h, t, t];
    let flops = 4.0 * (h * t * t * d) as f64;
    let reps = ((1e-3 * 60e9 / flops) as usize).clamp(1, 400);
    interleaved(
        runs,
        reps,
        |_| {
            std::hint::black_box(eval(&att, &[&q, &k, &v, &bias], &qs));
        },
        |_| {
            let kt = eval(&Op::Transpose { perm: vec![0, 1, 3, 2] }, &[&k], &[1, h, d, t]);
            let x = eval(&Op::MatMul, &[&q, &kt], &ss);
            let x = eval(&Op::Binary(BinaryKind::Mul), &[&x, &s_t], &ss);
            let x = eval(&Op::Binary(BinaryKind::Add), &[&x, &bias], &ss);
            let p = eval(&Op::Softmax { axis: -1, legacy: false }, &[&x], &ss);
            std::hint::black_box(eval(&Op::MatMul, &[&p, &v], &qs));
        },
    )
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let runs = arg("--runs", 21).max(15);
    let frames = arg("--frames", 16).max(1);
    let sweep = std::env::args().any(|a| a == "--sweep");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let threads = arg("--threads", 2).max(1);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("thread pool");
    let configs = [
        Config { name: "full (DeiT-S)", heads: 6, dh: 64, dataset: "models/masks/avit_full_d30.dsm" },
        Config { name: "small", heads: 2, dh: 32, dataset: "models/masks/avit_small_d30.dsm" },
    ];
    println!("attention_bench: {threads} threads, medians of {runs} samples, {frames} frames per real-mask row;");
    println!("speedup = median over adjacent (dense, sparse) sample pairs of dense / sparse\n");
    pool.install(|| {
        for cfg in &configs {
            let ds = MaskDataset::open(root.join(cfg.dataset)).expect("mask dataset");
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ cfg.heads as u64);
            let mut rows = Vec::new();
            for (mi, map) in ds.maps().iter().enumerate() {
                let masks = dataset_masks(&ds, mi, frames);
                rows.push(sparse_vs_dense(cfg, map.name.clone(), &masks, runs, &mut rng));
            }
            let t = rows.first().map_or(0, |_| dataset_masks(&ds, 0, 1)[0].len());
            let sweep = if sweep { vec![0.6, 0.7, 0.8, 0.9, 1.0] } else { vec![] };
            for d in [0.1, 0.3, 0.5].into_iter().chain(sweep) {
                let masks = random_masks(&mut rng, t, d, frames);
                rows.push(sparse_vs_dense(cfg, format!("random d={d}"), &masks, runs, &mut rng));
            }
            println!("## {} attention: T={t}, {} heads, dh={} ({})", cfg.name, cfg.heads, cfg.dh, cfg.dataset);
            println!("| mask | density | dense us (median) | sparse us (median) | speedup | target 0.6/density | met |");
            println!("| --- | --- | --- | --- | --- | --- | --- |");
            for r in &rows {
                let (sp, target) = (r.speedup, 0.6 / r.density);
                println!(
                    "| {} | {:.3} | {:.1} | {:.1} | {:.2}x | {:.2}x | {} |",
                    r.label,
                    r.density,
                    r.dense_us,
                    r.sparse_us,
                    sp,
                    target,
                    if sp >= target { "yes" } else { "no" }
                );
            }
            let (fused, chain, ratio) = fused_vs_unfused(cfg, t, runs, &mut rng);
            println!(
                "\nfused dense Attention node {:.1} us vs unfused chain (Transpose, MatMul, Mul, Add, Softmax, MatMul) {:.1} us: {:.2}x\n",
                fused * 1e6,
                chain * 1e6,
                1.0 / ratio
            );
        }
    });
}
