//! Sparse ops at run time. Per frame and mask value, the first op reading the mask launches
//! bitmask.cl (words, DISTile counts and lists for every granularity, on the device) and reads
//! back only the counts; every op sharing the mask reuses them (`Frames::counts`). Each op then
//! picks its PolyKernel member from the counts and replays that member's launches, which
//! were built at compile time: their grids cover every tile the map can have and work-groups
//! past the frame's count return at once, so nothing is sized on the host per frame.
//!
//! The readback is the one host sync a sparse region adds per frame: `download` waits for the
//! main queue to drain up to the bitmask launch (the mask's producer included), then copies
//! `images x (granularities + 1)` ints. On a discrete GPU that is one round trip through the
//! driver (a few µs to ~20 µs with the drain); work queued behind it cannot start before the
//! host has selected, so the GPU idles for about that long once per mask per frame.

use super::meta::MetaLayout;
use crate::cpu::ForceMember;
use crate::gpu::device::GpuDevice;
use crate::gpu::lower::ctx::{replay_launches, BufId, Launch};
use dynaspa_runtime::dispatch::PolyKernel;
use dynaspa_runtime::graph::FillPolicy;
use dynaspa_runtime::report::{PhaseTimes, SparseOpRecord};
use dynaspa_runtime::sparsity::Granularity;
use dynaspa_runtime::{Error, Result};
use std::time::Instant;

/// One reading (images x h x w) of one mask value, and where its bitmask results live.
pub(crate) struct MaskPlan<K> {
    pub name: String,
    pub value: usize,
    pub mask_buf: BufId,
    /// Floats per image in the mask tensor (0: one mask broadcast over the batch).
    pub mask_stride: usize,
    pub meta: BufId,
    pub layout: MetaLayout,
    pub bitmask: Launch<K>,
}

/// One sparse op's members and fill.
pub(crate) struct SparseOp<K> {
    pub node: String,
    pub op: &'static str,
    pub mask: usize,
    pub fill: FillPolicy,
    pub poly: PolyKernel,
    /// Launches per member granularity (`None`: the dense member).
    pub members: Vec<(Option<Granularity>, Vec<Launch<K>>)>,
    /// `Residual`: act(residual) at inactive positions, before any member.
    pub residual_fill: Vec<Launch<K>>,
    /// `Cached`: the first frame computes every position (there is nothing cached yet).
    pub cached_first: Vec<Launch<K>>,
    pub cached_ready: bool,
    /// `Zero`: the output buffer and its bytes, zeroed on the second queue before the member
    /// runs, once the step `zero_after` (the buffer's last earlier user) is done.
    pub zero: Option<(BufId, usize)>,
    pub zero_after: Option<usize>,
    pub force: Option<ForceMember>,
    /// The vendor call the dense member makes (`None`: our kernel).
    pub dense_vendor: Option<String>,
}

/// Every sparse op of an executable and the per-frame state.
pub(crate) struct Frames<K, E> {
    pub masks: Vec<MaskPlan<K>>,
    pub ops: Vec<SparseOp<K>>,
    counts: Vec<Option<Vec<usize>>>,
    zero_events: Vec<Option<E>>,
}

impl<K, E> Frames<K, E> {
    pub(crate) fn new() -> Frames<K, E> {
        Frames { masks: Vec::new(), ops: Vec::new(), counts: Vec::new(), zero_events: Vec::new() }
    }

    pub(crate) fn begin_frame(&mut self) {
        self.counts = (0..self.masks.len()).map(|_| None).collect();
        self.zero_events = (0..self.ops.len()).map(|_| None).collect();
    }
}

impl<K, E> Frames<K, E> {
    /// Queues the zero fill of every `Zero` op whose buffer is free once step `after` is done
    /// (`None`: free from the start of the frame).
    pub(crate) fn issue_zero_fills<D>(&mut self, dev: &D, bufs: &[D::Buffer], after: Option<usize>) -> Result<()>
    where
        D: GpuDevice<Kernel = K, Event = E>,
    {
        let mut marker = None;
        for (i, op) in self.ops.iter().enumerate() {
            if let (Some((b, bytes)), true) = (op.zero, op.zero_after == after) {
                if marker.is_none() {
                    marker = Some(dev.marker()?);
                }
                let ev = dev.fill_zero_async(&bufs[b], 0, bytes, std::slice::from_ref(marker.as_ref().expect("made above")))?;
                self.zero_events[i] = Some(ev);
            }
        }
        Ok(())
    }

    /// Tile counts per granularity of mask `m` this frame (summed over images), launching the
    /// bitmask kernel and reading the counts back on first use.
    fn counts<D>(&mut self, dev: &D, bufs: &[D::Buffer], m: usize) -> Result<&[usize]>
    where
        D: GpuDevice<Kernel = K, Event = E>,
    {
        if self.counts[m].is_none() {
            let mp = &self.masks[m];
            replay_launches(dev, bufs, std::slice::from_ref(&mp.bitmask))?;
            let mut raw = vec![0u8; mp.layout.data0 * 4];
            dev.download(&bufs[mp.meta], 0, &mut raw)?;
            let ints: Vec<i32> = raw.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            // The offending value, for the error message only.
            let value = |img: usize, pos: usize| {
                let mut b = [0u8; 4];
                dev.download(&bufs[mp.mask_buf], (img * mp.mask_stride + pos) * 4, &mut b).ok().map(|_| f32::from_le_bytes(b))
            };
            self.counts[m] = Some(mp.layout.decode(&ints, &mp.name, value)?);
        }
        Ok(self.counts[m].as_deref().expect("filled above"))
    }

