//! GPU sparse convs against their dense member on real DynConv masks; with `--avit`, A-ViT's
//! token ops (attention, qkv and proj) token-sparse against dense (common/avit_attention.rs).
//!
//!     cargo build --release -p dynaspa-backends --example gpu_sparse_bench
//!     target/release/examples/gpu_sparse_bench --backend cuda [--device SEL] [--json out.jsonl]
//!         [--masks models/masks/dynconv_full_d30.dsm] [--samples 50] [--runs 10] [--batches 1,2,4]
//!         [--only conv3x3] [--densities 0.1,0.3,0.5,1.0] [--dump-masks DIR] [--knobs N | --schedules LIST]
//!         [--fused-finish on|off|both] [--cudnn auto|off|force] [--jobs N]
//!     target/release/examples/gpu_sparse_bench --backend cuda --avit [--only deit_s|small] [...]
//!
//! The binary embeds every kernel; on the GPU host it needs only the driver and the mask file
//! (`--masks`, default `models/masks/dynconv_full_d30.dsm` under the working directory).
//! `--backend` is cuda, opencl (`--device N`, `PLATFORM:DEVICE` or a name part) or wgpu.
//!
//! Ops: conv3x3 s1 40x40 256->256, conv1x1 40x40 256->256, conv3x3 s2 80x80->40x40 128->256,
//! dw3x3 40x40 256; bias + ReLU fused, zero fill. Masks: DynConv layer1 block masks resampled
//! to 40x40 and grown or shrunk to each density by thresholding their signed distance to the
//! mask border (as sparse_ops_bench does), one frame per image; density 1.0 is all ones.
//! Per op, batch and density: every PolyKernel member (dense and each granularity), µs per run
//! as the median of `--samples` samples of `--runs` launches bracketed by a queue finish (the
//! finish is shared by the runs), after warm-up; inputs random non-zero. `overhead` is one
//! frame's dispatch (bitmask kernel, counts readback, selection) from an idle queue, median of
//! `--samples`. Then, for the fastest member: its time alone and with each frame's dispatch in
//! front of it, frames back to back, under lagged counts (the default: the counts copied to the
//! host behind the work, selection from the last frame's) and exact ones (a readback per frame);
//! the differences are what dispatch costs a frame in steady state. The table prints the speedup
//! of the best sparse member over the dense one and what the dense member runs (ours, or cuDNN
//! where the CUDA backend chose it: `--cudnn off|force` for our kernel or cuDNN's alone); the JSON lines hold
//! every number. `--knobs N` also times, for the GEMM convs, larger register tiles and N random
//! valid GEMM schedules (1x1 DISTiles) as members of profiles, as a tuned profile would hold
//! them; the fastest member overall, default or sampled, is the one timed with dispatch.
//! `--schedules m64n64k16_w4x4_s4,...` times those GEMM schedules instead of the sample (a few
//! members alone, e.g. under a profiler).
//! `--jobs N` builds the sampled executables on N threads first (default: every core on CUDA,
//! one elsewhere), so their kernels compile in parallel.
//! `--fused-finish` picks how members that split the reduction finish it: in the GEMM's last
//! work-group (`on`), in a second launch (`off`), or `both`, one after the other on the same
//! inputs and masks, the rows' op names then ending in `+fused` / `+split` (without the flag:
//! the backend's default). JSON lines say which in `fused_finish`.

#[path = "common/avit_attention.rs"]
mod avit_attention;
#[path = "common/knob_sample.rs"]
mod knob_sample;
#[path = "common/mask_shaping.rs"]
mod mask_shaping;

use dynaspa_backends::gpu::{CountsSync, GpuDevice, GpuExecutable, GpuOptions, SparseConvOverrides, VendorPolicy};
use dynaspa_backends::{ForceMember, SparseConfig};
use dynaspa_runtime::graph::{Activation, AutoPad, Conv, FillPolicy, Graph, MaskKind, MaskSource, Node, Op, SparseSpec, Value, Window};
use dynaspa_runtime::profile::Profile;
use dynaspa_runtime::sparsity::{BitMask, Granularity, MaskDataset};
use dynaspa_runtime::{DType, Result, Tensor};
use mask_shaping::{at_density, resample};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

