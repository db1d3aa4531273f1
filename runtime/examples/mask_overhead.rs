//! Times the per-op mask work of dispatch on a DynConv-sized mask: f32 mask -> BitMask, and
//! DISTile counts at the CPU's conv granularities.
//!     cargo run --release -p dynaspa-runtime --example mask_overhead
use dynaspa_runtime::sparsity::{BitMask, Granularity};
use std::time::Instant;

fn per_call(n: usize, mut f: impl FnMut() -> usize) -> (f64, usize) {
    let t = Instant::now();
    let mut acc = 0;
    for _ in 0..n {
        acc += f();
    }
    (t.elapsed().as_secs_f64() * 1e6 / n as f64, acc)
}

fn main() {
    let (h, w) = (18usize, 24usize);
    let mut s = 12345u64;
    let vals: Vec<f32> = (0..h * w)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 33) % 10 < 3) as u8 as f32
        })
        .collect();
    let gs = [Granularity::new(1, 1), Granularity::new(2, 8), Granularity::new(4, 4)];
    let n = 200_000;
    let m = BitMask::from_f32(h, w, &vals).unwrap();
    use std::hint::black_box as bb;
    let (us, _) = per_call(n, || BitMask::from_f32(h, w, bb(&vals)).unwrap().count_ones());
    println!("from_f32 {h}x{w}: {us:.3} us");
    let (us, _) = per_call(n, || bb(&m).count_tiles_many(&gs).iter().sum());
    println!("count_tiles_many 1x1,2x8,4x4: {us:.3} us");
    for g in gs {
        let (us, _) = per_call(n, || bb(&m).count_aligned_tiles(g));
        println!("count_aligned_tiles {g}: {us:.3} us");
    }
    let (us, _) = per_call(n, || bb(&m).aligned_tiles(Granularity::new(2, 8)).len());
    println!("aligned_tiles 2x8: {us:.3} us");
    let (us, _) = per_call(n, || bb(Instant::now()).elapsed().as_nanos() as usize);
    println!("Instant::now + elapsed: {us:.3} us");
}
