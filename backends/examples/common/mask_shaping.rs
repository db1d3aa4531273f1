//! Shaping real masks for the benchmarks: resampling to an op's plane and growing or shrinking
//! them to a target density while keeping their blobs, shared by `sparse_ops_bench` (CPU) and
//! `gpu_sparse_bench` so both time the same masks.

use dynaspa_runtime::sparsity::BitMask;

/// Nearest-neighbour resampling to `h` x `w`.
pub fn resample(m: &BitMask, h: usize, w: usize) -> BitMask {
    BitMask::from_fn(h, w, |y, x| m.get((2 * y + 1) * m.height() / (2 * h), (2 * x + 1) * m.width() / (2 * w)))
}

/// Chessboard distance of every position to the nearest position with the other bit value:
/// positive inside the mask, negative outside.
pub fn signed_distance(m: &BitMask) -> Vec<i32> {
    let (h, w) = (m.height(), m.width());
    let bits = m.to_bools();
    let far = (h + w) as i32;
    let mut d = vec![0i32; h * w];
    for inside in [true, false] {
        let mut dist: Vec<i32> = bits.iter().map(|&b| if b == inside { far } else { 0 }).collect();
        for _ in 0..2 {
            // Two raster passes of a chamfer transform (forward, backward).
            for y in 0..h {
                for x in 0..w {
                    let mut v = dist[y * w + x];
                    if y > 0 {
                        for xx in x.saturating_sub(1)..(x + 2).min(w) {
                            v = v.min(dist[(y - 1) * w + xx] + 1);
                        }
                    }
                    if x > 0 {
                        v = v.min(dist[y * w + x - 1] + 1);
                    }
                    dist[y * w + x] = v;
                }
            }
            for y in (0..h).rev() {
                for x in (0..w).rev() {
                    let mut v = dist[y * w + x];
                    if y + 1 < h {
                        for xx in x.saturating_sub(1)..(x + 2).min(w) {
                            v = v.min(dist[(y + 1) * w + xx] + 1);
                        }
                    }
                    if x + 1 < w {
                        v = v.min(dist[y * w + x + 1] + 1);
                    }
                    dist[y * w + x] = v;
                }
            }
        }
        for (o, (&dv, &b)) in d.iter_mut().zip(dist.iter().zip(&bits)) {
            if b == inside {
                *o = if inside { dv } else { -dv };
            }
        }
    }
    d
}

/// `m` grown or shrunk to `density`: the positions of highest signed distance (ties broken in
/// raster order), so blobs keep their shape and only their borders move.
pub fn at_density(m: &BitMask, density: f64) -> BitMask {
    let d = signed_distance(m);
    let mut order: Vec<usize> = (0..d.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(d[i]));
    let n = (density * d.len() as f64).round() as usize;
    let mut bits = vec![false; d.len()];
    for &i in &order[..n] {
        bits[i] = true;
    }
    BitMask::from_bools(m.height(), m.width(), &bits).unwrap()
}