struct Args {
    backend: String,
    device: Option<String>,
    json: Option<String>,
    masks: String,
    samples: usize,
    runs: usize,
    batches: Vec<usize>,
    densities: Vec<f64>,
    only: Option<String>,
    /// Where to write each (density, batch)'s masks as `d{density}_b{batch}.npy` (uint8
    /// `[batch, h, w]`), so baselines run elsewhere (`benches/ops.py torch`) use the same ones.
    dump_masks: Option<String>,
    /// A-ViT's token ops instead of the convs.
    avit: bool,
    /// GEMM schedules beyond the defaults to time per GEMM conv (hand-picked tiles and this
    /// many random valid ones), as a tuned profile would hold them.
    knobs: usize,
    /// These GEMM schedules instead of `knobs`' sample (`m64n64k16_w4x4_s4,...`).
    schedules: Option<String>,
    /// How split-K members finish, one executable per entry (`None`: the backend's default).
    fused_finish: Vec<Option<bool>>,
    /// How dense convs use cuDNN (`None`: timed against our kernels).
    cudnn: Option<VendorPolicy>,
    /// Threads that build the sampled executables once first, so their kernels compile in
    /// parallel (`warm`).
    jobs: usize,
}

fn usage(msg: &str) -> ! {
    eprintln!("gpu_sparse_bench: {msg}");
    eprintln!("usage: gpu_sparse_bench --backend cuda|opencl|wgpu [--device SEL] [--json PATH] [--masks FILE.dsm] [--samples N] [--runs N] [--batches 1,2,4] [--densities 0.1,0.3] [--only NAME] [--dump-masks DIR] [--knobs N | --schedules m64n64k16_w4x4_s4,...] [--fused-finish on|off|both] [--cudnn auto|off|force] [--avit]");
    std::process::exit(2)
}

fn parse_list<T: std::str::FromStr>(v: &str, what: &str) -> Vec<T> {
    v.split(',').map(|s| s.trim().parse().unwrap_or_else(|_| usage(&format!("bad {what} '{s}'")))).collect()
}

fn parse_args() -> Args {
    let mut a = Args {
        backend: String::new(),
        device: None,
        json: None,
        masks: "models/masks/dynconv_full_d30.dsm".into(),
        samples: 50,
        runs: 10,
        batches: vec![1, 2, 4],
        densities: vec![0.1, 0.3, 0.5, 1.0],
        only: None,
        dump_masks: None,
        avit: false,
        knobs: 0,
        schedules: None,
        fused_finish: vec![None],
        cudnn: None,
        jobs: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| usage(&format!("{k} needs a value")));
        match k.as_str() {
            "--backend" => a.backend = val(),
            "--device" => a.device = Some(val()),
            "--json" => a.json = Some(val()),
            "--masks" => a.masks = val(),
            "--samples" => a.samples = parse_list::<usize>(&val(), "--samples")[0].max(1),
            "--runs" => a.runs = parse_list::<usize>(&val(), "--runs")[0].max(1),
            "--batches" => a.batches = parse_list(&val(), "batch"),
            "--densities" => a.densities = parse_list(&val(), "density"),
            "--only" => a.only = Some(val()),
            "--dump-masks" => a.dump_masks = Some(val()),
            "--avit" => a.avit = true,
            "--knobs" => a.knobs = parse_list::<usize>(&val(), "--knobs")[0],
            "--schedules" => a.schedules = Some(val()),
            "--jobs" => a.jobs = parse_list::<usize>(&val(), "--jobs")[0],
            "--fused-finish" => {
                a.fused_finish = match val().as_str() {
                    "on" => vec![Some(true)],
                    "off" => vec![Some(false)],
                    "both" => vec![Some(false), Some(true)],
                    v => usage(&format!("--fused-finish takes on, off or both, not '{v}'")),
                }
            }
            "--cudnn" => {
                a.cudnn = match val().as_str() {
                    "auto" => None,
                    "off" => Some(VendorPolicy::Never),
                    "force" => Some(VendorPolicy::Always),
                    v => usage(&format!("--cudnn takes auto, off or force, not '{v}'")),
                }
            }
            "-h" | "--help" => usage("help"),
            _ => usage(&format!("unknown argument '{k}'")),
        }
    }
    if a.backend.is_empty() {
        usage("--backend is required");
    }
    if a.jobs == 0 {
        // NVRTC compiles on any thread; OpenCL and wgpu drivers are left to one.
        a.jobs = if a.backend == "cuda" { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { 1 };
    }
    a
}

