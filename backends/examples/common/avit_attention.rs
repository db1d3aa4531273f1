//! `gpu_sparse_bench --avit`: A-ViT's token ops on a GPU backend, token-sparse against dense,
//! on the same executor (see gpu_sparse_bench.rs for the command line).
//!
//! Two graphs per size (DeiT-S: 197 tokens, 6 heads x 64, dim 384; the reduced A-ViT: 109
//! tokens, 2 heads x 32, dim 64), both built as `detect_sparse_regions` annotates A-ViT (token
//! masks made in the graph, here given as an input `m` [B, T] and marked as a halting mask):
//! - `block`: the model's attention path: qkv = (LN-free x . Wqkv + b) * m, reshaped, transposed
//!   and split into q, k, v; Attention with the key-mask bias (m - 1) * 1e4; proj = (o . Wp +
//!   b) * m. On the token path the qkv and proj bias and mask fold into the token GEMM, and the
//!   attention's inactive keys are proven zero by the graph (no key-norm pass).
//! - `op`: the Attention op alone on q, k, v inputs (keys not proven zero: the kernel launches
//!   the key-norm pass first, and the op itself compacts its mask).
//! The same graph compiled with every token op forced dense (`ForceMember::Dense`) is the
//! baseline: the dense attention kernel over all tokens, the dense GEMM then the bias Add and
//! the mask Mul as separate kernels.
//!
//! Timing: per node (or node group), `--samples` samples of `--runs` launches bracketed by a
//! queue finish, dense and sparse samples interleaved, median; after a warm-up frame and 3
//! samples of each. Token sets: per image the class token plus random others, round(d * T) in
//! all (density 1.0: all tokens), the same set for every image of a batch drawn anew; written
//! with `--dump-masks DIR` as `avit_{size}_d{density}_b{batch}.npy` (uint8 [B, T]) for
//! `benches/ops.py attention DIR`. Inputs random non-zero.

use dynaspa_backends::gpu::{GpuDevice, GpuExecutable, GpuOptions, NodePart};
use dynaspa_backends::{ForceMember, SparseConfig};
use dynaspa_runtime::backend::Executable;
use dynaspa_runtime::graph::{
    Attention, BinaryKind, FillPolicy, Graph, KeyMaskBias, MaskKind, MaskSource, Node, Op, ScoreScale, SparseSpec, Value,
};
use dynaspa_runtime::{DType, Error, Result, Tensor};
use std::io::Write;
use std::sync::Arc;

pub struct Size {
    pub name: &'static str,
    pub tokens: usize,
    pub heads: usize,
    pub head_dim: usize,
}

pub const SIZES: [Size; 2] =
    [Size { name: "deit_s", tokens: 197, heads: 6, head_dim: 64 }, Size { name: "small", tokens: 109, heads: 2, head_dim: 32 }];

pub struct Settings<'a> {
    pub samples: usize,
    pub runs: usize,
    pub batches: &'a [usize],
    pub densities: &'a [f64],
    pub only: Option<&'a str>,
    pub json: Option<&'a mut std::fs::File>,
    pub dump_masks: Option<&'a str>,
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Non-zero values in [-a, -a/512] u [a/512, a).
    fn vec(&mut self, n: usize, a: f32) -> Vec<f32> {
        (0..n)
            .map(|_| {
                let v = (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0;
                a * if v.abs() < 1.0 / 512.0 { 0.5 } else { v }
            })
            .collect()
    }
}

struct Builder {
    g: Graph,
}

