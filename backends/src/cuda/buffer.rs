//! Device memory: a buffer of one context, freed when dropped, or a view of mapped host memory.
//! Under the device, so the vendor library wrappers (cuDNN) allocate their workspaces from a
//! context without the device.

use super::context::Context;
use super::error::Ctx;
use super::staging::PinnedHost;
use cudarc::driver::{result, sys};
use dynaspa_runtime::Result;
use std::sync::Arc;

/// Device memory. Zero-byte buffers hold no allocation (pointer 0).
pub struct CudaBuffer {
    pub(crate) ptr: sys::CUdeviceptr,
    pub(crate) bytes: usize,
    pub(crate) ctx: Arc<Context>,
    /// Mapped host memory this buffer views (`host_mapped`): it owns no device memory.
    pub(crate) host: Option<Arc<PinnedHost>>,
}

impl CudaBuffer {
    pub fn len(&self) -> usize {
        self.bytes
    }
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }
    /// The device address (for tests and debugging output).
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }
}

impl Drop for CudaBuffer {
    fn drop(&mut self) {
        if self.ptr == 0 || self.host.is_some() {
            return;
        }
        // SAFETY: allocated by cuMemAlloc in this context and freed once. cuMemFree waits for
        // work still using the memory.
        let r = self.ctx.bind().and_then(|_| unsafe { result::free_sync(self.ptr) }.ctx(|| "cuMemFree".into()));
        if let Err(e) = r {
            tracing::warn!("leaking {} bytes of device memory: {e}", self.bytes);
        }
    }
}

impl CudaBuffer {
    /// `bytes` of device memory in `ctx` (no allocation for 0 bytes).
    pub(crate) fn alloc(ctx: &Arc<Context>, bytes: usize) -> Result<CudaBuffer> {
        if bytes == 0 {
            return Ok(CudaBuffer { ptr: 0, bytes: 0, ctx: ctx.clone(), host: None });
        }
        ctx.bind()?;
        // SAFETY: plain allocation in the current context.
        let ptr = unsafe { result::malloc_sync(bytes) }.ctx(|| format!("cuMemAlloc({bytes} bytes)"))?;
        Ok(CudaBuffer { ptr, bytes, ctx: ctx.clone(), host: None })
    }
}
