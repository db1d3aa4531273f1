//! CUDA graphs of recorded launches: a member's main-queue kernels captured once (on a stream of
//! their own) and replayed with one `cuGraphLaunch`, where the GPU starts each recorded kernel
//! about 1 µs after the one before instead of the 3.5-5 µs back-to-back stream launches take
//! (session 21, `launch_floor` and `benches/device_s21/torch_floor.py`).

use super::device::Context;
use super::error::{driver_text, Ctx};
use cudarc::driver::{result, sys};
use dynaspa_runtime::Result;
use std::cell::Cell;
use std::sync::{Arc, Mutex};

thread_local! {
    /// The stream this thread records into, while it records: its main-queue launches go there,
    /// and launches that cannot be recorded (cuDNN's, whose plans may allocate or sync) refuse,
    /// so the capture falls back to plain launches.
    static RECORDING: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Where this thread's main-queue launches go while it records (`None`: not recording).
pub(crate) fn recording_stream() -> Option<sys::CUstream> {
    RECORDING.with(Cell::get).map(|s| s as sys::CUstream)
}

/// A device's stream for recording, made on first use. Recording never happens on the main
/// stream: other threads sharing the device keep queueing (and synchronising) there, which a
/// capture in progress would take in or refuse. The lock makes one capture at a time.
#[derive(Default)]
pub(crate) struct RecordStream(Mutex<Option<usize>>);

impl RecordStream {
    /// Destroys the stream, if one was made (the device's context current, the stream idle).
    pub(crate) fn destroy(&self) {
        if let Some(s) = self.0.lock().unwrap_or_else(|p| p.into_inner()).take() {
            // SAFETY: made by `capture` in this context, destroyed once.
            let _ = unsafe { result::stream::destroy(s as sys::CUstream) };
        }
    }
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

/// Records what `record` queues on the main queue, redirected to `rs`'s stream, and
/// instantiates it. `Ok(None)` when a launch refused or the driver would not record or
/// instantiate; nothing recorded has run.
pub(crate) fn capture(ctx: &Arc<Context>, rs: &RecordStream, record: &mut dyn FnMut() -> Result<()>) -> Result<Option<CudaGraph>> {
    ctx.bind()?;
    let mut held = rs.0.lock().map_err(|_| super::error::err("graph recording lock poisoned".to_string()))?;
    let stream = match *held {
        Some(s) => s as sys::CUstream,
        None => {
            let s = result::stream::create(result::stream::StreamKind::NonBlocking).ctx(|| "cuStreamCreate (recording)".into())?;
            *held = Some(s as usize);
            s
        }
    };
    // SAFETY: live stream of this context, used by no other thread (the lock).
    unsafe { result::stream::begin_capture(stream, sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) }
        .ctx(|| "cuStreamBeginCapture".into())?;
    RECORDING.with(|r| r.set(Some(stream as usize)));
    let recorded = record();
    RECORDING.with(|r| r.set(None));
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