impl Builder {
    fn value(&mut self, name: &str, shape: Vec<usize>, constant: Option<Tensor>) -> usize {
        let dtype = constant.as_ref().map_or(DType::F32, |t| t.dtype());
        self.g.values.push(Value { name: name.into(), dtype, shape, constant: constant.map(Arc::new) });
        self.g.values.len() - 1
    }
    fn node(&mut self, name: &str, op: Op, inputs: &[usize], output: usize, sparse: Option<SparseSpec>) {
        let inputs = inputs.iter().map(|&i| Some(i)).collect();
        self.g.nodes.push(Node { name: name.into(), op, inputs, outputs: vec![output], sparse });
    }
    fn shape(&mut self, name: &str, dims: &[usize]) -> Result<usize> {
        let t = Tensor::from_i64(vec![dims.len()], dims.iter().map(|&d| d as i64).collect())?;
        Ok(self.value(name, vec![dims.len()], Some(t)))
    }
    fn scalar(&mut self, name: &str, v: f32) -> usize {
        self.value(name, vec![], Some(Tensor::scalar_f32(v)))
    }
    /// `(x . W + b) * m3` with the MatMul annotated as detection does (mask product kept).
    fn token_linear(&mut self, name: &str, x: usize, k: usize, n: usize, m3: usize, rng: &mut Rng) -> Result<usize> {
        let shape = self.g.values[x].shape[..2].to_vec();
        let w = self.value(&format!("{name}.w"), vec![k, n], Some(Tensor::from_f32(vec![k, n], rng.vec(k * n, 1.0 / (k as f32).sqrt()))?));
        let b = self.value(&format!("{name}.b"), vec![n], Some(Tensor::from_f32(vec![n], rng.vec(n, 0.1))?));
        let out = |s: &mut Builder, tag: &str| s.value(&format!("{name}/{tag}"), [shape.clone(), vec![n]].concat(), None);
        let (y0, y1, y2) = (out(self, "matmul"), out(self, "bias"), out(self, "mask"));
        self.node(name, Op::MatMul, &[x, w], y0, Some(token_spec(m3)));
        self.node(&format!("{name}/add"), Op::Binary(BinaryKind::Add), &[y0, b], y1, None);
        self.node(&format!("{name}/mul"), Op::Binary(BinaryKind::Mul), &[y1, m3], y2, None);
        Ok(y2)
    }
    /// The key-mask bias (m - 1) * c as [B, 1, 1, T].
    fn key_bias(&mut self, m2: usize, b: usize, t: usize, c: f32) -> Result<usize> {
        let s4 = self.shape("bias.shape", &[b, 1, 1, t])?;
        let m4 = self.value("m4", vec![b, 1, 1, t], None);
        self.node("m4", Op::Reshape { allowzero: false }, &[m2, s4], m4, None);
        let (one, cv) = (self.scalar("one", 1.0), self.scalar("c", c));
        let (s, bias) = (self.value("m4-1", vec![b, 1, 1, t], None), self.value("bias", vec![b, 1, 1, t], None));
        self.node("bias/sub", Op::Binary(BinaryKind::Sub), &[m4, one], s, None);
        self.node("bias/mul", Op::Binary(BinaryKind::Mul), &[s, cv], bias, None);
        Ok(bias)
    }
}

fn token_spec(mask: usize) -> SparseSpec {
    SparseSpec {
        mask,
        kind: MaskKind::Token,
        // Stands for the model's in-graph halting mask (binary by construction).
        source: MaskSource::Halting { node: "bench".into() },
        dilation: [0, 0],
        fill: FillPolicy::Zero,
        fused_mul: false,
    }
}

fn attention_op(s: &Size) -> Op {
    let key_mask = Some(KeyMaskBias { c: 1e4 });
    Op::Attention(Attention { heads: s.heads, scale: ScoreScale::Mul((s.head_dim as f32).powf(-0.5)), k_transposed: false, key_mask })
}

