//! Pinned memory a frame's inputs go through: the host writes each input once into page-locked
//! memory and the copy to the device is queued on the main stream without the host waiting for
//! it. A pageable `cuMemcpyHtoD` copies through the driver's own staging and returns only when
//! done, so a 480x640 frame's 3.7 MB held the host for the whole transfer before the frame's
//! first launch.

use super::context::{Context, CudaEvent};
use super::error::{err, Ctx};
use super::staging::CudaStaging;
use cudarc::driver::{result, sys};
use dynaspa_runtime::Result;
use std::sync::{Arc, Mutex};

/// Slots kept: one per input of a frame in flight (frames of several executables can share a
/// device). Beyond this the oldest slot is waited for and reused.
const MAX_SLOTS: usize = 8;

#[derive(Default)]
pub(crate) struct UploadRing(Mutex<Vec<CudaStaging>>);

impl UploadRing {
    /// Writes `bytes` bytes with `fill` into a free slot and queues their copy to `dst` on
    /// `main`; the fill stream waits for the copy too, so no later work on either stream reads
    /// `dst` before it lands. The slot is reused once the copy is done.
    pub(crate) fn upload(
        &self,
        ctx: &Arc<Context>,
        main: sys::CUstream,
        fill: sys::CUstream,
        dst: sys::CUdeviceptr,
        bytes: usize,
        write: &mut dyn FnMut(&mut [u8]) -> Result<()>,
    ) -> Result<()> {
        let mut slots = self.0.lock().map_err(|_| err("upload staging lock poisoned"))?;
        let free = slots.iter().position(|s| s.len() >= bytes && s.idle().unwrap_or(false));
        let i = match free {
            Some(i) => i,
            None if slots.len() < MAX_SLOTS => {
                slots.push(CudaStaging::new(bytes, ctx.clone())?);
                slots.len() - 1
            }
            None => {
                // The oldest slot: waited for (or replaced by a larger one, whose old memory's
                // drop waits for its copy).
                let s = slots.remove(0);
                let s = if s.len() >= bytes {
                    s.wait()?;
                    s
                } else {
                    drop(s);
                    CudaStaging::new(bytes, ctx.clone())?
                };
                slots.push(s);
                slots.len() - 1
            }
        };
        let slot = &slots[i];
        // SAFETY: the slot's memory holds at least `bytes` bytes and no copy reads it (idle or
        // waited for above); the slice lives only for the write.
        let host = unsafe { std::slice::from_raw_parts_mut(slot.host_ptr(), bytes) };
        write(host)?;
        // SAFETY: `dst` holds `bytes` bytes (checked by the caller); the pinned source stays
        // untouched until the event recorded behind the copy completes (`idle`, `wait`, drop).
        unsafe {
            sys::cuMemcpyHtoDAsync_v2(dst, slot.host_ptr().cast(), bytes, main).result().ctx(|| "cuMemcpyHtoDAsync (staged)".into())?;
            let ev = result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING).ctx(|| "cuEventCreate".into())?;
            let ev = CudaEvent::new(ev, ctx.clone());
            result::event::record(ev.ev, main).ctx(|| "cuEventRecord".into())?;
            result::stream::wait_event(fill, ev.ev, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT).ctx(|| "cuStreamWaitEvent".into())?;
            slot.set_done(ev)
        }
    }
}
