//! The GPU executor takes its sparse convs' PolyKernels from a profile made on this device:
//! the members it reports are the profile's (schedules with their knobs), dispatch picks among
//! them and the outputs stay those of the CPU. A profile made for another device is refused as
//! a whole with both fingerprints named, and the ops are calibrated; a member the device cannot
//! run (too many work-items, a knob the kernel does not have) sends its op to calibration.
//! GEMM members that split the reduction (KS > 1) over small work-groups compute what the
//! CPU does (PoCL once ran them as if every input were 0; see sparse_conv_load_stage).

mod common;
#[path = "common/onnx_build.rs"]
#[allow(dead_code)]
mod onnx_build;

use dynaspa::backends::gpu::{fingerprint_at, DeviceInfo, GpuDevice, GpuExecutable, GpuOptions, Precision};
use dynaspa::backends::SparseConfig;
use dynaspa::runtime::backend::Executable;
use dynaspa::runtime::dispatch::{DispatchTable, Member, PolyKernel, Schedule};
use dynaspa::runtime::graph::sparse_detect::{detect_sparse_regions, SparseOptions};
use dynaspa::runtime::graph::Graph;
use dynaspa::runtime::profile::{DeviceId, MaskSetInfo, OpProfile, OpSignature, Profile};
use dynaspa::runtime::sparsity::Granularity;
use dynaspa::Tensor;
use std::collections::BTreeMap;
use std::sync::Arc;

fn graph() -> Graph {
    let mut g = dynaspa::load_graph(common::repo_path("models/sige_small.onnx"), &Default::default()).unwrap();
    detect_sparse_regions(&mut g, &SparseOptions::default());
    g
}

/// A member at 3x5 tiles (a size dividing no side of sige_small's maps) with knobs unlike any
/// calibration uses, which dispatch always prefers to dense.
fn tuned(g: &Graph, n: &dynaspa::runtime::graph::Node, knobs: &[(&str, i64)]) -> Member {
    let w = &g.values[n.inputs[1].unwrap()].shape;
    let depthwise = w[1] == 1;
    let mut s = Schedule::sparse(if depthwise { "tuned3x5" } else { "tuned3x5_m16n16k8_w2x2_s2" }, Granularity::new(3, 5));
    if !depthwise {
        for &(k, v) in knobs {
            s = s.with_knob(k, v);
        }
    }
    Member { schedule: s, table: DispatchTable::constant(1.0).unwrap() }
}

const KNOBS: [(&str, i64); 6] = [("TM", 16), ("TN", 16), ("TK", 8), ("WM", 2), ("WN", 2), ("KS", 2)];

fn profile(g: &Graph, device: DeviceId, knobs: &BTreeMap<String, Vec<(&str, i64)>>) -> Profile {
    let mut p = Profile::new(device, "sige_small", false, "test", MaskSetInfo::default());
    for n in g.nodes.iter().filter(|n| dynaspa::backends::gpu::runs_sparse(g, n)) {
        let k = knobs.get(&n.name).cloned().unwrap_or_else(|| KNOBS.to_vec());
        let poly = PolyKernel::new(vec![
            Member { schedule: Schedule::dense("dense"), table: DispatchTable::constant(1e9).unwrap() },
            tuned(g, n, &k),
        ])
        .unwrap();
        p.ops.push(OpProfile { node: n.name.clone(), signature: OpSignature::of(g, n), poly, stats: None });
    }
    p
}

fn this_device(info: &DeviceInfo) -> DeviceId {
    DeviceId { backend: info.backend.clone(), name: info.name.clone(), fingerprint: info.fingerprint() }
}

fn compile<D: GpuDevice + 'static>(
    dev: &Arc<D>,
    backend: &str,
    g: &Graph,
    p: Option<Profile>,
    cache: &std::path::Path,
) -> GpuExecutable<D> {
    compile_at(dev, backend, g, p, cache, Precision::F32)
}

fn compile_at<D: GpuDevice + 'static>(
    dev: &Arc<D>,
    backend: &str,
    g: &Graph,
    p: Option<Profile>,
    cache: &std::path::Path,
    precision: Precision,
) -> GpuExecutable<D> {
    let sparse = SparseConfig { cache_dir: Some(cache.to_path_buf()), force: None, profile: p.map(Arc::new) };
    GpuExecutable::compile(dev.clone(), backend, g, &GpuOptions { poison: true, sparse, precision, ..Default::default() }).unwrap()
}

