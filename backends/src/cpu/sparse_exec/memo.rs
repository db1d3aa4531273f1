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
    /// How the masks were read; a reader wanting another reading rebuilds them.
    key: (MaskKind, usize, usize, usize),
    counts: Vec<(Granularity, usize)>,
}

impl MaskInfo {
    /// DISTile counts summed over images, one per granularity of `grans`; only granularities no
    /// earlier reader asked for are counted now.
    pub fn counts(&mut self, grans: &[Granularity]) -> Vec<usize> {
        let missing: Vec<Granularity> =
            grans.iter().copied().filter(|g| !self.counts.iter().any(|(h, _)| h == g)).collect();
        if !missing.is_empty() {
            let mut sums = vec![0usize; missing.len()];
            for m in self.masks.iter() {
                for (s, n) in sums.iter_mut().zip(m.count_tiles_many(&missing)) {
                    *s += n;
                }
            }
            self.counts.extend(missing.into_iter().zip(sums));
        }
        grans.iter().map(|g| self.counts.iter().find(|(h, _)| h == g).map_or(0, |&(_, n)| n)).collect()
    }
}

pub(crate) struct MaskMemo {
    /// Indexed by graph value id.
    entries: Vec<Option<MaskInfo>>,
}

impl MaskMemo {
    pub fn new(values: usize) -> MaskMemo {
        MaskMemo { entries: (0..values).map(|_| None).collect() }
    }
    /// Forgets every mask: a new frame has new mask values.
    pub fn clear(&mut self) {
        self.entries.iter_mut().for_each(|e| *e = None);
    }
    /// The masks of value `id` read as `key` = (kind, images, h, w), built by `build` on first use.
    pub fn get(
        &mut self,
        id: usize,
        key: (MaskKind, usize, usize, usize),
        build: impl FnOnce() -> Result<Vec<BitMask>>,
    ) -> Result<&mut MaskInfo> {
        if id >= self.entries.len() {
            self.entries.resize_with(id + 1, || None);
        }
        let slot = &mut self.entries[id];
        if slot.as_ref().is_none_or(|e| e.key != key) {
            let masks = build()?;
            // One popcount per mask gives both the density and the 1x1 tile count.
            let ones: Vec<usize> = masks.iter().map(BitMask::count_ones).collect();
            let density = masks.iter().zip(&ones).map(|(m, &n)| if m.is_empty() { 0.0 } else { n as f64 / m.len() as f64 }).sum::<f64>()
                / masks.len().max(1) as f64;
            let counts = vec![(Granularity::new(1, 1), ones.iter().sum())];
            *slot = Some(MaskInfo { masks: masks.into(), density, key, counts });
        }
        Ok(slot.as_mut().expect("filled above"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_once_per_frame_and_counts_match_direct_counting() {
        let bits: Vec<f32> = (0..6 * 10).map(|i| ((i * 7) % 5 == 0) as u8 as f32).collect();
        let m = BitMask::from_f32(6, 10, &bits).unwrap();
        let key = (MaskKind::Spatial, 1, 6, 10);
        let mut memo = MaskMemo::new(3);
        let mut builds = 0;
        let gs = [Granularity::new(2, 8), Granularity::new(1, 1)];
        for _ in 0..2 {
            let info = memo.get(1, key, || { builds += 1; Ok(vec![m.clone()]) }).unwrap();
            assert_eq!(info.counts(&gs), m.count_tiles_many(&gs));
            assert_eq!(info.counts(&[Granularity::new(4, 4)]), vec![m.count_aligned_tiles(Granularity::new(4, 4))]);
        }
        assert_eq!(builds, 1);
        // Another reading of the same value, or a new frame, rebuilds.
        memo.get(1, (MaskKind::Spatial, 2, 6, 10), || { builds += 1; Ok(vec![m.clone(), m.clone()]) }).unwrap();
        memo.clear();
        memo.get(1, key, || { builds += 1; Ok(vec![m.clone()]) }).unwrap();
        assert_eq!(builds, 3);
    }
}
