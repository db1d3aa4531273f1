//! MaxPool, AveragePool and GlobalAveragePool over 1-D to 3-D maps, parallel over (N, C) planes.
//!
//! The output extent comes from `out.shape` (shape inference applied ceil_mode); windows are
//! clipped to the input, so any extent is safe to compute.

use super::gemm_util::with_scratch;
use super::im2col::{phase_offset, split_row, Geom, ValidTable};
use super::input;
use super::kernel_util::{err, f32_data, multiversion, per_axis, split_pads};
use super::pool2d;
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::graph::*;
use dynaspa_runtime::{Result, Tensor};
use rayon::prelude::*;

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Max,
    Avg { count_include_pad: bool },
}

pub(crate) fn max_pool(p: &Pool, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    pool("MaxPool", Kind::Max, p, ins, out)
}

pub(crate) fn average_pool(p: &Pool, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    pool("AveragePool", Kind::Avg { count_include_pad: p.count_include_pad }, p, ins, out)
}

/// Values below which a pooling op stays on one thread.
const PAR_MIN_VALUES: usize = 1 << 16;
/// Input values per task of the 2-D row path: it does ~16 values per few cycles, so the
/// reduced DynConv's 16x36x48 pool (~10 µs) stays on one thread, where waking the second
/// worker cost about what it saved; ResNet-18's 64x112x112 one splits in four.
const PAR_MIN_2D_VALUES: usize = 1 << 18;

fn pool(op: &str, kind: Kind, p: &Pool, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    pool_with(op, kind, p, ins, out, true)
}

/// `rows_2d: false` keeps 2-D windows on the general N-D loop (the A/B benchmark's baseline).
fn pool_with(op: &str, kind: Kind, p: &Pool, ins: &[Option<&Tensor>], out: &TensorSpec, rows_2d: bool) -> Result<Tensor> {
    let x = input(ins, 0, op)?;
    let xd = f32_data(x, op, "X")?;
    let (xs, os) = (x.shape(), out.shape.as_slice());
    let r = xs.len();
    if !(3..=5).contains(&r) || os.len() != r || os[..2] != xs[..2] {
        return err(format!("{op}: X {xs:?} and output {os:?} must both be (N, C, spatial...) with 1 to 3 spatial axes"));
    }
    let sp = r - 2;
    let kernel = &p.window.kernel_shape;
    if kernel.len() != sp || kernel.contains(&0) {
        return err(format!("{op}: kernel_shape {kernel:?} must have {sp} positive values"));
    }
    let stride = per_axis(op, "strides", &p.window.strides, sp)?;
    let dil = per_axis(op, "dilations", &p.window.dilations, sp)?;
    let (pb, pe) = split_pads(op, &p.window.pads, sp)?;
    if kernel.iter().zip(&dil).any(|(&k, &d)| (k as u128) * (d as u128) > i32::MAX as u128) {
        return err(format!("{op}: kernel_shape {kernel:?} with dilations {dil:?} is too large"));
    }
    let g = Geom::new(&xs[2..], &os[2..], kernel, &stride, &dil, &pb);
    let mut pad_end = [0; 3];
    pad_end[3 - sp..].copy_from_slice(&pe);
    let (img, o_len) = (g.image_len(), g.out_len());
    let mut y = vec![0.0f32; xs[0] * xs[1] * o_len];
    if !y.is_empty() {
        // Averages divide by a count that factorises over axes.
        let counts: Vec<Vec<f32>> = (0..3).map(|a| axis_counts(&g, a, pad_end[a], kind)).collect();
        let min = (PAR_MIN_VALUES / (img * g.kernel_len()).max(1)).max(1);
        if rows_2d && pool2d::applies(&g) && img > 0 {
            let min = (PAR_MIN_2D_VALUES / img).max(1);
            let avg = matches!(kind, Kind::Avg { .. });
            let planes = y.len() / o_len;
            let run = |ys: &mut [f32], xs: &[f32]| {
                with_scratch(pool2d::scratch_len(&g), |s| {
                    for (yc, xc) in ys.chunks_exact_mut(o_len).zip(xs.chunks_exact(img)) {
                        pool2d::pool_plane_2d(&g, avg, &counts, xc, yc, s);
                    }
                })
            };
            if planes <= min {
                run(&mut y, xd);
            } else {
                // Whole groups of planes per task: one scratch borrow and dispatch per group.
                let per = planes.div_ceil(planes.div_ceil(min));
                y.par_chunks_mut(per * o_len).zip(xd.par_chunks(per * img)).for_each(|(yc, xc)| run(yc, xc));
            }
        } else {
            let vt = g.valid_table();
            y.par_chunks_mut(o_len).zip(xd.par_chunks(img.max(1))).with_min_len(min).for_each(|(yc, xc)| {
                pool_plane(&g, &vt, kind, &counts, xc, yc);
            });
        }
    }
    Tensor::from_f32(out.shape.clone(), y)
}