/// The `block` graph (module docs): inputs x [B, T, C] and m [B, T].
fn block_graph(s: &Size, b: usize, rng: &mut Rng) -> Result<Graph> {
    let (t, h, dh) = (s.tokens, s.heads, s.head_dim);
    let c = h * dh;
    let mut bd = Builder { g: Graph { name: format!("avit_{}_block", s.name), opset: 17, ..Default::default() } };
    let x = bd.value("x", vec![b, t, c], None);
    let m2 = bd.value("m", vec![b, t], None);
    let s3 = bd.shape("m3.shape", &[b, t, 1])?;
    let m3 = bd.value("m3", vec![b, t, 1], None);
    bd.node("m3", Op::Reshape { allowzero: false }, &[m2, s3], m3, None);
    let qkv = bd.token_linear("qkv", x, c, 3 * c, m3, rng)?;
    let s5 = bd.shape("qkv.shape", &[b, t, 3, h, dh])?;
    let r5 = bd.value("qkv5", vec![b, t, 3, h, dh], None);
    bd.node("qkv5", Op::Reshape { allowzero: false }, &[qkv, s5], r5, None);
    let t5 = bd.value("qkvT", vec![3, b, h, t, dh], None);
    bd.node("qkvT", Op::Transpose { perm: vec![2, 0, 3, 1, 4] }, &[r5], t5, None);
    let mut qkv_parts = Vec::new();
    for (i, name) in ["q", "k", "v"].iter().enumerate() {
        let idx = bd.value(&format!("{name}.index"), vec![], Some(Tensor::from_i64(vec![], vec![i as i64])?));
        let y = bd.value(name, vec![b, h, t, dh], None);
        bd.node(name, Op::Gather { axis: 0 }, &[t5, idx], y, None);
        qkv_parts.push(y);
    }
    let bias = bd.key_bias(m2, b, t, 1e4)?;
    let o = bd.value("attention", vec![b, h, t, dh], None);
    bd.node("attention", attention_op(s), &[qkv_parts[0], qkv_parts[1], qkv_parts[2], bias, m2], o, Some(token_spec(m2)));
    let ot = bd.value("attentionT", vec![b, t, h, dh], None);
    bd.node("attentionT", Op::Transpose { perm: vec![0, 2, 1, 3] }, &[o], ot, None);
    let s3c = bd.shape("o.shape", &[b, t, c])?;
    let o3 = bd.value("o3", vec![b, t, c], None);
    bd.node("o3", Op::Reshape { allowzero: false }, &[ot, s3c], o3, None);
    let y = bd.token_linear("proj", o3, c, c, m3, rng)?;
    bd.g.inputs = vec![x, m2];
    bd.g.outputs = vec![y];
    Ok(bd.g)
}

/// The `op` graph (module docs): inputs q, k, v [B, H, T, dh] and m [B, T].
fn op_graph(s: &Size, b: usize) -> Result<Graph> {
    let (t, h, dh) = (s.tokens, s.heads, s.head_dim);
    let mut bd = Builder { g: Graph { name: format!("avit_{}_attention", s.name), opset: 17, ..Default::default() } };
    let (q, k, v) =
        (bd.value("q", vec![b, h, t, dh], None), bd.value("k", vec![b, h, t, dh], None), bd.value("v", vec![b, h, t, dh], None));
    let m2 = bd.value("m", vec![b, t], None);
    let bias = bd.key_bias(m2, b, t, 1e4)?;
    let o = bd.value("attention", vec![b, h, t, dh], None);
    bd.node("attention", attention_op(s), &[q, k, v, bias, m2], o, Some(token_spec(m2)));
    bd.g.inputs = vec![q, k, v, m2];
    bd.g.outputs = vec![o];
    Ok(bd.g)
}

