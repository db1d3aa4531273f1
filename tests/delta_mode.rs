//! Delta mode on stock exports (tests/classic: torchvision's ResNet-18, a U-Net): the runtime
//! finds where each frame changed and recomputes only there. With threshold 0 the outputs equal
//! the dense session's on every frame; the change map reaches the convs it should and stops at
//! ops it cannot cross; misuse gets a clear error.

#[path = "common/classic.rs"]
mod classic;
mod common;
#[allow(dead_code)]
#[path = "common/onnx_build.rs"]
mod onnx_build;

use dynaspa::backends::ForceMember;
use dynaspa::io::image;
use dynaspa::runtime::graph::FillPolicy;
use dynaspa::runtime::sparsity::Granularity;
use dynaspa::{DebugOptions, DeltaOptions, Session, Tensor};

const MEAN: [f32; 3] = [0.485, 0.456, 0.406];
const STD: [f32; 3] = [0.229, 0.224, 0.225];

/// A camera-like clip from real frames: vtest frame 0 as the still background, with a 48x40
/// patch of a later frame (a walking person's area) pasted at a place that moves every frame,
/// starting at a random offset. Outside the patch and where it was, frames are bit-identical.
fn clip(frames: usize) -> Vec<Tensor> {
    let dir = common::repo_path("models/frames/vtest");
    let base = image::load_for_input(&dir.join("vtest_000.jpg"), &[1, 3, 224, 224], &MEAN, &STD).unwrap();
    let donor = image::load_for_input(&dir.join("vtest_300.jpg"), &[1, 3, 224, 224], &MEAN, &STD).unwrap();
    let (b, d) = (base.as_f32().unwrap(), donor.as_f32().unwrap());
    let start = (common::seed() % 60) as usize;
    (0..frames)
        .map(|f| {
            let mut x = b.to_vec();
            if f > 0 {
                let (y0, x0) = (40 + start / 2 + 3 * f, 20 + start + 7 * f);
                for c in 0..3 {
                    for y in y0..y0 + 40 {
                        for xx in x0..x0 + 48 {
                            let i = (c * 224 + y) * 224 + xx;
                            x[i] = d[(c * 224 + y) * 224 + xx];
                        }
                    }
                }
            }
            Tensor::from_f32(vec![1, 3, 224, 224], x).unwrap()
        })
        .collect()
}

/// Runs the clip through delta mode (threshold 0) and dense on `backend`; returns per frame the
/// changed fraction and the relative L2 error against dense, asserting the latter <= 1e-5. The
/// CPU dispatches its calibrated PolyKernels; the GPU backends run every conv's 4x4-tile member
/// on every frame (calibrating the U-Net's convs on lavapipe took 8 of the test's 9 minutes,
/// and GPU calibration has its own tests), so their partial frames always take the sparse kernels.
fn exact_against_dense(model: &str, backend: &str) -> Vec<(f64, f64)> {
    let p = classic::prepare(model, "torchscript17.onnx", true);
    let opts = DeltaOptions { max_changed: 1.0, ..DeltaOptions::new(0.0) };
    let force_member = (backend != "cpu").then_some(ForceMember::Tiles(Granularity::new(4, 4)));
    let debug = DebugOptions { poison: true, force_member, ..Default::default() };
    let mut delta = common::open_on(backend).debug(debug).delta(Some(opts)).open(&p.model).unwrap_or_else(|e| panic!("{model} delta: {e}"));
    let mut dense = common::open_on(backend).dense(true).open(&p.model).unwrap();
    let input = p.export["input"].as_str().unwrap().to_string();
    let output = p.export["output"].as_str().unwrap();
    let mut seen = Vec::new();
    for (f, x) in clip(5).into_iter().enumerate() {
        let got = delta.run(vec![(input.clone(), x.clone())]).unwrap_or_else(|e| panic!("{model} frame {f}: {e}"));
        let want = dense.run(vec![(input.clone(), x)]).unwrap();
        let pick = |o: &[(String, Tensor)]| o.iter().find(|(n, _)| n == output).unwrap().1.clone();
        let err = common::rel_l2(pick(&got).as_f32().unwrap(), pick(&want).as_f32().unwrap());
        let changed = delta.last_changed_fraction().expect("delta mode reports the changed fraction");
        println!("{model} on {backend}, frame {f}: changed {changed:.4}, rel L2 {err:.2e}");
        assert!(err <= 1e-5, "{model} on {backend}, frame {f}: rel L2 {err:.3e} against dense");
        seen.push((changed, err));
    }
    assert_eq!(seen[0].0, 1.0, "the first frame is computed whole");
    // The patch and where it was: two 48x40 areas, a small part of the frame, recomputed only.
    assert!(seen[1..].iter().all(|&(c, _)| c > 0.0 && c <= 2.0 * 48.0 * 40.0 / (224.0 * 224.0) + 1e-9), "{seen:?}");
    let sparse_ran = delta.last_report().is_some_and(|r| r.sparse_ops.iter().any(|o| o.density < 0.5));
    assert!(sparse_ran, "{model}: no op computed a partial frame");
    seen
}

