//! 1x1 members that list their own columns (SELF_LIST), on the OpenCL device (PoCL in CI, where
//! they are asked for: not its default): they read the mask itself, not the bitmask kernel's
//! lists, so dispatch may launch that kernel beside them.

use super::tests::device;
use super::*;
use crate::gpu::test_compare::rel_l2;
use crate::gpu::test_rng::Rng;
use crate::ForceMember;
use dynaspa_runtime::graph::{Activation, AutoPad, Conv, FillPolicy, MaskKind, MaskSource, Node, Op, SparseSpec, Value, Window};
use dynaspa_runtime::sparsity::Granularity;

const C: usize = 24;
const M: usize = 20;
const H: usize = 13;
const W: usize = 17;

/// relu(conv3x3(x) + b) over an h x w map where the input mask `m` is 1, zero elsewhere: one
/// sparse conv whose reduction (24 x 9) splits.
fn graph(rng: &mut Rng, h: usize, w: usize) -> Graph {
    let mut g = Graph { name: "self_list".into(), opset: 17, ..Default::default() };
    let mut value = |name: &str, shape: Vec<usize>, c: Option<Tensor>| {
        g.values.push(Value { name: name.into(), dtype: DType::F32, shape, constant: c.map(Arc::new) });
        g.values.len() - 1
    };
    let x = value("x", vec![1, C, h, w], None);
    let wt = value("w", vec![M, C, 3, 3], Some(Tensor::from_f32(vec![M, C, 3, 3], rng.vec(M * C * 9, 1.0)).unwrap()));
    let b = value("b", vec![M], Some(Tensor::from_f32(vec![M], rng.vec(M, 1.0)).unwrap()));
    let m = value("m", vec![1, 1, h, w], None);
    let y = value("y", vec![1, M, h, w], None);
    let window =
        Window { kernel_shape: vec![3, 3], strides: vec![1, 1], pads: vec![1; 4], dilations: vec![1, 1], auto_pad: AutoPad::NotSet };
    let sparse = SparseSpec {
        mask: m,
        kind: MaskKind::Spatial,
        source: MaskSource::ModelInput { name: "m".into() },
        dilation: [0, 0],
        fill: FillPolicy::Zero,
        fused_mul: true,
    };
    g.nodes.push(Node {
        name: "conv".into(),
        op: Op::Conv(Conv { window, group: 1, fused_add: false, activation: Some(Activation::Relu) }),
        inputs: vec![Some(x), Some(wt), Some(b)],
        outputs: vec![y],
        sparse: Some(sparse),
    });
    g.inputs = vec![x, m];
    g.outputs = vec![y];
    g
}

/// The executable with member `force` of the conv, and its output for `inputs` (a frame with
/// exact counts, then one with lagged ones: the second must equal the first).
fn run_forced(
    dev: &Arc<crate::opencl::OpenClDevice>,
    g: &Graph,
    force: ForceMember,
    inputs: &[Tensor],
    cache: &std::path::Path,
) -> (GpuExecutable<crate::opencl::OpenClDevice>, Vec<f32>) {
    let sparse = crate::SparseConfig { cache_dir: Some(cache.to_path_buf()), force: Some(force), profile: None };
    // Asked for: PoCL's default is off (sparse_conv/schedule.rs says why); this batch-1 conv it computes right.
    let mut exe = GpuExecutable::compile(
        dev.clone(),
        "opencl",
        g,
        &GpuOptions {
            poison: true,
            sparse,
            sparse_conv: SparseConvOverrides { self_list: Some(true), ..Default::default() },
            ..Default::default()
        },
    )
    .unwrap();
    let first = exe.run(inputs).unwrap().remove(0).as_f32().unwrap().to_vec();
    let second = exe.run(inputs).unwrap().remove(0).as_f32().unwrap().to_vec();
    assert_eq!(first, second, "{force:?}: the lagged frame differs from the exact one");
    (exe, first)
}

