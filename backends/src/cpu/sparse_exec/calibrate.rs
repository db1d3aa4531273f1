//! The CPU backend's default PolyKernel for one sparse op, until tuned profiles exist: each
//! member is timed on synthetic blob masks of a few densities, giving its DispatchTable (time
//! against DISTile count), once per op signature and machine; the result is cached on disk so
//! a second start does not measure again.

use dynaspa_runtime::dispatch::{DispatchTable, Member, PolyKernel, Schedule};
use dynaspa_runtime::sparsity::{BitMask, Granularity};
use dynaspa_runtime::{Error, Result};
use std::path::PathBuf;
use std::time::Instant;

/// Densities the sparse members are timed at: enough points for the piecewise-linear table to
/// follow the fixed costs at the low end and the wasted phantom work at the high end.
const DENSITIES: [f64; 4] = [0.05, 0.2, 0.45, 0.8];
/// Timed runs per point, after one warm-up. The minimum is kept: on a shared machine the
/// noise only ever adds time, and a median of few runs let one busy moment pick dense where
/// sparse was twice as fast.
const REPS: usize = 5;

/// What calibration needs to know about one op: a cache key and how to time each member.
pub(crate) struct Subject<'a> {
    /// Stable description of the op (kind, shapes, attributes); part of the cache key.
    pub signature: String,
    /// Mask plane size (1 x tokens for token ops).
    pub height: usize,
    pub width: usize,
    pub granularities: Vec<Granularity>,
    pub time_dense: &'a dyn Fn() -> Result<()>,
    pub time_sparse: &'a dyn Fn(&BitMask, Granularity) -> Result<()>,
    /// Kernel runs per call of the timing functions (a GPU queues several before one sync, so
    /// the sync's cost is shared); tables hold the time of one.
    pub runs_per_call: usize,
}

/// The CPU model as /proc/cpuinfo names it (the architecture where there is none).
pub(crate) fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split(':').nth(1)).map(|m| m.trim().to_string()))
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// CPU model, the vector extension the kernels use, and the worker count: timings from another
/// machine or thread count would pick the wrong members.
pub(crate) fn fingerprint(threads: usize) -> String {
    let model = cpu_name();
    let simd = if crate::cpu::kernel_util::has_avx512() { "avx512" } else { "portable" };
    format!("{model}|{simd}|t{threads}")
}

fn hash(s: &str) -> u64 {
    crate::cache_dir::fnv1a(crate::cache_dir::FNV_OFFSET, s.as_bytes())
}

fn cache_file(root: &std::path::Path, dir: &str, fp: &str, sig: &str) -> PathBuf {
    root.join(dir).join(format!("{:016x}.json", hash(&format!("v5|{fp}|{sig}"))))
}

/// Loads the cached PolyKernel for `s` from under `cache` or measures one and caches it there.
pub(crate) fn poly_kernel(s: &Subject, threads: usize, cache: Option<&std::path::Path>) -> Result<PolyKernel> {
    poly_kernel_on(s, &fingerprint(threads), "cpu", cache)
}