backend_test!(resnet18_at_threshold_zero_equals_dense_on_every_frame, [cpu], |backend| {
    exact_against_dense("resnet18", backend);
});

backend_test!(unet_at_threshold_zero_equals_dense_on_every_frame, |backend| {
    exact_against_dense("unet", backend);
});

#[test]
fn the_change_map_reaches_every_conv_before_global_pooling_and_stops_at_resampling() {
    let p = classic::prepare("resnet18", "torchscript17.onnx", true);
    let s = Session::builder().delta(Some(DeltaOptions::new(0.1))).open(&p.model).unwrap();
    let g = s.graph();
    let convs: Vec<_> = g.nodes.iter().filter(|n| n.op.name() == "Conv").collect();
    assert_eq!(convs.len(), 20);
    assert!(
        convs.iter().all(|n| n.sparse.as_ref().is_some_and(|sp| sp.fill == FillPolicy::Cached)),
        "every ResNet-18 conv recomputes by map"
    );
    assert!(g.nodes.iter().filter(|n| n.op.name() != "Conv").all(|n| n.sparse.is_none()), "only convs run by map");
    let map = g.inputs.iter().map(|&i| &g.values[i]).find(|v| v.name.ends_with(":changed")).expect("the change-map input");
    assert_eq!(map.shape, vec![1, 1, 224, 224]);
    // Every conv's result stays from frame to frame, and the memory plan says so.
    let kept: usize = convs.iter().map(|n| g.values[n.outputs[0]].shape.iter().product::<usize>() * 4).sum();
    let mem = dynaspa::runtime::plan::plan(g);
    assert_eq!(mem.cached_bytes, kept);
    assert!(mem.peak_activation_bytes >= kept);

    // The U-Net's decoder reads a ConvTranspose and a bilinear Resize: convs after them are dense.
    let p = classic::prepare("unet", "torchscript17.onnx", true);
    let s = Session::builder().delta(Some(DeltaOptions::new(0.1))).open(&p.model).unwrap();
    let g = s.graph();
    let (by_map, dense): (Vec<_>, Vec<_>) = g.nodes.iter().filter(|n| n.op.name() == "Conv").partition(|n| n.sparse.is_some());
    assert_eq!((by_map.len(), dense.len()), (6, 5), "encoder convs by map, decoder convs dense");
}

