//! Host memory for asynchronous downloads: a non-blocking `clEnqueueReadBuffer` into memory this
//! value owns, and the event that says when it has landed.

use opencl3::event::Event;
use std::sync::Mutex;

pub struct ClStaging {
    /// Written by the device between the enqueue and the event; never resized.
    data: Mutex<Box<[u8]>>,
    done: Mutex<Option<Event>>,
}

// SAFETY: `data` is only written by the device while `done` holds the pending event, and only
// read on the host after waiting for it (both under the locks).
unsafe impl Send for ClStaging {}
unsafe impl Sync for ClStaging {}

impl ClStaging {
    pub(super) fn new(bytes: usize) -> ClStaging {
        ClStaging { data: Mutex::new(vec![0u8; bytes].into_boxed_slice()), done: Mutex::new(None) }
    }

    pub fn len(&self) -> usize {
        self.data.lock().map_or(0, |d| d.len())
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs `enqueue` with the destination pointer and length, keeping the event it returns.
    /// An earlier copy still in flight is not waited for: copies go to the device's in-order
    /// second queue, so the new one lands after it and its event stands for both. (Waiting
    /// here held the host on each frame's copy when frames were queued back to back: 3-37 µs
    /// per frame on NVIDIA's OpenCL; RESULTS.md, "NVIDIA OpenCL's counts copy no longer waits".)
    pub(super) fn start(&self, enqueue: impl FnOnce(*mut u8, usize) -> Result<Event, String>) -> Result<(), String> {
        let mut done = self.done.lock().map_err(|_| "staging lock poisoned".to_string())?;
        let mut data = self.data.lock().map_err(|_| "staging lock poisoned".to_string())?;
        let ev = enqueue(data.as_mut_ptr(), data.len())?;
        *done = Some(ev);
        Ok(())
    }

    /// Waits for the last copy and copies its bytes into `out` (as many as it holds).
    pub(super) fn read(&self, out: &mut [u8]) -> Result<(), String> {
        let mut done = self.done.lock().map_err(|_| "staging lock poisoned".to_string())?;
        if let Some(ev) = done.take() {
            ev.wait().map_err(|e| format!("waiting for a download: {e}"))?;
        }
        let data = self.data.lock().map_err(|_| "staging lock poisoned".to_string())?;
        let n = out.len().min(data.len());
        out[..n].copy_from_slice(&data[..n]);
        Ok(())
    }
}

impl Drop for ClStaging {
    fn drop(&mut self) {
        // The device may still be writing into `data`.
        if let Ok(mut d) = self.done.lock() {
            if let Some(ev) = d.take() {
                let _ = ev.wait();
            }
        }
    }
}
