//! CUDA graphs of recorded launches: a whole frame's work on both queues, captured once (on
//! streams of their own) and replayed with one `cuGraphLaunch`, where the GPU starts each
//! recorded kernel about 1 µs after the one before instead of the 3.5-5 µs back-to-back stream
//! launches take (RESULTS.md, "The launch floor"), and the host makes one driver call for all of
//! them.

use super::context::Context;
use super::error::{driver_text, Ctx};
use cudarc::driver::{result, sys};
use dynaspa_runtime::Result;
use std::cell::Cell;
use std::sync::{Arc, Mutex};

/// The streams a recording thread's work goes to instead of the device's.
#[derive(Clone, Copy)]
pub(crate) struct Recording {
    pub main: sys::CUstream,
    /// The second queue's stand-in.
    pub second: sys::CUstream,
}

thread_local! {
    /// Where this thread records, while it records: its launches go there, and launches that
    /// cannot be recorded refuse, so the capture falls back to plain launches.
    static RECORDING: Cell<Option<(usize, usize)>> = const { Cell::new(None) };
}

/// Where this thread's work goes while it records (`None`: not recording).
pub(crate) fn recording() -> Option<Recording> {
    RECORDING.with(Cell::get).map(|(m, s)| Recording { main: m as sys::CUstream, second: s as sys::CUstream })
}

/// A device's streams and fork / join events for recording, made on first use. Recording
/// never happens on the device's streams: other threads sharing the device keep queueing (and
/// synchronising) there, which a capture in progress would take in or refuse. The lock makes
/// one capture at a time.
#[derive(Default)]
pub(crate) struct RecordStream(Mutex<Option<Streams>>);

struct Streams {
    main: usize,
    second: usize,
    fork: usize,
    join: usize,
}

impl RecordStream {
    /// Destroys the streams and events, if made (the device's context current, streams idle).
    pub(crate) fn destroy(&self) {
        if let Some(s) = self.0.lock().unwrap_or_else(|p| p.into_inner()).take() {
            // SAFETY: made by `capture` in this context, destroyed once.
            unsafe {
                let _ = result::stream::destroy(s.main as sys::CUstream);
                let _ = result::stream::destroy(s.second as sys::CUstream);
                let _ = result::event::destroy(s.fork as sys::CUevent);
                let _ = result::event::destroy(s.join as sys::CUevent);
            }
        }
    }
}

fn make_streams() -> Result<Streams> {
    let stream = || result::stream::create(result::stream::StreamKind::NonBlocking).ctx(|| "cuStreamCreate (recording)".into());
    let event = || result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING).ctx(|| "cuEventCreate (recording)".into());
    // Leaked on a later failure: at most once per device, and only where the driver is failing.
    Ok(Streams { main: stream()? as usize, second: stream()? as usize, fork: event()? as usize, join: event()? as usize })
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

/// Records what `record` queues on the main and the second queue, redirected to `rs`'s
/// streams, and instantiates it. `Ok(None)` when a launch refused or the driver would not
/// record or instantiate; nothing recorded has run.
pub(crate) fn capture(ctx: &Arc<Context>, rs: &RecordStream, record: &mut dyn FnMut() -> Result<()>) -> Result<Option<CudaGraph>> {
    ctx.bind()?;
    let mut held = rs.0.lock().map_err(|_| super::error::err("graph recording lock poisoned".to_string()))?;
    if held.is_none() {
        *held = Some(make_streams()?);
    }
    let s = held.as_ref().expect("made above");
    let (stream, second) = (s.main as sys::CUstream, s.second as sys::CUstream);
    let (fork, join) = (s.fork as sys::CUevent, s.join as sys::CUevent);
    // SAFETY: live stream of this context, used by no other thread (the lock).
    unsafe { result::stream::begin_capture(stream, sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) }
        .ctx(|| "cuStreamBeginCapture".into())?;
    // The second stream joins the capture by waiting for a point in it (a fork), and is joined
    // back at the end: a capture must end with every stream it took in joined to its origin.
    // SAFETY: live events and streams of this context, used by this thread only (the lock).
    let forked = unsafe { result::event::record(fork, stream) }
        .and_then(|_| unsafe { result::stream::wait_event(second, fork, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT) })
        .ctx(|| "forking the recording".into());
    RECORDING.with(|r| r.set(Some((stream as usize, second as usize))));
    let mut recorded = forked.and_then(|_| record());
    RECORDING.with(|r| r.set(None));
    if recorded.is_ok() {
        // SAFETY: as above.
        recorded = unsafe { result::event::record(join, second) }
            .and_then(|_| unsafe { result::stream::wait_event(stream, join, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT) })
            .ctx(|| "joining the recording".into());
    }
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