/// Builds the executables of `profiles` on `jobs` threads and drops them, so the device's
/// kernel cache holds their kernels when the bench builds them again one by one: a hundred
/// sampled members took minutes to compile on one thread of a fresh GPU host, the bench's
/// longest step. A build that fails here fails again, and is reported, in the bench's own.
fn warm<D: GpuDevice + 'static>(dev: &Arc<D>, g: &Graph, opts: &GpuOptions, profiles: &[(Profile, Vec<String>)], jobs: usize) {
    if jobs < 2 || profiles.len() < 2 {
        return;
    }
    let t0 = std::time::Instant::now();
    let next = AtomicUsize::new(0);
    let backend = dev.info().backend.clone();
    std::thread::scope(|s| {
        for _ in 0..jobs.min(profiles.len()) {
            s.spawn(|| {
                while let Some((p, _)) = profiles.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let sparse = SparseConfig { cache_dir: None, force: None, profile: Some(Arc::new(p.clone())) };
                    let _ = GpuExecutable::compile(dev.clone(), &backend, g, &GpuOptions { sparse, ..opts.clone() });
                }
            });
        }
    });
    eprintln!("built {} executables on {} threads in {:.1} s", profiles.len(), jobs.min(profiles.len()), t0.elapsed().as_secs_f64());
}

struct Case {
    name: &'static str,
    c: usize,
    hin: usize,
    m: usize,
    k: usize,
    s: usize,
    group: usize,
}

const CASES: [Case; 4] = [
    Case { name: "conv3x3", c: 256, hin: 40, m: 256, k: 3, s: 1, group: 1 },
    Case { name: "conv1x1", c: 256, hin: 40, m: 256, k: 1, s: 1, group: 1 },
    Case { name: "conv3x3s2", c: 128, hin: 80, m: 256, k: 3, s: 2, group: 1 },
    Case { name: "dw3x3", c: 256, hin: 40, m: 256, k: 3, s: 1, group: 256 },
];

struct Rng(u64);
impl Rng {
    fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| {
                self.0 ^= self.0 << 13;
                self.0 ^= self.0 >> 7;
                self.0 ^= self.0 << 17;
                // Non-zero: [-1, -2^-9] u [2^-9, 1).
                let v = (self.0 >> 40) as f32 / (1u64 << 23) as f32 - 1.0;
                if v.abs() < 1.0 / 512.0 {
                    0.5
                } else {
                    v
                }
            })
            .collect()
    }
}

fn value(g: &mut Graph, name: &str, shape: Vec<usize>, constant: Option<Tensor>) -> usize {
    g.values.push(Value { name: name.into(), dtype: DType::F32, shape, constant: constant.map(Arc::new) });
    g.values.len() - 1
}

