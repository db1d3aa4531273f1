//! What one frame did, for `dynaspa run --frames`, `profile` and `bench`: per sparse op the mask
//! density, the chosen PolyKernel member and the time of each phase (DynaSpa's Table 4 rows).

use crate::sparsity::Granularity;
use serde::Serialize;
use std::time::Duration;

/// Phases of one sparse op, in the order they run. `mask` (evaluating the mask source) is not
/// here: the mask is an ordinary graph value computed by earlier nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct PhaseTimes {
    /// Mask tensor -> `BitMask` (includes the binary check).
    pub bitmask: Duration,
    /// DISTile counts for every granularity, and the chosen granularity's index list.
    pub tiles: Duration,
    /// Argmin of the dispatch tables.
    pub select: Duration,
    /// Waiting for or doing the zeroing of the output buffer.
    pub zero_fill: Duration,
    /// The kernel itself (for the dense member: dense kernel and the mask multiplication).
    pub compute: Duration,
}

impl PhaseTimes {
    pub fn total(&self) -> Duration {
        self.bitmask + self.tiles + self.select + self.zero_fill + self.compute
    }
    /// Everything that is not the kernel: what the runtime adds to a sparse op.
    pub fn overhead(&self) -> Duration {
        self.bitmask + self.tiles + self.select
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SparseOpRecord {
    pub node: String,
    pub op: String,
    /// Active fraction of the op's mask (mean over the batch).
    pub density: f64,
    /// The chosen member: its schedule name, and its granularity (`None`: the dense member).
    pub member: String,
    pub granularity: Option<Granularity>,
    /// DISTiles launched (summed over the batch); 0 for the dense member.
    pub tiles: usize,
    pub phases: PhaseTimes,
}

/// One step of a GPU frame, timed.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StepTime {
    pub node: String,
    pub op: String,
    /// The device's own time for the step, from a timestamp on its queue before the step's
    /// launches to one after them, the frame queued without waits; `None` where the device has no
    /// queue timestamps.
    pub gpu: Option<Duration>,
    /// The host's time for the step: queueing its launches where `gpu` is timed, else queueing
    /// them and waiting for the queue to drain (a sync per step).
    pub host: Duration,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FrameReport {
    /// Wall time of the whole graph.
    pub total: Duration,
    pub sparse_ops: Vec<SparseOpRecord>,
    /// Wall time of every node in graph order (index = node index), dense and sparse alike;
    /// empty where a backend does not time nodes.
    pub node_times: Vec<Duration>,
    /// Every step a backend timed by name, where its steps are not the graph's nodes one to one
    /// (the GPU executor after its own lowering, when asked for step times); empty otherwise.
    pub step_times: Vec<StepTime>,
    /// The phases are the host's time to queue each phase on a device that runs them later (the
    /// GPU backends, whose queue is only waited for at the frame's outputs), not the device's
    /// time: they show what dispatch costs the host, not the frame.
    pub phases_queued: bool,
    /// The frame's work was queued as one recorded graph (CUDA graphs, `GpuOptions::frame_graphs`):
    /// its sparse ops' phases are zero, as the host queued nothing per op.
    pub replayed: bool,
    /// Host time until the frame's work was queued, inputs uploaded (GPU backends; zero
    /// elsewhere): what the frame costs the CPU. The rest of `total` waits for the device.
    pub queued: Duration,
    /// Device time of the frame, from its input copies to its last step (GPU backends with
    /// queue timestamps; `None` elsewhere). Beside `total` it says whether the frame waited on the
    /// device or on the host.
    pub device: Option<Duration>,
}

impl FrameReport {
    /// Time spent in sparse ops (all phases).
    pub fn sparse_time(&self) -> Duration {
        self.sparse_ops.iter().map(|r| r.phases.total()).sum()
    }
}
