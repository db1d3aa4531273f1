//! Sparse ops at run time. Per frame and mask value, the first op reading the mask launches
//! bitmask.cl (words, DISTile counts and lists for every granularity, on the device); every op
//! sharing the mask then picks its PolyKernel member from DISTile counts and replays that
//! member's launches, which were built at compile time: their grids cover every tile the map
//! can have and work-groups past the device-side count return at once, so any member computes
//! the right output whatever counts the host selected with.
//!
//! That is what lets selection run without a host sync (`CountsSync::Lagged`, the default):
//! the counts reach host memory behind the frame's work (stored there by the bitmask launch
//! itself where the device maps host memory, CUDA; else copied by `download_async`) and read at
//! the end of the frame, after its outputs (the queue has drained by then, so the read waits for
//! nothing); the next frame selects with them. A camera's masks change little from one frame to
//! the next, so the pick is the one the exact counts would give nearly always, and the GPU never
//! idles waiting for the host. The first frame, and every frame under `CountsSync::Exact`, reads
//! the counts back right after the bitmask launch: one round trip per mask per frame that the
//! work queued behind it must wait for (~30 µs on an H100 through the driver).
//!
//! Members that list their own columns (1x1 GEMMs with SELF_LIST) read no metadata. When a
//! frame's first op on a mask selects one with lagged counts, the bitmask launch goes to the
//! second queue instead, behind the work so far, and the member starts at once beside it; the
//! counts copy, if any, follows it there. The main queue waits for that launch only before work
//! that needs it done (`settle`): a step using the mask's buffer or metadata (the buffer may be
//! pooled with a value written later), the mask's next reader, the next frame's uploads. So the
//! kernel after the member can overlap it, which on CUDA saved the wait's 1.1 µs per frame.
//! Where the mask was planned with 1x1 tiles alone, its counts are one count and one bad-value
//! word per image, which such a member finds anyway: it stores them where the launch would
//! (SELF_COUNT), and a frame whose readers of the mask all do makes no bitmask launch for it.
//! At low density a frame's launches, not its work, set its time (3.5-5.7 µs each back to back
//! on an H200, benches/RESULTS.md "The launch floor"), so a lone op's frame is then its member's
//! launches alone.

use super::meta::MetaLayout;
use crate::gpu::device::GpuDevice;
use crate::gpu::dtype::Precision;
use crate::gpu::lower::ctx::{replay_async, replay_expecting, replay_launches, BufId, LArg, Launch};
use crate::ForceMember;
use dynaspa_runtime::dispatch::PolyKernel;
use dynaspa_runtime::graph::FillPolicy;
use dynaspa_runtime::report::{PhaseTimes, SparseOpRecord};
use dynaspa_runtime::sparsity::Granularity;
use dynaspa_runtime::{DType, Error, Result};
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
    /// Where a self-listing member may store this mask's counts in the bitmask launch's place
    /// (SELF_COUNT) and its ints per image: the host-mapped counts where the device maps host
    /// memory, else `meta`'s counts region (copied to the host as the launch's are). `None`
    /// where the mask's layout has more than the 1x1 count, which only the launch makes.
    pub report: Option<(BufId, usize)>,
    /// How the mask's floats are stored.
    pub precision: Precision,
}

/// One sparse op's members and fill.
pub(crate) struct SparseOp<K> {
    pub node: String,
    pub op: &'static str,
    pub mask: usize,
    pub fill: FillPolicy,
    pub poly: PolyKernel,
    /// Launches of each PolyKernel member, in `poly.members()` order (members may share a
    /// granularity and differ in their other knobs).
    pub members: Vec<Vec<Launch<K>>>,
    /// Whether `poly` came from a profile (else calibration, or a forced member's placeholder).
    pub from_profile: bool,
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
    /// The member the last frame ran (benchmarks time it).
    pub last_pick: Option<usize>,
    /// Per member, in `members` order: whether it reads no mask metadata (lists its own
    /// columns); missing entries read it.
    pub meta_free: Vec<bool>,
    /// Per member, in `members` order: whether it also stores the mask's counts (SELF_COUNT),
    /// so a frame running it needs no bitmask launch for them; missing entries do not.
    pub reports_counts: Vec<bool>,
    /// A member every frame runs whatever the counts (benchmarks time one member's frames).
    pub pin: Option<usize>,
    /// Whether its self-listing members may read the mask before their PDL wait: no launch
    /// queued just ahead of them writes it (`MaskColumns::prewait`; the kernel honours it on
    /// CUDA alone).
    pub mask_prewait: bool,
}

