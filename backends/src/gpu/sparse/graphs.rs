//! PolyKernel members replayed as one recorded graph where the device records them (CUDA):
//! each member's launches are captured the first time it runs and replayed with one call after.
//! Off unless `DYNASPA_GRAPHS=1` (or `GpuExecutable::set_member_graphs`): on an H200 a recorded
//! member ran 0.4-0.9 µs slower than its launches queued one by one (session 21), whose
//! programmatic launches (`cuda/pdl.rs`) already overlap each kernel's start with the one before.

use crate::gpu::device::GpuDevice;
use crate::gpu::lower::ctx::{replay_expecting, Launch};
use dynaspa_runtime::Result;

/// Whether members are recorded into graphs: `$DYNASPA_GRAPHS` is 1.
pub(crate) fn enabled_by_env() -> bool {
    super::schedules::env_switch("DYNASPA_GRAPHS") == Some(true)
}

/// One member's recording.
pub(crate) enum Slot<G> {
    Untried,
    /// The device records no graphs, or a launch of the member could not be recorded.
    Plain,
    Ready(G),
}

/// Per op and member, grown on first use.
pub(crate) struct MemberGraphs<G> {
    pub enabled: bool,
    slots: Vec<Vec<Slot<G>>>,
}

impl<G> MemberGraphs<G> {
    pub(crate) fn new(enabled: bool) -> MemberGraphs<G> {
        MemberGraphs { enabled, slots: Vec::new() }
    }

    /// Turns recording on or off for members not recorded yet (recorded ones keep their graph
    /// while on).
    pub(crate) fn set_enabled(&mut self, on: bool) {
        self.enabled = on;
    }

    /// Members recorded so far.
    pub(crate) fn recorded(&self) -> usize {
        self.slots.iter().flatten().filter(|s| matches!(s, Slot::Ready(_))).count()
    }

    fn slot(&mut self, op: usize, member: usize) -> &mut Slot<G> {
        if self.slots.len() <= op {
            self.slots.resize_with(op + 1, Vec::new);
        }
        let s = &mut self.slots[op];
        if s.len() <= member {
            s.resize_with(member + 1, || Slot::Untried);
        }
        &mut s[member]
    }

    /// Queues `launches` (member `member` of op `op`) for a frame expecting `expect` columns
    /// per image on `dev`'s main queue: from the member's graph, recorded now if it has none
    /// yet, or one launch at a time where there is none. (A graph keeps the grids it was
    /// recorded with: right for any frame, narrowed for the first one's columns.)
    pub(crate) fn replay<D: GpuDevice<Graph = G>>(
        &mut self,
        dev: &D,
        bufs: &[D::Buffer],
        op: usize,
        member: usize,
        launches: &[Launch<D::Kernel>],
        expect: Option<usize>,
    ) -> Result<()> {
        if !self.enabled || launches.is_empty() {
            return replay_expecting(dev, bufs, launches, expect);
        }
        let slot = self.slot(op, member);
        if let Slot::Untried = slot {
            *slot = match dev.capture(&mut || replay_expecting(dev, bufs, launches, expect))? {
                Some(g) => Slot::Ready(g),
                None => Slot::Plain,
            };
        }
        match slot {
            Slot::Ready(g) => dev.launch_graph(g),
            _ => replay_expecting(dev, bufs, launches, expect),
        }
    }
}
