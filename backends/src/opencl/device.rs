//! `OpenClDevice`: the `GpuDevice` trait on one OpenCL device, through opencl3 with libOpenCL
//! loaded at run time. Two in-order queues: `main` runs kernels and transfers, `fill` zeroes
//! buffers, ordered against `main` by events.

use super::launch::{enqueue_without_event, new_buffer_id, KernelState};
use super::platform::{cl_err, ClDeviceEntry};
use super::program_cache::ProgramCache;
use super::staging::ClStaging;
use crate::gpu::{Arg, DeviceInfo, GpuDevice, KernelSpec};
use dynaspa_runtime::{Error, Result};
use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::Device;
use opencl3::error_codes::ClError;
use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, ClMem, CL_MEM_READ_WRITE};
use opencl3::program::Program;
use opencl3::types::{cl_event, CL_BLOCKING};
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

const PRELUDE: &str = include_str!("../gpu/kernels/prelude_opencl.h");

/// A program is one source file built with one set of defines.
type ProgramKey = (String, Vec<(String, String)>);

pub struct OpenClDevice {
    info: DeviceInfo,
    device: Device,
    context: Context,
    main: CommandQueue,
    fill: CommandQueue,
    /// Built programs by (file, defines): each entry point of one source shares one build.
    programs: Mutex<HashMap<ProgramKey, Arc<Program>>>,
    disk: ProgramCache,
    stats: ProgramStats,
}

/// How programs were obtained since the device was opened (tests check the disk cache with it).
#[derive(Default, Debug)]
pub struct ProgramStats {
    pub from_source: AtomicUsize,
    pub from_disk: AtomicUsize,
}

pub struct ClBuffer {
    mem: Buffer<u8>,
    bytes: usize,
    /// Never reused in the process: the kernels' argument memo keys buffers by it.
    id: u64,
}

/// Arguments are state of an OpenCL kernel object, so setting them and enqueueing happen under
/// one lock; the program stays alive as long as any kernel made from it.
pub struct ClKernel {
    kernel: Mutex<KernelState>,
    name: String,
    _program: Arc<Program>,
}

pub struct ClEvent(Event);

// The handles are reference-counted driver objects, usable from any thread (OpenCL 1.2 makes
// every API call thread-safe except clSetKernelArg, which `ClKernel` serialises).
unsafe impl Send for ClKernel {}
unsafe impl Sync for ClKernel {}

