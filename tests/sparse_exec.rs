//! The sparse executor end to end: sparse output equals the dense computation of the same
//! graph, for every PolyKernel member, on the three model families (against the ONNX Runtime
//! goldens) and on single sparse ops under random masks of density 0.02-1.0, frame after frame
//! on one session (so recycled, re-zeroed buffers are exercised).

mod common;
use common::{seed, Rng};
#[path = "common/onnx_build.rs"]
#[allow(dead_code)]
mod onnx_build;

use dynaspa::backends::ForceMember;
use dynaspa::io::npy;
use dynaspa::runtime::sparsity::Granularity;
use dynaspa::{DebugOptions, Session, SessionBuilder, Tensor};
use onnx_build::{f32_init, int_attr, ints_attr, model, node, value_info, with_attrs};

fn forced(force: Option<ForceMember>, cache: &std::path::Path) -> SessionBuilder {
    common::open_on("cpu").cache_dir(cache).debug(DebugOptions { force_member: force, ..Default::default() })
}

fn members() -> Vec<Option<ForceMember>> {
    vec![
        None,
        Some(ForceMember::Dense),
        Some(ForceMember::Tiles(Granularity::new(1, 1))),
        Some(ForceMember::Tiles(Granularity::new(2, 8))),
        Some(ForceMember::Tiles(Granularity::new(4, 4))),
    ]
}

