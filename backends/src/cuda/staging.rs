//! Pinned host memory for asynchronous downloads: `cuMemcpyDtoHAsync` into pageable memory
//! waits for the stream, into page-locked memory it does not, so the per-frame DISTile counts
//! can be copied behind the frame's work and read after the frame's outputs.

use super::device::{Context, CudaEvent};
use super::error::Ctx;
use cudarc::driver::result;
use dynaspa_runtime::Result;
use std::sync::{Arc, Mutex};

pub struct CudaStaging {
    host: *mut u8,
    bytes: usize,
    /// Recorded on the main stream after the last copy into `host`.
    done: Mutex<Option<CudaEvent>>,
    ctx: Arc<Context>,
}

// SAFETY: the pointer is page-locked host memory owned by this value; reads and writes go
// through `&mut`/the mutex-guarded event protocol below.
unsafe impl Send for CudaStaging {}
unsafe impl Sync for CudaStaging {}

impl CudaStaging {
    pub(super) fn new(bytes: usize, ctx: Arc<Context>) -> Result<CudaStaging> {
        let n = bytes.max(4);
        ctx.bind()?;
        // SAFETY: plain page-locked allocation in the current context; freed in Drop.
        let host =
            unsafe { result::malloc_host(n, 0) }.ctx(|| format!("cuMemHostAlloc({n} bytes)"))?;
        Ok(CudaStaging {
            host: host.cast(),
            bytes,
            done: Mutex::new(None),
            ctx,
        })
    }

    pub fn len(&self) -> usize {
        self.bytes
    }
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    pub(crate) fn host_ptr(&self) -> *mut u8 {
        self.host
    }

    pub(crate) fn set_done(&self, ev: CudaEvent) -> Result<()> {
        let mut d = self
            .done
            .lock()
            .map_err(|_| super::error::err("staging lock poisoned"))?;
        *d = Some(ev);
        Ok(())
    }

    /// Waits for the last copy and copies `out.len()` bytes (at most the staging's) out.
    pub(crate) fn read(&self, out: &mut [u8]) -> Result<()> {
        let d = self
            .done
            .lock()
            .map_err(|_| super::error::err("staging lock poisoned"))?;
        if let Some(ev) = d.as_ref() {
            ev.synchronize()?;
        }
        let n = out.len().min(self.bytes);
        // SAFETY: `host` holds `bytes` bytes and the copy that wrote them completed above; a
        // new copy records its event under the same lock, so none is in flight here.
        unsafe { std::ptr::copy_nonoverlapping(self.host, out.as_mut_ptr(), n) };
        Ok(())
    }
}

impl Drop for CudaStaging {
    fn drop(&mut self) {
        if let Ok(mut d) = self.done.lock() {
            if let Some(ev) = d.take() {
                // The copy must be done before the memory goes back.
                let _ = ev.synchronize();
            }
        }
        // SAFETY: allocated by cuMemHostAlloc, freed once.
        let r = self.ctx.bind().and_then(|_| {
            unsafe { result::free_host(self.host.cast()) }.ctx(|| "cuMemFreeHost".into())
        });
        if let Err(e) = r {
            tracing::warn!("leaking {} bytes of pinned host memory: {e}", self.bytes);
        }
    }
}