/// Per image: the class token and random others, `round(d * T)` in all.
fn token_mask(rng: &mut Rng, b: usize, t: usize, d: f64) -> Vec<f32> {
    let want = ((d * t as f64).round() as usize).clamp(1, t);
    let mut m = vec![0f32; b * t];
    for img in 0..b {
        let row = &mut m[img * t..(img + 1) * t];
        row[0] = 1.0;
        let mut have = 1;
        while have < want {
            let i = (rng.next() % t as u64) as usize;
            if row[i] == 0.0 {
                row[i] = 1.0;
                have += 1;
            }
        }
    }
    m
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Dense and sparse medians (µs) of node groups, samples interleaved.
fn time_pair<D: GpuDevice>(
    dense: &mut GpuExecutable<D>,
    dense_nodes: &[&str],
    sparse: &mut GpuExecutable<D>,
    sparse_nodes: &[(&str, NodePart)],
    set: &Settings,
) -> Result<(f64, f64)> {
    let one = |exe: &mut GpuExecutable<D>, nodes: &[(&str, NodePart)], samples: usize| -> Result<f64> {
        let mut total = 0.0;
        for &(n, part) in nodes {
            total += median(&mut exe.time_node(n, part, samples, set.runs)?);
        }
        Ok(total)
    };
    let dn: Vec<(&str, NodePart)> = dense_nodes.iter().map(|&n| (n, NodePart::All)).collect();
    one(dense, &dn, 3)?;
    one(sparse, sparse_nodes, 3)?;
    let (mut ds, mut ss) = (Vec::new(), Vec::new());
    for _ in 0..set.samples {
        ds.push(one(dense, &dn, 1)?);
        ss.push(one(sparse, sparse_nodes, 1)?);
    }
    Ok((median(&mut ds), median(&mut ss)))
}

fn opts(force: Option<ForceMember>) -> GpuOptions {
    GpuOptions { poison: false, sparse: SparseConfig { cache_dir: None, force, profile: None }, ..Default::default() }
}

pub fn bench<D: GpuDevice + 'static>(dev: Arc<D>, set: &mut Settings) -> Result<()> {
    let info = dev.info().clone();
    println!(
        "A-ViT token ops on {} ({}, {}), µs per run, median of {} samples x {} runs, dense/sparse interleaved",
        info.name, info.backend, info.driver, set.samples, set.runs
    );
    println!(
        "{:<7} {:>5} {:>7} | {:>9} {:>9} {:>7} {:>7} | {:>9} {:>9} {:>7} | {:>8} | {:>8} {:>8} | {:>8} {:>8}",
        "size",
        "batch",
        "density",
        "attn dn",
        "attn sp",
        "speedup",
        "target",
        "op dn",
        "op sp",
        "speedup",
        "compact",
        "qkv dn",
        "qkv sp",
        "proj dn",
        "proj sp"
    );
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for s in SIZES.iter().filter(|s| set.only.is_none_or(|o| s.name.contains(o))) {
        for &b in set.batches {
            let (t, c) = (s.tokens, s.heads * s.head_dim);
            let gb = block_graph(s, b, &mut rng)?;
            let go = op_graph(s, b)?;
            let mut bs = GpuExecutable::compile(dev.clone(), &info.backend, &gb, &opts(None))?;
            let mut bdn = GpuExecutable::compile(dev.clone(), &info.backend, &gb, &opts(Some(ForceMember::Dense)))?;
            let mut os = GpuExecutable::compile(dev.clone(), &info.backend, &go, &opts(None))?;
            let mut odn = GpuExecutable::compile(dev.clone(), &info.backend, &go, &opts(Some(ForceMember::Dense)))?;
            let ops = bs.token_ops();
            let att = ops
                .iter()
                .find(|o| o.kind == "attention")
                .ok_or_else(|| Error::Other("the block's attention is not on the token path".into()))?;
            if !att.keys_zero || ops.len() != 3 || !bdn.token_ops().is_empty() {
                return Err(Error::Other(format!("unexpected token plan: {ops:?}")));
            }
            let x = Tensor::from_f32(vec![b, t, c], rng.vec(b * t * c, 1.0))?;
            let qkv: Vec<Tensor> =
                (0..3).map(|_| Tensor::from_f32(vec![b, s.heads, t, s.head_dim], rng.vec(b * t * c, 1.0))).collect::<Result<_>>()?;
            for &d in set.densities {
                let m = token_mask(&mut rng, b, t, d);
                let real = m.iter().sum::<f32>() as f64 / m.len() as f64;
                if let Some(dir) = set.dump_masks {
                    super::write_npy_u8(&format!("{dir}/avit_{}_d{d:.2}_b{b}.npy", s.name), &[b, t], &m)?;
                }
                let mt = Tensor::from_f32(vec![b, t], m)?;
                // One frame each, so every buffer holds this frame's values; sparse against
                // dense as a check that the timed graphs compute the same thing.
                let want = bdn.run(&[x.clone(), mt.clone()])?;
                let got = bs.run(&[x.clone(), mt.clone()])?;
                check(&got[0], &want[0], "block")?;
                let op_in = [qkv[0].clone(), qkv[1].clone(), qkv[2].clone(), mt.clone()];
                let (wo, go_) = (odn.run(&op_in)?, os.run(&op_in)?);
                check_active(&go_[0], &wo[0], &mt, s)?;
                let (ad, asp) = time_pair(&mut bdn, &["attention"], &mut bs, &[("attention", NodePart::All)], set)?;
                let (od, osp) = time_pair(&mut odn, &["attention"], &mut os, &[("attention", NodePart::WithoutCompaction)], set)?;
                let mut cv = bs.time_node("qkv", NodePart::Compaction, set.samples, set.runs)?;
                let compact = median(&mut cv);
                let (qd, qs) = time_pair(&mut bdn, &["qkv", "qkv/add", "qkv/mul"], &mut bs, &[("qkv", NodePart::WithoutCompaction)], set)?;
                let (pd, ps) = time_pair(&mut bdn, &["proj", "proj/add", "proj/mul"], &mut bs, &[("proj", NodePart::All)], set)?;
                println!(
                    "{:<7} {:>5} {:>7.3} | {:>9.1} {:>9.1} {:>6.2}x {:>6.2}x | {:>9.1} {:>9.1} {:>6.2}x | {:>8.1} | {:>8.1} {:>8.1} | {:>8.1} {:>8.1}",
                    s.name, b, real, ad, asp, ad / asp, 0.5 / real, od, osp, od / osp, compact, qd, qs, pd, ps
                );
                if let Some(f) = set.json.as_deref_mut() {
                    let line = serde_json::json!({
                        "kind": "avit", "device": info.name, "backend": info.backend, "driver": info.driver,
                        "size": s.name, "tokens": t, "heads": s.heads, "head_dim": s.head_dim, "batch": b,
                        "density_target": d, "density": real,
                        "attention_dense_us": ad, "attention_sparse_us": asp,
                        "op_dense_us": od, "op_sparse_us": osp, "compaction_us": compact,
                        "qkv_dense_us": qd, "qkv_sparse_us": qs, "proj_dense_us": pd, "proj_sparse_us": ps,
                        "samples": set.samples, "runs": set.runs,
                    });
                    writeln!(f, "{line}").map_err(|e| Error::Other(format!("--json: {e}")))?;
                }
            }
        }
    }
    Ok(())
}

