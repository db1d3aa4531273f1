//! Convs whose members split the reduction (KS > 1) finish it either in the GEMM, by the last
//! of each output tile's KS work-groups (`SparseConvOverrides::fused_finish`: one launch), or in a second
//! launch. Both equal the CPU over consecutive frames whose masks and inputs all differ: the
//! fused GEMM counts each tile's finished splits and must leave every count at 0 for the next
//! frame (a count left over makes frame 2 skip or repeat a tile's finish, and outputs are
//! poisoned with NaN before every frame, so a skipped one shows). Tile counts go up and down
//! between frames, so tiles idle in one frame are busy in the next. Members: the dense one and
//! three granularities, with tiles that leave part of a channel tile or column tile empty; the
//! epilogue adds bias and a residual and applies ReLU; a batch of two images with a mask each.
//! Self-listing 1x1 members finish in a second launch whatever the option.

mod common;
use common::{seed, Rng};
#[path = "common/onnx_build.rs"]
#[allow(dead_code)]
mod onnx_build;

use dynaspa::backends::gpu::{DeviceInfo, GpuDevice, GpuExecutable, GpuOptions, SparseConvOverrides};
use dynaspa::backends::SparseConfig;
use dynaspa::runtime::backend::Executable;
use dynaspa::runtime::dispatch::{DispatchTable, Member, PolyKernel, Schedule};
use dynaspa::runtime::graph::sparse_detect::{detect_sparse_regions, SparseOptions};
use dynaspa::runtime::profile::{DeviceId, MaskSetInfo, OpProfile, OpSignature, Profile};
use dynaspa::runtime::sparsity::Granularity;
use dynaspa::Tensor;
use onnx_build::{f32_init, ints_attr, model, node, value_info, with_attrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Input channels: a reduction of 32 x 9 = 288 leaves each of 8 splits more than one stage.
const CIN: usize = 32;
/// Output map: no granularity below divides either side, so edge tiles have phantoms.
const H: usize = 13;
const W: usize = 21;

impl Rng {
    /// About `d` of an H x W map: rectangles half of the time, scattered points otherwise.
    fn mask(&mut self, d: f64) -> Vec<f32> {
        let mut m = vec![0f32; H * W];
        let target = ((d * (H * W) as f64).ceil() as usize).max(1);
        let blocks = self.next() < 0.5;
        while m.iter().filter(|&&v| v == 1.0).count() < target {
            let (y, x) = ((self.next() * H as f64) as usize % H, (self.next() * W as f64) as usize % W);
            let (bh, bw) = if blocks { (1 + (self.next() * 4.0) as usize, 1 + (self.next() * 6.0) as usize) } else { (1, 1) };
            for yy in y..(y + bh).min(H) {
                for xx in x..(x + bw).min(W) {
                    m[yy * W + xx] = 1.0;
                }
            }
        }
        m
    }
}

/// A model of one 3x3 conv (`cin` -> `cout`, bias) over `batch` images of H x W, masked by the
/// input `m`. With `residual`: `Relu(Mul(Conv(x), m) + r)` (the residual fill: bias, residual
/// and ReLU in the epilogue); else `Mul(Relu(Conv(x)), m)` (zero fill).
fn conv_model(dir: &Path, name: &str, batch: usize, cout: usize, residual: bool, rng: &mut Rng) -> PathBuf {
    let conv = with_attrs(
        node("Conv", "conv", &["x", "w", "b"], &["y"]),
        vec![ints_attr("kernel_shape", &[3, 3]), ints_attr("pads", &[1, 1, 1, 1])],
    );
    let nodes = if residual {
        vec![
            conv,
            node("Mul", "mask", &["y", "m"], &["ym"]),
            node("Add", "join", &["ym", "r"], &["s"]),
            node("Relu", "act", &["s"], &["out"]),
        ]
    } else {
        vec![conv, node("Relu", "act", &["y"], &["a"]), node("Mul", "mask", &["a", "m"], &["out"])]
    };
    let inits = vec![
        f32_init("w", &[cout as i64, CIN as i64, 3, 3], &rng.vec(cout * CIN * 9).iter().map(|v| v * 0.2).collect::<Vec<_>>()),
        f32_init("b", &[cout as i64], &(0..cout).map(|i| (i % 7) as f32 * 0.02 - 0.06).collect::<Vec<_>>()),
    ];
    let (n, hi, wi) = (batch as i64, H as i64, W as i64);
    let mut inputs = vec![value_info("x", 1, &[n, CIN as i64, hi, wi]), value_info("m", 1, &[n, 1, hi, wi])];
    if residual {
        inputs.push(value_info("r", 1, &[n, cout as i64, hi, wi]));
    }
    let bytes = model(nodes, inputs, vec![value_info("out", 1, &[n, cout as i64, hi, wi])], inits);
    let path = dir.join(format!("{name}.onnx"));
    std::fs::write(&path, bytes).unwrap();
    path
}

/// The members each model is run with, one at a time: name, granularity (`None`: dense) and
/// GEMM knobs TM, TN, TK, WM, WN, KS.
/// Members with runs of 2 or 4 columns per work-item (WN 2 or 4) store their partial sums 8 or
/// 16 bytes at a time where the map's column capacity is a multiple of the run (tiles4x4 here:
/// 384) and one float at a time where it is not (tiles1x1: 273, tiles3x5: 375).
/// A reduction of 288 (32 channels x 9 taps) leaves splits without a stage at KS 8 (chunks of
/// 48: 6 splits run), 16 (9 run) and 32 (chunks of 16: 18 run).
const MEMBERS: [(&str, Option<(u16, u16)>, [i64; 6]); 8] = [
    ("dense", None, [64, 32, 16, 4, 2, 4]),
    ("tiles3x5_m32n32k16_w2x2_s2", Some((3, 5)), [32, 32, 16, 2, 2, 2]),
    ("tiles4x4_m64n32k16_w4x2_s8", Some((4, 4)), [64, 32, 16, 4, 2, 8]),
    ("tiles1x1_m16n16k8_w2x2_s4", Some((1, 1)), [16, 16, 8, 2, 2, 4]),
    ("tiles4x4_m32n32k16_w4x4_s4", Some((4, 4)), [32, 32, 16, 4, 4, 4]),
    ("tiles1x1_m32n32k16_w2x4_s4", Some((1, 1)), [32, 32, 16, 2, 4, 4]),
    // 65,536 partial sums per tile: past FUSED_FINISH_MAX_PARTIALS, split even when fused.
    ("tiles2x8_m64n64k16_w4x4_s16", Some((2, 8)), [64, 64, 16, 4, 4, 16]),
    ("tiles1x1_m32n32k8_w2x4_s32", Some((1, 1)), [32, 32, 8, 2, 4, 32]),
];

/// A profile for this device whose PolyKernel for `node` dispatch always resolves to member
/// `mi` of `MEMBERS` (the dense member is always there; a sparse one alone never is).
fn profile(info: &DeviceInfo, g: &dynaspa::runtime::graph::Graph, node: &dynaspa::runtime::graph::Node, mi: usize) -> Profile {
    let knobbed = |s: Schedule, k: [i64; 6]| ["TM", "TN", "TK", "WM", "WN", "KS"].iter().zip(k).fold(s, |s, (n, v)| s.with_knob(*n, v));
    let (name, gran, knobs) = MEMBERS[mi];
    let mut members = Vec::new();
    match gran {
        None => members.push(Member { schedule: knobbed(Schedule::dense(name), knobs), table: DispatchTable::constant(1.0).unwrap() }),
        Some((h, w)) => {
            members.push(Member { schedule: Schedule::dense("dense"), table: DispatchTable::constant(1e9).unwrap() });
            let s = knobbed(Schedule::sparse(name, Granularity::new(h, w)), knobs);
            members.push(Member { schedule: s, table: DispatchTable::constant(1.0).unwrap() });
        }
    }
    let device = DeviceId { backend: info.backend.clone(), name: info.name.clone(), fingerprint: info.fingerprint() };
    let mut p = Profile::new(device, "fused_finish", false, "test", MaskSetInfo::default());
    p.ops.push(OpProfile {
        node: node.name.clone(),
        signature: OpSignature::of(g, node),
        poly: PolyKernel::new(members).unwrap(),
        stats: None,
    });
    p
}

/// Every member of `MEMBERS`, fused and not, over `frames` consecutive frames of `batch` images
/// at the densities given, each frame with new masks and inputs, against the CPU.
fn check_model<D: GpuDevice + 'static>(dev: &Arc<D>, backend: &str, path: &Path, batch: usize, cout: usize, residual: bool, rng: &mut Rng) {
    let mut g = dynaspa::load_graph(path, &Default::default()).unwrap();
    detect_sparse_regions(&mut g, &SparseOptions::default());
    let conv = g.nodes.iter().find(|n| dynaspa::backends::gpu::runs_sparse(&g, n)).expect("the conv runs sparse").clone();
    let info = dev.info().clone();
    let mut cpu = common::open_on("cpu").open(path).unwrap();
    let what = path.file_stem().unwrap().to_string_lossy().to_string();
    let mut ran = 0;
    for mi in 0..MEMBERS.len() {
        let k = MEMBERS[mi].2;
        let knobs = dynaspa::backends::gpu::sparse_conv_knobs::GemmKnobs {
            tm: k[0] as u32,
            tn: k[1] as u32,
            tk: k[2] as u32,
            wm: k[3] as u32,
            wn: k[4] as u32,
            ks: k[5] as u32,
            wk: 1,
            et: false,
        };
        if knobs.check(&dynaspa::backends::gpu::sparse_conv_knobs::GpuLimits::of(&info)).is_err() {
            continue;
        }
        let name = MEMBERS[mi].0;
        for fused in [false, true] {
            let sparse = SparseConfig { cache_dir: None, force: None, profile: Some(Arc::new(profile(&info, &g, &conv, mi))) };
            let sparse_conv = SparseConvOverrides { fused_finish: Some(fused), ..Default::default() };
            let opts = GpuOptions { poison: true, sparse, sparse_conv, ..Default::default() };
            let mut exe = GpuExecutable::compile(dev.clone(), backend, &g, &opts).unwrap();
            let case = format!("{what} on {backend}, member {name}, fused finish {fused}");
            assert_eq!(exe.fused_finish(), fused, "{case}: the option is not what the executable did");
            let ops = exe.sparse_ops();
            assert!(ops.len() == 1 && ops[0].from_profile, "{case}: {ops:?}");
            let at = ops[0].members.iter().position(|m| m == name).unwrap_or_else(|| panic!("{case}: no member {name} in {ops:?}"));
            // The fused GEMM is the member's only launch; unfused, the finish follows it (a
            // dense member run by the vendor's conv and its epilogue is two either way, and one
            // whose tiles hold more partial sums than a last work-group should read always
            // finishes in a second launch). A 1x1 member that lists its own columns never fuses.
            let self_lists = MEMBERS[mi].1 == Some((1, 1)) && exe.sparse_conv_features().self_list;
            if !(MEMBERS[mi].1.is_none() && ops[0].dense_vendor.is_some()) {
                let small = k[0] * k[1] * k[5] <= dynaspa::backends::gpu::sparse_conv_knobs::FUSED_FINISH_MAX_PARTIALS as i64;
                let one = small && !self_lists && fused;
                assert_eq!(ops[0].launches[at], if one { 1 } else { 2 }, "{case}: launches {:?}", ops[0].launches);
            }
            // Up, down, up, down: tiles unused in one frame work in the next.
            for (f, &d) in [0.5, 0.04, 0.9, 0.2].iter().enumerate() {
                let x = Tensor::from_f32(vec![batch, CIN, H, W], rng.vec(batch * CIN * H * W)).unwrap();
                let m = Tensor::from_f32(vec![batch, 1, H, W], (0..batch).flat_map(|_| rng.mask(d)).collect()).unwrap();
                let mut feeds = vec![("x".to_string(), x), ("m".to_string(), m)];
                if residual {
                    feeds.push(("r".to_string(), Tensor::from_f32(vec![batch, cout, H, W], rng.vec(batch * cout * H * W)).unwrap()));
                }
                let want = cpu.run(feeds.clone()).unwrap().remove(0).1;
                let inputs: Vec<Tensor> = g
                    .inputs
                    .iter()
                    .map(|&v| {
                        feeds.iter().find(|(n, _)| *n == g.values[v].name).unwrap_or_else(|| panic!("input {}", g.values[v].name)).1.clone()
                    })
                    .collect();
                let got = exe.run(&inputs).unwrap().remove(0);
                let r = &exe.last_report().unwrap().sparse_ops;
                assert!(r.len() == 1 && r[0].member == name, "{case}, frame {f}: ran {r:?}");
                let err = common::rel_l2(got.as_f32().unwrap(), want.as_f32().unwrap());
                assert!(err <= 1e-4, "{case}, frame {f} (density {d}): relative L2 {err:.2e} against the CPU");
            }
            ran += 1;
        }
    }
    assert!(ran >= 6, "{what} on {backend}: only {ran} member runs fit the device");
}

#[allow(dead_code)]
fn check<D: GpuDevice + 'static>(dev: Arc<D>, backend: &str) {
    let mut rng = Rng(seed());
    let dir = std::env::temp_dir().join(format!("dynaspa-fused-finish-{backend}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // 40 output channels: a 64-channel tile is part empty. Bias, residual and ReLU.
    let path = conv_model(&dir, "residual", 1, 40, true, &mut rng);
    check_model(&dev, backend, &path, 1, 40, true, &mut rng);
    // Two images, a mask each, 72 channels (two 64-channel tiles, the second mostly empty).
    let path = conv_model(&dir, "batch2", 2, 72, false, &mut rng);
    check_model(&dev, backend, &path, 2, 72, false, &mut rng);
    let _ = std::fs::remove_dir_all(&dir);
}

backend_test!(split_members_fused_and_not_equal_the_cpu_frame_after_frame, [opencl, cuda], |backend| {
    with_gpu_device!(backend, |dev| check(dev, backend))
});
