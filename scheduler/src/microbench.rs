//! Micro-benchmarks that fit a device descriptor's compute constants (alpha, gamma of the
//! roofline's `C * (alpha * ops * warps + gamma)`) and its streaming bandwidth, where we can
//! run. On the CPU the benchmark is the sparse conv kernel itself on a 1x1 conv at a few
//! position counts, so alpha is the throughput the kernels reach, not the datasheet's.

use crate::devices::DeviceDesc;
use crate::masks::MaskSet;
use crate::measure::Measurer;
use crate::rng::Rng;
use crate::roofline::{self, TileStats};
use crate::space::{OpGeometry, OpKind, Point, Space};
use dynaspa_backends::cpu::sparse::SparseConv;
use dynaspa_backends::gpu::sparse_conv_knobs::{default_gemm, schedule_name, GemmKnobs};
use dynaspa_runtime::dispatch::Schedule;
use dynaspa_runtime::graph::{AutoPad, Conv, Window};
use dynaspa_runtime::sparsity::BitMask;
use dynaspa_runtime::sparsity::Granularity;
use dynaspa_runtime::{Error, Result, Tensor};
use std::time::Instant;

/// Least squares `t = alpha * x + gamma * r` over samples `(x, r, t)`, both constants kept
/// positive. `None` with fewer than two distinct samples.
pub fn fit_alpha_gamma(samples: &[(f64, f64, f64)]) -> Option<(f64, f64)> {
    let (mut sxx, mut sxr, mut srr, mut sxt, mut srt) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(x, r, t) in samples {
        sxx += x * x;
        sxr += x * r;
        srr += r * r;
        sxt += x * t;
        srt += r * t;
    }
    let det = sxx * srr - sxr * sxr;
    if det.abs() <= 1e-30 * sxx.max(1.0) * srr.max(1.0) {
        return None;
    }
    let alpha = (sxt * srr - srt * sxr) / det;
    let gamma = (srt * sxx - sxt * sxr) / det;
    if alpha > 0.0 {
        Some((alpha, gamma.max(0.0)))
    } else {
        None
    }
}