impl ClBuffer {
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl OpenClDevice {
    /// Sets `kernel`'s arguments and queues it on `queue` behind `wait`; `Ok(None)` for an empty
    /// grid (nothing queued) and where no event is wanted.
    #[allow(clippy::too_many_arguments)]
    fn enqueue(
        &self,
        queue: &CommandQueue,
        kernel: &ClKernel,
        groups: [u32; 3],
        local: [u32; 3],
        args: &[Arg<'_, ClBuffer>],
        wait: &[cl_event],
        want_event: bool,
    ) -> Result<Option<Event>> {
        if groups.contains(&0) {
            return Ok(None);
        }
        let mut k = kernel.kernel.lock().map_err(|_| self.err(&kernel.name, "poisoned kernel lock"))?;
        k.set_args(args, |b: &ClBuffer| (b.id, b.mem.get()))
            .map_err(|(i, e)| self.err(&format!("kernel {} argument {i}", kernel.name), ClError(e)))?;
        let global: [usize; 3] = std::array::from_fn(|d| groups[d] as usize * local[d] as usize);
        let local: [usize; 3] = local.map(|l| l as usize);
        let failed = |e| self.err(&format!("launching {} over {groups:?} x {local:?}", kernel.name), ClError(e));
        if !want_event {
            // SAFETY: arguments set above, the queue and kernel are live, the wait list's events
            // are live for the call.
            return unsafe { enqueue_without_event(queue.get(), k.kernel.get(), &global, &local, wait) }.map(|()| None).map_err(failed);
        }
        // SAFETY: as above.
        unsafe { queue.enqueue_nd_range_kernel(k.kernel.get(), 3, std::ptr::null(), global.as_ptr(), local.as_ptr(), wait) }
            .map(Some)
            .map_err(|e| failed(e.0))
    }

    /// Opens `entry` with its own context and queues. `cache_root`: the dynaspa cache directory
    /// (program binaries go to `cache_root/opencl`); `None` compiles on every start.
    pub fn open(entry: &ClDeviceEntry, cache_root: Option<&Path>) -> Result<OpenClDevice> {
        let device = Device::new(entry.id);
        let what = |s: &str| format!("{s} on '{}'", entry.info.name);
        let context = Context::from_device(&device).map_err(|e| cl_err(&what("creating a context"), e))?;
        let queue = || -> Result<CommandQueue> {
            // clCreateCommandQueueWithProperties is OpenCL 2.0; 1.2 devices (Adreno, Mali) need the old call.
            #[allow(deprecated)]
            let q = if device_major_version(&device) >= 2 {
                CommandQueue::create_default_with_properties(&context, 0, 0)
            } else {
                CommandQueue::create_default(&context, 0)
            };
            q.map_err(|e| cl_err(&what("creating a command queue"), e))
        };
        let (main, fill) = (queue()?, queue()?);
        Ok(OpenClDevice {
            info: entry.info.clone(),
            device,
            context,
            main,
            fill,
            programs: Mutex::new(HashMap::new()),
            disk: ProgramCache::new(cache_root),
            stats: ProgramStats::default(),
        })
    }

    pub fn program_stats(&self) -> &ProgramStats {
        &self.stats
    }

    fn err(&self, what: &str, e: impl std::fmt::Display) -> Error {
        cl_err(&format!("{what} on '{}'", self.info.name), e)
    }

    /// The build options of `spec`: OpenCL C 1.2, the vendor's options, then its defines; they
    /// also key the disk cache.
    fn build_options(&self, spec: &KernelSpec) -> Result<String> {
        let mut options = String::from("-cl-std=CL1.2");
        options.push_str(vendor_options(&self.info.vendor));
        for (k, v) in &spec.defines {
            let ok = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "_.-+".contains(c));
            if !ok(k) || !ok(v) {
                return Err(Error::Backend {
                    backend: "opencl".into(),
                    msg: format!("{}: define '{k}={v}' is not a plain name and value", spec.file),
                });
            }
            options.push_str(&format!(" -D {k}={v}"));
        }
        Ok(options)
    }

    fn program(&self, spec: &KernelSpec) -> Result<Arc<Program>> {
        let key = (spec.file.to_string(), spec.defines.clone());
        if let Some(p) = self.programs.lock().map_err(|_| self.err("program cache", "poisoned lock"))?.get(&key) {
            return Ok(p.clone());
        }
        let options = self.build_options(spec)?;
        let source = format!("{PRELUDE}\n#line 1\n{}", spec.source);
        let cache_key = ProgramCache::key(&self.info.fingerprint(), &source, &options);
        let dev = [self.device.id()];
        let from_disk = self.disk.load(&cache_key).and_then(|bin| {
            // SAFETY: the device belongs to the context.
            let mut p = unsafe { Program::create_from_binary(&self.context, &dev, &[&bin]) }.ok()?;
            p.build(&dev, &options).ok()?;
            Some(p)
        });
        let program = match from_disk {
            Some(p) => {
                self.stats.from_disk.fetch_add(1, Ordering::Relaxed);
                p
            }
            None => {
                let _span = tracing::debug_span!("opencl_compile", file = spec.file).entered();
                let mut p = Program::create_from_source(&self.context, &source)
                    .map_err(|e| self.err(&format!("creating program {}", spec.file), e))?;
                if let Err(e) = p.build(&dev, &options) {
                    let log = p.get_build_log(self.device.id()).unwrap_or_default();
                    return Err(Error::Backend {
                        backend: "opencl".into(),
                        msg: format!("compiling {} with '{options}' failed ({e}); build log:\n{}", spec.file, log.trim()),
                    });
                }
                let log = p.get_build_log(self.device.id()).unwrap_or_default();
                if !log.trim().is_empty() {
                    tracing::debug!("build log of {} ({options}):\n{}", spec.file, log.trim());
                }
                self.stats.from_source.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut bins) = p.get_binaries() {
                    if let Some(bin) = bins.pop().filter(|b| !b.is_empty()) {
                        self.disk.store(&cache_key, &bin);
                    }
                }
                p
            }
        };
        let program = Arc::new(program);
        self.programs.lock().map_err(|_| self.err("program cache", "poisoned lock"))?.insert(key, program.clone());
        Ok(program)
    }
}