impl<K> SparseOp<K> {
    /// Node `n`'s op running `members` of `poly` over mask plan `mask`, with nothing else: no
    /// residual, cached or zero fill, not from a profile, no member forced, no vendor call.
    pub(crate) fn new(
        n: &dynaspa_runtime::graph::Node,
        mask: usize,
        fill: FillPolicy,
        poly: PolyKernel,
        members: Vec<Vec<Launch<K>>>,
    ) -> SparseOp<K> {
        SparseOp {
            node: n.name.clone(),
            op: n.op.name(),
            mask,
            fill,
            poly,
            members,
            from_profile: false,
            residual_fill: Vec::new(),
            cached_first: Vec::new(),
            cached_ready: false,
            zero: None,
            zero_after: None,
            force: None,
            dense_vendor: None,
            last_pick: None,
            meta_free: Vec::new(),
            reports_counts: Vec::new(),
            pin: None,
            mask_prewait: false,
        }
    }
}

/// How the host learns a frame's DISTile counts (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CountsSync {
    /// Select with the previous frame's counts, read without waiting; the first frame waits.
    #[default]
    Lagged,
    /// Wait for this frame's counts before the first op reading the mask (one sync per mask).
    Exact,
}

impl CountsSync {
    /// `lagged` or `exact` (any case); `None` for anything else.
    pub fn parse(s: &str) -> Option<CountsSync> {
        match s.trim().to_ascii_lowercase().as_str() {
            "lagged" => Some(CountsSync::Lagged),
            "exact" => Some(CountsSync::Exact),
            _ => None,
        }
    }
}

/// Per mask: the counts the frame selects with, and this frame's counts in flight to the host.
struct MaskCounts<S> {
    /// Counts for selection this frame (`None`: not launched yet this frame).
    select: Option<Vec<usize>>,
    /// This frame's exact counts, once known.
    exact: Option<Vec<usize>>,
    /// Last frame's exact counts (what `Lagged` selects with).
    last: Option<Vec<usize>>,
    /// Host memory the counts are copied into, and whether a copy of this frame is in it.
    staging: Option<S>,
    in_flight: bool,
    /// `staging` is mapped host memory the bitmask launch stores the counts into itself: no
    /// copy is queued (`GpuDevice::host_mapped`).
    mapped: bool,
}

impl<S> Default for MaskCounts<S> {
    fn default() -> Self {
        MaskCounts { select: None, exact: None, last: None, staging: None, in_flight: false, mapped: false }
    }
}

/// Every sparse op of an executable and the per-frame state.
pub(crate) struct Frames<D: GpuDevice> {
    pub masks: Vec<MaskPlan<D::Kernel>>,
    pub ops: Vec<SparseOp<D::Kernel>>,
    /// Granularities each mask reading (value, images, h, w) needs tile lists for: what the
    /// PolyKernels of the ops reading it use, decided before lowering (profiles bring their own).
    pub grans: Vec<((usize, usize, usize, usize), Vec<Granularity>)>,
    pub sync: CountsSync,
    counts: Vec<MaskCounts<D::Staging>>,
    zero_events: Vec<Option<D::Event>>,
    /// Per mask, the event of its bitmask launch on the second queue that the main queue has
    /// not waited for yet (`settle`). Kept across frames: the main queue waits only before work
    /// that needs it, so a kernel after the member can overlap it (`cuda/pdl.rs`).
    pending: Vec<Option<D::Event>>,
    /// The whole frame is being recorded (`gpu/frame_graphs.rs`): its counts are queued into
    /// the graph, not read at once.
    pub recording_frame: bool,
}