    /// Runs sparse op `i`: selection, fill, the chosen member. `poison`: the step's outputs were
    /// just filled with NaN, so the zero fill must come after that, not ahead of time.
    pub(crate) fn run_op<D>(&mut self, dev: &D, bufs: &[D::Buffer], i: usize, poison: bool) -> Result<SparseOpRecord>
    where
        D: GpuDevice<Kernel = K, Event = E>,
    {
        let mut ph = PhaseTimes::default();
        let t0 = Instant::now();
        let m = self.ops[i].mask;
        let fresh = self.counts[m].is_none();
        let counts = self.counts(dev, bufs, m)?.to_vec();
        let t1 = Instant::now();
        let layout = &self.masks[m].layout;
        let ones = layout.index(Granularity::new(1, 1)).map_or(0, |k| counts[k]);
        let density = ones as f64 / (layout.images * layout.h * layout.w) as f64;
        let op = &self.ops[i];
        let choice = choose(op, layout, &counts)?;
        let t2 = Instant::now();
        if fresh {
            ph.bitmask = t1 - t0;
        }
        ph.select = t2 - t1;
        if let Some((b, bytes)) = op.zero {
            let ev = match self.zero_events[i].take() {
                Some(ev) if !poison => ev,
                _ => {
                    let mk = dev.marker()?;
                    dev.fill_zero_async(&bufs[b], 0, bytes, &[mk])?
                }
            };
            dev.wait_for(&[ev])?;
        }
        let t3 = Instant::now();
        ph.zero_fill = t3 - t2;
        let op = &mut self.ops[i];
        replay_launches(dev, bufs, &op.residual_fill)?;
        let first_cached = op.fill == FillPolicy::Cached && !op.cached_ready;
        let (member, granularity, tiles) = if first_cached {
            replay_launches(dev, bufs, &op.cached_first)?;
            op.cached_ready = true;
            ("dense (first cached frame)".to_string(), None, 0)
        } else {
            let (gran, launches) = &op.members[choice.1];
            replay_launches(dev, bufs, launches)?;
            let tiles = gran.and_then(|g| layout.index(g)).map_or(0, |k| counts[k]);
            (op.poly.members()[choice.0].schedule.name.clone(), *gran, tiles)
        };
        ph.compute = t3.elapsed();
        Ok(SparseOpRecord { node: op.node.clone(), op: op.op.to_string(), density, member, granularity, tiles, phases: ph })
    }
}

/// (PolyKernel member, index into `op.members`) for this frame's counts.
fn choose<K>(op: &SparseOp<K>, layout: &MetaLayout, counts: &[usize]) -> Result<(usize, usize)> {
    let members = op.poly.members();
    let pick = match op.force {
        Some(ForceMember::Dense) => op.poly.dense_index(),
        Some(ForceMember::Tiles(g)) => {
            let dist = |h: Granularity| (h.h as i32 - g.h as i32).abs() + (h.w as i32 - g.w as i32).abs();
            members
                .iter()
                .enumerate()
                .filter_map(|(i, m)| m.schedule.granularity.map(|h| (dist(h), i)))
                .min()
                .map_or(op.poly.dense_index(), |(_, i)| i)
        }
        None => {
            let per_gran: Vec<usize> = op
                .poly
                .granularities()
                .iter()
                .map(|&g| layout.index(g).map_or(usize::MAX, |k| counts[k]))
                .collect();
            op.poly.try_select(&op.poly.member_counts(&per_gran)?)?
        }
    };
    let gran = members[pick].schedule.granularity;
    let idx = op
        .members
        .iter()
        .position(|(g, _)| *g == gran)
        .ok_or_else(|| Error::Other(format!("{}: no kernel for member '{}'", op.node, members[pick].schedule.name)))?;
    Ok((pick, idx))
}

impl<K, E> Frames<K, E> {
    /// Member names of op `i`, in PolyKernel order (benchmarks).
    pub(crate) fn member_names(&self, i: usize) -> Vec<String> {
        self.ops[i].poly.members().iter().map(|m| m.schedule.name.clone()).collect()
    }

    /// The launches of op `i`'s member `name` (with the residual fill, which every member needs).
    pub(crate) fn member_launches(&self, i: usize, name: &str) -> Option<Vec<&Launch<K>>> {
        let op = &self.ops[i];
        let gran = op.poly.members().iter().find(|m| m.schedule.name == name)?.schedule.granularity;
        let (_, l) = op.members.iter().find(|(g, _)| *g == gran)?;
        Some(op.residual_fill.iter().chain(l.iter()).collect())
    }

    /// One frame's dispatch of op `i` from scratch: bitmask launch, counts readback, selection.
    /// Returns the chosen member's name.
    pub(crate) fn dispatch_once<D>(&mut self, dev: &D, bufs: &[D::Buffer], i: usize) -> Result<String>
    where
        D: GpuDevice<Kernel = K, Event = E>,
    {
        let m = self.ops[i].mask;
        if self.counts.len() != self.masks.len() {
            self.begin_frame();
        }
        self.counts[m] = None;
        let counts = self.counts(dev, bufs, m)?.to_vec();
        let (pick, _) = choose(&self.ops[i], &self.masks[m].layout, &counts)?;
        Ok(self.ops[i].poly.members()[pick].schedule.name.clone())
    }

    /// Tiles of op `i`'s member granularity in the last frame (0 for dense or unknown).
    pub(crate) fn last_tiles(&self, i: usize, gran: Option<Granularity>) -> usize {
        let m = self.ops[i].mask;
        match (self.counts.get(m).and_then(|c| c.as_ref()), gran) {
            (Some(c), Some(g)) => self.masks[m].layout.index(g).map_or(0, |k| c[k]),
            _ => 0,
        }
    }
}
