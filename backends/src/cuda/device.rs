//! `CudaDevice`: the `GpuDevice` of one NVIDIA GPU through the driver API (cudarc's thin
//! `result`/`sys` layers; its safe layer tracks reads and writes per buffer with events of its
//! own, which the executor does explicitly here).
//!
//! The primary context of the device, a main stream for copies and kernels and a second one
//! for zero fills, both non-blocking (no implicit ordering with the legacy stream). Every call
//! makes the context current on the calling thread first, so the device may be used from any
//! thread.

pub use super::buffer::CudaBuffer;
use super::context::Context;
pub use super::context::CudaEvent;
use super::cudnn::{self, CudnnConv};
use super::cudnn_handle::CudnnHandle;
use super::cudnn_lib;
use super::error::{err, Ctx};
use super::graph::CudaGraph;
use super::kernel_cache::{CacheStats, KernelCache, Origin};
use super::staging::CudaStaging;
use super::{graph, launch_local, libs, nvrtc, pdl, probe};
use crate::gpu::{Arg, DeviceInfo, GpuDevice, KernelSpec, VendorConv, VendorConvDesc, VendorPolicy};
use cudarc::driver::{result, sys};
use dynaspa_runtime::Result;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Kernel parameters one launch may pass (more is a kernel signature bug, not a use case).
const MAX_ARGS: usize = 64;

struct Module {
    module: sys::CUmodule,
    ctx: Arc<Context>,
}

// SAFETY: modules are driver handles usable from any thread.
unsafe impl Send for Module {}
unsafe impl Sync for Module {}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: loaded in this context, unloaded once, after every kernel from it is gone
        // (each holds an Arc of the module).
        let _ = self.ctx.bind().map(|_| unsafe { result::module::unload(self.module) });
    }
}

/// One entry point of a loaded module, or a cuDNN conv (launched through the same call, so
/// the executor replays either).
pub struct CudaKernel {
    ctx: Arc<Context>,
    /// "file:entry" or the cuDNN plan's label, for errors.
    name: String,
    body: Body,
}

enum Body {
    Function {
        func: sys::CUfunction,
        _module: Arc<Module>,
        /// Byte size of each parameter, when the driver can say (cuFuncGetParamInfo, 12.4+).
        param_sizes: Option<Vec<usize>>,
        max_threads: u32,
        /// Bytes of dynamic shared memory each launch provides (the source's `DSP_DYN_SMEM`).
        launch_local: u32,
        /// Launched programmatically on the main stream (`pdl`): its source waits first.
        pdl: bool,
    },
    Cudnn(Arc<CudnnConv>),
}

// SAFETY: functions are driver handles usable from any thread; cuDNN plans are Send + Sync.
unsafe impl Send for CudaKernel {}
unsafe impl Sync for CudaKernel {}

impl CudaKernel {
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Threads per block this kernel can be launched with (its register use may lower it
    /// below the device's limit); 0 for a cuDNN conv.
    pub fn max_threads(&self) -> u32 {
        match &self.body {
            Body::Function { max_threads, .. } => *max_threads,
            Body::Cudnn(_) => 0,
        }
    }
    pub fn param_sizes(&self) -> Option<&[usize]> {
        match &self.body {
            Body::Function { param_sizes, .. } => param_sizes.as_deref(),
            Body::Cudnn(_) => None,
        }
    }
    /// Whether this is a cuDNN conv rather than a compiled kernel.
    pub fn is_cudnn(&self) -> bool {
        matches!(self.body, Body::Cudnn(_))
    }
    /// Whether main-stream launches of it may overlap the kernel before (`pdl`).
    pub fn programmatic(&self) -> bool {
        matches!(self.body, Body::Function { pdl: true, .. })
    }
}

pub struct CudaDevice {
    ctx: Arc<Context>,
    main: sys::CUstream,
    fill: sys::CUstream,
    info: DeviceInfo,
    cc: (i32, i32),
    arch: String,
    max_block: [u32; 3],
    max_grid: [u32; 3],
    cache: KernelCache,
    modules: Mutex<HashMap<String, Arc<Module>>>,
    memory_hits: AtomicUsize,
    /// Whether kernels that wait first launch programmatically here (`pdl::available`).
    pdl: bool,
    /// The cuDNN handle, made on first use (or why there is none).
    cudnn: OnceLock<std::result::Result<Arc<CudnnHandle>, String>>,
    /// Where members are recorded into graphs (`graph.rs`).
    record_stream: graph::RecordStream,
    /// Pinned memory the frames' inputs are staged in (`upload_staged`).
    uploads: super::upload_ring::UploadRing,
}

// SAFETY: streams and the context are driver handles; the driver API is thread-safe, and the
// module map is behind a mutex.
unsafe impl Send for CudaDevice {}
unsafe impl Sync for CudaDevice {}

impl CudaDevice {
    /// Device `ordinal` with compiled kernels cached under the default cache directory.
    pub fn new(ordinal: usize) -> Result<CudaDevice> {
        CudaDevice::with_cache(ordinal, KernelCache::from_env())
    }