/// Replays op 0's member of the last frame alone over an output poisoned with NaN and mask
/// metadata overwritten with garbage, and returns the output.
fn member_over_garbage_lists(exe: &mut GpuExecutable<crate::opencl::OpenClDevice>) -> Vec<f32> {
    let pick = exe.frames.ops[0].last_pick.expect("a frame ran");
    let name = exe.frames.ops[0].poly.members()[pick].schedule.name.clone();
    let meta = exe.frames.masks[0].meta;
    let ints = exe.frames.masks[0].layout.total();
    // Counts of 2^30 tiles and lists of positions far outside the map.
    let garbage: Vec<u8> = (0..ints).flat_map(|i| (0x4000_0000i32 + i as i32).to_le_bytes()).collect();
    // The last frame's bitmask launch may still be writing the lists on the second queue.
    exe.dev.finish().unwrap();
    exe.dev.upload(&exe.bufs[meta], 0, &garbage).unwrap();
    let Output::Device { buf, .. } = exe.outputs[0] else { panic!("the output lives on the device") };
    let nan: Vec<u8> = (0..M * H * W).flat_map(|_| f32::NAN.to_le_bytes()).collect();
    exe.dev.upload(&exe.bufs[buf], 0, &nan).unwrap();
    let launches: Vec<Launch<_>> = exe.frames.member_launches(0, &name).unwrap();
    replay_launches(&*exe.dev, &exe.bufs, &launches).unwrap();
    exe.dev.finish().unwrap();
    let mut out = vec![0u8; M * H * W * 4];
    exe.dev.download(&exe.bufs[buf], 0, &mut out).unwrap();
    out.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Whether `got` equals `want` at every position the mask sets (bit for bit).
fn active_equal(got: &[f32], want: &[f32], mask: &[f32]) -> bool {
    got.iter().zip(want).enumerate().all(|(i, (a, b))| mask[i % (H * W)] == 0.0 || a.to_bits() == b.to_bits())
}

#[test]
fn one_by_one_members_read_the_mask_not_the_bitmask_lists() {
    let Some(dev) = device() else { return };
    let mut rng = Rng(0x5e1f_1157 ^ std::process::id() as u64);
    let g = graph(&mut rng, H, W);
    let cache = std::env::temp_dir().join(format!("dynaspa-self-list-{}", std::process::id()));
    let mask: Vec<f32> = (0..H * W).map(|_| (rng.next() < 0.3) as u8 as f32).collect();
    let inputs =
        [Tensor::from_f32(vec![1, C, H, W], rng.vec(C * H * W, 1.0)).unwrap(), Tensor::from_f32(vec![1, 1, H, W], mask.clone()).unwrap()];

    let (mut exe, want) = run_forced(&dev, &g, ForceMember::Tiles(Granularity::new(1, 1)), &inputs, &cache);
    let op = &exe.frames.ops[0];
    let pick = op.last_pick.unwrap();
    assert!(
        op.meta_free.get(pick).copied().unwrap_or(false),
        "PoCL's 1x1 member {} should list its own columns",
        op.poly.members()[pick].schedule.name
    );
    let got = member_over_garbage_lists(&mut exe);
    assert!(active_equal(&got, &want, &mask), "the self-listing member read the bitmask kernel's lists");

    // The control: a member that reads the lists computes something else from the garbage, so
    // the check above can fail.
    let (mut tiled, want_tiled) = run_forced(&dev, &g, ForceMember::Tiles(Granularity::new(2, 8)), &inputs, &cache);
    assert_eq!(want_tiled.len(), want.len());
    let op = &tiled.frames.ops[0];
    assert!(!op.meta_free[op.last_pick.unwrap()], "the 2x8 member reads the lists");
    let got = member_over_garbage_lists(&mut tiled);
    assert!(!active_equal(&got, &want_tiled, &mask), "garbage lists left the 2x8 member's output unchanged");
    // Both computed the same conv from their own lists.
    let e = rel_l2(&want, &want_tiled);
    assert!(e <= 1e-5, "the self-listing member differs from the 2x8 member: relative L2 {e:.2e}");
    let _ = std::fs::remove_dir_all(&cache);
}

/// A map of more positions than a work-group keeps in registers while it lists (sparse_conv_gemm.cl's
/// SL_BITS per work-item): each work-item's segment is read again past them, and the columns
/// found there must be those of the bitmask kernel's lists (the 2x8 member) and of the dense
/// member.
#[test]
fn one_by_one_members_list_long_segments_right() {
    let Some(dev) = device() else { return };
    let mut rng = Rng(0x10_9e65 ^ std::process::id() as u64);
    // 150 x 150 = 22,500 positions: over 64 per work-item for work-groups of up to 256.
    let (h, w) = (150, 150);
    let g = graph(&mut rng, h, w);
    let cache = std::env::temp_dir().join(format!("dynaspa-self-list-long-{}", std::process::id()));
    let mask: Vec<f32> = (0..h * w).map(|_| (rng.next() < 0.3) as u8 as f32).collect();
    let inputs = [Tensor::from_f32(vec![1, C, h, w], rng.vec(C * h * w, 1.0)).unwrap(), Tensor::from_f32(vec![1, 1, h, w], mask).unwrap()];
    let (exe, listed) = run_forced(&dev, &g, ForceMember::Tiles(Granularity::new(1, 1)), &inputs, &cache);
    let op = &exe.frames.ops[0];
    assert!(op.meta_free[op.last_pick.unwrap()], "the 1x1 member should list its own columns");
    let (_, tiled) = run_forced(&dev, &g, ForceMember::Tiles(Granularity::new(2, 8)), &inputs, &cache);
    let (_, dense) = run_forced(&dev, &g, ForceMember::Dense, &inputs, &cache);
    for (what, want) in [("2x8", &tiled), ("dense", &dense)] {
        let e = rel_l2(&listed, want);
        assert!(e <= 1e-5, "self-listing 1x1 member against the {what} member on a 150 x 150 map: relative L2 {e:.2e}");
    }
    let _ = std::fs::remove_dir_all(&cache);
}

/// A profile of the conv in `g` for `dev`: the dense member, predicted dear, and a 1x1 member
/// with a split reduction, predicted cheap whatever the mask (every frame runs it); with
/// `with_2x8`, also a 2x8 member never picked, which puts a second granularity in the mask's
/// plan.
fn profile(dev: &crate::opencl::OpenClDevice, g: &Graph, with_2x8: bool) -> Arc<dynaspa_runtime::profile::Profile> {
    use dynaspa_runtime::dispatch::{DispatchTable, Member, PolyKernel, Schedule};
    use dynaspa_runtime::profile::{DeviceId, MaskSetInfo, OpProfile, OpSignature, Profile};
    let info = dev.info();
    let id = DeviceId { backend: "opencl".into(), name: info.name.clone(), fingerprint: info.fingerprint() };
    let mut one = Schedule::sparse("t1x1", Granularity::new(1, 1));
    for (k, v) in [("TM", 16), ("TN", 16), ("TK", 8), ("WM", 2), ("WN", 2), ("KS", 3)] {
        one = one.with_knob(k, v);
    }
    let mut members = vec![
        Member { schedule: Schedule::dense("dense"), table: DispatchTable::constant(100.0).unwrap() },
        Member { schedule: one, table: DispatchTable::constant(1.0).unwrap() },
    ];
    if with_2x8 {
        members.push(Member { schedule: Schedule::sparse("t2x8", Granularity::new(2, 8)), table: DispatchTable::constant(50.0).unwrap() });
    }
    let mut p = Profile::new(id, "self_count", false, "test", MaskSetInfo::default());
    let n = &g.nodes[0];
    p.ops.push(OpProfile { node: n.name.clone(), signature: OpSignature::of(g, n), poly: PolyKernel::new(members).unwrap(), stats: None });
    Arc::new(p)
}

/// A mask planned with 1x1 tiles alone is counted by its self-listing member (SELF_COUNT): with
/// lagged counts no frame after the first launches the bitmask kernel, yet each frame reports
/// its own density, computes what the same member reading the bitmask kernel's lists does, and
/// a mask value other than 0 and 1 still fails the frame, naming the mask.
#[test]
fn members_count_a_mask_of_1x1_tiles_alone_with_no_bitmask_launch() {
    let Some(dev) = device() else { return };
    let mut rng = Rng(0x5e1f_c0de ^ std::process::id() as u64);
    let g = graph(&mut rng, H, W);
    let compile = |with_2x8: bool| {
        let sparse = crate::SparseConfig { cache_dir: None, force: None, profile: Some(profile(&dev, &g, with_2x8)) };
        // Asked for: PoCL's default is off (sparse_conv/schedule.rs says why); this batch-1 conv it computes right.
        GpuExecutable::compile(
            dev.clone(),
            "opencl",
            &g,
            &GpuOptions {
                poison: true,
                sparse,
                sparse_conv: SparseConvOverrides { self_list: Some(true), ..Default::default() },
                ..Default::default()
            },
        )
        .unwrap()
    };
    // The control: a second granularity in the plan, so the bitmask kernel makes the counts.
    let (mut counted, mut listed) = (compile(false), compile(true));
    assert!(counted.frames.masks[0].report.is_some(), "a mask of 1x1 tiles alone should be counted by its members");
    assert!(listed.frames.masks[0].report.is_none(), "a mask with 2x8 tiles too needs the bitmask kernel's counts");
    assert!(counted.frames.ops[0].reports_counts.iter().any(|&r| r), "no member of the op counts the mask");
    let x = Tensor::from_f32(vec![1, C, H, W], rng.vec(C * H * W, 1.0)).unwrap();
    // Garbage where the bitmask kernel stores the packed words and tile lists.
    let garbage = |exe: &GpuExecutable<crate::opencl::OpenClDevice>| {
        let l = &exe.frames.masks[0].layout;
        let bytes: Vec<u8> = (l.data0..l.total()).flat_map(|i| (0x4000_0000i32 + i as i32).to_le_bytes()).collect();
        exe.dev.finish().unwrap();
        exe.dev.upload(&exe.bufs[exe.frames.masks[0].meta], l.data0 * 4, &bytes).unwrap();
        bytes
    };
    let lists = |exe: &GpuExecutable<crate::opencl::OpenClDevice>| {
        let l = &exe.frames.masks[0].layout;
        let mut out = vec![0u8; (l.total() - l.data0) * 4];
        exe.dev.finish().unwrap();
        exe.dev.download(&exe.bufs[exe.frames.masks[0].meta], l.data0 * 4, &mut out).unwrap();
        out
    };
    let (mut planted, mut planted_control) = (Vec::new(), Vec::new());
    for (f, d) in [0.3, 0.05, 0.6, 0.15].into_iter().enumerate() {
        let mask: Vec<f32> = (0..H * W).map(|_| (rng.next() < d) as u8 as f32).collect();
        let density = mask.iter().filter(|&&v| v == 1.0).count() as f64 / mask.len() as f64;
        let inputs = [x.clone(), Tensor::from_f32(vec![1, 1, H, W], mask).unwrap()];
        if f == 1 {
            // After the first frame (exact counts, one bitmask launch each).
            (planted, planted_control) = (garbage(&counted), garbage(&listed));
        }
        let got = counted.run(&inputs).unwrap().remove(0).as_f32().unwrap().to_vec();
        let want = listed.run(&inputs).unwrap().remove(0).as_f32().unwrap().to_vec();
        let e = rel_l2(&got, &want);
        assert!(e <= 1e-5, "frame {f}: the counting member against the listing one: relative L2 {e:.2e}");
        for (what, exe) in [("counted", &counted), ("listed", &listed)] {
            let r = &exe.last_report().unwrap().sparse_ops[0];
            assert_eq!(r.member, "t1x1", "frame {f}, {what}: ran {r:?}");
            assert!((r.density - density).abs() < 1e-12, "frame {f}, {what}: reports density {} for a mask of {density}", r.density);
        }
    }
    assert!(lists(&counted) == planted, "a bitmask launch ran in a frame whose member counts the mask");
    assert!(lists(&listed) != planted_control, "the control made no bitmask launch: the check above proves nothing");
    // Counted by the member alone, a value that is neither 0 nor 1 still fails its frame.
    let mut bad: Vec<f32> = (0..H * W).map(|_| (rng.next() < 0.2) as u8 as f32).collect();
    bad[5 * W + 7] = 0.5;
    let e = counted.run(&[x, Tensor::from_f32(vec![1, 1, H, W], bad).unwrap()]).unwrap_err().to_string();
    assert!(e.contains("'m'") && e.contains("0.5") && e.contains("(5, 7)"), "the error should name the mask, value and position: {e}");
}

/// A frame with far more columns than the last: its self-listing member's grids, launched for
/// the last frame's columns (lagged counts, `ColumnGrid`), are narrower than its map needs, so
/// each work-group takes several windows; the output must still be the dense member's.
#[test]
fn narrowed_grids_cover_a_frame_denser_than_the_last() {
    let Some(dev) = device() else { return };
    let mut rng = Rng(0x6a1d_0c01 ^ std::process::id() as u64);
    let (h, w) = (40, 40);
    let g = graph(&mut rng, h, w);
    let cache = std::env::temp_dir().join(format!("dynaspa-self-list-narrow-{}", std::process::id()));
    let frame = |rng: &mut Rng, d: f64| {
        let mask: Vec<f32> = (0..h * w).map(|_| (rng.next() < d) as u8 as f32).collect();
        [Tensor::from_f32(vec![1, C, h, w], rng.vec(C * h * w, 1.0)).unwrap(), Tensor::from_f32(vec![1, 1, h, w], mask).unwrap()]
    };
    let (sparse, dense) = (frame(&mut rng, 0.05), frame(&mut rng, 0.9));
    let compile = |force: ForceMember| {
        let sparse = crate::SparseConfig { cache_dir: Some(cache.clone()), force: Some(force), profile: None };
        GpuExecutable::compile(
            dev.clone(),
            "opencl",
            &g,
            &GpuOptions {
                poison: true,
                sparse,
                sparse_conv: SparseConvOverrides { self_list: Some(true), ..Default::default() },
                ..Default::default()
            },
        )
        .unwrap()
    };
    let mut exe = compile(ForceMember::Tiles(Granularity::new(1, 1)));
    exe.run(&sparse).unwrap();
    // Selected with the sparse frame's counts: the grids it launches for them.
    let expect = crate::gpu::sparse::step::expected_columns(
        &exe.frames.masks[0].layout,
        &exe.frames.counts_of(0).expect("the first frame's counts"),
    );
    let after_sparse = exe.frames.frame_key();
    let got = exe.run(&dense).unwrap().remove(0).as_f32().unwrap().to_vec();
    // The same member, other grids: a frame graph recorded after one frame must not replay
    // after the other.
    let after_dense = exe.frames.frame_key();
    assert!(after_sparse.is_some() && after_dense.is_some(), "lagged frames should have keys");
    assert_ne!(after_sparse, after_dense, "frame graph keys ignore the grids' widths");
    let op = &exe.frames.ops[0];
    let pick = op.last_pick.unwrap();
    assert!(op.meta_free[pick], "the 1x1 member should list its own columns");
    let narrowed: Vec<_> =
        op.members[pick].iter().filter_map(|l| l.columns.map(|c| (l.groups[c.dim], l.groups_for(expect)[c.dim]))).collect();
    assert!(
        !narrowed.is_empty() && narrowed.iter().all(|(whole, n)| n < whole),
        "no grid was narrowed for the sparse frame: {narrowed:?} (expect {expect:?})"
    );
    let want = compile(ForceMember::Dense).run(&dense).unwrap().remove(0).as_f32().unwrap().to_vec();
    let e = rel_l2(&got, &want);
    assert!(e <= 1e-5, "narrowed grids on a frame of density 0.9 after one of 0.05, against the dense member: relative L2 {e:.2e}");
    let _ = std::fs::remove_dir_all(&cache);
}

/// `graph`'s conv with its mask made by a node ("gate", |m|) instead of read from the input,
/// then, as `between` says: another node between the gate and the conv (|x|, the conv's input),
/// or an Identity view of the gate's output as the mask (the same buffer), or neither. `rng`
/// draws the weights as `graph`'s does.
fn gated(rng: &mut Rng, between: &str) -> Graph {
    let mut g = graph(rng, H, W);
    let (x, m) = (g.inputs[0], g.inputs[1]);
    let value = |g: &mut Graph, name: &str, like: usize| {
        let shape = g.values[like].shape.clone();
        g.values.push(Value { name: name.into(), dtype: DType::F32, shape, constant: None });
        g.values.len() - 1
    };
    let node =
        |name: &str, op: Op, i: usize, o: usize| Node { name: name.into(), op, inputs: vec![Some(i)], outputs: vec![o], sparse: None };
    let gate = value(&mut g, "gate", m);
    let mut pre = vec![node("gate", Op::Unary(dynaspa_runtime::graph::UnaryKind::Abs), m, gate)];
    let mut mask = gate;
    match between {
        "other" => {
            let xa = value(&mut g, "xa", x);
            pre.push(node("other", Op::Unary(dynaspa_runtime::graph::UnaryKind::Abs), x, xa));
            g.nodes[0].inputs[0] = Some(xa);
        }
        "view" => {
            mask = value(&mut g, "gate_view", gate);
            pre.push(node("view", Op::Identity, gate, mask));
        }
        _ => {}
    }
    let conv = &mut g.nodes[0];
    let sp = conv.sparse.as_mut().expect("graph's conv is sparse");
    sp.mask = mask;
    sp.source = MaskSource::InGraph { node: "gate".into() };
    g.nodes.splice(0..0, pre);
    g
}

/// Where the launch ahead of a self-listing member writes its mask, the member must wait before
/// reading it (SL_PREWAIT only elsewhere; the kernel honours it on CUDA, the choice is the
/// executor's on every backend): the mask from the input, from a node two steps back, from the
/// node just before, and through a view of that node's output, which shares its buffer.
#[test]
fn members_read_the_mask_before_their_wait_only_where_the_launch_ahead_does_not_write_it() {
    let Some(dev) = device() else { return };
    let seed = 0x9e_3a17 ^ std::process::id() as u64;
    // Every graph from the same draw: the same weights.
    let cases = [
        ("input", graph(&mut Rng(seed), H, W), true),
        ("other", gated(&mut Rng(seed), "other"), true),
        ("none", gated(&mut Rng(seed), "none"), false),
        ("view", gated(&mut Rng(seed), "view"), false),
    ];
    let mut rng = Rng(seed ^ 0x5eed);
    let mask: Vec<f32> = (0..H * W).map(|_| (rng.next() < 0.3) as u8 as f32).collect();
    let inputs = [Tensor::from_f32(vec![1, C, H, W], rng.vec(C * H * W, 1.0)).unwrap(), Tensor::from_f32(vec![1, 1, H, W], mask).unwrap()];
    let cache = std::env::temp_dir().join(format!("dynaspa-prewait-{}", std::process::id()));
    let mut outs = Vec::new();
    for (what, g, want) in &cases {
        let (exe, out) = run_forced(&dev, g, ForceMember::Tiles(Granularity::new(1, 1)), &inputs, &cache);
        let op = &exe.frames.ops[0];
        assert!(op.meta_free[op.last_pick.unwrap()], "{what}: the 1x1 member should list its own columns");
        assert_eq!(op.mask_prewait, *want, "{what}: whether the member may read the mask before its wait");
        outs.push(out);
    }
    // |m| of a binary mask is the mask; "other" convolves |x|, not x.
    assert!(outs[0] == outs[2], "the gated mask changed the output");
    assert!(outs[0] == outs[3], "the viewed mask changed the output");
    let _ = std::fs::remove_dir_all(&cache);
}
