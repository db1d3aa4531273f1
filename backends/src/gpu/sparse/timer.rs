//! What `dynaspa tune` measures through on the GPU backends: one PolyKernel op of a model (a
//! sparse conv, `sparse_conv::timer`, or a token projection, `token::timer`) run outside a
//! frame at whatever schedule the tuner asks for, timed the way calibration times members.

use dynaspa_runtime::dispatch::Schedule;
use dynaspa_runtime::sparsity::BitMask;
use dynaspa_runtime::Result;

/// Launches queued per timed call, as calibration queues them: one sync shared by the runs.
pub const RUNS_PER_CALL: usize = 4;

/// A PolyKernel op of a compiled model, ready to time any schedule of it on any mask.
pub trait SparseOpTimer {
    /// The graph node.
    fn node(&self) -> &str;
    /// Mask plane `(h, w)`: the op's output positions.
    fn plane(&self) -> (usize, usize);
    /// Seconds per run of `schedule` (`None`: the dense member as the executor builds it) on
    /// `mask` (every image): one call queues [`RUNS_PER_CALL`] runs and waits for them. An
    /// error when the schedule is not one this device's kernels run (naming why), or when its
    /// kernel fails to build or launch.
    fn time(&mut self, schedule: Option<&Schedule>, mask: &BitMask) -> Result<f64>;
}