#[test]
fn misuse_is_a_clear_error() {
    let p = classic::prepare("unet", "torchscript17.onnx", true);
    let named = DeltaOptions { input: Some("frames".into()), ..DeltaOptions::new(0.0) };
    let e = Session::builder().delta(Some(named)).open(&p.model).err().expect("an input the model lacks");
    assert!(e.to_string().contains("no input 'frames'"), "{e}");
    let e = Session::builder().delta(Some(DeltaOptions::new(-1.0))).open(&p.model).err().expect("a negative threshold");
    assert!(e.to_string().contains("threshold"), "{e}");

    let mut s = Session::builder().delta(Some(DeltaOptions::new(0.0))).open(&p.model).unwrap();
    let input = p.export["input"].as_str().unwrap().to_string();
    let x = clip(1).remove(0);
    let map = Tensor::from_f32(vec![1, 1, 224, 224], vec![1.0; 224 * 224]).unwrap();
    let e = s.run(vec![(input.clone(), x.clone()), (format!("{input}:changed"), map)]).unwrap_err();
    assert!(e.to_string().contains("delta mode's change map"), "{e}");
    let e = s.run(vec![]).unwrap_err();
    assert!(e.to_string().contains(&input) && e.to_string().contains("not given"), "{e}");
    s.run(vec![(input, x)]).expect("the session still runs after refused calls");

    // A model with no [N, C, H, W] input.
    use onnx_build::*;
    let bytes =
        model(vec![node("Relu", "r", &["x"], &["y"])], vec![value_info("x", 1, &[1, 16])], vec![value_info("y", 1, &[1, 16])], vec![]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flat.onnx");
    std::fs::write(&path, bytes).unwrap();
    let e = Session::builder().delta(Some(DeltaOptions::new(0.0))).open(&path).err().expect("no frame input");
    assert!(e.to_string().contains("frame input"), "{e}");
}

/// SIGE's GauGAN generator (the authors' SPADE code, exported stock): the edit case of its
/// goldens computed against the original, through every Resize of the seg map, equals the dense
/// run and ONNX Runtime's output.
fn gaugan_edit_equals_dense(backend: &str) {
    use dynaspa::io::npy;
    let dir = common::repo_path("tests/goldens/sige_gaugan_ngf8");
    let model = common::repo_path("models/authors/sige_gaugan_ngf8.onnx");
    let (original, edited) = (npy::read(&dir.join("input_0.npy")).unwrap(), npy::read(&dir.join("input_1.npy")).unwrap());
    let want = npy::read(&dir.join("output_1.npy")).unwrap();
    let mut delta =
        common::poisoned(backend).delta(Some(DeltaOptions { max_changed: 1.0, ..DeltaOptions::new(0.0) })).open(&model).unwrap();
    let reached = delta.graph().nodes.iter().filter(|n| n.op.name() == "Conv" && n.sparse.is_some()).count();
    assert_eq!(reached, 74, "every conv of the generator is reached through its Resizes");
    let mut dense = common::open_on(backend).dense(true).open(&model).unwrap();
    delta.run(vec![("input".into(), original.clone())]).unwrap();
    let got = delta.run(vec![("input".into(), edited.clone())]).unwrap().remove(0).1;
    let changed = delta.last_changed_fraction().unwrap();
    let base = dense.run(vec![("input".into(), edited)]).unwrap().remove(0).1;
    let (g, d, w) = (got.as_f32().unwrap(), base.as_f32().unwrap(), want.as_f32().unwrap());
    let (e_dense, e_ort) = (common::rel_l2(g, d), common::rel_l2(g, w));
    println!(
        "sige_gaugan_ngf8 edit on {backend}: changed {changed:.3}, rel L2 {e_dense:.2e} against dense, {e_ort:.2e} against ONNX Runtime"
    );
    assert!(changed > 0.0 && changed < 0.5, "{changed}");
    assert!(e_dense <= 1e-5 && e_ort <= 1e-4, "{e_dense:.2e} / {e_ort:.2e}");
    assert!(delta.last_report().is_some_and(|r| r.sparse_ops.iter().any(|o| o.density < 1.0)), "no op computed part of the edit");
    // A local edit (a rectangle of 3% of the map painted with one label): the SPADE blocks'
    // normalisation, modulation and activations run on the changed positions too.
    let mut local = original.as_f32().unwrap().to_vec();
    let (h, w) = (64, 128);
    for c in 0..36 {
        for y in 20..32 {
            for x in 40..60 {
                local[(c * h + y) * w + x] = f32::from(c == 5);
            }
        }
    }
    let local = Tensor::from_f32(vec![1, 36, h, w], local).unwrap();
    delta.refresh();
    delta.run(vec![("input".into(), original)]).unwrap();
    let got = delta.run(vec![("input".into(), local.clone())]).unwrap().remove(0).1;
    let want = dense.run(vec![("input".into(), local)]).unwrap().remove(0).1;
    let e = common::rel_l2(got.as_f32().unwrap(), want.as_f32().unwrap());
    assert!(e <= 1e-5, "local edit on {backend}: rel L2 {e:.2e} against dense");
    if backend == "cpu" {
        let report = delta.last_report().unwrap();
        let elementwise: Vec<_> = report.sparse_ops.iter().filter(|o| o.op != "Conv").collect();
        let seen: Vec<_> = elementwise.iter().map(|o| (&o.member, o.density)).collect();
        assert!(elementwise.len() >= 40, "{} elementwise ops by map", elementwise.len());
        assert!(elementwise.iter().any(|o| o.member == "positions" && o.density < 0.5), "no elementwise op ran on the changed positions only: {seen:?}");
    }
}

backend_test!(gaugan_edit_at_threshold_zero_equals_dense_and_onnx_runtime, [cpu], |backend| {
    gaugan_edit_equals_dense(backend);
});

/// The change map of frame `f` of the clip at threshold 0 (every changed position was taken
/// into the reference, so it is where `f` differs from `f - 1`), max-pooled to an `h` x `w`
/// plane by whole cells: the fraction of cells holding a change.
fn pooled_change(prev: &Tensor, cur: &Tensor, h: usize, w: usize) -> f64 {
    let (a, b) = (prev.as_f32().unwrap(), cur.as_f32().unwrap());
    let (sy, sx) = (224_usize.div_ceil(h), 224_usize.div_ceil(w));
    let mut cells = vec![false; h * w];
    for c in 0..3 {
        for y in 0..224 {
            for x in 0..224 {
                let i = (c * 224 + y) * 224 + x;
                if a[i] != b[i] {
                    cells[(y / sy) * w + x / sx] = true;
                }
            }
        }
    }
    cells.iter().filter(|&&v| v).count() as f64 / cells.len() as f64
}

/// `Spread::Stride` (SIGE's way): every conv recomputes exactly the changed positions brought to
/// its resolution, not what its window widens them to; the deep convs do much less than with
/// `Spread::Window`, and a frame computed whole still equals dense.
#[test]
fn stride_spread_recomputes_the_changed_positions_at_each_resolution_only() {
    use dynaspa::Spread;
    let p = classic::prepare("resnet18", "torchscript17.onnx", true);
    let open = |spread| {
        let opts = DeltaOptions { max_changed: 1.0, spread, ..DeltaOptions::new(0.0) };
        Session::builder().threads(2).delta(Some(opts)).open(&p.model).unwrap()
    };
    let (mut stride, mut window) = (open(Spread::Stride), open(Spread::Window));
    let mut dense = Session::builder().threads(2).dense(true).open(&p.model).unwrap();
    let input = p.export["input"].as_str().unwrap().to_string();
    let frames = clip(3);
    let mut widened = 0;
    for (f, x) in frames.iter().enumerate() {
        let got = stride.run(vec![(input.clone(), x.clone())]).unwrap().remove(0).1;
        window.run(vec![(input.clone(), x.clone())]).unwrap();
        let want = dense.run(vec![(input.clone(), x.clone())]).unwrap().remove(0).1;
        let err = common::rel_l2(got.as_f32().unwrap(), want.as_f32().unwrap());
        if f == 0 {
            assert!(err <= 1e-5, "a whole frame equals dense: {err:.2e}");
            continue;
        }
        assert!(err.is_finite(), "frame {f}: {err}");
        let (rs, rw) = (stride.last_report().unwrap(), window.last_report().unwrap());
        let g = stride.graph();
        assert_eq!(rs.sparse_ops.len(), 20, "every conv reports its map");
        for op in &rs.sparse_ops {
            let n = g.nodes.iter().find(|n| n.name == op.node).unwrap();
            let s = &g.values[n.outputs[0]].shape;
            let want = pooled_change(&frames[f - 1], x, s[2], s[3]);
            assert!((op.density - want).abs() < 1e-9, "frame {f}, {}: density {} against {want} changed cells", op.node, op.density);
            let wide = rw.sparse_ops.iter().find(|o| o.node == op.node).unwrap().density;
            assert!(op.density <= wide, "{}: {} > {wide}", op.node, op.density);
            widened += usize::from(op.density < wide);
        }
        println!("frame {f}: changed {:.4}, rel L2 against dense {err:.2e}", stride.last_changed_fraction().unwrap());
    }
    assert!(widened >= 20, "the window spread widens the maps of most convs ({widened})");
}

/// `Spread::Stride` holds an InstanceNormalization's statistics from the last whole frame, as
/// SIGE reuses the original's: the change map passes the norm (the conv after it recomputes
/// only the changed positions), outputs away from a change stay as they were even when the
/// change moved the plane's statistics, and a frame computed whole equals dense again. The
/// model (1x1 conv, InstanceNorm, ReLU, 1x1 conv) computes each position from its own
/// position, so a frame that only swaps two positions keeps every statistic and its delta
/// result must equal dense.
fn held_norm_statistics(backend: &str) {
    use dynaspa::Spread;
    use onnx_build::*;
    let (c, h, w) = (8, 16, 16);
    let mut rng = common::Rng(common::seed());
    let bytes = model(
        vec![
            node("Conv", "conv1", &["x", "w1", "b1"], &["a"]),
            node("InstanceNormalization", "norm", &["a", "gamma", "beta"], &["n"]),
            node("Relu", "relu", &["n"], &["r"]),
            node("Conv", "conv2", &["r", "w2", "b2"], &["y"]),
        ],
        vec![value_info("x", 1, &[1, c as i64, h as i64, w as i64])],
        vec![value_info("y", 1, &[1, 4, h as i64, w as i64])],
        vec![
            f32_init("w1", &[c as i64, c as i64, 1, 1], &rng.vec(c * c)),
            f32_init("b1", &[c as i64], &rng.vec(c)),
            f32_init("gamma", &[c as i64], &rng.vec(c).iter().map(|v| 1.0 + 0.5 * v).collect::<Vec<_>>()),
            f32_init("beta", &[c as i64], &rng.vec(c)),
            f32_init("w2", &[4, c as i64, 1, 1], &rng.vec(4 * c)),
            f32_init("b2", &[4], &rng.vec(4)),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("norm.onnx");
    std::fs::write(&path, bytes).unwrap();
    let opts = DeltaOptions { max_changed: 1.0, spread: Spread::Stride, ..DeltaOptions::new(0.0) };
    let mut delta = common::poisoned(backend).delta(Some(opts)).open(&path).unwrap();
    let held = delta.graph().nodes.iter().filter(|n| n.sparse.as_ref().is_some_and(|s| s.fill == FillPolicy::Held)).count();
    assert_eq!(held, 1, "the norm's statistics are held");
    let mut dense = common::open_on(backend).dense(true).open(&path).unwrap();
    let run = |s: &mut Session, x: &[f32]| {
        let t = Tensor::from_f32(vec![1, c, h, w], x.to_vec()).unwrap();
        s.run(vec![("x".into(), t)]).unwrap().remove(0).1.as_f32().unwrap().to_vec()
    };
    let x0 = rng.vec(c * h * w);
    let e = common::rel_l2(&run(&mut delta, &x0), &run(&mut dense, &x0));
    assert!(e <= 1e-5, "{backend}: a whole frame equals dense: {e:.2e}");

    // Two positions swapped: every statistic stays, so the result is dense's.
    let (p, q) = (3 * w + 4, 11 * w + 9);
    let mut x1 = x0.clone();
    for ch in 0..c {
        x1.swap(ch * h * w + p, ch * h * w + q);
    }
    let y1 = run(&mut delta, &x1);
    let e = common::rel_l2(&y1, &run(&mut dense, &x1));
    assert!(e <= 1e-5, "{backend}: swapped positions: {e:.2e} against dense");
    let report = delta.last_report().unwrap();
    let conv2 = report.sparse_ops.iter().find(|o| o.node == "conv2").expect("conv2 runs by the map");
    assert!((conv2.density - 2.0 / (h * w) as f64).abs() < 1e-9, "{backend}: the map passes the norm: conv2 density {}", conv2.density);
    let stats = report.sparse_ops.iter().find(|o| o.op == "NormScaleShift").expect("the held statistics report");
    assert_eq!(stats.member, "held", "{backend}: statistics are not recomputed on a partial frame");

    // A bright 4x4 block: the plane's statistics move, the held ones do not.
    let mut x2 = x1.clone();
    let inside = |i: usize| (4..8).contains(&(i / w)) && (8..12).contains(&(i % w));
    for ch in 0..c {
        for i in (0..h * w).filter(|&i| inside(i)) {
            x2[ch * h * w + i] += 3.0;
        }
    }
    let y2 = run(&mut delta, &x2);
    let d2 = run(&mut dense, &x2);
    let plane = h * w;
    let outside: Vec<usize> = (0..4 * plane).filter(|&i| !inside(i % plane)).collect();
    let kept = outside.iter().all(|&i| y2[i] == y1[i]);
    assert!(kept, "{backend}: outputs away from the change keep their values");
    let pick = |v: &[f32]| outside.iter().map(|&i| v[i]).collect::<Vec<f32>>();
    let moved = common::rel_l2(&pick(&y1), &pick(&d2));
    assert!(moved > 1e-3, "the block moves the statistics (dense outside it moved by {moved:.2e}), so holding them is visible");

    // A whole frame recomputes the statistics: dense again.
    delta.refresh();
    let e = common::rel_l2(&run(&mut delta, &x2), &d2);
    assert!(e <= 1e-5, "{backend}: a whole frame after the edit equals dense: {e:.2e}");
}

backend_test!(stride_spread_holds_norm_statistics_from_the_whole_frame, [cpu, opencl, wgpu], |backend| {
    held_norm_statistics(backend);
});
