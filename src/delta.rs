//! Delta mode's per-frame side: where the frame differs from what was last computed, as the
//! change map the rewritten graph takes (runtime/src/graph/delta.rs), and when to compute a
//! whole frame instead.

use dynaspa_runtime::graph::delta::{DeltaPlan, Spread};
use dynaspa_runtime::{Error, Result, Tensor};
use rayon::prelude::*;

/// How delta mode decides what changed (`SessionBuilder::delta`).
#[derive(Clone, Debug, PartialEq)]
pub struct DeltaOptions {
    /// A position changed when some channel of the frame differs by more than this from the
    /// value last computed there (in the model input's units; 0: any difference).
    pub threshold: f32,
    /// Changes are marked in blocks of this many positions a side (1: per position).
    pub block: usize,
    /// A whole frame every this many frames (0: only when `max_changed` says so).
    pub refresh_every: usize,
    /// A whole frame when more than this fraction of the positions changed.
    pub max_changed: f32,
    /// The frame input (default: the model's only 4-D FLOAT input).
    pub input: Option<String>,
    /// How far a change reaches through convs and pools: `Window` recomputes everything it
    /// reaches (results equal dense at threshold 0), `Stride` only the changed positions at each
    /// resolution, with norms over the plane normalising by the last whole frame's statistics
    /// (SIGE's approximation: faster, inexact beside a change).
    pub spread: Spread,
}

impl DeltaOptions {
    pub fn new(threshold: f32) -> DeltaOptions {
        DeltaOptions { threshold, block: 1, refresh_every: 0, max_changed: 0.5, input: None, spread: Spread::Window }
    }

    pub(crate) fn check(&self) -> Result<()> {
        if !self.threshold.is_finite() || self.threshold < 0.0 {
            return Err(Error::Other(format!("delta threshold must be a finite number >= 0, got {}", self.threshold)));
        }
        if self.block == 0 {
            return Err(Error::Other("delta block must be at least 1".into()));
        }
        if !(0.0..=1.0).contains(&self.max_changed) {
            return Err(Error::Other(format!("delta max_changed must lie in [0, 1], got {}", self.max_changed)));
        }
        Ok(())
    }
}

/// One session's delta state: the frame values each position was last computed from.
pub(crate) struct DeltaState {
    pub plan: DeltaPlan,
    opts: DeltaOptions,
    reference: Option<Vec<f32>>,
    since_full: usize,
    /// The last run failed: caches may be half updated, so the next frame is computed whole.
    pub must_refresh: bool,
    /// Fraction of positions recomputed in the last frame (1 for a whole frame).
    pub last_changed: Option<f64>,
}

impl DeltaState {
    pub fn new(plan: DeltaPlan, opts: DeltaOptions) -> DeltaState {
        DeltaState { plan, opts, reference: None, since_full: 0, must_refresh: false, last_changed: None }
    }

    /// The change map of `frame` (`[N, C, H, W]` FLOAT, already checked), updating the
    /// reference where the frame counts as changed.
    pub fn map_for(&mut self, frame: &Tensor) -> Result<Tensor> {
        let s = frame.shape();
        let (n, c, plane) = (s[0], s[1], s[2] * s[3]);
        let x = frame.as_f32()?;
        let refresh = self.opts.refresh_every > 0 && self.since_full + 1 >= self.opts.refresh_every;
        let mut map = vec![0.0f32; n * plane];
        let changed = match self.reference.as_mut() {
            Some(r) if !refresh && !self.must_refresh && r.len() == x.len() => {
                mark(x, r, (n, c, s[2], s[3]), self.opts.threshold, self.opts.block, &mut map);
                let count = map.iter().filter(|&&v| v != 0.0).count();
                let fraction = count as f64 / map.len().max(1) as f64;
                if fraction > self.opts.max_changed as f64 {
                    None
                } else {
                    for (img, m) in map.chunks_exact(plane).enumerate() {
                        let changed: Vec<usize> = m.iter().enumerate().filter(|(_, &v)| v != 0.0).map(|(p, _)| p).collect();
                        let (rs, xs) = (&mut r[img * c * plane..][..c * plane], &x[img * c * plane..][..c * plane]);
                        rs.par_chunks_mut(plane).zip(xs.par_chunks(plane)).for_each(|(rc, xc)| {
                            for &p in &changed {
                                rc[p] = xc[p];
                            }
                        });
                    }
                    Some(fraction)
                }
            }
            _ => None,
        };
        let fraction = match changed {
            Some(f) => {
                self.since_full += 1;
                f
            }
            None => {
                map.fill(1.0);
                match self.reference.as_mut() {
                    Some(r) if r.len() == x.len() => r.copy_from_slice(x),
                    _ => self.reference = Some(x.to_vec()),
                }
                self.since_full = 0;
                1.0
            }
        };
        self.must_refresh = false;
        self.last_changed = Some(fraction);
        Tensor::from_f32(vec![n, 1, s[2], s[3]], map)
    }
}