impl<D: GpuDevice> Frames<D> {
    pub(crate) fn new(sync: CountsSync) -> Frames<D> {
        Frames {
            masks: Vec::new(),
            ops: Vec::new(),
            grans: Vec::new(),
            sync,
            counts: Vec::new(),
            zero_events: Vec::new(),
            pending: Vec::new(),
            recording_frame: false,
        }
    }

    /// Mask `m`'s bitmask launch stores its counts into `st` (mapped host memory) itself.
    pub(crate) fn map_counts(&mut self, m: usize, st: D::Staging) {
        if self.counts.len() <= m {
            self.counts.resize_with(m + 1, MaskCounts::default);
        }
        self.counts[m].staging = Some(st);
        self.counts[m].mapped = true;
    }

    pub(crate) fn begin_frame(&mut self) {
        self.counts.resize_with(self.masks.len(), MaskCounts::default);
        for c in &mut self.counts {
            c.select = None;
            c.exact = None;
            c.in_flight = false;
        }
        self.zero_events = (0..self.ops.len()).map(|_| None).collect();
        self.pending.resize_with(self.masks.len(), || None);
    }

    /// Makes the main queue wait for mask `m`'s bitmask launch on the second queue, if it has
    /// not yet: before main-queue work that writes the mask's buffer or reads or writes its
    /// metadata. (Second-queue work needs no wait: that queue runs in order.)
    pub(crate) fn settle(&mut self, dev: &D, m: usize) -> Result<()> {
        match self.pending.get_mut(m).and_then(Option::take) {
            Some(ev) => dev.wait_for(&[ev]),
            None => Ok(()),
        }
    }

    /// `settle` for every mask: before host uploads, which could overwrite a mask.
    pub(crate) fn settle_all(&mut self, dev: &D) -> Result<()> {
        (0..self.pending.len()).try_for_each(|m| self.settle(dev, m))
    }

    /// Remembers `ev` (mask `m`'s bitmask on the second queue) until `settle`; an earlier one
    /// pending is covered, as it ran before it on that queue.
    fn defer(&mut self, m: usize, ev: D::Event) {
        if self.pending.len() <= m {
            self.pending.resize_with(m + 1, || None);
        }
        self.pending[m] = Some(ev);
    }

