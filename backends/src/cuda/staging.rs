//! Pinned host memory for asynchronous downloads: `cuMemcpyDtoHAsync` into pageable memory
//! waits for the stream, into page-locked memory it does not, so the per-frame DISTile counts
//! can be copied behind the frame's work and read after the frame's outputs. Mapped into the
//! device's address space (`CudaStaging::mapped`), kernels write it directly and no copy is
//! queued at all.

use super::context::{Context, CudaEvent};
use super::error::Ctx;
use cudarc::driver::{result, sys};
use dynaspa_runtime::Result;
use std::sync::{Arc, Mutex};

/// One page-locked host allocation, freed when its last owner (a staging, or the buffer view
/// kernels write it through) goes.
pub(crate) struct PinnedHost {
    host: *mut u8,
    bytes: usize,
    ctx: Arc<Context>,
}

// SAFETY: the pointer is page-locked host memory owned by this value; reads go through
// `CudaStaging::read`, after the event of the work writing it.
unsafe impl Send for PinnedHost {}
unsafe impl Sync for PinnedHost {}

impl Drop for PinnedHost {
    fn drop(&mut self) {
        // Kernels may still be queued to write it through a buffer view (teardown only, so the
        // sync costs nothing that matters). SAFETY: allocated by cuMemHostAlloc, freed once.
        let r = self
            .ctx
            .bind()
            .and_then(|_| result::ctx::synchronize().ctx(|| "cuCtxSynchronize".into()))
            .and_then(|_| unsafe { result::free_host(self.host.cast()) }.ctx(|| "cuMemFreeHost".into()));
        if let Err(e) = r {
            tracing::warn!("leaking {} bytes of pinned host memory: {e}", self.bytes);
        }
    }
}

pub struct CudaStaging {
    mem: Arc<PinnedHost>,
    bytes: usize,
    /// Completes once the last copy into (or kernel writing) the memory is done.
    done: Mutex<Option<CudaEvent>>,
    /// The last writer is on the main stream, with no event recorded behind it: the read
    /// records one there first (`CudaDevice::read_staging`). An event recorded between two
    /// kernels of the main stream keeps the second from launching programmatically, and the
    /// host reads the counts after the frame's outputs anyway, when the stream has drained.
    main_later: std::sync::atomic::AtomicBool,
}

impl CudaStaging {
    pub(super) fn new(bytes: usize, ctx: Arc<Context>) -> Result<CudaStaging> {
        CudaStaging::alloc(bytes, 0, ctx)
    }

    /// Pinned memory mapped into the device's address space, and the device address kernels
    /// write it at.
    pub(super) fn mapped(bytes: usize, ctx: Arc<Context>) -> Result<(CudaStaging, sys::CUdeviceptr)> {
        let st = CudaStaging::alloc(bytes, sys::CU_MEMHOSTALLOC_DEVICEMAP, ctx)?;
        let mut dptr: sys::CUdeviceptr = 0;
        // SAFETY: memory from cuMemHostAlloc with DEVICEMAP in the current (bound) context.
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dptr, st.mem.host.cast(), 0) }
            .result()
            .ctx(|| "cuMemHostGetDevicePointer".into())?;
        Ok((st, dptr))
    }

    fn alloc(bytes: usize, flags: u32, ctx: Arc<Context>) -> Result<CudaStaging> {
        let n = bytes.max(4);
        ctx.bind()?;
        // SAFETY: plain page-locked allocation in the current context; freed by PinnedHost.
        let host = unsafe { result::malloc_host(n, flags) }.ctx(|| format!("cuMemHostAlloc({n} bytes)"))?;
        let mem = Arc::new(PinnedHost { host: host.cast(), bytes: n, ctx });
        Ok(CudaStaging { mem, bytes, done: Mutex::new(None), main_later: false.into() })
    }

    /// The allocation, for a buffer view that must keep it alive.
    pub(super) fn memory(&self) -> Arc<PinnedHost> {
        self.mem.clone()
    }

    pub fn len(&self) -> usize {
        self.bytes
    }
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    pub(crate) fn host_ptr(&self) -> *mut u8 {
        self.mem.host
    }

    pub(crate) fn set_done(&self, ev: CudaEvent) -> Result<()> {
        let mut d = self.done.lock().map_err(|_| super::error::err("staging lock poisoned"))?;
        *d = Some(ev);
        self.main_later.store(false, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// Notes that work queued on the main stream writes the memory, its event left to the read.
    pub(crate) fn written_on_main(&self) {
        self.main_later.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether the read must record the main stream's event first (clears the note).
    pub(crate) fn take_main_later(&self) -> bool {
        self.main_later.swap(false, std::sync::atomic::Ordering::AcqRel)
    }

    /// Whether the last copy into or out of the memory is done (no wait).
    pub(crate) fn idle(&self) -> Result<bool> {
        let d = self.done.lock().map_err(|_| super::error::err("staging lock poisoned"))?;
        let Some(ev) = d.as_ref() else { return Ok(true) };
        ev.ctx.bind()?;
        // SAFETY: live event of this context.
        match unsafe { sys::cuEventQuery(ev.ev) } {
            sys::CUresult::CUDA_SUCCESS => Ok(true),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            e => Err(super::error::err(format!("cuEventQuery: {e:?}"))),
        }
    }

    /// Blocks until the last copy into or out of the memory is done.
    pub(crate) fn wait(&self) -> Result<()> {
        let d = self.done.lock().map_err(|_| super::error::err("staging lock poisoned"))?;
        match d.as_ref() {
            Some(ev) => ev.synchronize(),
            None => Ok(()),
        }
    }

    /// Waits for the last copy and copies `out.len()` bytes (at most the staging's) out.
    pub(crate) fn read(&self, out: &mut [u8]) -> Result<()> {
        let d = self.done.lock().map_err(|_| super::error::err("staging lock poisoned"))?;
        if let Some(ev) = d.as_ref() {
            ev.synchronize()?;
        }
        let n = out.len().min(self.bytes);
        // SAFETY: the memory holds `bytes` bytes and the work that wrote them completed above; a
        // new writer records its event under the same lock, so none is in flight here.
        unsafe { std::ptr::copy_nonoverlapping(self.mem.host, out.as_mut_ptr(), n) };
        Ok(())
    }
}

impl Drop for CudaStaging {
    fn drop(&mut self) {
        if let Ok(mut d) = self.done.lock() {
            if let Some(ev) = d.take() {
                // The writer must be done before the memory may go back.
                let _ = ev.synchronize();
            }
        }
    }
}
