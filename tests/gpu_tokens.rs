//! A-ViT's token ops on the GPU backends against the CPU backend (the reference): an A-ViT
//! block (LayerNorm, qkv, attention with the halting key mask, proj, GELU MLP, residuals) with
//! an in-graph halting mask under random masks of density 0-1.0 per image (batch 2, so the two
//! images have different active counts; token counts no tile divides, one above the
//! compaction's 256-item work-group), outputs poisoned with NaN before kernels run; the
//! attention's all-keys fallback (a key-mask factor too small for halted keys to vanish); and
//! the shipped A-ViT model at batch 2 on its golden frames. Every case checks that the token
//! ops run on the token kernels (the projections with their bias, GELU and mask folded in, the
//! attention without the key-norm pass where the graph proves inactive keys zero).

mod common;
use common::seed;
#[path = "common/onnx_build.rs"]
#[allow(dead_code)]
mod onnx_build;

use dynaspa::backends::gpu::{GpuDevice, GpuExecutable, GpuOptions, TokenOpInfo};
use dynaspa::backends::{ForceMember, SparseConfig};
use dynaspa::io::npy;
use dynaspa::runtime::backend::Executable;
use dynaspa::runtime::graph::sparse_detect::{detect_sparse_regions, SparseOptions};
use dynaspa::runtime::graph::Graph;
use dynaspa::Tensor;
use onnx_build::{f32_init, float_attr, i64_init, int_attr, ints_attr, model, node, value_info, with_attrs};
use std::sync::Arc;

const MAX_REL_L2: f64 = 1e-4;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in [-a, a), never 0.
    fn vec(&mut self, n: usize, a: f64) -> Vec<f32> {
        (0..n).map(|_| ((self.next() * 2.0 - 1.0) * a) as f32).map(|v| if v == 0.0 { 0.25 } else { v }).collect()
    }
}