fn tmp(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("dynaspa-sparse-exec-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

impl Rng {
    /// Blobs covering about `d` of an h x w map, as 0/1 floats.
    fn blobs(&mut self, h: usize, w: usize, d: f64) -> Vec<f32> {
        let mut m = vec![0f32; h * w];
        let target = (d * (h * w) as f64).ceil() as usize;
        while m.iter().filter(|&&v| v == 1.0).count() < target {
            let (cy, cx, r) = (self.next() * h as f64, self.next() * w as f64, 0.5 + self.next() * h.min(w) as f64 / 5.0);
            for y in 0..h {
                for x in 0..w {
                    let (dy, dx) = (y as f64 + 0.5 - cy, x as f64 + 0.5 - cx);
                    if dy * dy + dx * dx <= r * r {
                        m[y * w + x] = 1.0;
                    }
                }
            }
        }
        m
    }
}

/// Runs the golden cases of one family and returns the worst relative L2 error over its
/// non-mask outputs, with the number of sparse-op records that used a sparse member.
fn golden_run(s: &mut Session, family: &str) -> (f64, usize) {
    let dir = common::repo_path(&format!("tests/goldens/{family}"));
    let meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap();
    let list = |k: &str| -> Vec<String> { meta[k].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect() };
    let (inputs, outputs, masks) = (list("inputs"), list("outputs"), list("masks"));
    let (mut worst, mut sparse_runs) = (0f64, 0);
    for i in 0..meta["cases"].as_array().unwrap().len() {
        let feeds = inputs.iter().map(|n| (n.clone(), npy::read(&dir.join(format!("{n}_{i}.npy"))).unwrap())).collect();
        let outs = s.run(feeds).unwrap_or_else(|e| panic!("{family} case {i}: {e}"));
        for o in outputs.iter().filter(|o| !masks.contains(o)) {
            let got = &outs.iter().find(|(n, _)| n == o).unwrap().1;
            let want = npy::read(&dir.join(format!("{o}_{i}.npy"))).unwrap();
            worst = worst.max(common::rel_l2(got.as_f32().unwrap(), want.as_f32().unwrap()));
        }
        sparse_runs += s.last_report().map_or(0, |r| r.sparse_ops.iter().filter(|o| o.granularity.is_some() && o.tiles > 0).count());
    }
    (worst, sparse_runs)
}

#[test]
fn families_match_the_goldens_on_every_member() {
    let cache = tmp("families");
    // (family, model, sparse ops the executor must report per frame)
    for (family, path, ops) in [
        ("dynconv_small_d30", "models/dynconv_small_d30.onnx", 12),
        ("avit_small_d30", "models/avit_small_d30.onnx", 25),
        ("sige_small", "models/sige_small.onnx", 10),
    ] {
        for m in members() {
            let mut s = forced(m, &cache).open(common::repo_path(path)).unwrap();
            let (worst, sparse_runs) = golden_run(&mut s, family);
            let report = s.last_report().expect("a report after a run");
            assert_eq!(report.sparse_ops.len(), ops, "{family} {m:?}: sparse ops in the report");
            assert!(worst <= 1e-4, "{family} with {m:?}: relative L2 {worst:.2e} against ONNX Runtime");
            match m {
                Some(ForceMember::Dense) => assert_eq!(sparse_runs, 0, "{family}: forced dense ran a sparse member"),
                Some(ForceMember::Tiles(_)) => assert!(sparse_runs > 0, "{family} {m:?}: no sparse member ran"),
                None => {}
            }
            eprintln!("{family} {m:?}: rel L2 {worst:.1e}, {sparse_runs} sparse launches");
        }
    }
    let _ = std::fs::remove_dir_all(&cache);
}

/// One op `Mul(act(op(x)), m)` with `m` a model input, built in memory.
fn single_op_model(kind: &str, rng: &mut Rng) -> (Vec<u8>, Vec<usize>, Vec<usize>) {
    let (c, m, h, w) = (12usize, 20usize, 19usize, 23usize);
    let mut conv = |k: i64, s: i64, p: i64, group: i64, cin: usize, cout: usize| {
        let ho = (h as i64 + 2 * p - k) / s + 1;
        let wo = (w as i64 + 2 * p - k) / s + 1;
        let wt = rng.vec(cout * cin / group as usize * (k * k) as usize);
        let nodes = vec![
            with_attrs(
                node("Conv", "op", &["x", "w", "b"], &["y"]),
                vec![
                    ints_attr("kernel_shape", &[k, k]),
                    ints_attr("strides", &[s, s]),
                    ints_attr("pads", &[p, p, p, p]),
                    int_attr("group", group),
                ],
            ),
            node("Relu", "act", &["y"], &["r"]),
            node("Mul", "mask", &["r", "m"], &["out"]),
        ];
        let inits = vec![
            f32_init("w", &[cout as i64, (cin / group as usize) as i64, k, k], &wt),
            f32_init("b", &[cout as i64], &(0..cout).map(|i| i as f32 * 0.01 - 0.05).collect::<Vec<_>>()),
        ];
        let xs = vec![1, cin, h, w];
        let ms = vec![1, 1, ho as usize, wo as usize];
        let bytes = model(
            nodes,
            vec![value_info("x", 1, &[1, cin as i64, h as i64, w as i64]), value_info("m", 1, &[1, 1, ho, wo])],
            vec![value_info("out", 1, &[1, cout as i64, ho, wo])],
            inits,
        );
        (bytes, xs, ms)
    };
    match kind {
        "conv3x3" => conv(3, 1, 1, 1, c, m),
        "conv3x3s2" => conv(3, 2, 1, 1, c, m),
        "conv1x1" => conv(1, 1, 0, 1, c, m),
        "dw3x3" => conv(3, 1, 1, c as i64, c, c),
        "conv7x7" => conv(7, 1, 3, 1, c, m),
        "linear" => {
            let (t, k, n) = (37usize, 24usize, 40usize);
            let nodes = vec![node("MatMul", "op", &["x", "w"], &["y"]), node("Mul", "mask", &["y", "m"], &["out"])];
            let bytes = model(
                nodes,
                vec![value_info("x", 1, &[1, t as i64, k as i64]), value_info("m", 1, &[1, t as i64, 1])],
                vec![value_info("out", 1, &[1, t as i64, n as i64])],
                vec![f32_init("w", &[k as i64, n as i64], &rng.vec(k * n))],
            );
            (bytes, vec![1, t, k], vec![1, t, 1])
        }
        _ => unreachable!(),
    }
}

#[test]
fn single_ops_equal_dense_under_random_masks_frame_after_frame() {
    let mut rng = Rng(seed());
    let cache = tmp("ops");
    for kind in ["conv3x3", "conv3x3s2", "conv1x1", "dw3x3", "conv7x7", "linear"] {
        let (bytes, xs, ms) = single_op_model(kind, &mut rng);
        let path = cache.join(format!("{kind}.onnx"));
        std::fs::write(&path, &bytes).unwrap();
        let mut dense = common::open_on("cpu").dense(true).open(&path).unwrap();
        for m in members() {
            let mut s = forced(m, &cache).open(&path).unwrap();
            // Densities spread over 0.02..1, in a shuffled order so a dense frame follows a
            // sparse one and the other way round.
            for &d in &[0.3, 0.02, 1.0, 0.1, 0.6, 0.05] {
                let (h, w) = if ms.len() == 4 { (ms[2], ms[3]) } else { (ms[1], 1) };
                let mv = rng.blobs(h, w, d);
                let x = Tensor::from_f32(xs.clone(), rng.vec(xs.iter().product())).unwrap();
                let mt = Tensor::from_f32(ms.clone(), mv.clone()).unwrap();
                let feeds = vec![("x".to_string(), x), ("m".to_string(), mt)];
                let want = dense.run(feeds.clone()).unwrap().remove(0).1;
                let got = s.run(feeds).unwrap().remove(0).1;
                let (g, wv) = (got.as_f32().unwrap(), want.as_f32().unwrap());
                let err = common::rel_l2(g, wv);
                assert!(err <= 1e-5, "{kind} {m:?} density {d}: relative L2 {err:.2e}");
                // Inactive positions hold exact zeros (recycled buffers were re-zeroed).
                let plane = mv.len();
                let per = g.len() / plane;
                for (i, &v) in g.iter().enumerate() {
                    let pos = if ms.len() == 4 { i % plane } else { i / per };
                    if mv[pos] == 0.0 {
                        assert_eq!(v, 0.0, "{kind} {m:?} density {d}: inactive element {i} is {v}");
                    }
                }
                let r = s.last_report().unwrap();
                assert_eq!(r.sparse_ops.len(), 1, "{kind}: the op must be sparse");
                let rec = &r.sparse_ops[0];
                assert!((rec.density - mv.iter().sum::<f32>() as f64 / plane as f64).abs() < 1e-9);
                if let Some(ForceMember::Tiles(_)) = m {
                    assert!(rec.granularity.is_some() && rec.tiles > 0, "{kind}: forced tiles did not run sparse: {rec:?}");
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn non_binary_and_misshaped_masks_are_errors() {
    let mut rng = Rng(seed());
    let cache = tmp("bad");
    let (bytes, xs, ms) = single_op_model("conv3x3", &mut rng);
    let path = cache.join("m.onnx");
    std::fs::write(&path, &bytes).unwrap();
    let mut s = forced(Some(ForceMember::Tiles(Granularity::new(2, 8))), &cache).open(&path).unwrap();
    let x = Tensor::from_f32(xs.clone(), rng.vec(xs.iter().product())).unwrap();
    let mut mv = vec![1.0f32; ms.iter().product()];
    mv[7] = 0.5;
    let e = s.run(vec![("x".into(), x.clone()), ("m".into(), Tensor::from_f32(ms.clone(), mv).unwrap())]).unwrap_err().to_string();
    assert!(e.contains("0.5") && e.contains("'m'"), "{e}");
    // The session still works after the error.
    let ok = s.run(vec![("x".into(), x), ("m".into(), Tensor::from_f32(ms.clone(), vec![1.0; ms.iter().product()]).unwrap())]);
    assert!(ok.is_ok());
    let _ = std::fs::remove_dir_all(&cache);
}

/// SIGE's Cached fill: a session's first frame (the original image) fills the caches; the next
/// (the edit, with its mask) recomputes only the masked positions and takes the rest from the
/// caches. The golden `output_cached` is that semantics computed by ONNX Runtime on a rewritten
/// graph (tests/goldens/make_family_goldens.py).
#[test]
fn sige_cached_fill_matches_its_golden_on_every_member() {
    let dir = common::repo_path("tests/goldens/sige_small");
    let cache = tmp("sige-cached");
    for m in members() {
        for i in 0..4 {
            let mut s = forced(m, &cache).cached(true).open(common::repo_path("models/sige_small.onnx")).unwrap();
            let read = |n: &str| npy::read(&dir.join(format!("{n}_{i}.npy"))).unwrap();
            let mask = read("mask");
            let ones = Tensor::from_f32(mask.shape().to_vec(), vec![1.0; mask.len()]).unwrap();
            s.run(vec![("input".into(), read("original")), ("mask".into(), ones)]).unwrap();
            let outs = s.run(vec![("input".into(), read("input")), ("mask".into(), mask)]).unwrap();
            let got = &outs.iter().find(|(n, _)| n == "output").unwrap().1;
            let err = common::rel_l2(got.as_f32().unwrap(), read("output_cached").as_f32().unwrap());
            assert!(err <= 1e-4, "case {i} {m:?}: cached output relative L2 {err:.2e}");
            let r = s.last_report().unwrap();
            if let Some(ForceMember::Tiles(_)) = m {
                assert!(r.sparse_ops.iter().any(|o| o.tiles > 0), "case {i} {m:?}: nothing ran sparse");
            }
            // And it is not the zero-fill result (the cache matters).
            let zero = common::rel_l2(got.as_f32().unwrap(), read("output").as_f32().unwrap());
            assert!(zero > 10.0 * err.max(1e-6), "case {i} {m:?}: cached equals zero fill ({zero:.2e})");
        }
    }
    let _ = std::fs::remove_dir_all(&cache);
}

/// `ReLU(Mul(conv(x), m) + r)`: the residual join the sparse pass folds into the conv
/// (fill Residual); inactive outputs must be exactly `ReLU(r)`, active ones the dense result.
#[test]
fn residual_join_folded_into_the_sparse_conv_equals_dense() {
    let mut rng = Rng(seed() ^ 0x9e37);
    let cache = tmp("join");
    let (c, m, h, w) = (12usize, 20usize, 17usize, 21usize);
    let nodes = vec![
        with_attrs(
            node("Conv", "op", &["x", "w", "b"], &["y"]),
            vec![ints_attr("kernel_shape", &[3, 3]), ints_attr("pads", &[1, 1, 1, 1])],
        ),
        node("Mul", "mask", &["y", "m"], &["ym"]),
        node("Add", "join", &["ym", "r"], &["s"]),
        node("Relu", "act", &["s"], &["out"]),
    ];
    let inits = vec![
        f32_init("w", &[m as i64, c as i64, 3, 3], &rng.vec(m * c * 9)),
        f32_init("b", &[m as i64], &(0..m).map(|i| i as f32 * 0.01 - 0.05).collect::<Vec<_>>()),
    ];
    let (hi, wi) = (h as i64, w as i64);
    let bytes = model(
        nodes,
        vec![value_info("x", 1, &[1, c as i64, hi, wi]), value_info("m", 1, &[1, 1, hi, wi]), value_info("r", 1, &[1, m as i64, hi, wi])],
        vec![value_info("out", 1, &[1, m as i64, hi, wi])],
        inits,
    );
    let path = cache.join("join.onnx");
    std::fs::write(&path, &bytes).unwrap();
    let mut dense = common::open_on("cpu").dense(true).open(&path).unwrap();
    for mem in members() {
        let mut s = forced(mem, &cache).open(&path).unwrap();
        let fills: Vec<_> = s.graph().nodes.iter().filter_map(|n| n.sparse.as_ref().map(|sp| sp.fill)).collect();
        assert_eq!(fills, vec![dynaspa::runtime::graph::FillPolicy::Residual], "the join is folded into the conv");
        assert_eq!(s.graph().nodes.len(), 1, "Mul, Add and ReLU are gone");
        for &d in &[0.3, 0.02, 1.0, 0.1, 0.6, 0.0] {
            let mv = rng.blobs(h, w, d);
            let x = Tensor::from_f32(vec![1, c, h, w], rng.vec(c * h * w)).unwrap();
            let r = Tensor::from_f32(vec![1, m, h, w], rng.vec(m * h * w)).unwrap();
            let mt = Tensor::from_f32(vec![1, 1, h, w], mv.clone()).unwrap();
            let feeds = vec![("x".to_string(), x), ("m".to_string(), mt), ("r".to_string(), r.clone())];
            let want = dense.run(feeds.clone()).unwrap().remove(0).1;
            let got = s.run(feeds).unwrap().remove(0).1;
            let (g, wv, rv) = (got.as_f32().unwrap(), want.as_f32().unwrap(), r.as_f32().unwrap());
            let err = common::rel_l2(g, wv);
            assert!(err <= 1e-5, "{mem:?} density {d}: relative L2 {err:.2e}");
            for (i, &v) in g.iter().enumerate() {
                if mv[i % (h * w)] == 0.0 {
                    assert_eq!(v, rv[i].max(0.0), "{mem:?} density {d}: inactive element {i}");
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&cache);
}

backend_test!(gpu_backends_run_sparse_ops_as_dense_times_mask, gpus, |backend| gpu_backends_run_sparse_ops_as_dense_times_mask(backend));

/// The GPU backends run sparse-annotated nodes in their dense form (the producer everywhere,
/// multiplied by its mask) until their sparse kernels land: outputs equal the CPU's dense run,
/// inactive positions are exact zeros, frame after frame; the families match their goldens.
fn gpu_backends_run_sparse_ops_as_dense_times_mask(backend: &str) {
    let mut rng = Rng(seed());
    let cache = tmp(&format!("gpu-{backend}"));
    for kind in ["conv3x3", "conv3x3s2", "conv1x1", "dw3x3", "conv7x7", "linear"] {
        let (bytes, xs, ms) = single_op_model(kind, &mut rng);
        let path = cache.join(format!("{kind}.onnx"));
        std::fs::write(&path, &bytes).unwrap();
        let mut dense = common::open_on("cpu").dense(true).open(&path).unwrap();
        let mut s = common::poisoned(backend).open(&path).unwrap();
        assert!(s.graph().nodes.iter().any(|n| n.sparse.is_some()), "{kind}: the op is annotated sparse");
        for &d in &[0.3, 0.02, 1.0, 0.1] {
            let (h, w) = if ms.len() == 4 { (ms[2], ms[3]) } else { (ms[1], 1) };
            let mv = rng.blobs(h, w, d);
            let x = Tensor::from_f32(xs.clone(), rng.vec(xs.iter().product())).unwrap();
            let feeds = vec![("x".to_string(), x), ("m".to_string(), Tensor::from_f32(ms.clone(), mv.clone()).unwrap())];
            let want = dense.run(feeds.clone()).unwrap().remove(0).1;
            let got = s.run(feeds).unwrap().remove(0).1;
            let (g, wv) = (got.as_f32().unwrap(), want.as_f32().unwrap());
            let err = common::rel_l2(g, wv);
            assert!(err <= 1e-5, "{kind} on {backend} density {d}: relative L2 {err:.2e}");
            let plane = mv.len();
            let per = g.len() / plane;
            for (i, &v) in g.iter().enumerate() {
                let pos = if ms.len() == 4 { i % plane } else { i / per };
                if mv[pos] == 0.0 {
                    assert_eq!(v, 0.0, "{kind} on {backend} density {d}: inactive element {i} is {v}");
                }
            }
        }
    }
    for (family, path) in [
        ("dynconv_small_d30", "models/dynconv_small_d30.onnx"),
        ("avit_small_d30", "models/avit_small_d30.onnx"),
        ("sige_small", "models/sige_small.onnx"),
    ] {
        let mut s = common::poisoned(backend).open(common::repo_path(path)).unwrap();
        let (worst, _) = golden_run(&mut s, family);
        assert!(worst <= 1e-4, "{family} on {backend}: relative L2 {worst:.2e} against ONNX Runtime");
        eprintln!("{family} on {backend}: rel L2 {worst:.1e}");
    }
    let _ = std::fs::remove_dir_all(&cache);
}