/// `Relu(Conv(x) + b)` computed where `m` is 1, zeros elsewhere.
fn graph(cc: &Case, n: usize, rng: &mut Rng) -> Result<Graph> {
    let ho = (cc.hin + 2 * (cc.k / 2) - cc.k) / cc.s + 1;
    let mut g = Graph { name: cc.name.into(), opset: 17, ..Default::default() };
    let x = value(&mut g, "x", vec![n, cc.c, cc.hin, cc.hin], None);
    let cin_g = cc.c / cc.group;
    let w = value(
        &mut g,
        "w",
        vec![cc.m, cin_g, cc.k, cc.k],
        Some(Tensor::from_f32(vec![cc.m, cin_g, cc.k, cc.k], rng.vec(cc.m * cin_g * cc.k * cc.k))?),
    );
    let b = value(&mut g, "b", vec![cc.m], Some(Tensor::from_f32(vec![cc.m], rng.vec(cc.m))?));
    let m = value(&mut g, "m", vec![n, 1, ho, ho], None);
    let y = value(&mut g, "y", vec![n, cc.m, ho, ho], None);
    let window = Window {
        kernel_shape: vec![cc.k, cc.k],
        strides: vec![cc.s, cc.s],
        pads: vec![cc.k / 2; 4],
        dilations: vec![1, 1],
        auto_pad: AutoPad::NotSet,
    };
    let op = Op::Conv(Conv { window, group: cc.group, fused_add: false, activation: Some(Activation::Relu) });
    let sparse = SparseSpec {
        mask: m,
        kind: MaskKind::Spatial,
        source: MaskSource::ModelInput { name: "m".into() },
        dilation: [0, 0],
        fill: FillPolicy::Zero,
        fused_mul: true,
    };
    g.nodes.push(Node { name: cc.name.into(), op, inputs: vec![Some(x), Some(w), Some(b)], outputs: vec![y], sparse: Some(sparse) });
    g.inputs = vec![x, m];
    g.outputs = vec![y];
    Ok(g)
}

/// `count` 40x40 masks at `density` from DynConv's layer1 block masks.
fn masks(ds: &MaskDataset, density: f64, h: usize, count: usize) -> Vec<BitMask> {
    if density >= 1.0 {
        return vec![BitMask::ones(h, h); count];
    }
    let maps: Vec<usize> = (0..ds.maps().len()).filter(|&i| ds.maps()[i].name.starts_with("mask_layer1_")).collect();
    let mut out = Vec::new();
    'frames: for f in 0..ds.n_frames() {
        for &mi in &maps {
            if let Ok(m) = ds.map_mask(f, mi) {
                out.push(at_density(&resample(m, h, h), density));
                if out.len() == count {
                    break 'frames;
                }
            }
        }
    }
    while out.len() < count {
        out.push(out.first().cloned().unwrap_or_else(|| BitMask::ones(h, h)));
    }
    out
}

fn rel_l2(a: &[f32], b: &[f32]) -> f64 {
    let (mut d, mut n) = (0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        d += (*x as f64 - *y as f64).powi(2);
        n += (*y as f64).powi(2);
    }
    if a.len() != b.len() {
        f64::INFINITY
    } else {
        (d / n.max(1e-30)).sqrt()
    }
}

/// Members timed as dispatched (lagged counts) for the steady-state analysis: the fastest this
/// many alone.
const STEADY_OF: usize = 3;

