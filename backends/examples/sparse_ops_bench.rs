//! Sparse CPU kernels against the dense ones on real DynConv / A-ViT masks.
//!
//!     cargo run --release -p dynaspa-backends --example sparse_ops_bench
//!
//! For each op and mask density: the dense kernel (`eval_op`, what the runtime runs today) and
//! the sparse kernel at several granularities, interleaved round by round, medians of
//! `BENCH_ROUNDS` (default 21) rounds after warm-up, on a rayon pool of `BENCH_THREADS`
//! (default 2) threads, random non-zero inputs, bias + ReLU epilogue on both sides, L1/L2
//! evicted before every timed call (`evict`). "pos" is the positions schedule
//! (`run_positions`). Then the phase split of the best schedule and the NCHW-vs-NHWC experiment. BENCH_ONLY=text
//! runs the cases whose name contains it, BENCH_DENSITIES=0.1,1.0 other conv densities (masks
//! grown or shrunk from d30 where no dataset exists); BENCH_THREADS=1 BENCH_CPU=1 times on-CPU time of the
//! one worker, which other processes on a shared box barely disturb.
//!
//! Masks (40x40 outputs): the 56x56 block masks of DynConv's layer1 (`mask_layer1_*`),
//! nearest-resampled to 40x40, frames whose density is nearest the target. Density 0.3 comes
//! from the committed `models/masks/dynconv_full_d30.dsm`; 0.1 and 0.5 from datasets
//! regenerated with `python3 models/dynconv.py --density 0.1 --sizes full --out /tmp/d10` (and
//! 0.5 into /tmp/d50), paths overridable with SPARSE_MASKS_D10 / SPARSE_MASKS_D50. Where a file
//! is missing, the d30 masks are grown or shrunk to the density by thresholding their signed
//! distance to the mask boundary (printed as the source). The token linear uses A-ViT's
//! per-block token masks from `models/masks/avit_full_d30.dsm` (class token always active).

#[path = "common/mask_shaping.rs"]
mod mask_shaping;

use dynaspa_backends::cpu::eval_op;
use dynaspa_backends::cpu::sparse::{NhwcConv, NhwcDepthwise, NhwcGatherProbe, PhaseTimes, SparseConv, SparseLinear};
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::graph::{Activation, AutoPad, Conv, Op, Window};
use dynaspa_runtime::sparsity::tiles::aligned_tiles_naive;
use dynaspa_runtime::sparsity::{BitMask, Granularity, MaskDataset, TileSet};
use dynaspa_runtime::{DType, Tensor};
use mask_shaping::{at_density, resample};
use std::time::Instant;

struct Rng(u64);
impl Rng {
    fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| {
                self.0 ^= self.0 << 13;
                self.0 ^= self.0 >> 7;
                self.0 ^= self.0 << 17;
                (self.0 >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect()
    }
    fn shuffle(&mut self, v: &mut [usize]) {
        for i in (1..v.len()).rev() {
            let j = (self.vec(1)[0].abs() * (i + 1) as f32) as usize;
            v.swap(i, j.min(i));
        }
    }
    fn tensor(&mut self, shape: &[usize]) -> Tensor {
        Tensor::from_f32(shape.to_vec(), self.vec(shape.iter().product())).unwrap()
    }
}

fn cpu_mode() -> bool {
    thread_local!(static CPU: bool = std::env::var("BENCH_CPU").is_ok());
    CPU.with(|c| *c)
}

/// On-CPU nanoseconds of the calling thread.
fn thread_cpu_nanos() -> u64 {
    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }
    extern "C" {
        fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
    }
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: plain libc call writing a properly laid out timespec (3 = CLOCK_THREAD_CPUTIME_ID).
    unsafe { clock_gettime(3, &mut ts) };
    ts.sec as u64 * 1_000_000_000 + ts.nsec as u64
}

