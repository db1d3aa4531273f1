use super::*;
use crate::cpu::test_util::Rng;

fn reference(
    g: &Geo2,
    c: usize,
    w: &[f32],
    bias: &[f32],
    x: &[f32],
    r: Option<&[f32]>,
    act: Option<Activation>,
    mo: usize,
    pos: usize,
) -> f32 {
    let (oy, ox) = (pos / g.wo, pos % g.wo);
    let mut s = 0.0f64;
    for ci in 0..c {
        for a in 0..g.kh {
            for b in 0..g.kw {
                let iy = (oy * g.sh + a * g.dh) as isize - g.ph as isize;
                let ix = (ox * g.sw + b * g.dw) as isize - g.pw as isize;
                if iy >= 0 && ix >= 0 && (iy as usize) < g.h && (ix as usize) < g.w {
                    s += w[((mo * c + ci) * g.kh + a) * g.kw + b] as f64 * x[(ci * g.h + iy as usize) * g.w + ix as usize] as f64;
                }
            }
        }
    }
    let at = mo * g.out_plane() + pos;
    let v = s as f32 + bias[mo] + r.map_or(0.0, |r| r[at]);
    act.map_or(v, |a| a.apply(v))
}

/// Random geometry (kernels 1-7, strides 1-3, dilations 1-2, asymmetric pads, planes from 1x1
/// to past 16 lanes), channel counts around every register block, every epilogue; outputs
/// poisoned with NaN first, both the AVX-512 and the portable kernel, against a naive conv.
#[test]
fn matches_naive_conv_everywhere() {
    let mut rng = Rng::new(0x5eed);
    let mut done = 0;
    for case in 0..400 {
        let k = [(1, 1), (3, 3), (1, 3), (5, 5), (7, 7), (3, 1)][rng.below(6)];
        let (sh, sw) = (1 + rng.below(3), 1 + rng.below(3));
        let (dh, dw) = if case % 4 == 3 { (1 + rng.below(2), 1 + rng.below(2)) } else { (1, 1) };
        let (h, w) = (1 + rng.below(30), 1 + rng.below(40));
        let (pt, pl, pb, pr) = (rng.below(k.0), rng.below(k.1), rng.below(k.0), rng.below(k.1));
        let (eh, ew) = ((k.0 - 1) * dh + 1, (k.1 - 1) * dw + 1);
        if h + pt + pb < eh || w + pl + pr < ew {
            continue;
        }
        let (ho, wo) = ((h + pt + pb - eh) / sh + 1, (w + pl + pr - ew) / sw + 1);
        let g = Geo2 { h, w, ho, wo, kh: k.0, kw: k.1, sh, sw, dh, dw, ph: pt, pw: pl };
        let c = 1 + rng.below(12);
        let m = [1, 2, 3, 4, 7, 8, 12, 16, 17, 24, 33][rng.below(11)];
        let wv = rng.vec(m * c * k.0 * k.1);
        let bias = rng.vec(m);
        let act = [None, Some(Activation::Relu), Some(Activation::Sigmoid), Some(Activation::Clip(-0.5, 0.5))][rng.below(4)];
        let fused = rng.below(2) == 1;
        let Some(rc) = RowsConv::new(g, c, m, &wv, Some(&bias), act, fused) else { panic!("case {case}: {g:?} refused") };
        let x = rng.vec(c * h * w);
        let r = rng.vec(m * ho * wo);
        let res = fused.then_some(r.as_slice());
        for simd in [true, false] {
            if simd && !kernel_util::has_avx512() {
                continue;
            }
            let mut out = vec![f32::NAN; m * ho * wo];
            let buf;
            let xb: &[f32] = if rc.phases.is_empty() {
                &x
            } else {
                let mut b = vec![0.0; rc.buf_len];
                rc.fill_phases(&x, &mut b);
                buf = b;
                &buf
            };
            let (mr, nv) = BLOCKS[rc.block];
            for mb in 0..rc.mpad / mr {
                for qb in 0..rc.lanes.len() / nv {
                    // SAFETY: sizes as built; blocks are disjoint.
                    unsafe { rc.block_task(xb, out.as_mut_ptr(), res, mb * mr, qb * nv, simd) };
                }
            }
            for mo in 0..m {
                for p in 0..ho * wo {
                    let got = out[mo * ho * wo + p];
                    let want = reference(&g, c, &wv, &bias, &x, res, act, mo, p);
                    assert!(
                        (got - want).abs() <= 1e-4 * (1.0 + want.abs()),
                        "case {case} simd {simd} {g:?} c{c} m{m} block {:?}: out[{mo}][{p}] = {got}, want {want}",
                        BLOCKS[rc.block]
                    );
                }
            }
        }
        // And through `run` (thread-local buffer, the pool's threads).
        let mut out = vec![f32::NAN; m * ho * wo];
        rc.run(&x, &mut out, res);
        assert!(out.iter().all(|v| v.is_finite()), "case {case}: run left outputs unwritten");
        done += 1;
    }
    assert!(done > 300, "only {done} cases ran");
}

