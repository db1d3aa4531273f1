//! CUDA graphs of recorded launches: a member's kernels captured from the main stream once and
//! replayed with one `cuGraphLaunch`, where the GPU starts each recorded kernel about 1 µs
//! after the one before instead of the 3.5-5 µs back-to-back stream launches take (session 21,
//! `launch_floor`).

use super::device::Context;
use super::error::{driver_text, Ctx};
use cudarc::driver::{result, sys};
use dynaspa_runtime::Result;
use std::cell::Cell;
use std::sync::Arc;

thread_local! {
    /// Set while this thread records into a graph: launches that cannot be recorded (cuDNN's,
    /// whose plans may allocate or sync) refuse, and the capture falls back to plain launches.
    static RECORDING: Cell<bool> = const { Cell::new(false) };
}

pub(crate) fn recording() -> bool {
    RECORDING.with(Cell::get)
}

/// An instantiated graph of the context it was recorded in.
pub struct CudaGraph {
    exec: sys::CUgraphExec,
    ctx: Arc<Context>,
}

// SAFETY: a graph exec is a driver handle usable from any thread with its context current.
unsafe impl Send for CudaGraph {}
unsafe impl Sync for CudaGraph {}

impl Drop for CudaGraph {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: instantiated in `capture`, destroyed once here.
            if let Err(e) = unsafe { result::graph::exec_destroy(self.exec) } {
                tracing::warn!("cuGraphExecDestroy: {}", driver_text(e));
            }
        }
    }
}

/// Records what `record` queues on `stream` (thread-local capture: other threads' work is not
/// taken in) and instantiates it. `Ok(None)` when a launch refused or the driver would not
/// record or instantiate; nothing recorded has run.
pub(crate) fn capture(ctx: &Arc<Context>, stream: sys::CUstream, record: &mut dyn FnMut() -> Result<()>) -> Result<Option<CudaGraph>> {
    ctx.bind()?;
    // SAFETY: live stream of this context.
    unsafe { result::stream::begin_capture(stream, sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) }
        .ctx(|| "cuStreamBeginCapture".into())?;
    RECORDING.with(|r| r.set(true));
    let recorded = record();
    RECORDING.with(|r| r.set(false));
    // Always ended, so the stream is usable again whatever happened inside.
    // SAFETY: the capture begun above.
    let graph = unsafe { result::stream::end_capture(stream) };
    let graph = match (recorded, graph) {
        (Ok(()), Ok(g)) if !g.is_null() => g,
        (recorded, graph) => {
            let why = match (&recorded, &graph) {
                (Err(e), _) => e.to_string(),
                (_, Err(e)) => driver_text(*e),
                _ => "nothing was recorded".into(),
            };
            if let Ok(g) = graph {
                if !g.is_null() {
                    // SAFETY: the graph the capture made, not instantiated.
                    let _ = unsafe { result::graph::destroy(g) };
                }
            }
            tracing::debug!("launches not recorded into a CUDA graph: {why}");
            return Ok(None);
        }
    };
    // SAFETY: a complete graph of this context; the exec keeps what it needs of it.
    let exec = unsafe { result::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)) };
    // SAFETY: as above, destroyed once.
    let _ = unsafe { result::graph::destroy(graph) };
    match exec {
        Ok(exec) => Ok(Some(CudaGraph { exec, ctx: ctx.clone() })),
        Err(e) => {
            tracing::debug!("cuGraphInstantiate: {}", driver_text(e));
            Ok(None)
        }
    }
}

/// Queues `g` on `stream` of `ctx`.
pub(crate) fn launch(ctx: &Arc<Context>, g: &CudaGraph, stream: sys::CUstream) -> Result<()> {
    if !Arc::ptr_eq(ctx, &g.ctx) {
        return Err(super::error::err("graph belongs to another CUDA device".to_string()));
    }
    ctx.bind()?;
    // SAFETY: live exec and stream of this context.
    unsafe { result::graph::launch(g.exec, stream) }.ctx(|| "cuGraphLaunch".into())
}