/// Sets `map[img, y, x]` to 1 where some channel of `x` differs from `r` by more than `t`, then
/// widens every mark to its whole `block` x `block` block. Bands of whole blocks' rows are
/// marked in parallel (a frame of 4.7 M values took 4 ms on one core).
fn mark(x: &[f32], r: &[f32], (n, c, h, w): (usize, usize, usize, usize), t: f32, block: usize, map: &mut [f32]) {
    let plane = h * w;
    if plane == 0 {
        return;
    }
    let band_rows = block * (64 / block).max(1);
    for img in 0..n {
        let m = &mut map[img * plane..][..plane];
        m.par_chunks_mut(band_rows * w).enumerate().for_each(|(band, m)| {
            let (start, len) = (band * band_rows * w, m.len());
            for ch in 0..c {
                let at = (img * c + ch) * plane + start;
                for ((mv, &a), &b) in m.iter_mut().zip(&x[at..at + len]).zip(&r[at..at + len]) {
                    // A NaN difference cannot reach here: frames are checked finite first.
                    if (a - b).abs() > t {
                        *mv = 1.0;
                    }
                }
            }
            widen_to_blocks(m, w, block);
        });
    }
}

/// Sets every `block` x `block` block of the rows `m` (`w` wide, blocks from its first row)
/// that holds a mark to 1 entirely.
fn widen_to_blocks(m: &mut [f32], w: usize, block: usize) {
    if block <= 1 {
        return;
    }
    let rows = m.len() / w;
    for by in (0..rows).step_by(block) {
        for bx in (0..w).step_by(block) {
            let (y1, x1) = ((by + block).min(rows), (bx + block).min(w));
            if (by..y1).any(|y| m[y * w + bx..y * w + x1].iter().any(|&v| v != 0.0)) {
                (by..y1).for_each(|y| m[y * w + bx..y * w + x1].fill(1.0));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> DeltaPlan {
        DeltaPlan { frame_input: "x".into(), map_input: "x:changed".into(), convs: vec![], elementwise: vec![], held_norms: vec![] }
    }

    fn rng_frame(seed: &mut u64, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| {
                *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (*seed >> 40) as f32 / 16777216.0
            })
            .collect()
    }

    #[test]
    fn maps_mark_changes_above_the_threshold_against_what_was_last_computed() {
        let mut seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1;
        let (c, h, w) = (3, 6, 8);
        let first = rng_frame(&mut seed, c * h * w);
        let mut d = DeltaState::new(plan(), DeltaOptions { max_changed: 1.0, ..DeltaOptions::new(0.1) });
        let t = |v: &Vec<f32>| Tensor::from_f32(vec![1, c, h, w], v.clone()).unwrap();
        assert!(d.map_for(&t(&first)).unwrap().as_f32().unwrap().iter().all(|&v| v == 1.0), "the first frame is whole");
        // Channel 2 of position (1, 3) moves by 0.3, position (4, 5) by 0.05 twice.
        let mut second = first.clone();
        second[2 * h * w + w + 3] += 0.3;
        second[4 * w + 5] += 0.05;
        let m = d.map_for(&t(&second)).unwrap();
        let ones: Vec<usize> = m.as_f32().unwrap().iter().enumerate().filter(|(_, &v)| v == 1.0).map(|(i, _)| i).collect();
        assert_eq!(ones, vec![w + 3]);
        assert!((d.last_changed.unwrap() - 1.0 / (h * w) as f64).abs() < 1e-12);
        let mut third = second.clone();
        third[4 * w + 5] += 0.06;
        let m = d.map_for(&t(&third)).unwrap();
        let ones: Vec<usize> = m.as_f32().unwrap().iter().enumerate().filter(|(_, &v)| v == 1.0).map(|(i, _)| i).collect();
        assert_eq!(ones, vec![4 * w + 5], "small changes add up against the reference until they pass the threshold");
    }

    #[test]
    fn blocks_refreshes_and_too_many_changes_give_whole_areas() {
        let (c, h, w) = (1, 4, 4);
        let base = vec![0.5f32; c * h * w];
        let t = |v: &Vec<f32>| Tensor::from_f32(vec![1, c, h, w], v.clone()).unwrap();
        let mut d = DeltaState::new(plan(), DeltaOptions { block: 2, refresh_every: 3, max_changed: 0.5, ..DeltaOptions::new(0.0) });
        d.map_for(&t(&base)).unwrap();
        let mut f = base.clone();
        f[w + 1] = 0.7;
        let m = d.map_for(&t(&f)).unwrap();
        assert_eq!(m.as_f32().unwrap(), &[1., 1., 0., 0., 1., 1., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0.]);
        let m = d.map_for(&t(&f)).unwrap();
        assert!(m.as_f32().unwrap().iter().all(|&v| v == 0.0) && d.last_changed == Some(0.0), "nothing changed");
        let m = d.map_for(&t(&f)).unwrap();
        assert!(m.as_f32().unwrap().iter().all(|&v| v == 1.0), "every third frame is whole");
        let g: Vec<f32> = f.iter().map(|v| v + 1.0).collect();
        let m = d.map_for(&t(&g)).unwrap();
        assert!(m.as_f32().unwrap().iter().all(|&v| v == 1.0) && d.last_changed == Some(1.0), "more than half changed");
        let opts = DeltaOptions { threshold: f32::NAN, ..DeltaOptions::new(0.0) };
        assert!(opts.check().unwrap_err().to_string().contains("threshold"));
    }

    /// Bands marked in parallel give the map of the plain definition: every block holding a
    /// position where some channel moved by more than the threshold, on planes of many bands.
    #[test]
    fn parallel_bands_mark_whole_blocks_across_the_plane() {
        let mut seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1;
        for (n, c, h, w, block) in [(2, 3, 150, 70, 3), (1, 2, 131, 9, 1), (1, 1, 200, 33, 8)] {
            let r = rng_frame(&mut seed, n * c * h * w);
            let x: Vec<f32> = r.iter().zip(rng_frame(&mut seed, r.len())).map(|(&a, u)| if u < 0.01 { a + 0.5 } else { a }).collect();
            let mut got = vec![0.0; n * h * w];
            mark(&x, &r, (n, c, h, w), 0.1, block, &mut got);
            for img in 0..n {
                for y in 0..h {
                    for xx in 0..w {
                        let (by, bx) = (y / block * block, xx / block * block);
                        let moved = (by..(by + block).min(h)).any(|yy| {
                            (bx..(bx + block).min(w)).any(|xq| {
                                (0..c).any(|ch| (x[((img * c + ch) * h + yy) * w + xq] - r[((img * c + ch) * h + yy) * w + xq]).abs() > 0.1)
                            })
                        });
                        assert_eq!(got[(img * h + y) * w + xx] == 1.0, moved, "{n}x{c}x{h}x{w} block {block}: image {img} at ({y}, {xx})");
                    }
                }
            }
        }
    }
}