/// The executable holding a timed member: `home` 0 the default one, i + 1 `tuned[i]`'s.
fn holder<'a, D: GpuDevice>(
    exe: &'a mut GpuExecutable<D>,
    tuned: &'a mut [(GpuExecutable<D>, Vec<String>)],
    home: usize,
) -> &'a mut GpuExecutable<D> {
    match home {
        0 => exe,
        h => &mut tuned[h - 1].0,
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn bench<D: GpuDevice + 'static>(dev: Arc<D>, a: &Args) -> Result<()> {
    if a.avit {
        let mut json = match &a.json {
            Some(p) => Some(std::fs::File::create(p).map_err(|e| dynaspa_runtime::Error::Other(format!("--json {p}: {e}")))?),
            None => None,
        };
        let mut set = avit_attention::Settings {
            samples: a.samples,
            runs: a.runs,
            batches: &a.batches,
            densities: &a.densities,
            only: a.only.as_deref(),
            json: json.as_mut(),
            dump_masks: a.dump_masks.as_deref(),
        };
        return avit_attention::bench(dev, &mut set);
    }
    let ds = MaskDataset::open(&a.masks).map_err(|e| dynaspa_runtime::Error::Other(format!("masks '{}': {e}", a.masks)))?;
    let mut json = match &a.json {
        Some(p) => Some(std::fs::File::create(p).map_err(|e| dynaspa_runtime::Error::Other(format!("--json {p}: {e}")))?),
        None => None,
    };
    let info = dev.info().clone();
    println!("device: {} ({}, {}), samples {} x {} runs", info.name, info.backend, info.driver, a.samples, a.runs);
    println!(
        "{:<10} {:>5} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>8}  dense member",
        "op", "batch", "density", "dense", "1x1", "2x8", "4x4", "8x8", "overhead", "speedup"
    );
    println!("  (then: fastest member, its µs alone, and what lagged / exact dispatch add to it per frame back to back)");
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    // Forced to one member, the executable skips calibration; every member is timed directly.
    let base = GpuOptions {
        poison: false,
        sparse: SparseConfig { cache_dir: None, force: Some(ForceMember::Dense), profile: None },
        counts: CountsSync::Lagged,
        step_times: false,
        sparse_conv: SparseConvOverrides::default(),
        // Whole frames are timed both ways (`time_frames`); the rest times launches itself.
        frame_graphs: None,
        // The benched graphs have no ConvTranspose.
        convt_gemm: None,
        vendor_convs: a.cudnn,
        precision: dynaspa_backends::Precision::F32,
    };
    for cc in CASES.iter().filter(|c| a.only.as_deref().is_none_or(|o| c.name.contains(o))) {
        for &n in &a.batches {
            let g = graph(cc, n, &mut rng)?;
            let ho = g.values[g.inputs[1]].shape[2];
            let x = Tensor::from_f32(g.values[g.inputs[0]].shape.clone(), rng.vec(g.values[g.inputs[0]].shape.iter().product()))?;
            // Each finish on the same graph, input and masks.
            for &fused_finish in &a.fused_finish {
                let opts = GpuOptions { sparse_conv: SparseConvOverrides { fused_finish, ..base.sparse_conv }, ..base.clone() };
                let mut exe = GpuExecutable::compile(dev.clone(), &info.backend, &g, &opts)?;
                let fused = exe.fused_finish();
                let label = if a.fused_finish.len() > 1 {
                    format!("{}{}", cc.name, if fused { "+fused" } else { "+split" })
                } else {
                    cc.name.to_string()
                };
                // Our kernel, or a vendor library's conv where the backend chose it (cuDNN on CUDA;
                // `--cudnn`).
                let dense_impl = exe.sparse_ops().first().and_then(|o| o.dense_vendor.clone()).unwrap_or_else(|| "ours".into());
                // Sampled schedules, a few per executable (a PolyKernel holds at most 8 members).
                let mut tuned: Vec<(GpuExecutable<D>, Vec<String>)> = Vec::new();
                if (a.knobs > 0 || a.schedules.is_some()) && cc.group == 1 {
                    let ks = match &a.schedules {
                        Some(list) => knob_sample::parse(&info, list)?,
                        None => knob_sample::sample(&info, a.knobs, 0x5eed ^ n as u64),
                    };
                    let profiles = knob_sample::profiles(&info, &g, cc.name, &ks)?;
                    warm(&dev, &g, &opts, &profiles, a.jobs);
                    for (p, names) in profiles {
                        let o = GpuOptions {
                            sparse: SparseConfig { cache_dir: None, force: None, profile: Some(Arc::new(p)) },
                            ..opts.clone()
                        };
                        let te = GpuExecutable::compile(dev.clone(), &info.backend, &g, &o)?;
                        // A member the compiled kernel cannot run (registers) sends the op back to
                        // calibration: that group is reported and left out.
                        if te.sparse_ops().first().is_some_and(|op| op.from_profile) {
                            tuned.push((te, names));
                        } else {
                            eprintln!("{label} b{n}: a schedule of {names:?} cannot run here; group left out (RUST_LOG=warn says which)");
                        }
                    }
                    eprintln!("{label} b{n}: {} sampled schedules in {} executables", ks.len(), tuned.len());
                }
                for &d in &a.densities {
                    let ms = masks(&ds, d, ho, n);
                    let mv: Vec<f32> = ms.iter().flat_map(|m| m.to_bools().into_iter().map(|b| b as u8 as f32)).collect();
                    let real: f64 = ms.iter().map(BitMask::density).sum::<f64>() / n as f64;
                    if let Some(dir) = &a.dump_masks {
                        write_npy_u8(&format!("{dir}/d{d:.2}_b{n}.npy"), &[n, ho, ho], &mv)?;
                    }
                    let mt = Tensor::from_f32(vec![n, 1, ho, ho], mv)?;
                    use dynaspa_runtime::backend::Executable;
                    // Forced dense: the reference every sampled schedule's output is checked against.
                    let reference = exe.run(&[x.clone(), mt.clone()])?.remove(0).as_f32()?.to_vec();
                    let members = exe.sparse_ops()[0].members.clone();
                    let mut times = Vec::new();
                    let mut wrong = 0usize;
                    for name in &members {
                        exe.time_member(0, name, 3, a.runs)?;
                        // Checked like the sampled schedules below (the finish of split members
                        // hands partial sums between work-groups), but timed anyway: the table
                        // needs every default member.
                        let err = rel_l2(exe.read_output(0)?.as_f32()?, &reference);
                        if !(err <= 1e-4) {
                            eprintln!("WRONG {label} b{n} d{d}: member '{name}': relative L2 {err:.2e} against dense");
                            wrong += 1;
                        }
                        let mut t = exe.time_member(0, name, a.samples, a.runs)?;
                        times.push((name.clone(), median(&mut t)));
                    }
                    // Which executable holds each timed member: 0 the default, i + 1 tuned[i].
                    let mut home: Vec<usize> = vec![0; times.len()];
                    for (i, (te, names)) in tuned.iter_mut().enumerate() {
                        te.run(&[x.clone(), mt.clone()])?;
                        let have = te.sparse_ops()[0].members.clone();
                        for name in names.iter() {
                            if !have.contains(name) {
                                return Err(dynaspa_runtime::Error::Other(format!(
                                    "{}: sampled schedule '{name}' was not built (members: {have:?})",
                                    cc.name
                                )));
                            }
                            te.time_member(0, name, 3, a.runs)?;
                            let err = rel_l2(te.read_output(0)?.as_f32()?, &reference);
                            if !(err <= 1e-4) {
                                // Reported and left out, so one bad variant does not lose the run.
                                eprintln!(
                                    "WRONG {label} b{n} d{d}: sampled schedule '{name}': relative L2 {err:.2e} against dense; not timed"
                                );
                                wrong += 1;
                                continue;
                            }
                            let mut t = te.time_member(0, name, a.samples, a.runs)?;
                            times.push((name.clone(), median(&mut t)));
                            home.push(i + 1);
                        }
                    }
                    if wrong > 0 {
                        println!("    {wrong} members or sampled schedules gave wrong outputs (see WRONG lines)");
                    }
                    let (mut ov, _) = exe.time_dispatch(0, a.samples)?;
                    let overhead = median(&mut ov);
                    let dense = times.iter().find(|t| t.0 == "dense").map_or(f64::NAN, |t| t.1);
                    let best = times.iter().filter(|t| t.0 != "dense").map(|t| t.1).fold(f64::INFINITY, f64::min);
                    // What dispatch adds to the member a tuned profile would ship, in steady
                    // state: member alone vs dispatch + member, alternating, same queue pattern.
                    // That member is the fastest as dispatched among the STEADY_OF fastest alone:
                    // the fastest alone may sit in an executable whose mask needs a bitmask
                    // launch each frame (the defaults', planned for four granularities), which
                    // one of 1x1 members alone does not (conv1x1 on an H200: 9.4 µs alone, 14.1
                    // lagged).
                    let mut by_alone: Vec<usize> = (0..times.len()).collect();
                    by_alone.sort_by(|&i, &j| times[i].1.total_cmp(&times[j].1));
                    let mut at = by_alone.first().copied().unwrap_or(0);
                    if by_alone.len() > 1 {
                        // The candidates in alternation, five rounds, so a slow spell of the
                        // GPU does not pick one (one pass each picked members 2-4 µs slower
                        // dispatched than alone on an H200).
                        let cands: Vec<usize> = by_alone.iter().take(STEADY_OF).copied().collect();
                        let mut lagged_of: Vec<Vec<f64>> = vec![Vec::new(); cands.len()];
                        for _ in 0..5 {
                            for (c, &i) in cands.iter().enumerate() {
                                let e = holder(&mut exe, &mut tuned, home[i]);
                                lagged_of[c].extend(e.time_dispatched(
                                    0,
                                    &times[i].0,
                                    CountsSync::Lagged,
                                    a.samples.div_ceil(5),
                                    a.runs,
                                )?);
                            }
                        }
                        let mut best_lagged = f64::INFINITY;
                        for (c, l) in lagged_of.iter_mut().enumerate() {
                            let l = median(l);
                            if l < best_lagged {
                                (best_lagged, at) = (l, cands[c]);
                            }
                        }
                    }
                    let pick = times.get(at).map(|t| t.0.clone()).unwrap_or_default();
                    let pe = holder(&mut exe, &mut tuned, home.get(at).copied().unwrap_or(0));
                    let (mut alone, mut empty, mut masked, mut lagged, mut exact) =
                        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
                    let mut queued = Vec::new();
                    // Whole frames of the op's executable (zero fill, mask launch, member), launch
                    // by launch and from one recorded graph per frame.
                    let (mut frame, mut frame_graph) = (Vec::new(), Vec::new());
                    for _ in 0..5 {
                        frame.extend(pe.time_frames(0, &pick, false, a.samples.div_ceil(5), a.runs)?);
                        frame_graph.extend(pe.time_frames(0, &pick, true, a.samples.div_ceil(5), a.runs)?);
                        alone.extend(pe.time_member(0, &pick, a.samples.div_ceil(5), a.runs)?);
                        empty.extend(pe.time_member_after_empty(0, &pick, a.samples.div_ceil(5), a.runs)?);
                        masked.extend(pe.time_member_after_mask(0, &pick, a.samples.div_ceil(5), a.runs)?);
                        for (all, host) in pe.time_dispatched_queueing(0, &pick, CountsSync::Lagged, a.samples.div_ceil(5), a.runs)? {
                            lagged.push(all);
                            queued.push(host);
                        }
                        exact.extend(pe.time_dispatched(0, &pick, CountsSync::Exact, a.samples.div_ceil(5), a.runs)?);
                    }
                    let (alone, empty, masked, lagged, exact) =
                        (median(&mut alone), median(&mut empty), median(&mut masked), median(&mut lagged), median(&mut exact));
                    let (frame, frame_graph) = (median(&mut frame), median(&mut frame_graph));
                    let queued = median(&mut queued);
                    let graphs = pe.frame_graph_stats();
                    // Where the member's time goes: each of its launches alone (GEMM, split-K finish).
                    let parts = pe.time_member_launches(0, &pick, a.samples, a.runs)?;
                    let cell =
                        |g: &str| times.iter().find(|t| t.0 == format!("tiles{g}")).map_or("-".to_string(), |t| format!("{:.1}", t.1));
                    println!(
                        "{:<10} {:>5} {:>7.3} {:>10.1} {:>10} {:>10} {:>10} {:>10} {:>9.1} {:>7.2}x  {dense_impl}\n    {:>8} {:>8.1} {:>9.1} {:>9.1}",
                        label, n, real, dense, cell("1x1"), cell("2x8"), cell("4x4"), cell("8x8"), overhead, dense / best,
                        pick, alone, lagged - alone, exact - alone
                    );
                    println!("    launches alone (µs): {}", parts.iter().map(|t| format!("{t:.1}")).collect::<Vec<_>>().join(" + "));
                    println!(
                        "    whole frame (zero fill, mask, member): {frame:.1} launch by launch, {frame_graph:.1} from a recorded graph ({} frames replayed, {} refused)",
                        graphs.replayed, graphs.refused
                    );
                    println!(
                        "    of the lagged dispatch: the mask launch {:.1}, the counts copy and host {:.1}; an empty launch in front costs {:.1}; the host queued each frame in {queued:.1}",
                        masked - alone,
                        lagged - masked,
                        empty - alone
                    );
                    if let Some(f) = json.as_mut() {
                        for (name, us) in &times {
                            let gran = members_gran(name);
                            let tiles = exe.last_tiles(0, gran);
                            let line = serde_json::json!({
                                "device": info.name, "backend": info.backend, "driver": info.driver,
                                "op": cc.name, "batch": n, "density_target": d, "density": real,
                                "member": name, "tiles": tiles, "us": us, "overhead_us": overhead,
                                "steady_member": pick, "steady_alone_us": alone, "steady_launches_us": parts, "steady_lagged_us": lagged, "steady_queued_us": queued, "steady_after_mask_us": masked, "steady_exact_us": exact, "frame_us": frame, "frame_graph_us": frame_graph, "frame_graphs_replayed": graphs.replayed,
                                "samples": a.samples, "runs": a.runs, "dense_impl": dense_impl, "fused_finish": fused,
                            });
                            writeln!(f, "{line}").map_err(|e| dynaspa_runtime::Error::Other(format!("--json: {e}")))?;
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// `values` (0.0 / 1.0) as a uint8 `.npy` of `shape`.
fn write_npy_u8(path: &str, shape: &[usize], values: &[f32]) -> Result<()> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let mut header = format!("{{'descr': '|u1', 'fortran_order': False, 'shape': ({},), }}", dims.join(", "));
    // Magic (6) + version (2) + length (2) + header + newline, padded to a multiple of 64.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend(values.iter().map(|&v| (v != 0.0) as u8));
    std::fs::write(path, bytes).map_err(|e| dynaspa_runtime::Error::Other(format!("--dump-masks {path}: {e}")))
}

fn members_gran(name: &str) -> Option<Granularity> {
    let g = name.strip_prefix("tiles")?;
    let (h, w) = g.split('_').next()?.split_once('x')?;
    Some(Granularity::new(h.parse().ok()?, w.parse().ok()?))
}

fn main() {
    // RUST_LOG=dynaspa_backends::cuda=debug shows cuDNN's searches, for one.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    let a = parse_args();
    // The CLI's kernel cache: a second run skips compiling, and the programs of every sampled
    // schedule stay on disk for inspection (NVIDIA OpenCL's are PTX).
    let cache = dynaspa_backends::cache_dir::cache_root();
    let r = match a.backend.as_str() {
        #[cfg(feature = "cuda")]
        "cuda" => dynaspa_backends::cuda::shared_device(a.device.as_deref(), cache.as_deref()).and_then(|d| bench(d, &a)),
        #[cfg(feature = "opencl")]
        "opencl" => dynaspa_backends::opencl::shared_device(a.device.as_deref(), cache.as_deref()).and_then(|d| bench(d, &a)),
        #[cfg(feature = "wgpu")]
        "wgpu" => dynaspa_backends::wgpu::shared_device(a.device.as_deref()).and_then(|d| bench(d, &a)),
        other => usage(&format!("backend '{other}' is not one of this build's GPU backends")),
    };
    if let Err(e) = r {
        eprintln!("gpu_sparse_bench: {e}");
        std::process::exit(1);
    }
}