/// A random image and a mask of two blocks (about a fifth of the map), in graph input order.
fn inputs(g: &Graph) -> Vec<Tensor> {
    let mut st = 0x2545_f491_4f6c_dd1du64;
    let img: Vec<f32> = (0..3 * 48 * 64)
        .map(|_| {
            st ^= st << 13;
            st ^= st >> 7;
            st ^= st << 17;
            (st >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect();
    let mask: Vec<f32> = (0..48 * 64).map(|i| (((i / 64) % 24 < 10) && ((i % 64) % 32 < 12)) as u8 as f32).collect();
    g.inputs
        .iter()
        .map(|&v| match g.values[v].name.as_str() {
            "input" => Tensor::from_f32(vec![1, 3, 48, 64], img.clone()).unwrap(),
            "mask" => Tensor::from_f32(vec![1, 1, 48, 64], mask.clone()).unwrap(),
            other => panic!("unexpected input {other}"),
        })
        .collect()
}

#[allow(dead_code)]
fn check<D: GpuDevice + 'static>(dev: Arc<D>, backend: &str) {
    let g = graph();
    let cache = std::env::temp_dir().join(format!("dynaspa-gpu-profile-{backend}-{}", std::process::id()));
    let info = dev.info().clone();
    let convs: Vec<String> = g.nodes.iter().filter(|n| dynaspa::backends::gpu::runs_sparse(&g, n)).map(|n| n.name.clone()).collect();
    assert!(convs.len() >= 8, "{convs:?}");
    let mut cpu = common::open_on("cpu").open(common::repo_path("models/sige_small.onnx")).unwrap();
    let feeds: Vec<(String, Tensor)> = g.inputs.iter().map(|&v| g.values[v].name.clone()).zip(inputs(&g)).collect();
    let want = cpu.run(feeds).unwrap();

    // Calibrated: no profile member anywhere.
    let calibrated = compile(&dev, backend, &g, None, &cache);
    let cal_ops = calibrated.sparse_ops();
    assert_eq!(cal_ops.len(), convs.len());
    assert!(cal_ops.iter().all(|o| !o.from_profile && !o.members.iter().any(|m| m.starts_with("tuned"))), "{cal_ops:?}");
    assert!(calibrated.profile_refused().is_none());

    // This device's profile: its members are what the executor runs, and the outputs hold.
    let mut exe = compile(&dev, backend, &g, Some(profile(&g, this_device(&info), &BTreeMap::new())), &cache);
    assert!(exe.profile_refused().is_none());
    let ops = exe.sparse_ops();
    assert_eq!(ops.len(), convs.len());
    for o in &ops {
        assert!(o.from_profile, "{o:?}");
        assert_eq!(o.members[0], "dense");
        assert!(o.members[1].starts_with("tuned3x5"), "{o:?}");
        assert_eq!(o.schedules[1].granularity, Some(Granularity::new(3, 5)));
        if o.members[1] != "tuned3x5" {
            assert_eq!(o.schedules[1].knobs.get("TN"), Some(&16), "{o:?}");
            assert_eq!(o.schedules[1].knobs.get("KS"), Some(&2), "{o:?}");
        }
    }
    let got = exe.run(&inputs(&g)).unwrap();
    let report = exe.last_report().unwrap();
    assert!(report.sparse_ops.len() >= convs.len());
    assert!(report.phases_queued, "{backend}: a GPU report must say its phases are queueing times");
    for r in &report.sparse_ops {
        assert!(r.member.starts_with("tuned3x5") && r.tiles > 0, "{backend}: {r:?}");
    }
    let out = got[0].as_f32().unwrap();
    let e = common::rel_l2(out, want[0].1.as_f32().unwrap());
    assert!(e < 1e-4, "{backend}: profile members change the output: rel L2 {e}");

    // Another device's profile: refused with both fingerprints, everything calibrated.
    let other = DeviceId {
        backend: info.backend.clone(),
        name: "Some Other GPU".into(),
        fingerprint: "opencl|Other Vendor|Some Other GPU|3.0|1.0".into(),
    };
    let exe = compile(&dev, backend, &g, Some(profile(&g, other, &BTreeMap::new())), &cache);
    let why = exe.profile_refused().expect("another device's profile is refused");
    assert!(why.contains("Some Other GPU") && why.contains(&info.fingerprint()), "{why}");
    assert!(exe.sparse_ops().iter().all(|o| !o.from_profile && !o.members.iter().any(|m| m.starts_with("tuned"))));
    // The same device on another backend is another device too.
    let wrong_backend = DeviceId { backend: if backend == "wgpu" { "opencl".into() } else { "wgpu".into() }, ..this_device(&info) };
    let exe = compile(&dev, backend, &g, Some(profile(&g, wrong_backend, &BTreeMap::new())), &cache);
    assert!(exe.profile_refused().is_some_and(|w| w.contains("backend")));

    // Precisions: an f32 profile says nothing of half kernels and is refused at f16; one filed
    // under the f16 fingerprint (`dynaspa tune --precision f16`) is used there.
    if backend != "wgpu" {
        let exe = compile_at(&dev, backend, &g, Some(profile(&g, this_device(&info), &BTreeMap::new())), &cache, Precision::F16);
        let why = exe.profile_refused().expect("an f32 profile is refused at f16");
        assert!(why.contains("|f16"), "{why}");
        let at_f16 = DeviceId { fingerprint: fingerprint_at(&info, Precision::F16), ..this_device(&info) };
        let exe = compile_at(&dev, backend, &g, Some(profile(&g, at_f16, &BTreeMap::new())), &cache, Precision::F16);
        assert!(exe.profile_refused().is_none(), "{:?}", exe.profile_refused());
        assert!(exe.sparse_ops().iter().all(|o| o.from_profile), "{:?}", exe.sparse_ops());
    }

    // Members this device cannot run: their ops are calibrated, the others keep the profile.
    let mut bad = BTreeMap::new();
    bad.insert(convs[0].clone(), vec![("TM", 128), ("TN", 128), ("WM", 1), ("WN", 1)]);
    bad.insert(convs[1].clone(), vec![("tiles_per_group", 4)]);
    let exe = compile(&dev, backend, &g, Some(profile(&g, this_device(&info), &bad)), &cache);
    for o in exe.sparse_ops() {
        let knob_op = g.nodes.iter().find(|n| n.name == o.node).is_some_and(|n| g.values[n.inputs[1].unwrap()].shape[1] != 1);
        let broken = knob_op && (o.node == convs[0] || o.node == convs[1]);
        assert_eq!(o.from_profile, !broken, "{o:?}");
    }
    let _ = std::fs::remove_dir_all(&cache);
}

/// GEMM members (TM, TN, TK, WM, WN) of 32, 64 and 128 work-items, each run with KS 2 and 8:
/// the shapes PoCL miscompiled when it kept sparse_conv_load_stage out of line (every split's partial
/// sums 0), among them two of the bogus members its shipped profiles once held. Those a device
/// cannot run (WGSL holds 16 outputs per invocation) are left out there.
const SPLIT_TILES: [[i64; 5]; 6] =
    [[16, 16, 16, 2, 4], [32, 32, 16, 4, 4], [64, 32, 16, 4, 4], [128, 64, 16, 8, 8], [64, 32, 4, 8, 8], [16, 128, 4, 8, 8]];

/// `Mul(Relu(Conv3x3(x)), m)`, 32 -> 256 channels on a 13 x 21 map (no granularity divides it):
/// a reduction of 288, so KS = 8 still leaves each split several TK stages to prefetch.
fn split_model(dir: &std::path::Path) -> std::path::PathBuf {
    use onnx_build::{f32_init, int_attr, ints_attr, model, node, value_info, with_attrs};
    let (cin, cout, h, w) = (32usize, 256usize, 13i64, 21i64);
    let mut st = 0x9e37_79b9_7f4a_7c15u64;
    let wv: Vec<f32> = (0..cout * cin * 9)
        .map(|_| {
            st ^= st << 13;
            st ^= st >> 7;
            st ^= st << 17;
            ((st >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.2
        })
        .collect();
    let nodes = vec![
        with_attrs(
            node("Conv", "conv", &["x", "w", "b"], &["y"]),
            vec![ints_attr("kernel_shape", &[3, 3]), ints_attr("pads", &[1, 1, 1, 1]), int_attr("group", 1)],
        ),
        node("Relu", "act", &["y"], &["r"]),
        node("Mul", "mask", &["r", "m"], &["out"]),
    ];
    let inits = vec![
        f32_init("w", &[cout as i64, cin as i64, 3, 3], &wv),
        f32_init("b", &[cout as i64], &(0..cout).map(|i| (i % 7) as f32 * 0.02 - 0.06).collect::<Vec<_>>()),
    ];
    let bytes = model(
        nodes,
        vec![value_info("x", 1, &[1, cin as i64, h, w]), value_info("m", 1, &[1, 1, h, w])],
        vec![value_info("out", 1, &[1, cout as i64, h, w])],
        inits,
    );
    let path = dir.join("split_conv.onnx");
    std::fs::write(&path, bytes).unwrap();
    path
}

#[allow(dead_code)]
fn check_split_members<D: GpuDevice + 'static>(dev: Arc<D>, backend: &str) {
    use dynaspa::backends::gpu::sparse_conv_knobs::{GemmKnobs, GpuLimits};
    let cache = std::env::temp_dir().join(format!("dynaspa-gpu-split-{backend}-{}", std::process::id()));
    std::fs::create_dir_all(&cache).unwrap();
    let path = split_model(&cache);
    let mut g = dynaspa::load_graph(&path, &Default::default()).unwrap();
    detect_sparse_regions(&mut g, &SparseOptions::default());
    let conv = g.nodes.iter().find(|n| dynaspa::backends::gpu::runs_sparse(&g, n)).expect("the conv runs sparse").clone();
    let info = dev.info().clone();
    let limits = GpuLimits::of(&info);

    let mut st = 0x2545_f491_4f6c_dd1du64;
    let x: Vec<f32> = (0..32 * 13 * 21)
        .map(|_| {
            st ^= st << 13;
            st ^= st >> 7;
            st ^= st << 17;
            (st >> 40) as f32 / (1u64 << 24) as f32 - 0.3
        })
        .collect();
    // Two blocks, about 40% of the map, with edge tiles.
    let m: Vec<f32> = (0..13 * 21).map(|i| ((i / 21 < 6 && i % 21 < 13) || (i / 21 >= 9 && i % 21 >= 15)) as u8 as f32).collect();
    let feeds = vec![Tensor::from_f32(vec![1, 32, 13, 21], x).unwrap(), Tensor::from_f32(vec![1, 1, 13, 21], m).unwrap()];
    let mut cpu = common::open_on("cpu").open(&path).unwrap();
    let want = cpu.run(vec![("x".to_string(), feeds[0].clone()), ("m".to_string(), feeds[1].clone())]).unwrap().remove(0).1;

    let mut ran = 0;
    for [tm, tn, tk, wm, wn] in SPLIT_TILES {
        for ks in [2i64, 8] {
            let k =
                GemmKnobs { tm: tm as u32, tn: tn as u32, tk: tk as u32, wm: wm as u32, wn: wn as u32, ks: ks as u32, wk: 1, et: false };
            if k.check(&limits).is_err() {
                continue;
            }
            let name = format!("tiles4x4_m{tm}n{tn}k{tk}_w{wm}x{wn}_s{ks}");
            let mut s = Schedule::sparse(name.clone(), Granularity::new(4, 4));
            for (knob, v) in [("TM", tm), ("TN", tn), ("TK", tk), ("WM", wm), ("WN", wn), ("KS", ks)] {
                s = s.with_knob(knob, v);
            }
            let poly = PolyKernel::new(vec![
                Member { schedule: Schedule::dense("dense"), table: DispatchTable::constant(1e9).unwrap() },
                Member { schedule: s, table: DispatchTable::constant(1.0).unwrap() },
            ])
            .unwrap();
            let mut p = Profile::new(this_device(&info), "split_conv", false, "test", MaskSetInfo::default());
            p.ops.push(OpProfile { node: conv.name.clone(), signature: OpSignature::of(&g, &conv), poly, stats: None });
            let mut exe = compile(&dev, backend, &g, Some(p), &cache);
            assert!(exe.sparse_ops().iter().all(|o| o.from_profile), "{backend} {name}: {:?}", exe.sparse_ops());
            let got = exe.run(&feeds).unwrap();
            let r = exe.last_report().unwrap();
            assert!(r.sparse_ops.iter().all(|o| o.member == name && o.tiles > 0), "{backend}: {:?}", r.sparse_ops);
            let e = common::rel_l2(got[0].as_f32().unwrap(), want.as_f32().unwrap());
            assert!(e < 1e-4, "{backend} {name} ({} work-items): relative L2 {e:.2e} against the CPU", k.threads());
            ran += 1;
        }
    }
    // Every member runs on OpenCL and CUDA; WGSL refuses only the three 64-output tiles.
    assert_eq!(ran, if limits.wgsl { 6 } else { 12 }, "{backend}: members run");
    let _ = std::fs::remove_dir_all(&cache);
}

backend_test!(runs_the_profile_of_its_device_and_refuses_another, gpus, |backend| with_gpu_device!(backend, |dev| check(dev, backend)));

backend_test!(split_reduction_members_over_small_work_groups_equal_the_cpu, gpus, |backend| {
    with_gpu_device!(backend, |dev| check_split_members(dev, backend))
});