    /// The masks (indices) whose buffer or metadata one of `launches` uses: the step running
    /// them must `settle` those first.
    pub(crate) fn masks_used_by<'a>(&self, launches: impl Iterator<Item = &'a Launch<D::Kernel>> + Clone) -> Vec<usize>
    where
        D::Kernel: 'a,
    {
        let uses = |b: BufId| launches.clone().any(|l| l.args.contains(&LArg::Buf(b)));
        (0..self.masks.len()).filter(|&m| uses(self.masks[m].mask_buf) || uses(self.masks[m].meta)).collect()
    }

    /// Queues the zero fill of every `Zero` op whose buffer is free once step `after` is done
    /// (`None`: free from the start of the frame).
    pub(crate) fn issue_zero_fills(&mut self, dev: &D, bufs: &[D::Buffer], after: Option<usize>) -> Result<()> {
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

    /// Decoded counts from the raw ints of mask `m`'s counts region.
    fn decode(&self, dev: &D, bufs: &[D::Buffer], m: usize, raw: &[u8]) -> Result<Vec<usize>> {
        let mp = &self.masks[m];
        let ints: Vec<i32> = raw.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        // The offending value, for the error message only.
        let value = |img: usize, pos: usize| {
            let size = mp.precision.elem_bytes(DType::F32);
            let mut b = vec![0u8; size];
            dev.download(&bufs[mp.mask_buf], (img * mp.mask_stride + pos) * size, &mut b).ok()?;
            crate::gpu::dtype::from_words(&b, DType::F32, vec![1], mp.precision).ok()?.as_f32().ok().map(|v| v[0])
        };
        mp.layout.decode(&ints, &mp.name, value)
    }

    /// Tile counts per granularity of mask `m` (summed over images) that this frame selects
    /// with, launching the bitmask kernel on first use: this frame's counts read back now
    /// (`Exact`, or the first frame), else the last frame's while this frame's are copied to the
    /// host behind the work.
    fn counts(&mut self, dev: &D, bufs: &[D::Buffer], m: usize) -> Result<&[usize]> {
        if self.counts[m].select.is_none() {
            let mp = &self.masks[m];
            let bytes = mp.layout.data0 * 4;
            if self.lagged(m) {
                self.launch_lagged(dev, bufs, m, false)?;
            } else {
                replay_launches(dev, bufs, std::slice::from_ref(&mp.bitmask))?;
                let mut raw = vec![0u8; bytes];
                dev.download(&bufs[mp.meta], 0, &mut raw)?;
                let c = self.decode(dev, bufs, m, &raw)?;
                let mc = &mut self.counts[m];
                mc.select = Some(c.clone());
                mc.exact = Some(c);
            }
        }
        Ok(self.counts[m].select.as_deref().expect("filled above"))
    }

    /// The counts of mask `m` the next frame selects with under lagged counts (the last
    /// frame's, once it ended).
    #[cfg(test)]
    pub(crate) fn counts_of(&self, m: usize) -> Option<Vec<usize>> {
        self.counts.get(m)?.last.clone()
    }

    /// Whether mask `m`'s first reader this frame selects with last frame's counts.
    fn lagged(&self, m: usize) -> bool {
        self.sync == CountsSync::Lagged && self.counts[m].last.is_some()
    }

    /// Launches mask `m`'s bitmask kernel, on the second queue when `off_path` (returning its
    /// event), and queues its counts' copy to the host behind it; the frame selects with last
    /// frame's counts.
    fn launch_lagged(&mut self, dev: &D, bufs: &[D::Buffer], m: usize, off_path: bool) -> Result<Option<D::Event>> {
        let mp = &self.masks[m];
        let mut ev = None;
        if off_path {
            let after = dev.marker()?;
            ev = Some(replay_async(dev, bufs, &mp.bitmask, std::slice::from_ref(&after))?);
        } else {
            replay_launches(dev, bufs, std::slice::from_ref(&mp.bitmask))?;
        }
        // (A recorded frame copies its counts after its graph: `after_frame_graph`.)
        self.queue_counts(dev, bufs, m, ev.as_ref(), off_path, !self.recording_frame)?;
        Ok(ev)
    }

    /// Sends mask `m`'s counts of this frame to the host behind the work queued so far and marks
    /// them in flight, the last frame's kept for selection. Mapped counts were stored in host
    /// memory by the bitmask launch itself: the host reads them once its queue (the second
    /// where `off_path`) is done. Others are copied, where `copy`, behind `after` (the bitmask
    /// launch's event off the main path, so the main queue gets no marker between its
    /// kernels) or behind the main queue's work.
    pub(crate) fn queue_counts(
        &mut self,
        dev: &D,
        bufs: &[D::Buffer],
        m: usize,
        after: Option<&D::Event>,
        off_path: bool,
        copy: bool,
    ) -> Result<()> {
        let mc = &mut self.counts[m];
        if mc.mapped {
            dev.staging_written(mc.staging.as_ref().expect("mapped counts have their memory"), off_path)?;
        } else if copy {
            if mc.staging.is_none() {
                mc.staging = Some(dev.staging(self.masks[m].layout.data0 * 4)?);
            }
            dev.download_async(&bufs[self.masks[m].meta], 0, mc.staging.as_ref().expect("made above"), after)?;
        }
        mc.in_flight = true;
        mc.select = mc.last.clone();
        Ok(())
    }

    /// Mask `m`'s counts of this frame were stored by the member just queued (SELF_COUNT), in
    /// its bitmask launch's place: they travel to the host as the launch's would. `select`
    /// stays unset, so a later reader of the mask this frame that needs its metadata still
    /// makes the launch (and stores the same counts again).
    fn counts_reported(&mut self, dev: &D, bufs: &[D::Buffer], m: usize) -> Result<()> {
        self.queue_counts(dev, bufs, m, None, false, !self.recording_frame)?;
        self.counts[m].select = None;
        Ok(())
    }

    /// Ends a frame once its work is done (after the outputs were read): reads the counts
    /// copied to the host (waiting for nothing by then), keeps them for the next frame's
    /// selection and corrects the records of ops that selected with last frame's counts, so the
    /// report shows this frame's density and DISTiles.
    pub(crate) fn end_frame(&mut self, dev: &D, bufs: &[D::Buffer], records: &mut [(usize, SparseOpRecord)]) -> Result<()> {
        for m in 0..self.counts.len() {
            if self.counts[m].in_flight {
                let mut raw = vec![0u8; self.masks[m].layout.data0 * 4];
                let st = self.counts[m].staging.as_ref().ok_or_else(|| Error::Other("counts in flight without host memory".into()))?;
                dev.read_staging(st, &mut raw)?;
                self.counts[m].in_flight = false;
                let c = self.decode(dev, bufs, m, &raw)?;
                self.counts[m].exact = Some(c);
            }
            let mc = &mut self.counts[m];
            if let Some(c) = mc.exact.take() {
                mc.last = Some(c);
            }
        }
        for (i, rec) in records.iter_mut() {
            let m = self.ops[*i].mask;
            let (Some(c), layout) = (self.counts[m].last.as_ref(), &self.masks[m].layout) else { continue };
            let ones = layout.index(Granularity::new(1, 1)).map_or(0, |k| c[k]);
            rec.density = ones as f64 / (layout.images * layout.h * layout.w) as f64;
            if let Some(g) = rec.granularity {
                rec.tiles = layout.index(g).map_or(0, |k| c[k]);
            }
        }
        Ok(())
    }

    /// Runs sparse op `i`: selection, fill, the chosen member. `poison`: the step's outputs were
    /// just filled with NaN, so the zero fill must come after that, not ahead of time.
    pub(crate) fn run_op(&mut self, dev: &D, bufs: &[D::Buffer], i: usize, poison: bool) -> Result<SparseOpRecord> {
        let mut ph = PhaseTimes::default();
        let t0 = Instant::now();
        let m = self.ops[i].mask;
        let fresh = self.counts[m].select.is_none();
        // The first reader selects with last frame's counts before the bitmask launch, so a
        // member reading no metadata need not wait for it (see the module docs).
        // Held results need this frame's counts: whether the frame is whole.
        let deferred = fresh && self.lagged(m) && self.ops[i].fill != FillPolicy::Held;
        // Everything but a member that lists its own columns beside a new bitmask launch
        // reads or writes the metadata on the main queue: the last one must be done.
        if !deferred {
            self.settle(dev, m)?;
        }
        let counts = match self.counts[m].last.clone() {
            Some(last) if deferred => last,
            _ => self.counts(dev, bufs, m)?.to_vec(),
        };
        let t1 = Instant::now();
        let layout = &self.masks[m].layout;
        let ones = layout.index(Granularity::new(1, 1)).map_or(0, |k| counts[k]);
        let density = ones as f64 / (layout.images * layout.h * layout.w) as f64;
        let whole = ones == layout.images * layout.h * layout.w;
        let expect = expected_columns(layout, &counts);
        let op = &self.ops[i];
        let pick = choose(op, layout, &counts)?;
        let tiles_of = |g: Option<Granularity>| g.and_then(|g| layout.index(g)).map_or(0, |k| counts[k]);
        let tiles = tiles_of(op.poly.members()[pick].schedule.granularity);
        let first_cached = op.fill == FillPolicy::Cached && !op.cached_ready;
        let meta_free = !first_cached && op.residual_fill.is_empty() && op.meta_free.get(pick).copied().unwrap_or(false);
        // The member stores the counts the launch would have: this frame needs none for it.
        let reported = deferred && meta_free && op.reports_counts.get(pick).copied().unwrap_or(false);
        let t2 = Instant::now();
        if fresh {
            ph.bitmask = t1 - t0;
        }
        ph.select = t2 - t1;
        if deferred && !meta_free {
            self.settle(dev, m)?;
            self.launch_lagged(dev, bufs, m, false)?;
            ph.bitmask += t2.elapsed();
        }
        let t2 = Instant::now();
        let op = &self.ops[i];
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
        // After the zero fill above, which the member waits for, on the same queue.
        let beside = if deferred && meta_free && !reported { self.launch_lagged(dev, bufs, m, true)? } else { None };
        ph.bitmask += t3.elapsed();
        let t3 = Instant::now();
        let op = &mut self.ops[i];
        replay_launches(dev, bufs, &op.residual_fill)?;
        let held = op.fill == FillPolicy::Held && op.cached_ready && !whole;
        let (member, granularity, tiles) = if held {
            ("held".to_string(), None, 0)
        } else if first_cached {
            replay_launches(dev, bufs, &op.cached_first)?;
            op.cached_ready = true;
            ("dense (first cached frame)".to_string(), None, 0)
        } else {
            replay_expecting(dev, bufs, &op.members[pick], expect)?;
            op.last_pick = Some(pick);
            op.cached_ready = true;
            let s = &op.poly.members()[pick].schedule;
            (s.name.clone(), s.granularity, tiles)
        };
        let (node, op_name) = (op.node.clone(), op.op.to_string());
        if let Some(ev) = beside {
            self.defer(m, ev);
        }
        if reported {
            self.counts_reported(dev, bufs, m)?;
        }
        ph.compute = t3.elapsed();
        Ok(SparseOpRecord { node, op: op_name, density, member, granularity, tiles, phases: ph })
    }
}

