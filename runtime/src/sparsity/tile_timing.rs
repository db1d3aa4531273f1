//! Timing of per-frame mask work (counting and making DISTiles, packing f32 masks), at the mask
//! sizes of the models we target. Ignored by default; run with
//! `cargo test --release -p dynaspa-runtime tile_timing -- --ignored --nocapture`.

use super::test_rng::TestRng;
use super::tiles::aligned_tiles_naive;
use super::{BitMask, Granularity};
use std::hint::black_box;
use std::time::Instant;

/// Best-of-7 nanoseconds per call of `f`, each sample running ~5 ms (the machine is shared,
/// so the minimum is the least disturbed figure).
fn ns_per_call(mut f: impl FnMut()) -> f64 {
    let mut iters = 1u64;
    loop {
        let t = Instant::now();
        for _ in 0..iters {
            f();
        }
        if t.elapsed().as_micros() > 5000 {
            break;
        }
        iters *= 2;
    }
    (0..7)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed().as_nanos() as f64 / iters as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// Blobs at about 30% density: what a DynConv-style mask looks like.
fn blobby(rng: &mut TestRng, h: usize, w: usize) -> BitMask {
    let mut m = BitMask::zeros(h, w);
    while m.density() < 0.3 {
        let (bh, bw) = (rng.range(1, h / 4 + 2), rng.range(1, w / 4 + 2));
        let (y0, x0) = (rng.range(0, h), rng.range(0, w));
        for y in y0..(y0 + bh).min(h) {
            for x in x0..(x0 + bw).min(w) {
                m.set(y, x, true);
            }
        }
    }
    m
}

#[test]
#[ignore]
fn tile_timing() {
    let (mut rng, _seed) = TestRng::fresh();
    let gs = [Granularity::new(2, 2), Granularity::new(4, 4), Granularity::new(8, 8), Granularity::new(3, 5)];
    println!("granularities {}", gs.iter().map(|g| g.to_string()).collect::<Vec<_>>().join(", "));
    for (h, w) in [(56, 56), (40, 40), (18, 24), (9, 12), (5, 6), (112, 112)] {
        let m = blobby(&mut rng, h, w);
        println!("\nmask {h}x{w}, density {:.2}, {} components", m.density(), m.components().len());
        let mut single = 0.0;
        for &g in &gs {
            let count = ns_per_call(|| {
                black_box(black_box(&m).count_aligned_tiles(g));
            });
            single += count;
            let tiles = ns_per_call(|| {
                black_box(black_box(&m).aligned_tiles(g));
            });
            let comp = ns_per_call(|| {
                black_box(black_box(&m).component_tiles(g));
            });
            let naive = ns_per_call(|| {
                black_box(aligned_tiles_naive(black_box(&m), g));
            });
            println!(
                "  g {g:>4}: {:>4} tiles  count {count:>7.0} ns  aligned_tiles {tiles:>7.0} ns  \
                 component_tiles {comp:>7.0} ns ({} tiles)  naive aligned {naive:>8.0} ns",
                m.count_aligned_tiles(g),
                m.component_tiles(g).len()
            );
        }
        let many = ns_per_call(|| {
            black_box(black_box(&m).count_tiles_many(&gs));
        });
        println!("  4 granularities: count_tiles_many {many:.0} ns, 4 x count_aligned_tiles {single:.0} ns");
        // Equal heights: the case where count_tiles_many shares the row pass.
        let same_h = [Granularity::new(4, 2), Granularity::new(4, 4), Granularity::new(4, 8), Granularity::new(4, 16)];
        let many_same = ns_per_call(|| {
            black_box(black_box(&m).count_tiles_many(&same_h));
        });
        let singles_same: f64 = same_h
            .iter()
            .map(|&g| {
                ns_per_call(|| {
                    black_box(black_box(&m).count_aligned_tiles(g));
                })
            })
            .sum();
        println!("  4x2, 4x4, 4x8, 4x16: count_tiles_many {many_same:.0} ns, 4 x count_aligned_tiles {singles_same:.0} ns");
        let v: Vec<f32> = m.to_bools().iter().map(|&b| b as u8 as f32).collect();
        let f = ns_per_call(|| {
            black_box(BitMask::from_f32(h, w, black_box(&v)).unwrap());
        });
        let d = ns_per_call(|| {
            black_box(black_box(&m).dilate_xy(1, 1));
        });
        println!("  from_f32 {f:.0} ns ({:.2} ns/value), dilate_xy(1, 1) {d:.0} ns", f / (h * w) as f64);
    }
}

/// Runs one operation a fixed number of times, for counting instructions and cycles with
/// `perf stat` (stable on a loaded machine, unlike wall time):
/// `DYNASPA_TEST_OP=count DYNASPA_TEST_SIZE=112 perf stat -e instructions:u,cycles:u <test binary>
///  tile_ops_fixed --ignored`; ops: count, many, count_same_h, many_same_h, aligned, component,
/// from_f32, dilate.
#[test]
#[ignore]
fn tile_ops_fixed() {
    let op = std::env::var("DYNASPA_TEST_OP").unwrap_or_else(|_| "count".into());
    let side: usize = std::env::var("DYNASPA_TEST_SIZE").ok().and_then(|s| s.parse().ok()).unwrap_or(56);
    let n: usize = std::env::var("DYNASPA_TEST_ITERS").ok().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let (mut rng, _seed) = TestRng::fresh();
    let m = blobby(&mut rng, side, side);
    let gs = [Granularity::new(2, 2), Granularity::new(4, 4), Granularity::new(8, 8), Granularity::new(3, 5)];
    let same_h = [Granularity::new(4, 2), Granularity::new(4, 4), Granularity::new(4, 8), Granularity::new(4, 16)];
    let v: Vec<f32> = m.to_bools().iter().map(|&b| b as u8 as f32).collect();
    for i in 0..n {
        let g = gs[i % 4];
        match op.as_str() {
            "count" => drop(black_box(black_box(&m).count_aligned_tiles(g))),
            "many" => drop(black_box(black_box(&m).count_tiles_many(&gs))),
            "many_same_h" => drop(black_box(black_box(&m).count_tiles_many(&same_h))),
            "count_same_h" => drop(black_box(black_box(&m).count_aligned_tiles(same_h[i % 4]))),
            "aligned" => drop(black_box(black_box(&m).aligned_tiles(g))),
            "component" => drop(black_box(black_box(&m).component_tiles(g))),
            "from_f32" => drop(black_box(BitMask::from_f32(side, side, black_box(&v)))),
            "dilate" => drop(black_box(black_box(&m).dilate_xy(1, 1))),
            _ => panic!("unknown DYNASPA_TEST_OP {op}"),
        }
    }
}
