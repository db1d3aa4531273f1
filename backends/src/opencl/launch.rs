//! Kernel launches with less host work per launch: arguments set only where they changed since
//! the kernel object's last launch, and no event object for launches nobody waits on. Together
//! they made the best members on NVIDIA's OpenCL 4-13% faster (benches/RESULTS.md, "OpenCL:
//! arguments set only where they changed").

use crate::gpu::Arg;
use opencl3::kernel::Kernel;
use opencl3::types::{cl_command_queue, cl_event, cl_int, cl_kernel};
use std::sync::atomic::{AtomicU64, Ordering};

/// Buffer identities for the argument memo. A `cl_mem` value can come back for a new buffer
/// after the old one is released, and a driver may have resolved the old one's device address
/// when the argument was set; an id is never reused within the process.
static NEXT_BUFFER_ID: AtomicU64 = AtomicU64::new(1);

pub fn new_buffer_id() -> u64 {
    NEXT_BUFFER_ID.fetch_add(1, Ordering::Relaxed)
}

/// What one argument was last set to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ArgKey {
    Buf(u64),
    I32(i32),
    U32(u32),
    F32(u32),
}

/// A kernel object and the arguments it holds now (OpenCL keeps them between launches).
pub struct KernelState {
    pub kernel: Kernel,
    set: Vec<Option<ArgKey>>,
}

impl KernelState {
    pub fn new(kernel: Kernel) -> KernelState {
        KernelState { kernel, set: Vec::new() }
    }

    /// Sets the arguments of `args` that differ from what the kernel holds; `buf` gives a
    /// buffer's id and `cl_mem`. The memo records an argument only once the driver took it, so
    /// a failed launch leaves it true.
    pub fn set_args<B>(&mut self, args: &[Arg<'_, B>], buf: impl Fn(&B) -> (u64, opencl3::types::cl_mem)) -> Result<(), (usize, cl_int)> {
        if self.set.len() < args.len() {
            self.set.resize(args.len(), None);
        }
        for (i, a) in args.iter().enumerate() {
            let key = match a {
                Arg::Buf(b) => ArgKey::Buf(buf(b).0),
                Arg::I32(v) => ArgKey::I32(*v),
                Arg::U32(v) => ArgKey::U32(*v),
                Arg::F32(v) => ArgKey::F32(v.to_bits()),
            };
            if self.set[i] == Some(key) {
                continue;
            }
            let at = i as u32;
            // SAFETY: each value has the size of the kernel parameter it is set to (buffers are
            // cl_mem, scalars 32-bit), which the driver checks and reports as an error.
            let r = unsafe {
                match a {
                    Arg::Buf(b) => self.kernel.set_arg(at, &buf(b).1),
                    Arg::I32(v) => self.kernel.set_arg(at, v),
                    Arg::U32(v) => self.kernel.set_arg(at, v),
                    Arg::F32(v) => self.kernel.set_arg(at, v),
                }
            };
            if let Err(e) = r {
                self.set[i] = None;
                return Err((i, e.0));
            }
            self.set[i] = Some(key);
        }
        Ok(())
    }
}

/// `clEnqueueNDRangeKernel` without an event object (opencl3 always asks for one, and drivers
/// create and release one per launch).
///
/// # Safety
/// The queue and kernel are live, the kernel's arguments are set, `global` and `local` are
/// 3-element arrays, and the wait list's events are live for the call.
pub unsafe fn enqueue_without_event(
    queue: cl_command_queue,
    kernel: cl_kernel,
    global: &[usize; 3],
    local: &[usize; 3],
    wait: &[cl_event],
) -> Result<(), cl_int> {
    let rt = cl3::load_library().as_ref().map_err(|_| cl3::error_codes::DLOPEN_RUNTIME_LOAD_FAILED)?;
    let wait_ptr = if wait.is_empty() { std::ptr::null() } else { wait.as_ptr() };
    // As the caller promises; a null event pointer is allowed (OpenCL 1.2, 5.8).
    let status = rt.clEnqueueNDRangeKernel(
        queue,
        kernel,
        3,
        std::ptr::null(),
        global.as_ptr(),
        local.as_ptr(),
        wait.len() as u32,
        wait_ptr,
        std::ptr::null_mut(),
    );
    match status {
        Some(0) => Ok(()),
        Some(e) => Err(e),
        None => Err(cl3::error_codes::DLOPEN_FUNCTION_NOT_AVAILABLE),
    }
}