/// For each output index on `axis`, how many window taps an average divides by.
fn axis_counts(g: &Geom, axis: usize, pad_end: usize, kind: Kind) -> Vec<f32> {
    let Kind::Avg { count_include_pad } = kind else { return vec![] };
    let (n, s, d, pb) = (g.image[axis] as i64, g.stride[axis] as i64, g.dilation[axis] as i64, g.pad[axis] as i64);
    let (lo, hi) = if count_include_pad { (-pb, n + pad_end as i64) } else { (0, n) };
    (0..g.out[axis] as i64)
        .map(|o| (0..g.kernel[axis] as i64).filter(|&j| (lo..hi).contains(&(o * s - pb + j * d))).count() as f32)
        .collect()
}

/// Row at a time: each window tap folds an input row into the output row, which vectorises
/// the way a per-output loop over taps does not. Strided windows first split every input row
/// into its `stride` phases (even/odd columns for stride 2), so each tap reads contiguously.
fn pool_plane(g: &Geom, vt: &ValidTable, kind: Kind, counts: &[Vec<f32>], xc: &[f32], yc: &mut [f32]) {
    let (sw, iw_n) = (g.stride[2], g.image[2]);
    if sw == 1 || iw_n == 0 {
        return pool_rows(g, vt, kind, counts, xc, None, yc);
    }
    // Phase r of a row holds columns r, r + s, ...; it starts at phase_off[r].
    let phase_off: Vec<usize> = (0..sw).map(|r| phase_offset(iw_n, sw, r)).collect();
    with_scratch(xc.len(), |split| pool_rows(g, vt, kind, counts, xc, Some((&phase_off, split)), yc));
}

multiversion! {
/// The pooling loop over one plane. With `split` = (phase offsets, buffer), rows are first
/// phase-split into the buffer and read from there.
fn pool_rows(g: &Geom, vt: &ValidTable, kind: Kind, counts: &[Vec<f32>], xc: &[f32], split: Option<(&[usize], &mut [f32])>, yc: &mut [f32]) {
    let [_, ih_n, iw_n] = g.image;
    let [od_n, oh_n, ow_n] = g.out;
    let sw = g.stride[2];
    let (xc, off): (&[f32], &[usize]) = match split {
        Some((off, buf)) => {
            for (src, dst) in xc.chunks_exact(iw_n).zip(buf.chunks_exact_mut(iw_n)) {
                split_row(src, sw, off, dst);
            }
            (buf, off)
        }
        None => (xc, &[0]),
    };
    for od in 0..od_n {
        for oh in 0..oh_n {
            let row = &mut yc[(od * oh_n + oh) * ow_n..][..ow_n];
            row.fill(if kind == Kind::Max { f32::NEG_INFINITY } else { 0.0 });
            for &(d_lo, d_hi, d_base) in &vt[0] {
                if od < d_lo || od >= d_hi {
                    continue;
                }
                let id = (d_base + (od * g.stride[0]) as isize) as usize;
                for &(h_lo, h_hi, h_base) in &vt[1] {
                    if oh < h_lo || oh >= h_hi {
                        continue;
                    }
                    let ih = (h_base + (oh * g.stride[1]) as isize) as usize;
                    let src = &xc[(id * ih_n + ih) * iw_n..][..iw_n];
                    for &(lo, hi, base) in &vt[2] {
                        if lo >= hi {
                            continue;
                        }
                        let iw = (base + (lo * sw) as isize) as usize;
                        let start = off[iw % sw] + iw / sw;
                        let taps = &src[start..start + (hi - lo)];
                        match kind {
                            // `max` ignores a NaN tap as the compare-select did (the row starts at
                            // -inf, never NaN), but stores whole vectors: the compare-select became
                            // masked stores, which the next tap's loads cannot forward from.
                            Kind::Max => fold(&mut row[lo..hi], taps, f32::max),
                            Kind::Avg { .. } => fold(&mut row[lo..hi], taps, |a, b| a + b),
                        }
                    }
                }
            }
            if let Kind::Avg { .. } = kind {
                let c = counts[0][od] * counts[1][oh];
                for (v, &cw) in row.iter_mut().zip(&counts[2]) {
                    *v /= c * cw;
                }
            }
        }
    }
}
}