/// A mask unit's logit: one output channel of a 3x3 conv over many channels on a large map
/// (the shape `pays` sends here instead of im2col + GEMM), with long sums per output.
#[test]
fn a_single_output_over_many_channels_on_a_large_map() {
    let mut rng = Rng::new(0x1a4e);
    for (c, h, w, s) in [(64, 56, 56, 1), (256, 14, 14, 1), (32, 57, 41, 2)] {
        let (ho, wo) = ((h + 2 - 3) / s + 1, (w + 2 - 3) / s + 1);
        let g = Geo2 { h, w, ho, wo, kh: 3, kw: 3, sh: s, sw: s, dh: 1, dw: 1, ph: 1, pw: 1 };
        assert!(super::pays(c, 1, 3, 3, c * h * w), "{c}x{h}x{w}");
        let wv: Vec<f32> = rng.vec(c * 9).iter().map(|v| v * 0.1).collect();
        let bias = rng.vec(1);
        let rc = RowsConv::new(g, c, 1, &wv, Some(&bias), None, false).expect("built");
        let x = rng.vec(c * h * w);
        let mut out = vec![f32::NAN; ho * wo];
        rc.run(&x, &mut out, None);
        for p in 0..ho * wo {
            let want = reference(&g, c, &wv, &bias, &x, None, None, 0, p);
            assert!((out[p] - want).abs() <= 1e-4 * (1.0 + want.abs()), "{c}x{h}x{w} s{s}: out[{p}] = {}, want {want}", out[p]);
        }
    }
}

/// The phase buffer is kept between calls and only its data cells are rewritten: a second
/// input must not see the first one's values, and calls from several threads at once (the
/// buffer taken by one of them) must each be right.
#[test]
fn phase_buffer_reuse_and_concurrent_calls() {
    let g = Geo2 { h: 9, w: 13, ho: 5, wo: 7, kh: 3, kw: 3, sh: 2, sw: 2, dh: 1, dw: 1, ph: 1, pw: 1 };
    let mut rng = Rng::new(9);
    let (c, m) = (3, 5);
    let (wv, bias) = (rng.vec(m * c * 9), rng.vec(m));
    let rc = RowsConv::new(g, c, m, &wv, Some(&bias), None, false).unwrap();
    let check = |x: &[f32]| {
        let mut out = vec![f32::NAN; m * 35];
        rc.run(x, &mut out, None);
        for mo in 0..m {
            for p in 0..35 {
                let want = reference(&g, c, &wv, &bias, x, None, None, mo, p);
                assert!((out[mo * 35 + p] - want).abs() <= 1e-4 * (1.0 + want.abs()));
            }
        }
    };
    let inputs: Vec<Vec<f32>> = (0..8).map(|_| rng.vec(c * 9 * 13)).collect();
    for x in &inputs {
        check(x);
    }
    std::thread::scope(|s| {
        for x in &inputs {
            s.spawn(|| (0..20).for_each(|_| check(x)));
        }
    });
}

