//! The bottom of the CUDA backend: the device's retained primary context and the events made
//! in it, which every other part (device, graphs, staging, cuDNN) holds.

use super::error::Ctx;
use cudarc::driver::{result, sys};
use dynaspa_runtime::Result;
use std::sync::Arc;

/// The retained primary context; released when the last buffer, event, kernel and the device
/// holding it are gone.
pub(crate) struct Context {
    dev: sys::CUdevice,
    ctx: sys::CUcontext,
}

// SAFETY: CUcontext is a handle the driver lets any thread use (made current per call).
unsafe impl Send for Context {}
unsafe impl Sync for Context {}

impl Context {
    /// Takes `ctx`, the primary context of `dev` retained by the caller, releasing it on drop.
    pub(crate) fn retained(dev: sys::CUdevice, ctx: sys::CUcontext) -> Context {
        Context { dev, ctx }
    }

    pub(crate) fn bind(&self) -> Result<()> {
        // SAFETY: the context is retained for as long as `self` lives.
        unsafe { result::ctx::set_current(self.ctx) }.ctx(|| "cuCtxSetCurrent".into())
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: retained in CudaDevice::new, released once here.
        if let Err(e) = unsafe { result::primary_ctx::release(self.dev) } {
            tracing::warn!("cuDevicePrimaryCtxRelease: {}", super::error::driver_text(e));
        }
    }
}

/// A point in one stream's work.
pub struct CudaEvent {
    pub(crate) ev: sys::CUevent,
    pub(crate) ctx: Arc<Context>,
}

// SAFETY: events are driver handles usable from any thread.
unsafe impl Send for CudaEvent {}
unsafe impl Sync for CudaEvent {}

impl CudaEvent {
    /// Takes `ev`, an event created in `ctx`, destroying it on drop.
    pub(crate) fn new(ev: sys::CUevent, ctx: Arc<Context>) -> CudaEvent {
        CudaEvent { ev, ctx }
    }

    /// Blocks the host until the event's work is done.
    pub fn synchronize(&self) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: live event of this context.
        unsafe { result::event::synchronize(self.ev) }.ctx(|| "cuEventSynchronize".into())
    }
}

impl Drop for CudaEvent {
    fn drop(&mut self) {
        // SAFETY: created in this context, destroyed once; destroying a pending event is
        // allowed (the driver frees it on completion).
        let _ = self.ctx.bind().map(|_| unsafe { result::event::destroy(self.ev) });
    }
}