/// Seconds on the clock the bench reads: wall time, or with BENCH_CPU=1 (and BENCH_THREADS=1)
/// the on-CPU time of the calling thread, which other processes on the box do not inflate.
fn now() -> f64 {
    if cpu_mode() {
        return thread_cpu_nanos() as f64 * 1e-9;
    }
    thread_local!(static T0: Instant = Instant::now());
    T0.with(|t| t.elapsed().as_secs_f64())
}

/// Evicts every worker's L1 and L2 (writes 4 MiB per thread, 2x the L2), so each timed call
/// starts like an op inside a network, with its weights and inputs in L3 at best rather than
/// left warm by the call before (which otherwise favours whichever variant runs second).
/// BENCH_WARM=1 skips it.
fn evict() {
    thread_local!(static JUNK: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0u8; 4 << 20]));
    if std::env::var("BENCH_WARM").is_ok() {
        return;
    }
    rayon::broadcast(|_| {
        JUNK.with(|j| {
            for v in j.borrow_mut().iter_mut().step_by(64) {
                *v = v.wrapping_add(1);
            }
        })
    });
}

/// Seconds `f` takes, caches evicted first.
fn timed(f: impl FnOnce()) -> f64 {
    evict();
    let t0 = now();
    f();
    now() - t0
}