/// Build options a vendor's compiler needs: NVIDIA's OpenCL gets PTX's device-wide fence for
/// GLOBAL_FENCE (prelude_opencl.h says why); others none.
pub(crate) fn vendor_options(vendor: &str) -> &'static str {
    if vendor.to_ascii_lowercase().contains("nvidia") {
        " -D NV_GPU_FENCE=1"
    } else {
        ""
    }
}

fn device_major_version(d: &Device) -> u32 {
    // "OpenCL <major>.<minor> <vendor info>"
    d.version().ok().and_then(|v| v.split_whitespace().nth(1).and_then(|n| n.split('.').next()).and_then(|m| m.parse().ok())).unwrap_or(1)
}

fn events(list: &[ClEvent]) -> Vec<cl_event> {
    list.iter().map(|e| e.0.get()).collect()
}

impl GpuDevice for OpenClDevice {
    type Buffer = ClBuffer;
    type Kernel = ClKernel;
    type Event = ClEvent;
    type Staging = ClStaging;
    type Graph = ();

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn alloc(&self, bytes: usize) -> Result<ClBuffer> {
        // OpenCL has no empty buffers; a 0-byte tensor still gets an address.
        let n = bytes.max(4);
        // SAFETY: no host pointer is passed.
        let mem = unsafe { Buffer::<u8>::create(&self.context, CL_MEM_READ_WRITE, n, std::ptr::null_mut()) }
            .map_err(|e| self.err(&format!("allocating {n} bytes"), e))?;
        Ok(ClBuffer { mem, bytes, id: new_buffer_id() })
    }