fn min_time(reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    f()?;
    let mut best = f64::INFINITY;
    for _ in 0..reps {
        let t = Instant::now();
        f()?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok(best)
}

/// Fits `dev.alpha_s`, `dev.gamma_s` and `dev.mem_bandwidth_gbs` on this CPU with `threads`
/// workers. Takes about a second.
pub fn fit_cpu(dev: &mut DeviceDesc, threads: usize) -> Result<()> {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads.max(1)).build().map_err(|e| Error::Other(e.to_string()))?;
    let side = 32usize;
    let p = Conv {
        window: Window {
            kernel_shape: vec![1, 1],
            strides: vec![1, 1],
            pads: vec![0; 4],
            dilations: vec![1, 1],
            auto_pad: AutoPad::NotSet,
        },
        group: 1,
        fused_add: false,
        activation: None,
    };
    let mut st = 0x1234_5678u64;
    let mut rnd = move || {
        st ^= st << 13;
        st ^= st >> 7;
        st ^= st << 17;
        (st >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    let mut samples = vec![];
    // Two sizes of 1x1 conv, so that work per panel varies apart from the panel count.
    for (c, m) in [(32usize, 32usize), (64, 128)] {
        let w = Tensor::from_f32(vec![m, c, 1, 1], (0..m * c).map(|_| rnd()).collect())?;
        let x: Vec<f32> = (0..c * side * side).map(|_| rnd()).collect();
        let conv = SparseConv::new(&p, &[1, c, side, side], &w, None)?;
        let mut out = vec![0.0f32; m * side * side];
        let op = OpGeometry {
            kind: OpKind::Conv,
            images: 1,
            c_in: c,
            c_out: m,
            groups: 1,
            kh: 1,
            kw: 1,
            sh: 1,
            sw: 1,
            h: side,
            w: side,
            heads: 0,
            head_dim: 0,
        };
        let ops_per_panel = 64.0 * op.macs_per_position() / dev.simd_width as f64;
        for positions in [64usize, 256, 512, 1024] {
            let mask = BitMask::from_fn(side, side, |y, xx| y * side + xx < positions);
            let t = pool.install(|| min_time(9, || conv.run_positions(&x, &mut out, &mask, None)))?;
            // As the roofline counts it (fractional rounds).
            let rounds = positions as f64 / 64.0 / threads.max(1) as f64;
            samples.push((rounds * ops_per_panel, rounds, t));
        }
    }
    if let Some((a, g)) = fit_alpha_gamma(&samples) {
        dev.alpha_s = a;
        dev.gamma_s = g;
        dev.alpha_source = "fitted".into();
    }
    // Streaming read of 32 MiB: well past the caches. Integer adds are associative, so the
    // loop vectorises and the bound is the memory, not an add chain.
    let buf: Vec<u32> = (0..8usize << 20).map(|i| (i % 7) as u32).collect();
    let t = min_time(3, || {
        std::hint::black_box(buf.iter().fold(0u32, |a, &b| a.wrapping_add(b)));
        Ok(())
    })?;
    dev.mem_bandwidth_gbs = (buf.len() * 4) as f64 / t / 1e9;
    Ok(())
}

/// Fits a GPU descriptor's `alpha_s`, `gamma_s`, `latency_s` and `serial_op_s` to the device.
/// Measured: the sparse convs' default schedules (the dense member, and 1x1 tiles with
/// calibration's knobs) on a few masks of up to four ops, plus a seeded sample of the first
/// GEMM op's schedule space on one mask. The defaults alone cannot tell the constants apart
/// (every default is a many-warp schedule, so a lone work-item's cost and the round-trip
/// latency never bind: a fit on them alone put latency at 4 ns); the sample's one-warp groups
/// and long and short reduction chains do. Each constant is scaled by the power of two (1/64 to
/// 64) that, all four together, minimises the squared log error of the roofline over the
/// samples. Bandwidth keeps its table value. About 40 measurements.
pub fn fit_gpu(dev: &mut DeviceDesc, m: &mut dyn Measurer, masks: &MaskSet) -> Result<()> {
    let ops = m.ops().to_vec();
    let one = Granularity::new(1, 1);
    let mut samples: Vec<Sample> = vec![];
    let mut sampled_space = false;
    for (i, o) in ops.iter().enumerate() {
        let (Some(geo), Some(om)) = (o.geometry.clone(), masks.ops.get(&o.node)) else { continue };
        if geo.is_token() || om.is_empty() {
            continue;
        }
        let knobs = (geo.kind == OpKind::Conv)
            .then(|| default_gemm(geo.c_out, geo.k_dim(), false, geo.h * geo.w, geo.images.max(1), dev.compute_units));
        let sched =
            knobs.map_or_else(|| Schedule::sparse("tiles1x1", one), |k| k.apply(Schedule::sparse(schedule_name(Some(one), Some(&k)), one)));
        for f in [0, om.len() / 2, om.len() - 1] {
            let t = m.measure(i, None, &om[f])?;
            samples.push((geo.clone(), None, TileStats::dense(geo.h, geo.w), t));
            let t = m.measure(i, Some(&sched), &om[f])?;
            samples.push((geo.clone(), Some((one, knobs)), TileStats::of(&om[f], one), t));
        }
        if geo.kind == OpKind::Conv && !sampled_space {
            sampled_space = true;
            let mask = &om[om.len() / 2];
            let st = TileStats::of(mask, one);
            let space = Space::gpu(geo.clone(), dev);
            let pts: Vec<Point> = space.points().into_iter().filter(|p| space.granularity(p) == one).collect();
            let mut rng = Rng::new(0x5e7 ^ pts.len() as u64);
            for _ in 0..SPACE_SAMPLES.min(pts.len()) {
                let p = &pts[rng.below(pts.len())];
                let t = m.measure(i, Some(&space.schedule(p)), mask)?;
                samples.push((geo.clone(), Some((one, space.gemm(p))), st, t));
            }
        }
        if samples.len() >= 24 + SPACE_SAMPLES {
            break;
        }
    }
    samples.retain(|s| s.3.is_finite() && s.3 > 0.0);
    if samples.len() < 4 {
        return Ok(());
    }
    let (err, d) = fit_constants(dev, &samples);
    *dev = d;
    dev.alpha_source = "fitted".into();
    tracing::info!(samples = samples.len(), rms_log_error = (err / samples.len() as f64).sqrt(), "GPU roofline constants fitted");
    Ok(())
}

/// Schedules of the first GEMM op's space measured by [`fit_gpu`].
const SPACE_SAMPLES: usize = 16;

/// (op, granularity and knobs of the sparse schedule or None for dense, tile stats, seconds)
pub type Sample = (OpGeometry, Option<(Granularity, Option<GemmKnobs>)>, TileStats, f64);

/// The grid search of [`fit_gpu`]: the descriptor of least squared log error and that error.
pub fn fit_constants(base: &DeviceDesc, samples: &[Sample]) -> (f64, DeviceDesc) {
    let est = |d: &DeviceDesc, (op, s, st, _): &Sample| match s {
        None => roofline::estimate_dense(op, d).total,
        Some((g, Some(k))) => roofline::gemm(op, Some(*g), k, st, d).total,
        Some((g, None)) => roofline::depthwise(op, Some(*g), st, d).total,
    };
    let steps: Vec<f64> = (-6..=6).map(|e| 2f64.powi(e)).collect();
    let mut best = (f64::INFINITY, base.clone());
    for &a in &steps {
        for &g in &steps {
            for &l in &steps {
                for &o in &steps {
                    let d = DeviceDesc {
                        alpha_s: base.alpha_s * a,
                        gamma_s: base.gamma_s * g,
                        latency_s: base.latency_s * l,
                        serial_op_s: base.serial_op_s * o,
                        ..base.clone()
                    };
                    let err: f64 = samples.iter().map(|s| (est(&d, s).max(1e-12) / s.3).ln().powi(2)).sum();
                    if err < best.0 {
                        best = (err, d);
                    }
                }
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_recovers_known_constants() {
        let s: Vec<(f64, f64, f64)> =
            [(1.0, 1.0), (4.0, 1.0), (8.0, 2.0), (16.0, 3.0)].iter().map(|&(x, r)| (x, r, 2e-9 * x + 5e-7 * r)).collect();
        let (a, g) = fit_alpha_gamma(&s).unwrap();
        assert!((a / 2e-9 - 1.0).abs() < 1e-6 && (g / 5e-7 - 1.0).abs() < 1e-6, "{a} {g}");
        assert!(fit_alpha_gamma(&[(1.0, 1.0, 1.0)]).is_none());
    }

    #[test]
    fn cpu_fit_gives_plausible_constants() {
        let mut d = crate::devices::cpu(1);
        fit_cpu(&mut d, 1).unwrap();
        assert_eq!(d.alpha_source, "fitted");
        // A SIMD multiply-add takes between a tenth of a nanosecond and ten (generous: shared VM).
        assert!(d.alpha_s > 1e-11 && d.alpha_s < 1e-8, "{}", d.alpha_s);
        assert!(d.mem_bandwidth_gbs > 0.5 && d.mem_bandwidth_gbs < 500.0, "{}", d.mem_bandwidth_gbs);
    }
}