fn rel_l2(a: &[f32], b: &[f32]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| ((*x as f64) - (*y as f64)).powi(2)).sum();
    let den: f64 = b.iter().map(|y| (*y as f64).powi(2)).sum();
    (num / den.max(1e-30)).sqrt()
}

fn check(got: &Tensor, want: &Tensor, what: &str) -> Result<()> {
    let e = rel_l2(got.as_f32()?, want.as_f32()?);
    if e > 1e-4 {
        return Err(Error::Other(format!("{what}: token-sparse and dense differ (relative L2 {e:.2e})")));
    }
    Ok(())
}

/// The attention op on active query rows (the dense op computes the others too).
fn check_active(got: &Tensor, want: &Tensor, m: &Tensor, s: &Size) -> Result<()> {
    let (g, w, mv) = (got.as_f32()?, want.as_f32()?, m.as_f32()?);
    let (t, dh) = (s.tokens, s.head_dim);
    let keep = |i: usize| mv[(i / (s.heads * t * dh)) * t + (i / dh) % t] == 1.0;
    let (a, b): (Vec<f32>, Vec<f32>) = g.iter().zip(w).enumerate().filter(|(i, _)| keep(*i)).map(|(_, (x, y))| (*x, *y)).unzip();
    check(&Tensor::from_f32(vec![a.len()], a)?, &Tensor::from_f32(vec![b.len()], b)?, "attention op")
}
