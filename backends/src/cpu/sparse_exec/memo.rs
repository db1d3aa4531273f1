//! Per frame, the `BitMask`s and DISTile counts of each mask value, computed once and shared by
//! every sparse op that reads that value (DynConv's conv2 and conv3 read the same mask).

use dynaspa_runtime::graph::MaskKind;
use dynaspa_runtime::sparsity::{BitMask, Granularity};
use dynaspa_runtime::Result;
use std::sync::Arc;

pub(crate) struct MaskInfo {
    /// One per image of the batch.
    pub masks: Arc<[BitMask]>,
    pub density: f64,
    /// Set positions over all images: the 1x1 DISTile count.
    pub ones: usize,
    /// How the masks were read; a reader wanting another reading rebuilds them.
    key: (MaskKind, usize, usize, usize),
    /// The frame (`MaskMemo::frame`) the masks are of.
    frame: u64,
    /// Tile counts asked for so far this frame (summed over images); a fixed array, so that
    /// dispatch allocates nothing per op.
    counts: [(Granularity, usize); MEMO_COUNTS],
    n_counts: usize,
}

/// Granularities whose counts are kept per mask and frame (a PolyKernel has at most 8 members,
/// one dense); more are counted again when asked.
const MEMO_COUNTS: usize = 8;

impl MaskInfo {
    /// DISTile count at `g` summed over images, counted on first use in the frame; the time
    /// spent counting (not looking up) is added to `spent`.
    pub fn count(&mut self, g: Granularity, spent: &mut std::time::Duration) -> usize {
        let g = g.effective();
        if g == Granularity::new(1, 1) {
            return self.ones;
        }
        if let Some(&(_, n)) = self.counts[..self.n_counts].iter().find(|(h, _)| *h == g) {
            return n;
        }
        let t = std::time::Instant::now();
        // A span of its own (inside `select`, which asked), so the trace shows the counting
        // that lazy selection could not avoid.
        let n = {
            let _s = tracing::trace_span!("tiles").entered();
            self.masks.iter().map(|m| m.count_aligned_tiles(g)).sum()
        };
        *spent += t.elapsed();
        if self.n_counts < MEMO_COUNTS {
            self.counts[self.n_counts] = (g, n);
            self.n_counts += 1;
        }
        n
    }
}

pub(crate) struct MaskMemo {
    /// Indexed by graph value id; entries of earlier frames are kept for their storage.
    entries: Vec<Option<MaskInfo>>,
    frame: u64,
}

/// How a mask value becomes `BitMask`s: `new` makes them, `refill` rewrites ones of the same
/// reading in place (last frame's, when no one holds them any more).
pub(crate) trait MaskSource {
    fn new(&self) -> Result<Vec<BitMask>>;
    fn refill(&self, masks: &mut [BitMask]) -> Result<()>;
}