#[inline(always)]
fn fold(dst: &mut [f32], src: &[f32], f: impl Fn(f32, f32) -> f32) {
    dst.iter_mut().zip(src).for_each(|(d, &s)| *d = f(*d, s));
}

multiversion! {
/// Mean of `v`, accumulated in f64 over 16 independent lanes (a single running sum is one long
/// dependency chain the compiler may not reorder: 8x slower on a 56x56 plane).
fn mean(v: &[f32]) -> f32 {
    let mut lanes = [0f64; 16];
    let chunks = v.chunks_exact(16);
    let rest = chunks.remainder();
    for c in chunks {
        for (l, &a) in lanes.iter_mut().zip(c) {
            *l += a as f64;
        }
    }
    let sum = lanes.iter().sum::<f64>() + rest.iter().map(|&a| a as f64).sum::<f64>();
    (sum / v.len() as f64) as f32
}
}

pub(crate) fn global_average_pool(ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    const OP: &str = "GlobalAveragePool";
    let x = input(ins, 0, OP)?;
    let xd = f32_data(x, OP, "X")?;
    let xs = x.shape();
    let want: Vec<usize> = xs.iter().enumerate().map(|(i, &d)| if i < 2 { d } else { 1 }).collect();
    if xs.len() < 2 || out.shape != want {
        return err(format!("{OP}: X {xs:?} must be (N, C, spatial...) and the output {want:?}, got {:?}", out.shape));
    }
    let plane: usize = xs[2..].iter().product();
    let mut y = vec![0.0f32; xs[0] * xs[1]];
    if plane > 0 {
        // Tiny maps (a classifier head's 7x7 or 5x6) are a few microseconds of work: splitting
        // them over threads cost more than it saved.
        let min = (PAR_MIN_VALUES / plane).max(1);
        y.par_iter_mut().zip(xd.par_chunks(plane)).with_min_len(min).for_each(|(v, c)| *v = mean(c));
    } else {
        y.fill(f32::NAN);
    }
    Tensor::from_f32(want, y)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::test_util::*;

    /// Per-output definition over N-D windows, following the ONNX reference's counting.
    #[allow(clippy::too_many_arguments)]
    fn reference(kind: Kind, xs: &[usize], x: &[f32], os: &[usize], k: &[usize], s: &[usize], d: &[usize], pads: &[usize]) -> Vec<f32> {
        let sp = k.len();
        let isz: usize = xs[2..].iter().product();
        let osz: usize = os[2..].iter().product();
        let ksz: usize = k.iter().product();
        let unravel = |mut i: usize, dims: &[usize]| {
            let mut v = vec![0; dims.len()];
            for a in (0..dims.len()).rev() {
                v[a] = i % dims[a];
                i /= dims[a];
            }
            v
        };
        let mut y = vec![];
        for plane in 0..xs[0] * xs[1] {
            for o in 0..osz {
                let oi = unravel(o, &os[2..]);
                let (mut mx, mut sum, mut cnt_valid, mut cnt_pad) = (f32::NEG_INFINITY, 0.0f64, 0, 0);
                for kk in 0..ksz {
                    let ki = unravel(kk, k);
                    let pos: Vec<i64> = (0..sp).map(|a| (oi[a] * s[a] + ki[a] * d[a]) as i64 - pads[a] as i64).collect();
                    let inside = (0..sp).all(|a| pos[a] >= 0 && pos[a] < xs[2 + a] as i64);
                    let in_pad = (0..sp).all(|a| pos[a] >= -(pads[a] as i64) && pos[a] < (xs[2 + a] + pads[sp + a]) as i64);
                    if in_pad {
                        cnt_pad += 1;
                    }
                    if inside {
                        let idx = (0..sp).fold(0, |acc, a| acc * xs[2 + a] + pos[a] as usize);
                        let v = x[plane * isz + idx];
                        mx = mx.max(v);
                        sum += v as f64;
                        cnt_valid += 1;
                    }
                }
                y.push(match kind {
                    Kind::Max => mx,
                    Kind::Avg { count_include_pad } => (sum / if count_include_pad { cnt_pad } else { cnt_valid } as f64) as f32,
                });
            }
        }
        y
    }

    fn out_dim(n: usize, k: usize, s: usize, d: usize, pb: usize, pe: usize, ceil: bool) -> usize {
        let span = n + pb + pe - ((k - 1) * d + 1);
        let mut o = if ceil { span.div_ceil(s) + 1 } else { span / s + 1 };
        // ONNX: the last window must start inside the input or the left padding.
        if ceil && (o - 1) * s >= n + pb {
            o -= 1;
        }
        o
    }

    #[allow(clippy::too_many_arguments)]
    fn run(kind: Kind, xs: &[usize], k: &[usize], s: &[usize], d: &[usize], pads: &[usize], ceil: bool, seed: u64) {
        let mut rng = Rng::new(seed);
        let sp = k.len();
        let mut os = xs[..2].to_vec();
        for a in 0..sp {
            os.push(out_dim(xs[2 + a], k[a], s[a], d[a], pads[a], pads[sp + a], ceil));
        }
        let x = rng.tensor(xs);
        let p = Pool {
            window: Window { kernel_shape: k.into(), strides: s.into(), pads: pads.into(), dilations: d.into(), auto_pad: AutoPad::NotSet },
            ceil_mode: ceil,
            count_include_pad: matches!(kind, Kind::Avg { count_include_pad: true }),
        };
        let got = match kind {
            Kind::Max => max_pool(&p, &[Some(&x)], &spec(&os)),
            Kind::Avg { .. } => average_pool(&p, &[Some(&x)], &spec(&os)),
        }
        .unwrap();
        let want = reference(kind, xs, x.as_f32().unwrap(), &os, k, s, d, pads);
        assert_close(got.as_f32().unwrap(), &want, 1e-5, &format!("pool x={xs:?} k={k:?} s={s:?} d={d:?} p={pads:?} ceil={ceil}"));
    }

    #[test]
    fn pools_match_reference() {
        let kinds = [Kind::Max, Kind::Avg { count_include_pad: false }, Kind::Avg { count_include_pad: true }];
        for (i, kind) in kinds.into_iter().enumerate() {
            let seed = 10 * i as u64;
            run(kind, &[1, 3, 112, 112], &[3, 3], &[2, 2], &[1, 1], &[1, 1, 1, 1], false, seed + 1);
            run(kind, &[2, 2, 7, 9], &[2, 2], &[2, 2], &[1, 1], &[0, 0, 0, 0], true, seed + 2);
            run(kind, &[1, 2, 8, 8], &[3, 3], &[2, 2], &[1, 1], &[1, 1, 1, 1], true, seed + 3);
            run(kind, &[1, 2, 9, 10], &[3, 2], &[1, 3], &[2, 1], &[1, 0, 2, 1], false, seed + 4);
            run(kind, &[1, 2, 10, 11], &[3, 3], &[3, 3], &[1, 2], &[1, 2, 0, 1], true, seed + 5);
            run(kind, &[2, 3, 11], &[4], &[3], &[1], &[1, 2], true, seed + 6);
            run(kind, &[1, 2, 5, 6, 7], &[2, 3, 2], &[2, 1, 3], &[1, 1, 2], &[0, 1, 1, 1, 0, 0], true, seed + 7);
            run(kind, &[1, 2, 6, 6], &[1, 1], &[2, 2], &[1, 1], &[0, 0, 0, 0], false, seed + 8);
        }
    }

    /// The 2-D row path (`pool2d`) on random windows: kernels 1-5, strides 1-4, every pad up to
    /// the kernel, ceil mode, widths past 32 (the vector deinterleave) and ragged ones, enough
    /// planes to split over threads; against the per-output reference.
    #[test]
    fn pools_2d_random_windows_match_reference() {
        let mut rng = Rng::new(77);
        let kinds = [Kind::Max, Kind::Avg { count_include_pad: false }, Kind::Avg { count_include_pad: true }];
        for case in 0..300u64 {
            let pick = |rng: &mut Rng, n: usize| rng.below(n);
            let (kh, kw) = (1 + pick(&mut rng, 5), 1 + pick(&mut rng, 5));
            let (sh, sw) = (1 + pick(&mut rng, 4), 1 + pick(&mut rng, 4));
            let pads = [pick(&mut rng, kh), pick(&mut rng, kw), pick(&mut rng, kh), pick(&mut rng, kw)];
            let (h, w) = (kh + pick(&mut rng, 30), kw + pick(&mut rng, 70));
            let planes = [1, 3, 40][pick(&mut rng, 3)];
            let ceil = case % 3 == 0;
            let kind = kinds[case as usize % 3];
            run(kind, &[1, planes, h, w], &[kh, kw], &[sh, sw], &[1, 1], &pads, ceil, 1000 + case);
        }
    }

    #[test]
    fn deinterleave2_splits_every_length() {
        for n in 0..100usize {
            let src: Vec<f32> = (0..n).map(|i| i as f32).collect();
            let (mut e, mut o) = (vec![-1.0; n.div_ceil(2)], vec![-1.0; n / 2]);
            crate::cpu::im2col::deinterleave2(&src, &mut e, &mut o);
            assert!(e.iter().enumerate().all(|(i, &v)| v == (2 * i) as f32), "n {n}: evens {e:?}");
            assert!(o.iter().enumerate().all(|(i, &v)| v == (2 * i + 1) as f32), "n {n}: odds {o:?}");
        }
    }

    #[test]
    fn global_average_pool_matches_mean() {
        let mut rng = Rng::new(5);
        for xs in [vec![2, 3, 4, 5], vec![1, 4, 7], vec![1, 2, 2, 3, 4]] {
            let x = rng.tensor(&xs);
            let plane: usize = xs[2..].iter().product();
            let want: Vec<f32> = x.as_f32().unwrap().chunks(plane).map(|c| c.iter().sum::<f32>() / plane as f32).collect();
            let os: Vec<usize> = xs.iter().enumerate().map(|(i, &d)| if i < 2 { d } else { 1 }).collect();
            let got = global_average_pool(&[Some(&x)], &spec(&os)).unwrap();
            assert_close(got.as_f32().unwrap(), &want, 1e-5, "gap");
        }
        let x = rng.tensor(&[1, 2, 3, 3]);
        assert!(global_average_pool(&[Some(&x)], &spec(&[1, 2, 1])).is_err());
    }

    #[test]
    fn pools_reject_bad_inputs() {
        let mut rng = Rng::new(6);
        let x = rng.tensor(&[1, 2, 5, 5]);
        let p = Pool {
            window: Window { kernel_shape: vec![2, 2], strides: vec![], pads: vec![], dilations: vec![], auto_pad: AutoPad::NotSet },
            ceil_mode: false,
            count_include_pad: false,
        };
        assert!(max_pool(&p, &[Some(&x)], &spec(&[1, 2, 4, 4])).is_ok());
        assert!(max_pool(&p, &[Some(&x)], &spec(&[1, 3, 4, 4])).is_err());
        let bad = Pool { window: Window { kernel_shape: vec![2], ..p.window.clone() }, ..p.clone() };
        assert!(average_pool(&bad, &[Some(&x)], &spec(&[1, 2, 4, 4])).is_err());
        let bad = Pool { window: Window { strides: vec![0, 1], ..p.window.clone() }, ..p.clone() };
        assert!(average_pool(&bad, &[Some(&x)], &spec(&[1, 2, 4, 4])).is_err());
        let xi = Tensor::from_i64(vec![1, 1, 2, 2], vec![1; 4]).unwrap();
        assert!(max_pool(&p, &[Some(&xi)], &spec(&[1, 1, 1, 1])).unwrap_err().to_string().contains("INT64"));
        // An extent larger than the windows reach is clipped, not a crash.
        assert!(max_pool(&p, &[Some(&x)], &spec(&[1, 2, 9, 9])).is_ok());
    }

    /// The pools of the reduced DynConv, the row path against the general loop, interleaved:
    /// `BENCH_THREADS=1 cargo test --release -p dynaspa-backends --lib bench_dynconv_pools --
    /// --ignored --nocapture` (median µs of 15 rounds of 200 calls each).
    #[test]
    #[ignore]
    fn bench_dynconv_pools() {
        let nt: usize = std::env::var("BENCH_THREADS").ok().and_then(|v| v.parse().ok()).unwrap_or(2);
        let win = |k: usize, s: usize, p: usize| Pool {
            window: Window {
                kernel_shape: vec![k, k],
                strides: vec![s, s],
                pads: vec![p; 4],
                dilations: vec![],
                auto_pad: AutoPad::NotSet,
            },
            ceil_mode: false,
            count_include_pad: false,
        };
        let cases = [
            ("maxpool 3x3 s2 p1 16x36x48 (stem)", vec![1, 16, 36, 48], win(3, 2, 1), vec![1, 16, 18, 24]),
            ("maxpool 3x3 s1 p1 1x18x24 (mask halo)", vec![1, 1, 18, 24], win(3, 1, 1), vec![1, 1, 18, 24]),
            ("maxpool 2x2 s2 8x32x32", vec![1, 8, 32, 32], win(2, 2, 0), vec![1, 8, 16, 16]),
            ("maxpool 3x3 s2 p1 64x112x112 (resnet18)", vec![1, 64, 112, 112], win(3, 2, 1), vec![1, 64, 56, 56]),
        ];
        rayon::ThreadPoolBuilder::new().num_threads(nt).build().unwrap().install(|| {
            let mut rng = Rng::new(3);
            for (name, xs, p, os) in cases {
                let x = rng.tensor(&xs);
                let reps = if xs[2] > 100 { 20 } else { 200 };
                let (mut old, mut new) = (vec![], vec![]);
                for _ in 0..15 {
                    for (rows, v) in [(false, &mut old), (true, &mut new)] {
                        let t = std::time::Instant::now();
                        for _ in 0..reps {
                            drop(pool_with("MaxPool", Kind::Max, &p, &[Some(&x)], &spec(&os), rows).unwrap());
                        }
                        v.push(t.elapsed().as_secs_f64() * 1e6 / reps as f64);
                    }
                }
                let med = |v: &mut Vec<f64>| {
                    v.sort_by(f64::total_cmp);
                    v[v.len() / 2]
                };
                let (o, n) = (med(&mut old), med(&mut new));
                println!("{name}: general {o:.2} µs, rows {n:.2} µs ({:.1}x), {nt} thread(s)", o / n);
            }
        });
    }

    /// The non-conv ops of ResNet-18 at batch 1: `BENCH_THREADS=1 cargo test --release -p
    /// dynaspa-backends --lib bench_resnet18_other_ops -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn bench_resnet18_other_ops() {
        let nt: usize = std::env::var("BENCH_THREADS").ok().and_then(|v| v.parse().ok()).unwrap_or(2);
        rayon::ThreadPoolBuilder::new().num_threads(nt).build().unwrap().install(|| {
            let mut rng = Rng::new(1);
            let x = rng.tensor(&[1, 64, 112, 112]);
            let p = Pool {
                window: Window {
                    kernel_shape: vec![3, 3],
                    strides: vec![2, 2],
                    pads: vec![1; 4],
                    dilations: vec![],
                    auto_pad: AutoPad::NotSet,
                },
                ceil_mode: false,
                count_include_pad: false,
            };
            let dt = time_it(30, || drop(max_pool(&p, &[Some(&x)], &spec(&[1, 64, 56, 56])).unwrap()));
            println!("maxpool 3x3 s2 64@112: {:.3} ms", dt * 1e3);
            let x = rng.tensor(&[1, 512, 7, 7]);
            let dt = time_it(30, || drop(global_average_pool(&[Some(&x)], &spec(&[1, 512, 1, 1])).unwrap()));
            println!("global average pool 512@7: {:.3} ms", dt * 1e3);
            let a = rng.tensor(&[1, 512]);
            let b = rng.tensor(&[1000, 512]);
            let c = rng.tensor(&[1000]);
            let dt = time_it(30, || {
                drop(crate::cpu::matmul::gemm(1.0, 1.0, false, true, &[Some(&a), Some(&b), Some(&c)], &spec(&[1, 1000])).unwrap())
            });
            println!("gemm 1x512 x 512x1000: {:.3} ms", dt * 1e3);
        });
    }
}