    fn upload(&self, dst: &ClBuffer, offset: usize, data: &[u8]) -> Result<()> {
        check_range("upload", dst, offset, data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        // SAFETY: blocking write; `data` outlives the call and the range was checked.
        unsafe {
            opencl3::command_queue::enqueue_write_buffer(
                self.main.get(),
                dst.mem.get(),
                CL_BLOCKING,
                offset,
                data.len(),
                data.as_ptr().cast(),
                0,
                std::ptr::null(),
            )
        }
        .map(|ev| drop(Event::new(ev)))
        .map_err(|e| self.err("writing a buffer", ClError(e)))
    }

    fn download(&self, src: &ClBuffer, offset: usize, out: &mut [u8]) -> Result<()> {
        check_range("download", src, offset, out.len())?;
        if out.is_empty() {
            return Ok(());
        }
        // SAFETY: blocking read into `out`, range checked.
        unsafe {
            opencl3::command_queue::enqueue_read_buffer(
                self.main.get(),
                src.mem.get(),
                CL_BLOCKING,
                offset,
                out.len(),
                out.as_mut_ptr().cast(),
                0,
                std::ptr::null(),
            )
        }
        .map(|ev| drop(Event::new(ev)))
        .map_err(|e| self.err("reading a buffer", ClError(e)))
    }

    fn staging(&self, bytes: usize) -> Result<ClStaging> {
        Ok(ClStaging::new(bytes))
    }

    fn download_async(&self, src: &ClBuffer, offset: usize, dst: &ClStaging, after: Option<&ClEvent>) -> Result<()> {
        check_range("download", src, offset, dst.len())?;
        if dst.is_empty() {
            return Ok(());
        }
        // On the second queue, after the main queue's work so far (or `after`): the main
        // queue's next kernels do not wait for the copy.
        let marker;
        let after = match after {
            Some(ev) => ev,
            None => {
                marker = self.marker()?;
                &marker
            }
        };
        let wait = events(std::slice::from_ref(after));
        let r = dst.start(|ptr, len| {
            // SAFETY: non-blocking read into memory `dst` owns and keeps (its Drop and the next
            // `start`/`read` wait for the returned event); range checked; the wait list is live.
            unsafe {
                opencl3::command_queue::enqueue_read_buffer(
                    self.fill.get(),
                    src.mem.get(),
                    opencl3::types::CL_NON_BLOCKING,
                    offset,
                    len,
                    ptr.cast(),
                    wait.len() as u32,
                    wait.as_ptr(),
                )
            }
            .map(Event::new)
            .map_err(|e| ClError(e).to_string())
        });
        // Submitted now, so neither waits for the next blocking call.
        let _ = self.main.flush();
        let _ = self.fill.flush();
        r.map_err(|e| self.err("reading a buffer asynchronously", e))
    }

    fn read_staging(&self, st: &ClStaging, out: &mut [u8]) -> Result<()> {
        st.read(out).map_err(|e| self.err("reading a download", e))
    }

    fn kernel(&self, spec: &KernelSpec) -> Result<ClKernel> {
        let program = self.program(spec)?;
        let kernel =
            Kernel::create(&program, spec.entry).map_err(|e| self.err(&format!("creating kernel {} of {}", spec.entry, spec.file), e))?;
        Ok(ClKernel { kernel: Mutex::new(KernelState::new(kernel)), name: spec.entry.to_string(), _program: program })
    }

    fn launch(&self, kernel: &ClKernel, groups: [u32; 3], local: [u32; 3], args: &[Arg<'_, ClBuffer>]) -> Result<()> {
        self.enqueue(&self.main, kernel, groups, local, args, &[], false).map(drop)
    }

    fn launch_async(
        &self,
        kernel: &ClKernel,
        groups: [u32; 3],
        local: [u32; 3],
        args: &[Arg<'_, ClBuffer>],
        after: &[ClEvent],
    ) -> Result<ClEvent> {
        let ev = self.enqueue(&self.fill, kernel, groups, local, args, &events(after), true)?;
        // Submitted now, so it runs while the main queue works.
        let _ = self.fill.flush();
        match ev {
            Some(ev) => Ok(ClEvent(ev)),
            // An empty grid ran nothing: an event that completes with what came before.
            // SAFETY: no wait list.
            None => unsafe { self.fill.enqueue_marker_with_wait_list(&[]) }.map(ClEvent).map_err(|e| self.err("marker", e)),
        }
    }

    fn fill_zero_async(&self, buf: &ClBuffer, offset: usize, bytes: usize, after: &[ClEvent]) -> Result<ClEvent> {
        check_range("fill", buf, offset, bytes)?;
        let wait = events(after);
        // The widest pattern that divides offset and size: fills are faster in whole words.
        let zero = [0u8; 4];
        let pat: &[u8] = if offset.is_multiple_of(4) && bytes.is_multiple_of(4) { &zero } else { &zero[..1] };
        // SAFETY: the pattern outlives the call (the driver copies it); range checked.
        unsafe {
            opencl3::command_queue::enqueue_fill_buffer(
                self.fill.get(),
                buf.mem.get(),
                pat.as_ptr().cast(),
                pat.len(),
                offset,
                bytes,
                wait.len() as u32,
                if wait.is_empty() { std::ptr::null() } else { wait.as_ptr() },
            )
        }
        .map(|ev| {
            // Submitted now, so the fill runs while the main queue works.
            let _ = self.fill.flush();
            ClEvent(Event::new(ev))
        })
        .map_err(|e| self.err("zero fill", ClError(e)))
    }

    fn marker(&self) -> Result<ClEvent> {
        // SAFETY: no wait list.
        unsafe { self.main.enqueue_marker_with_wait_list(&[]) }.map(ClEvent).map_err(|e| self.err("marker", e))
    }

    fn wait_for(&self, events_: &[ClEvent]) -> Result<()> {
        if events_.is_empty() {
            return Ok(());
        }
        let wait = events(events_);
        // SAFETY: the events are valid for the call.
        unsafe { self.main.enqueue_barrier_with_wait_list(&wait) }.map(drop).map_err(|e| self.err("barrier", e))
    }

    fn finish(&self) -> Result<()> {
        self.main.finish().map_err(|e| self.err("finishing the main queue", e))?;
        self.fill.finish().map_err(|e| self.err("finishing the fill queue", e))
    }
}

fn check_range(what: &str, b: &ClBuffer, offset: usize, len: usize) -> Result<()> {
    if offset.checked_add(len).is_none_or(|end| end > b.mem_len()) {
        return Err(Error::Backend {
            backend: "opencl".into(),
            msg: format!("{what} of {len} bytes at offset {offset} exceeds a buffer of {} bytes", b.bytes),
        });
    }
    Ok(())
}

impl ClBuffer {
    /// Bytes actually allocated (at least 4).
    fn mem_len(&self) -> usize {
        self.bytes.max(4)
    }
}

#[cfg(test)]
#[path = "device_tests.rs"]
mod tests;