#[path = "frame_state.rs"]
mod frame_state;

/// The PolyKernel member to run for this frame's counts.
fn choose<K>(op: &SparseOp<K>, layout: &MetaLayout, counts: &[usize]) -> Result<usize> {
    let members = op.poly.members();
    let pick = match op.force {
        _ if op.pin.is_some_and(|p| p < op.members.len()) => op.pin.expect("checked"),
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
            let per_gran: Vec<usize> = op.poly.granularities().iter().map(|&g| layout.index(g).map_or(usize::MAX, |k| counts[k])).collect();
            op.poly.try_select(&op.poly.member_counts(&per_gran)?)?
        }
    };
    if op.members.len() != members.len() {
        return Err(Error::Other(format!("{}: {} member launches for {} members", op.node, op.members.len(), members.len())));
    }
    Ok(pick)
}

impl<D: GpuDevice> Frames<D> {
    /// Member names of op `i`, in PolyKernel order (benchmarks).
    pub(crate) fn member_names(&self, i: usize) -> Vec<String> {
        self.ops[i].poly.members().iter().map(|m| m.schedule.name.clone()).collect()
    }

    /// Where op `i`'s member `name` is among its members (and their launch lists).
    pub(crate) fn member_index(&self, i: usize, name: &str) -> Option<usize> {
        let op = &self.ops[i];
        op.poly.members().iter().position(|m| m.schedule.name == name).filter(|&a| a < op.members.len())
    }