/// `poly_kernel` for any device: `fp` identifies the device (and what else changes timings),
/// `dir` names the backend's folder under the cache root.
pub(crate) fn poly_kernel_on(s: &Subject, fp: &str, dir: &str, cache: Option<&std::path::Path>) -> Result<PolyKernel> {
    let fp = fp.to_string();
    let file = cache.map(|r| cache_file(r, dir, &fp, &s.signature));
    if let Some(f) = &file {
        if let Ok(text) = std::fs::read_to_string(f) {
            match serde_json::from_str::<Cached>(&text) {
                Ok(c) if c.fingerprint == fp && c.signature == s.signature => return Ok(c.poly),
                Ok(_) => tracing::debug!(file = %f.display(), "calibration cache key collision; measuring again"),
                Err(e) => tracing::warn!(file = %f.display(), "ignoring unreadable calibration cache: {e}"),
            }
        }
    }
    let t0 = Instant::now();
    let poly = measure(s)?;
    tracing::info!(op = %s.signature, ms = t0.elapsed().as_secs_f64() * 1e3, "calibrated sparse kernels");
    if let Some(f) = &file {
        let c = Cached { fingerprint: fp, signature: s.signature.clone(), poly: poly.clone() };
        let write = || crate::cache_dir::write_atomic(f, &serde_json::to_vec_pretty(&c).map_err(std::io::Error::other)?);
        if let Err(e) = write() {
            tracing::warn!(file = %f.display(), "could not cache the calibration: {e}");
        }
    }
    Ok(poly)
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Cached {
    fingerprint: String,
    signature: String,
    poly: PolyKernel,
}

fn min_time(f: &dyn Fn() -> Result<()>, runs: usize) -> Result<f64> {
    f()?;
    let mut t = Vec::with_capacity(REPS);
    for _ in 0..REPS {
        let t0 = Instant::now();
        f()?;
        t.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    // Whole nanoseconds: the cache's JSON then reads back exactly the table that was measured.
    Ok((t.into_iter().fold(f64::INFINITY, f64::min) / runs.max(1) as f64 * 1e3).round() / 1e3)
}

fn measure(s: &Subject) -> Result<PolyKernel> {
    let dense = min_time(s.time_dense, s.runs_per_call)?;
    let mut members = vec![Member { schedule: Schedule::dense("dense"), table: DispatchTable::constant(dense)? }];
    let masks: Vec<BitMask> = DENSITIES.iter().enumerate().map(|(i, &d)| blob_mask(s.height, s.width, d, 0x9e37 + i as u64)).collect();
    for &g in &s.granularities {
        let mut points: Vec<(u32, f64)> = Vec::new();
        for m in &masks {
            let tiles = m.count_aligned_tiles(g) as u32;
            if points.iter().any(|p| p.0 == tiles) {
                continue;
            }
            let t = min_time(&|| (s.time_sparse)(m, g), s.runs_per_call)?;
            points.push((tiles, t));
        }
        points.sort_by_key(|p| p.0);
        // Times must not fall as tiles grow: noise in one point would otherwise make the table
        // claim that more work is cheaper.
        for i in 1..points.len() {
            points[i].1 = points[i].1.max(points[i - 1].1);
        }
        let table = DispatchTable::new(points).map_err(|e| Error::Other(format!("calibrating {}: {e}", s.signature)))?;
        members.push(Member { schedule: Schedule::sparse(format!("tiles{g}"), g), table });
    }
    prune(PolyKernel::new(members)?, s.height, s.width)
}

/// Densities at which the calibrated members are compared to find those that never win.
const PRUNE_DENSITIES: [f64; 12] = [0.01, 0.03, 0.06, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.65, 0.8, 0.95];

/// Drops the sparse members that are not the predicted best on any mask of a sweep of
/// densities: every member costs a DISTile count per frame (the bulk of the dispatch overhead),
/// and one that never wins buys nothing for it. The dense member always stays.
fn prune(poly: PolyKernel, h: usize, w: usize) -> Result<PolyKernel> {
    let mut wins = vec![false; poly.members().len()];
    wins[poly.dense_index()] = true;
    for (i, &d) in PRUNE_DENSITIES.iter().enumerate() {
        let m = blob_mask(h, w, d, 0x51ed + i as u64);
        wins[poly.select_for_mask(&m)] = true;
    }
    let kept: Vec<Member> = poly.members().iter().zip(&wins).filter(|(_, &win)| win).map(|(m, _)| m.clone()).collect();
    PolyKernel::new(kept)
}

/// Uniform values in [-1, 1) for float tensors (zeros for other types), seeded: operands for
/// timing kernels, where all-zero data could take shortcuts real frames do not.
pub(crate) fn random_tensor(dtype: dynaspa_runtime::DType, shape: &[usize], seed: u64) -> dynaspa_runtime::Tensor {
    use dynaspa_runtime::{DType, Tensor};
    let n: usize = shape.iter().product();
    if dtype != DType::F32 {
        return Tensor::zeros(dtype, shape.to_vec());
    }
    let mut st = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let v = (0..n)
        .map(|_| {
            st ^= st << 13;
            st ^= st >> 7;
            st ^= st << 17;
            (st >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect();
    Tensor::from_f32(shape.to_vec(), v).unwrap_or_else(|_| Tensor::zeros(dtype, shape.to_vec()))
}

/// A mask of roughly `density` made of random disks: real masks (saliency, moving objects,
/// edits) are blobs, and blobs set the ratio of tiles to active positions that matters here.
pub(crate) fn blob_mask(h: usize, w: usize, density: f64, seed: u64) -> BitMask {
    let mut st = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut rnd = move || {
        st ^= st << 13;
        st ^= st >> 7;
        st ^= st << 17;
        (st >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut m = BitMask::zeros(h, w);
    let target = (density * (h * w) as f64).round() as usize;
    let r_max = ((h.min(w) as f64) * 0.25).max(1.0);
    let mut guard = 0;
    while m.count_ones() < target && guard < 10_000 {
        guard += 1;
        let (cy, cx, r) = (rnd() * h as f64, rnd() * w as f64, 0.5 + rnd() * r_max);
        let (y0, y1) = (((cy - r).floor().max(0.0)) as usize, ((cy + r).ceil() as usize).min(h));
        let (x0, x1) = (((cx - r).floor().max(0.0)) as usize, ((cx + r).ceil() as usize).min(w));
        for y in y0..y1 {
            for x in x0..x1 {
                let (dy, dx) = (y as f64 + 0.5 - cy, x as f64 + 0.5 - cx);
                if dy * dy + dx * dx <= r * r {
                    m.set(y, x, true);
                }
            }
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_masks_reach_their_density_and_are_blobs() {
        for &(h, w) in &[(40usize, 40usize), (18, 24), (1, 197)] {
            for &d in &DENSITIES {
                let m = blob_mask(h, w, d, 7);
                let got = m.density();
                assert!(got >= d - 1e-9 && got < d + 0.35, "{h}x{w} d={d}: got {got}");
            }
        }
        // Blobs: far fewer 4x4 tiles than a scatter of the same density would need.
        let m = blob_mask(40, 40, 0.2, 3);
        assert!(m.count_aligned_tiles(Granularity::new(4, 4)) < 60, "{}", m.count_aligned_tiles(Granularity::new(4, 4)));
    }

    #[test]
    fn measures_then_reads_the_cache() {
        let dir = tempdir();
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let dense = || {
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            std::thread::sleep(std::time::Duration::from_micros(400));
            Ok(())
        };
        let sparse = |m: &BitMask, _g: Granularity| {
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            std::thread::sleep(std::time::Duration::from_micros(20 + 5 * m.count_ones() as u64));
            Ok(())
        };
        let sig = format!("test-op-{}", std::process::id());
        let s = Subject {
            signature: sig,
            height: 8,
            width: 8,
            granularities: vec![Granularity::new(2, 2)],
            time_dense: &dense,
            time_sparse: &sparse,
            runs_per_call: 1,
        };
        let p = poly_kernel(&s, 2, Some(&dir)).unwrap();
        let measured = calls.load(std::sync::atomic::Ordering::Relaxed);
        assert!(measured > 0);
        // Both members win somewhere (sparse at low density, dense near 1), so both are kept.
        assert_eq!(p.members().len(), 2);
        // Low density: the sparse member; everything set: 320 us of sparse beats 400 of dense
        // only barely, so just check the low end and that the table grows.
        assert_eq!(p.select(&[0, 2]), 1);
        let p2 = poly_kernel(&s, 2, Some(&dir)).unwrap();
        assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), measured, "second call measured again");
        assert_eq!(p2, p);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn prune_drops_members_that_never_win_and_keeps_dense() {
        let g1 = Granularity::new(1, 1);
        let g4 = Granularity::new(4, 4);
        let t = |pts: Vec<(u32, f64)>| DispatchTable::new(pts).unwrap();
        let members = vec![
            Member { schedule: Schedule::dense("dense"), table: DispatchTable::constant(500.0).unwrap() },
            // 1 µs per position: beats dense below ~500 of 1600 positions.
            Member { schedule: Schedule::sparse("tiles1x1", g1), table: t(vec![(1, 1.0), (1600, 1600.0)]) },
            // 20 µs per 4x4 tile (1.25 µs per position even when full): never the best.
            Member { schedule: Schedule::sparse("tiles4x4", g4), table: t(vec![(1, 20.0), (100, 2000.0)]) },
        ];
        let p = prune(PolyKernel::new(members).unwrap(), 40, 40).unwrap();
        let names: Vec<&str> = p.members().iter().map(|m| m.schedule.name.as_str()).collect();
        assert_eq!(names, ["dense", "tiles1x1"]);
        assert_eq!(p.granularities(), &[g1]);
        // A dense member that never wins stays all the same.
        let cheap = vec![
            Member { schedule: Schedule::dense("dense"), table: DispatchTable::constant(5000.0).unwrap() },
            Member { schedule: Schedule::sparse("tiles1x1", g1), table: t(vec![(1, 1.0), (1600, 1600.0)]) },
        ];
        assert_eq!(prune(PolyKernel::new(cheap).unwrap(), 40, 40).unwrap().members().len(), 2);
    }

    fn tempdir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("dynaspa-calib-{}-{}", std::process::id(), hash(&format!("{:?}", Instant::now()))));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