fn phase_times() -> PhaseTimes {
    if cpu_mode() {
        PhaseTimes::with_clock(thread_cpu_nanos)
    } else {
        PhaseTimes::default()
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// `count` masks of `h` x `w` at about `density` and where they came from.
fn conv_masks(density: f64, h: usize, w: usize, count: usize) -> (Vec<BitMask>, String) {
    let tag = (density * 100.0).round() as usize;
    let var = format!("SPARSE_MASKS_D{tag}");
    let path = std::env::var(&var).unwrap_or_else(|_| {
        if tag == 30 {
            "models/masks/dynconv_full_d30.dsm".into()
        } else {
            format!("/tmp/d{tag}/masks/dynconv_full_d{tag}.dsm")
        }
    });
    let (ds, grown) = match MaskDataset::open(&path) {
        Ok(ds) => (ds, false),
        Err(_) => (MaskDataset::open("models/masks/dynconv_full_d30.dsm").expect("committed d30 masks"), true),
    };
    let maps: Vec<usize> = (0..ds.maps().len()).filter(|&i| ds.maps()[i].name.starts_with("mask_layer1_")).collect();
    let mut all = Vec::new();
    for f in 0..ds.n_frames() {
        for &mi in &maps {
            let m = resample(ds.map_mask(f, mi).unwrap(), h, w);
            let m = if grown { at_density(&m, density) } else { m };
            all.push(m);
        }
    }
    all.sort_by(|a, b| (a.density() - density).abs().total_cmp(&(b.density() - density).abs()));
    all.truncate(count);
    let src = if grown { format!("d30 grown/shrunk ({path} missing)") } else { path.rsplit('/').next().unwrap_or(&path).to_string() };
    (all, src)
}

fn conv_attrs(k: usize, s: usize, group: usize) -> Conv {
    Conv {
        window: Window {
            kernel_shape: vec![k, k],
            strides: vec![s, s],
            pads: vec![k / 2; 4],
            dilations: vec![1, 1],
            auto_pad: AutoPad::NotSet,
        },
        group,
        fused_add: false,
        activation: Some(Activation::Relu),
    }
}

struct ConvCase {
    name: &'static str,
    c: usize,
    hin: usize,
    m: usize,
    k: usize,
    s: usize,
    group: usize,
}

const GRANS: [(u16, u16); 7] = [(1, 1), (2, 8), (4, 4), (4, 8), (8, 8), (1, 16), (8, 16)];

fn bench_conv(cc: &ConvCase, densities: &[f64], rounds: usize, rng: &mut Rng, nhwc_rows: &mut Vec<String>) {
    let attrs = conv_attrs(cc.k, cc.s, cc.group);
    let ho = (cc.hin + 2 * (cc.k / 2) - cc.k) / cc.s + 1;
    let x = rng.tensor(&[1, cc.c, cc.hin, cc.hin]);
    let w = rng.tensor(&[cc.m, cc.c / cc.group, cc.k, cc.k]);
    let b = rng.tensor(&[cc.m]);
    let spec = [TensorSpec { dtype: DType::F32, shape: vec![1, cc.m, ho, ho] }];
    let sc = SparseConv::new(&attrs, x.shape(), &w, Some(&b)).unwrap();
    let xd = x.as_f32().unwrap();
    let mut out = vec![0.0f32; sc.output_len()];
    let dense = || {
        let y = eval_op(&Op::Conv(attrs.clone()), &[Some(&x), Some(&w), Some(&b)], &spec).unwrap();
        std::hint::black_box(y);
    };
    for &density in densities {
        let (masks, src) = conv_masks(density, ho, ho, 8);
        let actual = masks.iter().map(|m| m.density()).sum::<f64>() / masks.len() as f64;
        let tiles: Vec<Vec<TileSet>> =
            GRANS.iter().map(|&(gh, gw)| masks.iter().map(|m| aligned_tiles_naive(m, Granularity::new(gh, gw))).collect()).collect();
        // Warm-up, then interleaved rounds: dense, then every granularity, cycling the frames.
        for _ in 0..3 {
            dense();
            for t in &tiles {
                sc.run(xd, &mut out, &t[0], &masks[0], None).unwrap();
            }
        }
        let (mut td, mut tf) = (Vec::new(), Vec::new());
        // Index 0: the positions schedule (`run_positions`); then one per granularity.
        let mut ts = vec![Vec::new(); GRANS.len() + 1];
        // The sparse kernel on an all-ones mask: how much of the speedup is the kernel itself.
        let full = BitMask::ones(ho, ho);
        // Whatever ran right after the dense call measured ~5-10% slower (even with the
        // eviction), so every round runs the variants in a fresh random order.
        let n_var = GRANS.len() + 3;
        let mut order: Vec<usize> = (0..n_var).collect();
        for r in 0..rounds {
            let f = r % masks.len();
            rng.shuffle(&mut order);
            for &v in &order {
                match v {
                    0 => td.push(timed(dense)),
                    1 => ts[0].push(timed(|| sc.run_positions(xd, &mut out, &masks[f], None).unwrap())),
                    v if v == n_var - 1 => tf.push(timed(|| sc.run_positions(xd, &mut out, &full, None).unwrap())),
                    v => {
                        let t = &tiles[v - 2][f];
                        ts[v - 1].push(timed(|| sc.run(xd, &mut out, t, &masks[f], None).unwrap()));
                    }
                }
            }
        }
        let (dm, fm) = (median(&mut td), median(&mut tf));
        let sm: Vec<f64> = ts.iter_mut().map(|v| median(v)).collect();
        let best_v = (0..sm.len()).min_by(|&a, &b| sm[a].total_cmp(&sm[b])).unwrap();
        // Positions and 1x1 tiles compute the same columns; phases are read through the tiles.
        let best = best_v.saturating_sub(1);
        let label = |v: usize| if v == 0 { "pos".to_string() } else { format!("{}x{}", GRANS[v - 1].0, GRANS[v - 1].1) };
        // Phase split of the best granularity (thread-summed times, as shares).
        let times = phase_times();
        for r in 0..rounds {
            let f = r % masks.len();
            evict();
            sc.run_timed(xd, &mut out, &tiles[best][f], &masks[f], None, Some(&times)).unwrap();
        }
        let s = times.secs();
        let tot: f64 = s.iter().sum();
        let pct = |v: f64| 100.0 * v / tot;
        let all: Vec<String> = sm.iter().enumerate().map(|(v, &t)| format!("{}:{:.2}", label(v), t * 1e3)).collect();
        let target = 0.6 / density;
        let speedup = dm / sm[best_v];
        println!(
            "| {} | {:.2} ({:.3}) | {} | {} | {:.2} | {:.2} | {:.2}x | {:.1}x{} | {:.2} ({:.2}x) | {:.0} / {:.0} / {:.0} / {:.0} | {} |",
            cc.name,
            density,
            actual,
            src,
            label(best_v),
            dm * 1e3,
            sm[best_v] * 1e3,
            speedup,
            target,
            if speedup >= target { "" } else { " MISSED" },
            fm * 1e3,
            fm / sm[best_v],
            pct(s[1]),
            pct(s[2]),
            pct(s[3]),
            pct(s[0]),
            all.join(" ")
        );
        if cc.group == 1 {
            nhwc_rows.push(nhwc_row(rng, cc, &sc, &attrs, &w, &b, &x, &masks, &tiles[best], density, rounds));
        } else {
            nhwc_rows.push(nhwc_dw_row(cc, &sc, &attrs, &w, &b, &x, &masks, &tiles[best], density, rounds));
        }
    }
}

/// The layout experiment at one density: the sparse conv on NCHW (as the runtime lays out
/// activations today) against the same conv on NHWC, interleaved, and the gather phase alone.
#[allow(clippy::too_many_arguments)]
fn nhwc_row(
    rng: &mut Rng,
    cc: &ConvCase,
    sc: &SparseConv,
    attrs: &Conv,
    w: &Tensor,
    b: &Tensor,
    x: &Tensor,
    masks: &[BitMask],
    tiles: &[TileSet],
    density: f64,
    rounds: usize,
) -> String {
    let xd = x.as_f32().unwrap();
    let probe = NhwcGatherProbe::new(sc).unwrap();
    let nc = NhwcConv::new(attrs, x.shape(), w, Some(b)).unwrap();
    let plane = cc.hin * cc.hin;
    let mut xh = vec![0.0f32; xd.len()];
    for ch in 0..cc.c {
        for p in 0..plane {
            xh[p * cc.c + ch] = xd[ch * plane + p];
        }
    }
    let mut o1 = vec![0.0f32; sc.output_len()];
    let mut o2 = vec![0.0f32; sc.output_len()];
    let mut t = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    let mut order = [0, 1, 2, 3];
    for r in 0..rounds + 3 {
        let f = r % masks.len();
        rng.shuffle(&mut order);
        for &v in &order {
            let d = match v {
                0 => timed(|| sc.run(xd, &mut o1, &tiles[f], &masks[f], None).unwrap()),
                1 => timed(|| nc.run_timed(&xh, &mut o2, &tiles[f], &masks[f], None).unwrap()),
                2 => timed(|| probe.nchw(xd, &tiles[f], &masks[f]).map(drop).unwrap()),
                _ => timed(|| probe.nhwc(&xh, &tiles[f], &masks[f]).map(drop).unwrap()),
            };
            if r >= 3 {
                t[v].push(d);
            }
        }
    }
    let [a, bq, g1, g2] = t.map(|mut v| median(&mut v));
    format!(
        "| {} | {:.2} | {:.2} | {:.2} | {:.2}x | {:.3} ({:.0}%) | {:.3} ({:.0}%) |",
        cc.name,
        density,
        a * 1e3,
        bq * 1e3,
        a / bq,
        g1 * 1e3,
        100.0 * g1 / a,
        g2 * 1e3,
        100.0 * g2 / bq,
    )
}

/// The layout experiment for the depthwise conv: NCHW (row blocks) against NHWC (per active
/// position, contiguous channel runs), interleaved. There is no separate gather phase in either.
#[allow(clippy::too_many_arguments)]
fn nhwc_dw_row(
    cc: &ConvCase,
    sc: &SparseConv,
    attrs: &Conv,
    w: &Tensor,
    b: &Tensor,
    x: &Tensor,
    masks: &[BitMask],
    tiles: &[TileSet],
    density: f64,
    rounds: usize,
) -> String {
    let xd = x.as_f32().unwrap();
    let nd = NhwcDepthwise::new(attrs, x.shape(), w, Some(b)).unwrap();
    let plane = cc.hin * cc.hin;
    let xh: Vec<f32> = (0..xd.len()).map(|i| xd[(i % cc.c) * plane + i / cc.c]).collect();
    let mut o1 = vec![0.0f32; sc.output_len()];
    let mut o2 = vec![0.0f32; sc.output_len()];
    let (mut a, mut bq) = (Vec::new(), Vec::new());
    for r in 0..rounds + 3 {
        let f = r % masks.len();
        let (t1, t2) = if r % 2 == 0 {
            let t1 = timed(|| sc.run(xd, &mut o1, &tiles[f], &masks[f], None).unwrap());
            (t1, timed(|| nd.run_timed(&xh, &mut o2, &tiles[f], &masks[f], None).unwrap()))
        } else {
            let t2 = timed(|| nd.run_timed(&xh, &mut o2, &tiles[f], &masks[f], None).unwrap());
            (timed(|| sc.run(xd, &mut o1, &tiles[f], &masks[f], None).unwrap()), t2)
        };
        if r >= 3 {
            a.push(t1);
            bq.push(t2);
        }
    }
    let (a, bq) = (median(&mut a), median(&mut bq));
    format!("| {} | {:.2} | {:.3} | {:.3} | {:.2}x | - | - |", cc.name, density, a * 1e3, bq * 1e3, a / bq)
}

fn bench_linear(rounds: usize, rng: &mut Rng) {
    let (t, k, n) = (197usize, 384usize, 1152usize);
    let x = rng.tensor(&[t, k]);
    let w = rng.tensor(&[k, n]);
    let b = rng.tensor(&[n]);
    let lin = SparseLinear::new(&w, Some(&b), None).unwrap();
    let spec = [TensorSpec { dtype: DType::F32, shape: vec![t, n] }];
    let dense = || std::hint::black_box(eval_op(&Op::MatMul, &[Some(&x), Some(&w)], &spec).unwrap());
    let ds = MaskDataset::open("models/masks/avit_full_d30.dsm").unwrap();
    let mut out = vec![0.0f32; t * n];
    for density in [0.1, 0.3, 0.5] {
        // The block whose token masks are nearest the density, 8 frames of it.
        let mi = (0..ds.maps().len())
            .min_by(|&a, &b| {
                let da = ds.map_mask(0, a).unwrap().density();
                let db = ds.map_mask(0, b).unwrap().density();
                (da - density).abs().total_cmp(&(db - density).abs())
            })
            .unwrap();
        let prefix = ds.maps()[mi].prefix_tokens as u32;
        let rows: Vec<Vec<u32>> = (0..8)
            .map(|f| {
                let m = ds.map_mask(f * 20, mi).unwrap();
                let grid = m.to_bools();
                (0..prefix).chain(grid.iter().enumerate().filter(|(_, &on)| on).map(|(i, _)| prefix + i as u32)).collect()
            })
            .collect();
        let actual = rows.iter().map(|r| r.len()).sum::<usize>() as f64 / (8 * t) as f64;
        for _ in 0..3 {
            dense();
            lin.run(x.as_f32().unwrap(), t, &mut out, &rows[0]).unwrap();
        }
        let (mut td, mut ts) = (Vec::new(), Vec::new());
        for r in 0..rounds {
            // Alternate which goes first (the call after a dense one measured slower).
            if r % 2 == 0 {
                td.push(timed(|| drop(dense())));
                ts.push(timed(|| lin.run(x.as_f32().unwrap(), t, &mut out, &rows[r % 8]).unwrap()));
            } else {
                ts.push(timed(|| lin.run(x.as_f32().unwrap(), t, &mut out, &rows[r % 8]).unwrap()));
                td.push(timed(|| drop(dense())));
            }
        }
        let times = phase_times();
        for f in 0..rounds {
            evict();
            lin.run_timed(x.as_f32().unwrap(), t, &mut out, &rows[f % 8], Some(&times)).unwrap();
        }
        let s = times.secs();
        let tot: f64 = s.iter().sum();
        let (dm, sm) = (median(&mut td), median(&mut ts));
        println!(
            "| linear {t}x{k}->{n} | {density:.2} ({actual:.3}) | {} | rows | {:.3} | {:.3} | {:.2}x | {:.1}x{} | - | {:.0} / {:.0} / {:.0} / - | |",
            ds.maps()[mi].name,
            dm * 1e3,
            sm * 1e3,
            dm / sm,
            0.6 / actual,
            if dm / sm >= 0.6 / actual { "" } else { " MISSED" },
            100.0 * s[1] / tot,
            100.0 * s[2] / tot,
            100.0 * s[3] / tot
        );
    }
}

fn main() {
    let threads = env_usize("BENCH_THREADS", 2);
    let rounds = env_usize("BENCH_ROUNDS", 21);
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let densities: Vec<f64> = std::env::var("BENCH_DENSITIES")
        .map(|v| v.split(',').filter_map(|d| d.trim().parse().ok()).collect())
        .unwrap_or_else(|_| vec![0.1, 0.3, 0.5]);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let clock = if std::env::var("BENCH_CPU").is_ok() { "thread CPU time" } else { "wall time" };
    println!("sparse_ops_bench: {threads} threads, median of {rounds} interleaved rounds, {clock}; ms per image");
    println!(
        "| op | density (actual) | masks | best | dense ms | sparse ms | speedup | target | sparse at density 1 ms (ratio) | gather / gemm / scatter / plan % | ms per schedule (pos = positions) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let cases = [
        ConvCase { name: "conv3x3 s1 40x40 256->256", c: 256, hin: 40, m: 256, k: 3, s: 1, group: 1 },
        ConvCase { name: "conv1x1 40x40 256->256", c: 256, hin: 40, m: 256, k: 1, s: 1, group: 1 },
        ConvCase { name: "conv3x3 s2 80x80->40x40 128->256", c: 128, hin: 80, m: 256, k: 3, s: 2, group: 1 },
        ConvCase { name: "dw3x3 s1 40x40 256", c: 256, hin: 40, m: 256, k: 3, s: 1, group: 256 },
        // The reduced DynConv's layer1 convs (18x24 there): few channels, a few µs of work,
        // where fixed per-call costs decide.
        ConvCase { name: "small conv3x3 s1 24x24 16->16", c: 16, hin: 24, m: 16, k: 3, s: 1, group: 1 },
        ConvCase { name: "small conv1x1 24x24 16->64", c: 16, hin: 24, m: 64, k: 1, s: 1, group: 1 },
    ];
    let mut nhwc = Vec::new();
    pool.install(|| {
        for cc in &cases {
            let small = cc.name.starts_with("small");
            if (only.is_empty() && !small) || (!only.is_empty() && cc.name.contains(only.as_str())) {
                bench_conv(cc, &densities, rounds, &mut rng, &mut nhwc);
            }
        }
        if only.is_empty() || "linear".contains(only.as_str()) {
            bench_linear(rounds, &mut rng);
        }
    });
    if !nhwc.is_empty() {
        println!("\nLayout: the sparse conv on NCHW vs NHWC activations (best NCHW granularity), and the gather phase alone (share of that layout's run)");
        println!("| op | density | NCHW run ms | NHWC run ms | NCHW/NHWC | NCHW gather ms (share) | NHWC gather ms (share) |");
        println!("|---|---|---|---|---|---|---|");
        for r in nhwc {
            println!("{r}");
        }
    }
}