/// `cargo test --release -p dynaspa-backends --lib bench_rows_vs_direct -- --ignored --nocapture`:
/// µs per call on the reduced DynConv's dense conv shapes (1 thread), the row kernel against
/// the direct kernel, interleaved rounds, median of 15 rounds of 100 calls.
#[test]
#[ignore]
fn bench_rows_vs_direct() {
    use crate::cpu::conv_direct::{DirectConv, Image};
    // (name, c, h, w, m, k, stride)
    let shapes = [
        ("stem 3x3 s2 3->16 72x96", 3, 72, 96, 16, 3, 2),
        ("mask unit 1x1 16->1 18x24", 16, 18, 24, 1, 1, 1),
        ("mask unit 1x1 128->1 9x12", 128, 9, 12, 1, 1, 1),
        ("1x1 16->64 18x24 (downsample)", 16, 18, 24, 64, 1, 1),
        ("1x1 64->32 18x24", 64, 18, 24, 32, 1, 1),
        ("1x1 s2 64->128 18x24", 64, 18, 24, 128, 1, 2),
        ("3x3 s2 32->32 18x24", 32, 18, 24, 32, 3, 2),
        ("1x1 32->128 9x12", 32, 9, 12, 128, 1, 1),
        ("1x1 128->64 9x12", 128, 9, 12, 64, 1, 1),
        ("3x3 s2 64->64 9x12", 64, 9, 12, 64, 3, 2),
        ("1x1 s2 128->256 9x12", 128, 9, 12, 256, 1, 2),
        ("1x1 64->256 5x6", 64, 5, 6, 256, 1, 1),
        ("3x3 s1 16->16 18x24", 16, 18, 24, 16, 3, 1),
    ];
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let mut rng = Rng::new(1);
    for (name, c, h, w, m, k, s) in shapes {
        let p = k / 2;
        let (ho, wo) = ((h + 2 * p - k) / s + 1, (w + 2 * p - k) / s + 1);
        let g = Geo2 { h, w, ho, wo, kh: k, kw: k, sh: s, sw: s, dh: 1, dw: 1, ph: p, pw: p };
        let wv = rng.vec(m * c * k * k);
        let x = rng.vec(c * h * w);
        let rc = RowsConv::new(g, c, m, &wv, None, Some(Activation::Relu), false).unwrap();
        let dc = DirectConv::new(g, c, m, &wv, None, Some(Activation::Relu), false).unwrap();
        let mut out = vec![0.0f32; m * ho * wo];
        let (mut tr, mut td) = (vec![], vec![]);
        pool.install(|| {
            for _ in 0..15 {
                let t0 = std::time::Instant::now();
                for _ in 0..100 {
                    rc.run(&x, &mut out, None);
                }
                tr.push(t0.elapsed().as_secs_f64() * 1e4);
                let t0 = std::time::Instant::now();
                for _ in 0..100 {
                    dc.run_all(Image { x: &x, out: &mut out, residual: None });
                }
                td.push(t0.elapsed().as_secs_f64() * 1e4);
            }
        });
        tr.sort_by(f64::total_cmp);
        td.sort_by(f64::total_cmp);
        let (r, d) = (tr[7], td[7]);
        let macs = (ho * wo * c * k * k * m) as f64;
        println!(
            "{name}: rows {r:.2} µs ({:.1} GMAC/s, block {:?}), direct {d:.2} µs ({:.1} GMAC/s), {:.2}x (min {:.2} vs {:.2} µs)",
            macs / r / 1e3,
            BLOCKS[rc.block],
            macs / d / 1e3,
            d / r,
            tr[0],
            td[0]
        );
    }
}