    /// The launches of op `i`'s member `name` (with the residual fill, which every member needs)
    /// with the grids the frame's counts ask for (`frame_columns`).
    pub(crate) fn member_launches(&self, i: usize, name: &str) -> Option<Vec<Launch<D::Kernel>>> {
        let (op, at) = (&self.ops[i], self.member_index(i, name)?);
        let expect = self.frame_columns(i);
        Some(op.residual_fill.iter().chain(&op.members[at]).map(|l| Launch { groups: l.groups_for(expect), ..l.clone() }).collect())
    }

    /// Columns per image op `i`'s frame expects: from the counts this frame selects with, else
    /// the last frame's (`expected_columns`).
    fn frame_columns(&self, i: usize) -> Option<usize> {
        let m = self.ops[i].mask;
        let c = self.counts.get(m)?;
        expected_columns(&self.masks[m].layout, c.select.as_ref().or(c.last.as_ref())?)
    }

    /// The launch that makes op `i`'s mask metadata each frame.
    pub(crate) fn mask_launch(&self, i: usize) -> Option<&Launch<D::Kernel>> {
        self.ops.get(i).and_then(|op| self.masks.get(op.mask)).map(|m| &m.bitmask)
    }

    /// One frame's dispatch of op `i` from scratch: bitmask launch, counts readback, selection.
    /// Returns the chosen member's name.
    pub(crate) fn dispatch_once(&mut self, dev: &D, bufs: &[D::Buffer], i: usize) -> Result<String> {
        let m = self.ops[i].mask;
        if self.counts.len() != self.masks.len() {
            self.begin_frame();
        }
        self.counts[m].select = None;
        self.settle(dev, m)?;
        let counts = self.counts(dev, bufs, m)?.to_vec();
        let pick = choose(&self.ops[i], &self.masks[m].layout, &counts)?;
        Ok(self.ops[i].poly.members()[pick].schedule.name.clone())
    }

