//! The device's cuDNN handle: cuDNN loaded, one handle bound to a context and its main stream,
//! calls serialised and queued on a recording stream where asked, and what the convs planned on
//! it found per geometry, in memory and on disk for the next start (`disk_memo`, keyed on the
//! device and cuDNN's version). A leaf under the device: it takes a context and a stream.

use super::buffer::CudaBuffer;
use super::context::Context;
use super::cudnn_lib::{self as lib, Api, Handle, Loaded, Status};
use super::cudnn_plan::EnginePlan;
use super::error::{err, Ctx};
use cudarc::driver::result;
use cudarc::driver::sys::CUstream;
use dynaspa_runtime::Result;
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex};

struct RawHandle(Handle);
// SAFETY: a cuDNN handle may be used from any thread, one call at a time (the mutex).
unsafe impl Send for RawHandle {}

/// What the algorithm search found for one geometry: the fastest FMA algorithms with their
/// workspace bytes (none when cuDNN has no FMA algorithm for it).
pub(crate) type Found = Vec<(c_int, usize)>;

/// The device's cuDNN handle.
pub(crate) struct CudnnHandle {
    pub(crate) lib: &'static Loaded,
    raw: Mutex<RawHandle>,
    ctx: Arc<Context>,
    /// The device's main stream, the handle's own between recordings (`with_on`).
    stream: usize,
    /// Per geometry: the legacy API's algorithm search result.
    pub(crate) found: Mutex<HashMap<String, Found>>,
    /// Per geometry: the fastest fp32 engine of the backend API, or `None`.
    pub(crate) engines: Mutex<HashMap<String, Option<Arc<EnginePlan>>>>,
    /// Why the last engine search found no plan (self-checks report it).
    engine_note: Mutex<Option<String>>,
    /// The device's fingerprint, which with cuDNN's version keys what searches leave on disk.
    device: String,
}

impl CudnnHandle {
    /// The handle of the device `device` (its fingerprint) on `ctx`, queueing on `stream`.
    pub(crate) fn new(ctx: Arc<Context>, stream: CUstream, device: String) -> std::result::Result<CudnnHandle, String> {
        let lib = lib::load()?;
        ctx.bind().map_err(|e| e.to_string())?;
        let api = &lib.api;
        let mut h: Handle = std::ptr::null_mut();
        // SAFETY: writes the new handle; the device's context is current.
        let s = unsafe { (api.create)(&mut h) };
        if s != lib::SUCCESS {
            return Err(format!("cudnnCreate: {}", api.status_text(s)));
        }
        // SAFETY: live handle; the stream belongs to the current context and outlives the handle
        // (the device destroys the handle first).
        let s = unsafe { (api.set_stream)(h, stream as *mut c_void) };
        if s != lib::SUCCESS {
            // SAFETY: created above, destroyed once.
            unsafe { (api.destroy)(h) };
            return Err(format!("cudnnSetStream: {}", api.status_text(s)));
        }
        Ok(CudnnHandle {
            lib,
            raw: Mutex::new(RawHandle(h)),
            ctx,
            stream: stream as usize,
            found: Mutex::new(HashMap::new()),
            engines: Mutex::new(HashMap::new()),
            engine_note: Mutex::new(None),
            device,
        })
    }

    fn memo_key(&self, geometry: &str) -> String {
        let (a, b, c) = self.lib.version;
        format!("{}|cuDNN {a}.{b}.{c}|{geometry}", self.device)
    }

    /// What a search of `kind` found for `geometry` in an earlier process, if it was kept.
    pub(crate) fn recall(&self, kind: &str, geometry: &str) -> Option<String> {
        crate::disk_memo::read(&crate::cache_dir::cache_root()?, kind, &self.memo_key(geometry))
    }

    /// Keeps what a search of `kind` found for `geometry` for later processes.
    pub(crate) fn keep(&self, kind: &str, geometry: &str, answer: &str) {
        if let Some(root) = crate::cache_dir::cache_root() {
            crate::disk_memo::write(&root, kind, &self.memo_key(geometry), answer);
        }
    }

    pub(crate) fn version(&self) -> (usize, usize, usize) {
        self.lib.version
    }

    pub(crate) fn note_engine(&self, why: String) {
        if let Ok(mut n) = self.engine_note.lock() {
            *n = Some(why);
        }
    }

    /// Why the last engine search found no plan, if one did not.
    pub(crate) fn engine_note(&self) -> Option<String> {
        self.engine_note.lock().ok().and_then(|n| n.clone())
    }

    pub(crate) fn api(&self) -> &'static Api {
        &self.lib.api
    }

    /// The handle as an attribute value (backend descriptors name it); not for calls.
    pub(crate) fn raw_handle(&self) -> Result<Handle> {
        Ok(self.raw.lock().map_err(|_| err("cuDNN handle lock poisoned"))?.0)
    }

    pub(crate) fn check(&self, s: Status, what: &str) -> Result<()> {
        if s == lib::SUCCESS {
            Ok(())
        } else {
            Err(err(format!("{what}: {}", self.lib.api.status_text(s))))
        }
    }

    /// Runs `f` with the handle, the device's context current, calls serialised.
    pub(crate) fn with<T>(&self, f: impl FnOnce(Handle) -> T) -> Result<T> {
        self.with_on(None, f)
    }

    /// `with`, the handle's work queued on `stream` (a graph's recording stream) for the call.
    pub(crate) fn with_on<T>(&self, stream: Option<CUstream>, f: impl FnOnce(Handle) -> T) -> Result<T> {
        let h = self.raw.lock().map_err(|_| err("cuDNN handle lock poisoned"))?;
        self.ctx.bind()?;
        let Some(s) = stream else { return Ok(f(h.0)) };
        let api = &self.lib.api;
        // SAFETY: live handle (locked) and streams of this context.
        let set = |s: CUstream| unsafe { (api.set_stream)(h.0, s as *mut c_void) };
        let st = set(s);
        if st != lib::SUCCESS {
            return Err(err(format!("cudnnSetStream (recording): {}", api.status_text(st))));
        }
        let out = f(h.0);
        let st = set(self.stream as CUstream);
        if st != lib::SUCCESS {
            return Err(err(format!("cudnnSetStream (back to the main stream): {}", api.status_text(st))));
        }
        Ok(out)
    }

    /// `bytes` of device memory in the handle's context (a search's workspace).
    pub(crate) fn alloc(&self, bytes: usize) -> Result<CudaBuffer> {
        CudaBuffer::alloc(&self.ctx, bytes)
    }

    /// Waits for the work queued on the handle's stream (a search's timed runs).
    pub(crate) fn synchronize(&self) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: the device's main stream, alive while the handle is.
        unsafe { result::stream::synchronize(self.stream as CUstream) }.ctx(|| "cuStreamSynchronize (cuDNN)".into())
    }
}

impl Drop for CudnnHandle {
    fn drop(&mut self) {
        if let Ok(mut e) = self.engines.lock() {
            for plan in e.drain().filter_map(|(_, p)| p) {
                plan.destroy(self.api());
            }
        }
        if let (Ok(h), Ok(())) = (self.raw.lock(), self.ctx.bind()) {
            // SAFETY: created in new(), destroyed once.
            unsafe { (self.lib.api.destroy)(h.0) };
        }
    }
}