    pub fn with_cache(ordinal: usize, cache: KernelCache) -> Result<CudaDevice> {
        let info = probe::device_info(ordinal)?;
        let dev = result::device::get(ordinal as i32).ctx(|| format!("cuDeviceGet({ordinal})"))?;
        use sys::CUdevice_attribute as A;
        let cc = (
            probe::attribute(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            probe::attribute(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        let dim = |a| probe::attribute(dev, a).map(|v| v.max(0) as u32);
        let max_block = [
            dim(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
            dim(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
            dim(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
        ];
        let max_grid = [
            dim(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
            dim(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
            dim(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
        ];
        let arch = nvrtc::arch_for(cc)?;
        // SAFETY: `dev` comes from cuDeviceGet; released by Context::drop.
        let raw = unsafe { result::primary_ctx::retain(dev) }.ctx(|| format!("cuDevicePrimaryCtxRetain({ordinal})"))?;
        let ctx = Arc::new(Context::retained(dev, raw));
        ctx.bind()?;
        let main = result::stream::create(result::stream::StreamKind::NonBlocking).ctx(|| "cuStreamCreate".into())?;
        let fill = match result::stream::create(result::stream::StreamKind::NonBlocking) {
            Ok(s) => s,
            Err(e) => {
                // SAFETY: created just above, destroyed once.
                let _ = unsafe { result::stream::destroy(main) };
                return Err(err(format!("cuStreamCreate: {}", super::error::driver_text(e))));
            }
        };
        tracing::debug!(device = %info.name, arch = %arch, "CUDA device ready");
        Ok(CudaDevice {
            ctx,
            main,
            fill,
            info,
            cc,
            arch,
            max_block,
            max_grid,
            cache,
            modules: Mutex::new(HashMap::new()),
            memory_hits: AtomicUsize::new(0),
            pdl: pdl::available(cc),
            cudnn: OnceLock::new(),
            record_stream: graph::RecordStream::default(),
            uploads: Default::default(),
        })
    }

    pub fn compute_capability(&self) -> (i32, i32) {
        self.cc
    }

    /// The architecture kernels are compiled for ("sm_90").
    pub fn arch(&self) -> &str {
        &self.arch
    }

    pub fn cache_stats(&self) -> CacheStats {
        CacheStats { memory_hits: self.memory_hits.load(Ordering::Relaxed), ..self.cache.stats() }
    }

    /// Drops the loaded modules (kernels already handed out keep theirs), so the next
    /// `kernel` call goes to the disk cache: how a second start is tested in one process.
    pub fn forget_loaded_kernels(&self) {
        if let Ok(mut m) = self.modules.lock() {
            m.clear();
        }
    }

    /// The device's cuDNN handle, made on first use; `Err` says why cuDNN cannot be used.
    pub(crate) fn cudnn(&self) -> std::result::Result<&Arc<CudnnHandle>, &str> {
        self.cudnn
            .get_or_init(|| {
                let h = CudnnHandle::new(self.ctx.clone(), self.main, self.info.fingerprint()).map(Arc::new);
                if let Err(e) = &h {
                    tracing::warn!(device = %self.info.name, "cuDNN not used: {e}");
                }
                h
            })
            .as_ref()
            .map_err(String::as_str)
    }

    /// Why cuDNN's last backend-API engine search on this device found no plan, if it did not.
    pub fn cudnn_engine_note(&self) -> Option<String> {
        self.cudnn().ok().and_then(|h| h.engine_note())
    }

    /// The cuDNN version in use on this device, or why none is.
    pub fn cudnn_status(&self) -> std::result::Result<(usize, usize, usize), String> {
        self.cudnn().map(|h| h.version()).map_err(str::to_string)
    }

    fn same_device(&self, ctx: &Arc<Context>, what: &str) -> Result<()> {
        if Arc::ptr_eq(&self.ctx, ctx) {
            Ok(())
        } else {
            Err(err(format!("{what} belongs to another CUDA device")))
        }
    }

    fn check_range(&self, buf: &CudaBuffer, offset: usize, len: usize, what: &str) -> Result<()> {
        self.same_device(&buf.ctx, "buffer")?;
        match offset.checked_add(len) {
            Some(end) if end <= buf.bytes => Ok(()),
            _ => Err(err(format!("{what}: {len} bytes at offset {offset} outside a buffer of {} bytes", buf.bytes))),
        }
    }

    /// The main and the second stream this thread queues on now: the device's, or while it
    /// records a graph, the recording's (`graph.rs`).
    fn streams(&self) -> (sys::CUstream, sys::CUstream) {
        match graph::recording() {
            Some(r) => (r.main, r.second),
            None => (self.main, self.fill),
        }
    }

    /// Refuses host copies while this thread records a graph: they wait for the stream, which
    /// a recording does not run.
    fn not_recording(&self, what: &str) -> Result<()> {
        match graph::recording() {
            Some(_) => Err(err(format!("{what} while a graph is recorded"))),
            None => Ok(()),
        }
    }

    /// Queues `kernel` on `stream` (cuDNN convs run on the main stream, their handle's).
    fn launch_on(
        &self,
        stream: sys::CUstream,
        kernel: &CudaKernel,
        groups: [u32; 3],
        local: [u32; 3],
        args: &[Arg<'_, CudaBuffer>],
    ) -> Result<()> {
        self.same_device(&kernel.ctx, "kernel")?;
        let name = &kernel.name;
        let (func, param_sizes, max_threads, launch_local, programmatic) = match &kernel.body {
            Body::Function { func, param_sizes, max_threads, launch_local, pdl, .. } => {
                (*func, param_sizes, *max_threads, *launch_local, *pdl && stream != self.streams().1)
            }
            Body::Cudnn(conv) => {
                let mut bufs = Vec::with_capacity(args.len());
                for a in args {
                    match a {
                        Arg::Buf(b) => {
                            self.same_device(&b.ctx, "buffer argument")?;
                            bufs.push(*b);
                        }
                        _ => return Err(err(format!("{name}: a cuDNN conv takes buffers only"))),
                    }
                }
                return conv.run(&bufs, graph::recording().map(|r| r.main));
            }
        };
        if local.contains(&0) {
            return Err(err(format!("{name}: work-group size {local:?} has a zero side")));
        }
        let threads = local.iter().map(|&d| d as u64).product::<u64>();
        if threads > max_threads as u64 {
            return Err(err(format!("{name}: {threads} threads per block, the kernel allows {max_threads}")));
        }
        for d in 0..3 {
            if local[d] > self.max_block[d] || groups[d] > self.max_grid[d] {
                return Err(err(format!(
                    "{name}: launch {groups:?} x {local:?} exceeds the device's grid {:?} / block {:?}",
                    self.max_grid, self.max_block
                )));
            }
        }
        if args.len() > MAX_ARGS {
            return Err(err(format!("{name}: {} arguments, at most {MAX_ARGS}", args.len())));
        }
        if let Some(sizes) = param_sizes {
            let got: Vec<usize> = args.iter().map(|a| if matches!(a, Arg::Buf(_)) { 8 } else { 4 }).collect();
            if &got != sizes {
                return Err(err(format!("{name}: arguments of {got:?} bytes do not match the kernel's parameters of {sizes:?} bytes")));
            }
        }
        // An empty grid (no DISTiles this frame) is nothing to do.
        if groups.contains(&0) {
            return Ok(());
        }
        // Each argument in its own 8-byte slot; the driver reads each parameter's size from
        // the slot's start (little-endian, so a 4-byte value sits in the low half).
        let mut slots = [0u64; MAX_ARGS];
        for (slot, a) in slots.iter_mut().zip(args) {
            *slot = match a {
                Arg::Buf(b) => {
                    self.same_device(&b.ctx, "buffer argument")?;
                    b.ptr
                }
                Arg::I32(v) => *v as u32 as u64,
                Arg::U32(v) => *v as u64,
                Arg::F32(v) => v.to_bits() as u64,
            };
        }
        let mut ptrs = [std::ptr::null_mut::<c_void>(); MAX_ARGS];
        for (p, s) in ptrs.iter_mut().zip(slots.iter_mut()) {
            *p = s as *mut u64 as *mut c_void;
        }
        self.ctx.bind()?;
        let params = &mut ptrs[..args.len()];
        if programmatic {
            // SAFETY: as below; the kernel waits first and the device has PDL (`kernel`).
            return unsafe { pdl::launch(func, groups, local, launch_local, stream, params) }
                .result()
                .ctx(|| format!("cuLaunchKernelEx({name}, {groups:?} x {local:?}, programmatic)"));
        }
        // SAFETY: live function and stream of this context; parameters checked against the
        // kernel's signature where the driver tells it; `slots` outlives the call (the driver
        // copies parameters at launch).
        unsafe {
            result::launch_kernel(func, (groups[0], groups[1], groups[2]), (local[0], local[1], local[2]), launch_local, stream, params)
        }
        .ctx(|| format!("cuLaunchKernel({name}, {groups:?} x {local:?})"))
    }

    fn event_on(&self, stream: sys::CUstream) -> Result<CudaEvent> {
        let ev = result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING).ctx(|| "cuEventCreate".into())?;
        let event = CudaEvent::new(ev, self.ctx.clone());
        // SAFETY: live event and stream of this context.
        unsafe { result::event::record(event.ev, stream) }.ctx(|| "cuEventRecord".into())?;
        Ok(event)
    }

    fn load_module(&self, spec: &KernelSpec) -> Result<Arc<Module>> {
        let key = self.cache.key(spec, &self.arch)?;
        let lock = || self.modules.lock().map_err(|_| err("kernel cache lock poisoned"));
        if let Some(m) = lock()?.get(&key.text) {
            self.memory_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(m.clone());
        }
        // NVRTC runs without the lock, so threads building executables compile in parallel (a
        // sparse op's sampled members: about a second each); two that ask for one key both
        // compile it, and the first module stored is the one both get.
        let (mut cubin, origin) = self.cache.load_or_compile(spec, &self.arch, &key)?;
        let module = match self.module_from(&cubin) {
            Ok(m) => m,
            Err(e) if origin == Origin::Disk => {
                tracing::warn!(file = spec.file, "cached CUBIN refused ({e}); compiling again");
                cubin = self.cache.compile(spec, &self.arch, &key)?;
                self.module_from(&cubin)?
            }
            Err(e) => return Err(err(format!("{}: the driver refused the CUBIN NVRTC made for {}: {e}", spec.file, self.arch))),
        };
        let mut modules = lock()?;
        Ok(modules.entry(key.text).or_insert_with(|| Arc::new(module)).clone())
    }

    fn module_from(&self, cubin: &[u8]) -> Result<Module> {
        self.ctx.bind()?;
        // SAFETY: `cubin` is a complete image; the driver copies it during the call.
        let module = unsafe { result::module::load_data(cubin.as_ptr() as *const c_void) }.ctx(|| "cuModuleLoadData".into())?;
        Ok(Module { module, ctx: self.ctx.clone() })
    }

    fn param_sizes(func: sys::CUfunction) -> Option<Vec<usize>> {
        if !libs::driver_has(libs::OPT_FUNC_PARAM_INFO) {
            return None;
        }
        let mut sizes = Vec::new();
        for i in 0..=MAX_ARGS {
            let (mut offset, mut size) = (0usize, 0usize);
            // SAFETY: live function; the symbol exists (checked above). An index past the last
            // parameter is CUDA_ERROR_INVALID_VALUE, which ends the list.
            match unsafe { sys::cuFuncGetParamInfo(func, i, &mut offset, &mut size) } {
                sys::CUresult::CUDA_SUCCESS => sizes.push(size),
                sys::CUresult::CUDA_ERROR_INVALID_VALUE => return Some(sizes),
                _ => return None,
            }
        }
        None
    }
}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        // cuDNN's handle is bound to the main stream: it goes first (plans still alive keep
        // their own reference and release it later).
        drop(self.cudnn.take());
        if self.ctx.bind().is_ok() {
            // SAFETY: both streams were created in this context and are destroyed once, after
            // their work is done.
            unsafe {
                let _ = result::stream::synchronize(self.main);
                let _ = result::stream::synchronize(self.fill);
                let _ = result::stream::destroy(self.main);
                let _ = result::stream::destroy(self.fill);
            }
            self.record_stream.destroy();
        }
    }
}

impl GpuDevice for CudaDevice {
    fn kernel_max_threads(&self, kernel: &CudaKernel) -> Option<u32> {
        Some(kernel.max_threads()).filter(|&m| m > 0)
    }

    type Buffer = CudaBuffer;
    type Kernel = CudaKernel;
    type Event = CudaEvent;
    type Staging = CudaStaging;
    type Graph = CudaGraph;

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn alloc(&self, bytes: usize) -> Result<CudaBuffer> {
        CudaBuffer::alloc(&self.ctx, bytes)
    }

    fn upload(&self, dst: &CudaBuffer, offset: usize, data: &[u8]) -> Result<()> {
        self.check_range(dst, offset, data.len(), "upload")?;
        self.not_recording("upload")?;
        if data.is_empty() {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: range checked; `data` stays borrowed until the stream has copied it (the
        // synchronize below), which is also when the caller may reuse it.
        unsafe {
            result::memcpy_htod_async(dst.ptr + offset as u64, data, self.main).ctx(|| "cuMemcpyHtoDAsync".into())?;
            result::stream::synchronize(self.main).ctx(|| "cuStreamSynchronize (upload)".into())
        }
    }

    fn upload_staged(&self, dst: &CudaBuffer, offset: usize, bytes: usize, write: &mut dyn FnMut(&mut [u8]) -> Result<()>) -> Result<()> {
        self.check_range(dst, offset, bytes, "upload")?;
        self.not_recording("upload")?;
        if bytes == 0 {
            return Ok(());
        }
        self.ctx.bind()?;
        self.uploads.upload(&self.ctx, self.main, self.fill, dst.ptr + offset as u64, bytes, write)
    }

    fn download(&self, src: &CudaBuffer, offset: usize, out: &mut [u8]) -> Result<()> {
        self.check_range(src, offset, out.len(), "download")?;
        self.not_recording("download")?;
        if out.is_empty() {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: range checked; `out` is written by the stream before synchronize returns.
        unsafe {
            result::memcpy_dtoh_async(out, src.ptr + offset as u64, self.main).ctx(|| "cuMemcpyDtoHAsync".into())?;
            result::stream::synchronize(self.main).ctx(|| "cuStreamSynchronize (download)".into())
        }
    }

    fn staging(&self, bytes: usize) -> Result<CudaStaging> {
        CudaStaging::new(bytes, self.ctx.clone())
    }

    fn download_async(&self, src: &CudaBuffer, offset: usize, dst: &CudaStaging, after: Option<&CudaEvent>) -> Result<()> {
        self.check_range(src, offset, dst.len(), "download")?;
        self.not_recording("asynchronous download")?;
        if dst.is_empty() {
            return Ok(());
        }
        self.ctx.bind()?;
        // On the second stream, after the main stream's work so far (or `after`): the copy
        // engine's latency stays off the main stream, whose next kernels do not read the
        // destination.
        let marker;
        let after = match after {
            Some(ev) => {
                self.same_device(&ev.ctx, "event")?;
                ev
            }
            None => {
                marker = self.event_on(self.main)?;
                &marker
            }
        };
        // SAFETY: range checked; the pinned destination holds `dst.len()` bytes and lives until
        // the event recorded next has completed (its Drop waits for it); live event and streams.
        unsafe {
            result::stream::wait_event(self.fill, after.ev, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT)
                .ctx(|| "cuStreamWaitEvent".into())?;
            sys::cuMemcpyDtoHAsync_v2(dst.host_ptr().cast(), src.ptr + offset as u64, dst.len(), self.fill)
                .result()
                .ctx(|| "cuMemcpyDtoHAsync".into())?;
        }
        dst.set_done(self.event_on(self.fill)?)
    }

    fn read_staging(&self, st: &CudaStaging, out: &mut [u8]) -> Result<()> {
        if st.take_main_later() {
            self.ctx.bind()?;
            st.set_done(self.event_on(self.streams().0)?)?;
        }
        st.read(out)
    }

    fn host_mapped(&self, bytes: usize) -> Result<Option<(CudaBuffer, CudaStaging)>> {
        let (st, ptr) = CudaStaging::mapped(bytes, self.ctx.clone())?;
        Ok(Some((CudaBuffer { ptr, bytes, ctx: self.ctx.clone(), host: Some(st.memory()) }, st)))
    }

    fn staging_written(&self, st: &CudaStaging, second: bool) -> Result<()> {
        // A main-stream write records its event when the host reads the counts, not here: an
        // event between a frame's kernels stops the next from overlapping the one before
        // (`cuda/pdl.rs`).
        if !second {
            st.written_on_main();
            return Ok(());
        }
        self.ctx.bind()?;
        let (main, fill) = self.streams();
        st.set_done(self.event_on(if second { fill } else { main })?)
    }

    fn kernel(&self, spec: &KernelSpec) -> Result<CudaKernel> {
        let module = self.load_module(spec)?;
        let entry = CString::new(spec.entry).map_err(|_| err(format!("entry name {:?} contains NUL", spec.entry)))?;
        self.ctx.bind()?;
        // SAFETY: live module of this context.
        let func = unsafe { result::module::get_function(module.module, entry) }
            .ctx(|| format!("{} has no kernel '{}' (cuModuleGetFunction)", spec.file, spec.entry))?;
        // SAFETY: live function.
        let max_threads =
            unsafe { result::function::get_function_attribute(func, sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK) }
                .ctx(|| "cuFuncGetAttribute".into())?;
        let launch_local = launch_local::allow(func, spec, &self.info)?;
        Ok(CudaKernel {
            ctx: self.ctx.clone(),
            name: format!("{}:{}", spec.file, spec.entry),
            body: Body::Function {
                func,
                _module: module,
                param_sizes: CudaDevice::param_sizes(func),
                max_threads: max_threads.max(0) as u32,
                launch_local,
                pdl: self.pdl && pdl::waits_first(spec.source, spec.entry),
            },
        })
    }

    fn launch(&self, kernel: &CudaKernel, groups: [u32; 3], local: [u32; 3], args: &[Arg<'_, CudaBuffer>]) -> Result<()> {
        self.launch_on(self.streams().0, kernel, groups, local, args)
    }

    fn records_graphs(&self) -> bool {
        true
    }

    fn capture_frame(&self, record: &mut dyn FnMut() -> Result<()>) -> Result<Option<CudaGraph>> {
        graph::capture(&self.ctx, &self.record_stream, record)
    }

    fn launch_graph(&self, g: &CudaGraph) -> Result<()> {
        if graph::recording().is_some() {
            return Err(err("a graph is not launched while another is recorded".to_string()));
        }
        graph::launch(&self.ctx, g, self.main)
    }

    fn launch_async(
        &self,
        kernel: &CudaKernel,
        groups: [u32; 3],
        local: [u32; 3],
        args: &[Arg<'_, CudaBuffer>],
        after: &[CudaEvent],
    ) -> Result<CudaEvent> {
        if matches!(kernel.body, Body::Cudnn(_)) {
            return Err(err(format!("{}: cuDNN convs run on the main stream only", kernel.name)));
        }
        self.ctx.bind()?;
        let fill = self.streams().1;
        for e in after {
            self.same_device(&e.ctx, "event")?;
            // SAFETY: live event and stream of this context.
            unsafe { result::stream::wait_event(fill, e.ev, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT) }
                .ctx(|| "cuStreamWaitEvent (second-stream launch)".into())?;
        }
        self.launch_on(fill, kernel, groups, local, args)?;
        self.event_on(fill)
    }

    fn fill_zero_async(&self, buf: &CudaBuffer, offset: usize, bytes: usize, after: &[CudaEvent]) -> Result<CudaEvent> {
        self.check_range(buf, offset, bytes, "fill_zero_async")?;
        self.ctx.bind()?;
        let fill = self.streams().1;
        for e in after {
            self.same_device(&e.ctx, "event")?;
            // SAFETY: live event and stream of this context.
            unsafe { result::stream::wait_event(fill, e.ev, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT) }
                .ctx(|| "cuStreamWaitEvent (zero fill)".into())?;
        }
        if bytes > 0 {
            let ptr = buf.ptr + offset as u64;
            // SAFETY: range checked; memsets on the fill stream. Whole 32-bit words when aligned
            // (the common case: f32 tensors), bytes otherwise.
            if ptr % 4 == 0 && bytes % 4 == 0 {
                unsafe { sys::cuMemsetD32Async(ptr, 0, bytes / 4, fill) }.result().ctx(|| "cuMemsetD32Async".into())?;
            } else {
                unsafe { result::memset_d8_async(ptr, 0, bytes, fill) }.ctx(|| "cuMemsetD8Async".into())?;
            }
        }
        self.event_on(fill)
    }

    fn marker(&self) -> Result<CudaEvent> {
        self.ctx.bind()?;
        self.event_on(self.streams().0)
    }

    fn timestamp(&self) -> Result<Option<CudaEvent>> {
        self.ctx.bind()?;
        self.not_recording("timestamp")?;
        let ev = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).ctx(|| "cuEventCreate (timed)".into())?;
        let event = CudaEvent::new(ev, self.ctx.clone());
        // SAFETY: live event and stream of this context.
        unsafe { result::event::record(event.ev, self.main) }.ctx(|| "cuEventRecord (timed)".into())?;
        Ok(Some(event))
    }

    fn time_between(&self, a: &CudaEvent, b: &CudaEvent) -> Result<std::time::Duration> {
        self.ctx.bind()?;
        self.same_device(&a.ctx, "event")?;
        self.same_device(&b.ctx, "event")?;
        // SAFETY: live timed events of this context, both recorded.
        let ms = unsafe { result::event::elapsed(a.ev, b.ev) }.ctx(|| "cuEventElapsedTime".into())?;
        Ok(std::time::Duration::from_secs_f64(f64::from(ms.max(0.0)) * 1e-3))
    }

    fn wait_for(&self, events: &[CudaEvent]) -> Result<()> {
        self.ctx.bind()?;
        let main = self.streams().0;
        for e in events {
            self.same_device(&e.ctx, "event")?;
            // SAFETY: live event and stream of this context.
            unsafe { result::stream::wait_event(main, e.ev, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT) }
                .ctx(|| "cuStreamWaitEvent".into())?;
        }
        Ok(())
    }

    fn vendor_policy(&self) -> VendorPolicy {
        if cudnn_lib::load().is_ok() {
            VendorPolicy::Timed
        } else {
            VendorPolicy::Never
        }
    }

    fn vendor_library(&self) -> Option<String> {
        let (a, b, c) = cudnn_lib::load().ok()?.version;
        Some(format!("cuDNN {a}.{b}.{c}"))
    }

    /// cuDNN's fastest fp32 engine of the backend API (bare convs) and its legacy API's fastest
    /// FMA algorithm (bare or fused); the lowering times them against each other and ours.
    fn vendor_convs(&self, desc: &VendorConvDesc, x: &CudaBuffer, w: &CudaBuffer, y: &CudaBuffer) -> Result<Vec<VendorConv<CudaKernel>>> {
        let Ok(h) = self.cudnn() else { return Ok(Vec::new()) };
        for b in [x, w, y] {
            self.same_device(&b.ctx, "buffer")?;
        }
        let mut plans = Vec::new();
        plans.extend(cudnn::plan_engine(h, desc, x, w, y)?);
        plans.extend(cudnn::plan(h, desc, x, w, y, self.info.global_mem_bytes)?);
        Ok(plans
            .into_iter()
            .map(|plan| {
                let (workspace, label) = (plan.workspace(), plan.label.clone());
                let kernel = CudaKernel { ctx: self.ctx.clone(), name: label.clone(), body: Body::Cudnn(Arc::new(plan)) };
                VendorConv { kernel, workspace, label }
            })
            .collect())
    }

    fn finish(&self) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: live streams of this context.
        unsafe {
            result::stream::synchronize(self.main).ctx(|| "cuStreamSynchronize (main)".into())?;
            result::stream::synchronize(self.fill).ctx(|| "cuStreamSynchronize (zero fill)".into())
        }
    }
}