impl MaskMemo {
    pub fn new(values: usize) -> MaskMemo {
        MaskMemo { entries: (0..values).map(|_| None).collect(), frame: 0 }
    }
    /// A new frame has new mask values: every entry is stale from now on.
    pub fn clear(&mut self) {
        self.frame += 1;
    }
    /// The masks of value `id` read as `key` = (kind, images, h, w), built from `src` on first
    /// use in the frame.
    pub fn get(&mut self, id: usize, key: (MaskKind, usize, usize, usize), src: &impl MaskSource) -> Result<&mut MaskInfo> {
        if id >= self.entries.len() {
            self.entries.resize_with(id + 1, || None);
        }
        let frame = self.frame;
        let slot = &mut self.entries[id];
        if slot.as_ref().is_some_and(|e| e.frame == frame && e.key == key) {
            return Ok(slot.as_mut().expect("checked above"));
        }
        // Last frame's storage, when it is the same reading and no buffer still refers to it.
        let mut reuse = slot.take().filter(|e| e.key == key).map(|e| e.masks);
        let masks: Arc<[BitMask]> = match reuse.as_mut().and_then(Arc::get_mut) {
            Some(ms) => {
                src.refill(ms)?;
                reuse.take().expect("borrowed just above")
            }
            None => src.new()?.into(),
        };
        // One popcount per mask gives both the density and the 1x1 tile count.
        let (mut ones, mut density) = (0, 0.0);
        for m in masks.iter() {
            let n = m.count_ones();
            ones += n;
            density += if m.is_empty() { 0.0 } else { n as f64 / m.len() as f64 };
        }
        density /= masks.len().max(1) as f64;
        let counts = [(Granularity::new(1, 1), 0); MEMO_COUNTS];
        Ok(slot.insert(MaskInfo { masks, density, ones, key, frame, counts, n_counts: 0 }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Src<'a>(&'a [BitMask], std::cell::Cell<(usize, usize)>);
    impl MaskSource for Src<'_> {
        fn new(&self) -> Result<Vec<BitMask>> {
            self.1.set((self.1.get().0 + 1, self.1.get().1));
            Ok(self.0.to_vec())
        }
        fn refill(&self, masks: &mut [BitMask]) -> Result<()> {
            self.1.set((self.1.get().0, self.1.get().1 + 1));
            masks.clone_from_slice(self.0);
            Ok(())
        }
    }

    #[test]
    fn built_once_per_frame_reused_next_frame_and_counts_match_direct_counting() {
        let bits: Vec<f32> = (0..6 * 10).map(|i| ((i * 7) % 5 == 0) as u8 as f32).collect();
        let m = BitMask::from_f32(6, 10, &bits).unwrap();
        let other = BitMask::from_fn(6, 10, |y, x| (y + x) % 4 == 0);
        let key = (MaskKind::Spatial, 1, 6, 10);
        let mut memo = MaskMemo::new(3);
        let src = Src(std::slice::from_ref(&m), Default::default());
        let gs = [Granularity::new(2, 8), Granularity::new(1, 1)];
        let mut spent = std::time::Duration::ZERO;
        for _ in 0..2 {
            let info = memo.get(1, key, &src).unwrap();
            let got: Vec<usize> = gs.iter().map(|&g| info.count(g, &mut spent)).collect();
            assert_eq!(got, m.count_tiles_many(&gs));
            assert_eq!(info.count(Granularity::new(4, 4), &mut spent), m.count_aligned_tiles(Granularity::new(4, 4)));
            assert_eq!(info.ones, m.count_ones());
        }
        assert_eq!(src.1.get(), (1, 0));
        // More granularities than the memo keeps are still counted right.
        let info = memo.get(1, key, &src).unwrap();
        for h in 1..=12u16 {
            let g = Granularity::new(h, 3);
            assert_eq!(info.count(g, &mut spent), m.count_aligned_tiles(g));
            assert_eq!(info.count(g, &mut spent), m.count_aligned_tiles(g));
        }
        // Another reading of the same value builds anew; the next frame refills in place, and
        // its counts are of the new masks.
        memo.get(1, (MaskKind::Spatial, 2, 6, 10), &Src(&[m.clone(), m.clone()], Default::default())).unwrap();
        memo.clear();
        memo.get(1, key, &src).unwrap();
        memo.clear();
        let src2 = Src(std::slice::from_ref(&other), Default::default());
        let info = memo.get(1, key, &src2).unwrap();
        assert_eq!(src2.1.get(), (0, 1), "refilled, not rebuilt");
        assert_eq!(&info.masks[..], std::slice::from_ref(&other));
        assert_eq!(info.ones, other.count_ones());
        assert_eq!(info.count(Granularity::new(2, 8), &mut spent), other.count_aligned_tiles(Granularity::new(2, 8)));
        // Held elsewhere (a buffer still being cleared): built anew, the holder's copy untouched.
        let held = info.masks.clone();
        memo.clear();
        let info = memo.get(1, key, &src).unwrap();
        assert_eq!(&info.masks[..], std::slice::from_ref(&m));
        assert_eq!(&held[..], std::slice::from_ref(&other));
    }
}