fn tmp(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("dynaspa-gpu-tokens-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A GPU executable of `g` on backend `name`, with its token ops.
fn compile(name: &str, g: &Graph, force: Option<ForceMember>, cache: &std::path::Path) -> (Box<dyn Executable>, Vec<TokenOpInfo>) {
    fn on<D: GpuDevice + 'static>(dev: Arc<D>, name: &str, g: &Graph, opts: &GpuOptions) -> (Box<dyn Executable>, Vec<TokenOpInfo>) {
        let exe = GpuExecutable::compile(dev, name, g, opts).unwrap_or_else(|e| panic!("compiling on {name}: {e}"));
        let ops = exe.token_ops();
        (Box::new(exe), ops)
    }
    let opts = GpuOptions {
        poison: true,
        sparse: SparseConfig { cache_dir: Some(cache.to_path_buf()), force, profile: None },
        ..Default::default()
    };
    with_gpu_device!(name, |dev| on(dev, name, g, &opts))
}

/// The model's graph as a session prepares it (sparse regions detected).
fn graph_of(bytes: &[u8], batch: usize) -> Graph {
    let load = dynaspa::LoadOptions { batch, ..Default::default() };
    let mut g = dynaspa::load_graph_bytes(bytes, &load).unwrap();
    detect_sparse_regions(&mut g, &SparseOptions::default());
    g
}

struct Block {
    batch: usize,
    tokens: usize,
    dim: usize,
    heads: usize,
    /// The key-mask factor: 1e4 in A-ViT; small values leave halted keys a weight.
    c: f32,
}

/// One A-ViT block as exported (models/avit.py): inputs x [B, T, C] and halting scores
/// h [B, T]; the mask is Cast(Less(h, 0.5)).
fn block_model(b: &Block, rng: &mut Rng) -> Vec<u8> {
    let (bb, t, c, h) = (b.batch as i64, b.tokens as i64, b.dim as i64, b.heads as i64);
    let dh = c / h;
    let w = |rng: &mut Rng, k: i64, n: i64| rng.vec((k * n) as usize, 1.0 / (k as f64).sqrt());
    let mut inits = vec![
        f32_init("thr", &[], &[0.5]),
        i64_init("ax2", &[1], &[2]),
        i64_init("ax1", &[1], &[1]),
        f32_init("one", &[], &[1.0]),
        f32_init("cmask", &[], &[b.c]),
        f32_init("scale", &[], &[(dh as f32).powf(-0.5)]),
        f32_init("sqrt2", &[], &[std::f32::consts::SQRT_2]),
        f32_init("half", &[], &[0.5]),
        i64_init("shape5", &[5], &[bb, t, 3, h, dh]),
        i64_init("shape3", &[3], &[bb, t, c]),
        i64_init("i0", &[], &[0]),
        i64_init("i1", &[], &[1]),
        i64_init("i2", &[], &[2]),
    ];
    for (name, k, n) in [("wqkv", c, 3 * c), ("wproj", c, c), ("w1", c, 4 * c), ("w2", 4 * c, c)] {
        inits.push(f32_init(name, &[k, n], &w(rng, k, n)));
        inits.push(f32_init(&format!("{name}_b"), &[n], &rng.vec(n as usize, 0.1)));
    }
    for ln in ["ln1", "ln2"] {
        inits.push(f32_init(&format!("{ln}_g"), &[c], &rng.vec(c as usize, 0.2).iter().map(|v| 1.0 + v).collect::<Vec<_>>()));
        inits.push(f32_init(&format!("{ln}_b"), &[c], &rng.vec(c as usize, 0.1)));
    }
    let ln = |x: &str, p: &str, y: &str| {
        with_attrs(
            node("LayerNormalization", y, &[x, &format!("{p}_g"), &format!("{p}_b")], &[y]),
            vec![int_attr("axis", -1), float_attr("epsilon", 1e-6)],
        )
    };
    let tr = |x: &str, y: &str, perm: &[i64]| with_attrs(node("Transpose", y, &[x], &[y]), vec![ints_attr("perm", perm)]);
    let nodes = vec![
        node("Less", "less", &["h", "thr"], &["lt"]),
        with_attrs(node("Cast", "cast", &["lt"], &["m"]), vec![int_attr("to", 1)]),
        node("Unsqueeze", "m3", &["m", "ax2"], &["m3"]),
        ln("x", "ln1", "n1"),
        node("MatMul", "qkv", &["n1", "wqkv"], &["qkv0"]),
        node("Add", "qkv_b", &["wqkv_b", "qkv0"], &["qkv1"]),
        node("Mul", "qkv_m", &["qkv1", "m3"], &["qkv2"]),
        node("Reshape", "r5", &["qkv2", "shape5"], &["r5"]),
        tr("r5", "t5", &[2, 0, 3, 1, 4]),
        node("Gather", "q", &["t5", "i0"], &["q"]),
        node("Gather", "k", &["t5", "i1"], &["k"]),
        node("Gather", "v", &["t5", "i2"], &["v"]),
        tr("k", "kt", &[0, 1, 3, 2]),
        node("MatMul", "qk", &["q", "kt"], &["s"]),
        node("Mul", "qk_s", &["s", "scale"], &["ss"]),
        tr("m3", "mt", &[0, 2, 1]),
        node("Unsqueeze", "mt4", &["mt", "ax1"], &["mt4"]),
        node("Sub", "mb_s", &["mt4", "one"], &["mb0"]),
        node("Mul", "mb_c", &["mb0", "cmask"], &["mb"]),
        node("Add", "sb", &["ss", "mb"], &["sb"]),
        with_attrs(node("Softmax", "p", &["sb"], &["p"]), vec![int_attr("axis", -1)]),
        node("MatMul", "pv", &["p", "v"], &["o"]),
        tr("o", "ot", &[0, 2, 1, 3]),
        node("Reshape", "o3", &["ot", "shape3"], &["o3"]),
        node("MatMul", "proj", &["o3", "wproj"], &["pj0"]),
        node("Add", "proj_b", &["wproj_b", "pj0"], &["pj1"]),
        node("Mul", "proj_m", &["pj1", "m3"], &["pj2"]),
        node("Add", "res1", &["x", "pj2"], &["x1"]),
        ln("x1", "ln2", "n2"),
        node("MatMul", "fc1", &["n2", "w1"], &["f0"]),
        node("Add", "fc1_b", &["w1_b", "f0"], &["f1"]),
        node("Div", "gelu_d", &["f1", "sqrt2"], &["g0"]),
        node("Erf", "gelu_e", &["g0"], &["g1"]),
        node("Add", "gelu_a", &["g1", "one"], &["g2"]),
        node("Mul", "gelu_m", &["f1", "g2"], &["g3"]),
        node("Mul", "gelu_h", &["g3", "half"], &["g4"]),
        node("Mul", "fc1_m", &["g4", "m3"], &["g5"]),
        node("MatMul", "fc2", &["g5", "w2"], &["f2"]),
        node("Add", "fc2_b", &["w2_b", "f2"], &["f3"]),
        node("Mul", "fc2_m", &["f3", "m3"], &["f4"]),
        node("Add", "res2", &["x1", "f4"], &["y"]),
    ];
    model(nodes, vec![value_info("x", 1, &[bb, t, c]), value_info("h", 1, &[bb, t])], vec![value_info("y", 1, &[bb, t, c])], inits)
}

/// Halting scores giving each image a mask of about its density (0 active tokens possible),
/// and the masks themselves.
fn halting(rng: &mut Rng, densities: &[f64], tokens: usize) -> (Vec<f32>, Vec<f32>) {
    let (mut h, mut m) = (Vec::new(), Vec::new());
    for &d in densities {
        let blobs = rng.next() < 0.5;
        let start = rng.next() * tokens as f64;
        for t in 0..tokens {
            // Runs of tokens (a contiguous, wrapping band) or scattered ones.
            let on = if blobs { ((t as f64 - start).rem_euclid(tokens as f64)) < d * tokens as f64 } else { rng.next() < d };
            h.push(if on { 0.25 } else { 0.75 });
            m.push(on as u8 as f32);
        }
    }
    (h, m)
}

/// `blocks` A-ViT blocks' token ops: per block qkv, proj and fc2 with bias and mask folded in,
/// fc1 with its GELU too, one attention whose inactive keys the graph proves zero, and one
/// compaction of the block's mask; the attention as the tiled kernel off wgpu (whose WGSL twin
/// is the row kernel).
fn assert_token_ops(ops: &[TokenOpInfo], backend: &str, what: &str, blocks: usize) {
    let n = |k: &str, e: &str| ops.iter().filter(|o| o.kind == k && o.epilogue == e).count();
    let counts = (n("linear", "bias, mask"), n("linear", "bias, gelu, mask"), n("attention", ""));
    assert_eq!(counts, (3 * blocks, blocks, blocks), "{what}: token ops {ops:?}");
    assert!(ops.iter().filter(|o| o.kind == "attention").all(|o| o.keys_zero), "{what}: keys not proven zero: {ops:?}");
    assert_eq!(ops.iter().filter(|o| o.compacts).count(), blocks, "{what}: one compaction per mask: {ops:?}");
    let tiled = backend != "wgpu";
    assert!(ops.iter().filter(|o| o.kind == "attention").all(|o| o.tiled == tiled), "{what}: attention kernels {ops:?}");
}

backend_test!(avit_block_equals_the_cpu_under_random_halting_masks, gpus, |backend| avit_block_equals_the_cpu_under_random_halting_masks(
    backend
));

fn avit_block_equals_the_cpu_under_random_halting_masks(backend: &str) {
    let mut rng = Rng(seed());
    let cache = tmp(&format!("block-{backend}"));
    let blocks = [
        Block { batch: 2, tokens: 37, dim: 48, heads: 3, c: 1e4 },
        Block { batch: 2, tokens: 300, dim: 32, heads: 2, c: 1e4 },
        // Halted keys keep a weight: every row takes the all-keys path.
        Block { batch: 2, tokens: 45, dim: 32, heads: 2, c: 4.0 },
    ];
    for b in &blocks {
        let bytes = block_model(b, &mut rng);
        let path = cache.join(format!("block{}.onnx", b.tokens));
        std::fs::write(&path, &bytes).unwrap();
        let mut cpu = common::open_on("cpu").cache_dir(&cache).open(&path).unwrap();
        let g = graph_of(&bytes, 1);
        let (mut exe, ops) = compile(backend, &g, None, &cache);
        let what = format!("block T={} c={} on {backend}", b.tokens, b.c);
        assert_token_ops(&ops, backend, &what, 1);
        let (mut dense, dense_ops) = compile(backend, &g, Some(ForceMember::Dense), &cache);
        assert!(dense_ops.is_empty(), "{what}: forced dense still ran token ops {dense_ops:?}");
        let pairs: [[f64; 2]; 7] = [[0.3, 0.6], [0.02, 1.0], [1.0, 1.0], [0.1, 0.05], [0.0, 0.5], [0.6, 0.0], [0.5, 0.9]];
        for ds in pairs {
            let (t, c) = (b.tokens, b.dim);
            let x = Tensor::from_f32(vec![2, t, c], rng.vec(2 * t * c, 1.0)).unwrap();
            let (h, m) = halting(&mut rng, &ds, t);
            let ht = Tensor::from_f32(vec![2, t], h).unwrap();
            let want = cpu.run(vec![("x".into(), x.clone()), ("h".into(), ht.clone())]).unwrap().remove(0).1;
            let got = exe.run(&[x.clone(), ht.clone()]).unwrap().remove(0);
            let base = dense.run(&[x.clone(), ht]).unwrap().remove(0);
            let (g, wv, xv) = (got.as_f32().unwrap(), want.as_f32().unwrap(), x.as_f32().unwrap());
            let err = common::rel_l2(g, wv);
            let what = format!("{what}, densities {ds:?} ({} and {} active)", m[..t].iter().sum::<f32>(), m[t..].iter().sum::<f32>());
            assert!(err <= MAX_REL_L2, "{what}: relative L2 {err:.2e} against the CPU");
            let err_dense = common::rel_l2(g, base.as_f32().unwrap());
            assert!(err_dense <= MAX_REL_L2, "{what}: relative L2 {err_dense:.2e} against the GPU's dense form");
            // Halted tokens leave the block as they entered it (the residual stream is kept).
            for (i, (&gv, &xe)) in g.iter().zip(xv).enumerate() {
                if m[i / c] == 0.0 {
                    assert_eq!(gv, xe, "{what}: halted element {i} changed");
                }
            }
        }
        eprintln!("{what}: 7 mask pairs agree with the CPU");
    }
    let _ = std::fs::remove_dir_all(&cache);
}

backend_test!(
    avit_model_at_batch_2_matches_the_cpu_and_the_goldens,
    gpus,
    |backend| avit_model_at_batch_2_matches_the_cpu_and_the_goldens(backend)
);

/// A-ViT (reduced) at batch 2: two golden frames side by side, so each block's mask has a
/// different active count per image; every output within 1e-4 of the CPU's and the goldens.
fn avit_model_at_batch_2_matches_the_cpu_and_the_goldens(backend: &str) {
    let dir = common::repo_path("tests/goldens/avit_small_d30");
    let model = std::fs::read(common::repo_path("models/avit_small_d30.onnx")).unwrap();
    let cache = tmp(&format!("avit-{backend}"));
    let names = ["logits", "mask_blocks_1", "mask_blocks_2", "mask_blocks_3", "mask_blocks_4", "mask_blocks_5"];
    let read = |n: &str, i: usize| npy::read(&dir.join(format!("{n}_{i}.npy"))).unwrap();
    let stack = |a: &Tensor, b: &Tensor| {
        let mut shape = a.shape().to_vec();
        shape[0] *= 2;
        let mut v = a.as_f32().unwrap().to_vec();
        v.extend_from_slice(b.as_f32().unwrap());
        Tensor::from_f32(shape, v).unwrap()
    };
    let g = graph_of(&model, 2);
    let cpu_g = g.clone();
    let cpu_backend = dynaspa::backends::create_configured("cpu", &Default::default()).unwrap();
    let mut cpu = dynaspa::Session::new(cpu_g, cpu_backend.as_ref()).unwrap();
    let (mut exe, ops) = compile(backend, &g, None, &cache);
    assert_token_ops(&ops, backend, &format!("avit on {backend}"), 5);
    for (i, j) in [(0usize, 1usize), (2, 3), (1, 2)] {
        let input = stack(&read("input", i), &read("input", j));
        let want = cpu.run(vec![("input".into(), input.clone())]).unwrap();
        let got = exe.run(&[input]).unwrap();
        for (k, n) in names.iter().enumerate() {
            let golden = stack(&read(n, i), &read(n, j));
            let o = got[k].as_f32().unwrap();
            assert!(o.iter().all(|v| v.is_finite()), "{backend} frames {i},{j}: {n} is not finite");
            let e_cpu = common::rel_l2(o, want[k].1.as_f32().unwrap());
            let e_gold = common::rel_l2(o, golden.as_f32().unwrap());
            assert!(
                e_cpu <= MAX_REL_L2 && e_gold <= MAX_REL_L2,
                "{backend} frames {i},{j}: {n} relative L2 {e_cpu:.2e} (CPU), {e_gold:.2e} (golden)"
            );
        }
        let m1 = got[1].as_f32().unwrap();
        let counts: Vec<f32> = m1.chunks(m1.len() / 2).map(|c| c.iter().sum()).collect();
        eprintln!("avit on {backend}, frames {i},{j}: block-1 active tokens {counts:?}, agrees with the CPU and the goldens");
    }
    let _ = std::fs::remove_dir_all(&cache);
}

backend_test!(token_projections_run_the_member_their_profile_picks, gpus, |backend| token_projections_run_the_member_their_profile_picks(
    backend
));

/// A-ViT's token projections are PolyKernel ops on the GPU: with a profile, each frame runs the
/// member its tables pick from the active count (the dense member, every row, where dense is
/// cheaper; a tile over the active tokens where it is not), the report names it, and both give
/// the CPU's result.
fn token_projections_run_the_member_their_profile_picks(backend: &str) {
    fn run<D: GpuDevice + 'static>(dev: Arc<D>, backend: &str, rng: &mut Rng) {
        use dynaspa::runtime::dispatch::{DispatchTable, Member, PolyKernel, Schedule};
        use dynaspa::runtime::profile::{DeviceId, MaskSetInfo, OpProfile, OpSignature, Profile};
        use dynaspa::runtime::sparsity::Granularity;
        let cache = tmp(&format!("poly-{backend}"));
        let b = Block { batch: 2, tokens: 45, dim: 32, heads: 2, c: 1e4 };
        let bytes = block_model(&b, rng);
        let path = cache.join("block.onnx");
        std::fs::write(&path, &bytes).unwrap();
        let mut cpu = common::open_on("cpu").cache_dir(&cache).open(&path).unwrap();
        let g = graph_of(&bytes, 1);
        let info = dev.info().clone();
        let tile = Schedule::sparse("tiles1x1_m16n16k8_w2x2_s1", Granularity::new(1, 1))
            .with_knob("TM", 16)
            .with_knob("TN", 16)
            .with_knob("TK", 8)
            .with_knob("WM", 2)
            .with_knob("WN", 2)
            .with_knob("KS", 1);
        // Dense costs 40 µs; the tile 1 µs per active token: it wins below 40 active tokens
        // (of 90, two images).
        let tables = [DispatchTable::constant(40.0).unwrap(), DispatchTable::new(vec![(0, 0.0), (90, 90.0)]).unwrap()];
        let mut p = Profile::new(
            DeviceId { backend: info.backend.clone(), name: info.name.clone(), fingerprint: info.fingerprint() },
            "block",
            false,
            "test",
            MaskSetInfo::default(),
        );
        let projections: Vec<String> =
            g.nodes.iter().filter(|n| n.sparse.is_some() && n.op.name() == "MatMul").map(|n| n.name.clone()).collect();
        assert_eq!(projections.len(), 4, "qkv, proj, fc1, fc2: {projections:?}");
        for n in g.nodes.iter().filter(|n| projections.contains(&n.name)) {
            let members = vec![
                Member { schedule: Schedule::dense("dense"), table: tables[0].clone() },
                Member { schedule: tile.clone(), table: tables[1].clone() },
            ];
            p.ops.push(OpProfile {
                node: n.name.clone(),
                signature: OpSignature::of(&g, n),
                poly: PolyKernel::new(members).unwrap(),
                stats: None,
            });
        }
        let sparse = SparseConfig { cache_dir: Some(cache.clone()), force: None, profile: Some(Arc::new(p)) };
        let opts = GpuOptions { poison: true, sparse, counts: dynaspa::backends::gpu::CountsSync::Exact, ..Default::default() };
        let mut exe = GpuExecutable::compile(dev, backend, &g, &opts).unwrap();
        let ops = exe.sparse_ops();
        for name in &projections {
            let op = ops.iter().find(|o| &o.node == name).unwrap_or_else(|| panic!("{backend}: {name} is not a PolyKernel op: {ops:?}"));
            assert!(op.from_profile, "{backend}: {name} did not take the profile's members");
            assert_eq!(op.members, ["dense", tile.name.as_str()], "{backend}: {name}");
        }
        let (t, c) = (b.tokens, b.dim);
        // Few active tokens: the tile; many: dense.
        for (ds, want_member) in [([0.1, 0.2], tile.name.as_str()), ([0.9, 1.0], "dense"), ([0.0, 0.3], tile.name.as_str())] {
            let x = Tensor::from_f32(vec![2, t, c], rng.vec(2 * t * c, 1.0)).unwrap();
            let (h, m) = halting(rng, &ds, t);
            let active = m.iter().sum::<f32>() as usize;
            let ht = Tensor::from_f32(vec![2, t], h).unwrap();
            let want = cpu.run(vec![("x".into(), x.clone()), ("h".into(), ht.clone())]).unwrap().remove(0).1;
            let got = exe.run(&[x, ht]).unwrap().remove(0);
            let what = format!("{backend}, densities {ds:?} ({active} active)");
            let err = common::rel_l2(got.as_f32().unwrap(), want.as_f32().unwrap());
            assert!(err <= MAX_REL_L2, "{what}: relative L2 {err:.2e} against the CPU");
            let report = exe.last_report().unwrap();
            let expect = if (active as f64) < 40.0 { tile.name.as_str() } else { "dense" };
            assert_eq!(expect, want_member, "{what}: the masks did not reach the intended side of the crossover");
            for name in &projections {
                let rec = report.sparse_ops.iter().find(|r| &r.node == name).unwrap_or_else(|| panic!("{what}: no record for {name}"));
                assert_eq!(rec.member, expect, "{what}: {name}");
                assert!((rec.density - active as f64 / (2 * t) as f64).abs() < 1e-9, "{what}: {name} density {}", rec.density);
            }
        }
        let _ = std::fs::remove_dir_all(&cache);
    }
    let mut rng = Rng(seed());
    with_gpu_device!(backend, |dev| run(dev, backend, &mut rng));
}