    /// Whether op `i`'s member `name` runs without the mask metadata (lists its own columns
    /// and has no residual fill), so dispatch launches the bitmask beside it.
    pub(crate) fn member_meta_free(&self, i: usize, name: &str) -> bool {
        let op = &self.ops[i];
        op.residual_fill.is_empty() && self.member_index(i, name).and_then(|a| op.meta_free.get(a).copied()).unwrap_or(false)
    }

    /// Queues op `i`'s member `name` as a frame runs it: the residual fill, then the member.
    pub(crate) fn replay_member(&mut self, dev: &D, bufs: &[D::Buffer], i: usize, name: &str) -> Result<()> {
        let at = self.member_index(i, name).ok_or_else(|| Error::Other(format!("sparse op {i} has no member '{name}'")))?;
        let expect = self.frame_columns(i);
        let op = &self.ops[i];
        replay_launches(dev, bufs, &op.residual_fill)?;
        replay_expecting(dev, bufs, &op.members[at], expect)
    }

    /// One frame's dispatch of op `i` followed by its member `name` (`replay_member`), ordered
    /// as `run_op` orders them: under lagged counts, the bitmask launch beside a member reading
    /// no metadata, else in front of it.
    pub(crate) fn dispatch_member(&mut self, dev: &D, bufs: &[D::Buffer], i: usize, name: &str) -> Result<()> {
        let meta_free = self.member_meta_free(i, name);
        let m = self.ops[i].mask;
        if self.counts.len() != self.masks.len() {
            self.begin_frame();
        }
        self.counts[m].select = None;
        let reported = meta_free && self.lagged(m) && self.member_reports_counts(i, name);
        let beside = if reported {
            None
        } else if meta_free && self.lagged(m) {
            self.launch_lagged(dev, bufs, m, true)?
        } else {
            self.settle(dev, m)?;
            self.counts(dev, bufs, m)?;
            None
        };
        self.replay_member(dev, bufs, i, name)?;
        if let Some(ev) = beside {
            self.defer(m, ev);
        }
        if reported {
            self.counts_reported(dev, bufs, m)?;
        }
        Ok(())
    }

    /// Whether op `i`'s member `name` stores its mask's counts itself (SELF_COUNT), so a frame
    /// running it under lagged counts makes no bitmask launch.
    pub(crate) fn member_reports_counts(&self, i: usize, name: &str) -> bool {
        self.member_index(i, name).and_then(|a| self.ops[i].reports_counts.get(a).copied()).unwrap_or(false)
    }

    /// Tiles of op `i`'s member granularity in the last frame (0 for dense or unknown).
    pub(crate) fn last_tiles(&self, i: usize, gran: Option<Granularity>) -> usize {
        let m = self.ops[i].mask;
        let c = self.counts.get(m).and_then(|c| c.exact.as_ref().or(c.last.as_ref()));
        match (c, gran) {
            (Some(c), Some(g)) => self.masks[m].layout.index(g).map_or(0, |k| c[k]),
            _ => 0,
        }
    }
}

/// Columns per image (the mean: an image with more takes further windows) a frame with
/// `counts` over `layout` narrows self-listing grids to (`lower::ctx::ColumnGrid`); `None`
/// where they stay whole (no 1x1 count). Narrowed, the fastest member as dispatched on an H200
/// at batch 1 and density 0.1 went from 24.6 to 19.2 µs (conv3x3), 17.2 to 14.9 (stride 2) and
/// 11.1 to 9.8 (conv1x1; RESULTS.md, "self-listing grids launched for the columns a frame
/// expects").
pub(crate) fn expected_columns(layout: &MetaLayout, counts: &[usize]) -> Option<usize> {
    let ones = counts.get(layout.index(Granularity::new(1, 1))?)?;
    Some(ones.div_ceil(layout.images.max(1)))
}
