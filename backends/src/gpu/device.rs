//! The device abstraction the GPU backends share: buffers, kernels compiled from source with
//! schedule constants, launches on an in-order main queue, and a second queue for zero fills
//! and work off the main queue's path ordered with events (DynaSpa's triple buffer). One executor drives every `GpuDevice`.

use dynaspa_runtime::Result;

/// What the runtime needs to know about a device: for listing, for the profile fingerprint and
/// for the roofline descriptor of the tuner.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DeviceInfo {
    /// Backend family: "cuda", "opencl", "wgpu".
    pub backend: String,
    /// Marketing name as the driver reports it.
    pub name: String,
    pub vendor: String,
    /// Driver (and for OpenCL the platform) version string.
    pub driver: String,
    /// "gpu", "cpu", "accelerator" or "other".
    pub kind: String,
    pub compute_units: u32,
    /// Bytes of on-chip memory one work-group / block may use.
    pub local_mem_bytes: u64,
    /// Bytes one block may use where its launch provides some of them (CUDA's opt-in dynamic
    /// shared memory, past `local_mem_bytes`); 0 where launches provide none.
    #[serde(default)]
    pub local_mem_launch_bytes: u64,
    pub max_work_group_size: u32,
    pub global_mem_bytes: u64,
    /// Compute capability for CUDA ("9.0"), OpenCL C version for OpenCL, adapter backend for wgpu.
    pub arch: String,
}

impl DeviceInfo {
    /// Stable identity of the device and driver; profiles and compiled-kernel caches key on it.
    pub fn fingerprint(&self) -> String {
        format!("{}|{}|{}|{}|{}", self.backend, self.vendor, self.name, self.arch, self.driver)
    }

    /// The language this device's kernels are compiled from.
    pub fn dialect(&self) -> KernelDialect {
        match self.backend.as_str() {
            "cuda" => KernelDialect::Cuda,
            "wgpu" => KernelDialect::Wgsl,
            _ => KernelDialect::OpenCl,
        }
    }
}

/// The language a device's kernels are compiled from: it decides which kernel variants exist
/// (the WGSL twins lack several) and whose compiler a measured default was chosen on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelDialect {
    /// The shared OpenCL C sources behind the CUDA prelude, compiled by NVRTC.
    Cuda,
    /// The shared OpenCL C sources, compiled by the OpenCL driver.
    OpenCl,
    /// The WGSL twins (wgpu).
    Wgsl,
}

/// Where a kernel comes from: a named source file of the backend (kept for cache keys and
/// error messages) and the compile-time constants of one `Schedule`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KernelSpec {
    /// Source file name, e.g. "conv.cl"; errors and logs name it.
    pub file: &'static str,
    /// The source without any backend prelude: the device prepends its own, which defines the
    /// macros the shared sources use (see `gpu/kernels.rs`).
    pub source: &'static str,
    pub entry: &'static str,
    /// `-D NAME=VALUE` for CUDA/OpenCL, override constants for WGSL; sorted by the caller
    /// so equal schedules share one compiled kernel.
    pub defines: Vec<(String, String)>,
}

/// One kernel argument. Scalars are 32-bit everywhere so WGSL can take them in a uniform.
pub enum Arg<'a, B> {
    Buf(&'a B),
    I32(i32),
    U32(u32),
    F32(f32),
}

/// Whether a device's vendor library (cuDNN on CUDA) competes with our kernels for dense convs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VendorPolicy {
    /// No vendor library here, or it is turned off: our kernels only.
    Never,
    /// Timed against our kernels once per conv shape at compile time; the faster one runs.
    Timed,
    /// The vendor's wherever it can run the conv (measurements, checks).
    Always,
}

/// A dense 2-D convolution as a vendor library takes it: NCHW, f32 or half tensors (`precision`;
/// accumulated in f32 either way), the ONNX window with the begin pads (the device refuses a
/// conv whose output extent then differs from `oh` x `ow`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VendorConvDesc {
    pub n: usize,
    pub cin: usize,
    pub h: usize,
    pub w: usize,
    pub cout: usize,
    pub oh: usize,
    pub ow: usize,
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub pad: [usize; 2],
    pub dilation: [usize; 2],
    pub groups: usize,
    /// `None`: y = conv(x). `Some`: y = act(conv(x) + bias + z), z the residual or ignored.
    pub fused: Option<VendorFused>,
    /// How x, w, bias, z and y are stored.
    pub precision: super::dtype::Precision,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VendorFused {
    pub residual: bool,
    /// ReLU, else the identity.
    pub relu: bool,
}

/// A vendor conv ready to launch: `launch(&kernel, [1; 3], [1; 3], [x, w, bias, z, y,
/// workspace])` (placeholders for what the conv does not read; the workspace at least
/// `workspace` bytes).
pub struct VendorConv<K> {
    pub kernel: K,
    pub workspace: usize,
    /// What runs, for logs and reports ("cudnn IMPLICIT_PRECOMP_GEMM").
    pub label: String,
}

pub trait GpuDevice: Send + Sync {
    type Buffer: Send + Sync;
    type Kernel: Send + Sync;
    type Event: Send + Sync;
    /// Host memory a `download_async` copies into (pinned where the API has it).
    type Staging: Send + Sync;
    /// Launches recorded once and replayed in one call (`capture_frame`); `()` where the API has
    /// none.
    type Graph: Send + Sync;

    fn info(&self) -> &DeviceInfo;
    /// A device buffer of `bytes` bytes; contents undefined.
    fn alloc(&self, bytes: usize) -> Result<Self::Buffer>;
    /// Host to device on the main queue; returns when `data` may be reused.
    fn upload(&self, dst: &Self::Buffer, offset: usize, data: &[u8]) -> Result<()>;
    /// Device to host after all work queued on the main queue so far.
    /// Uploads `bytes` bytes that `write` puts in place: where the device has pinned staging,
    /// written there once and copied behind the work queued so far without the host waiting
    /// (later work on both queues waits for it); elsewhere as `upload`.
    fn upload_staged(&self, dst: &Self::Buffer, offset: usize, bytes: usize, write: &mut dyn FnMut(&mut [u8]) -> Result<()>) -> Result<()> {
        let mut data = vec![0u8; bytes];
        write(&mut data)?;
        self.upload(dst, offset, &data)
    }
    fn download(&self, src: &Self::Buffer, offset: usize, out: &mut [u8]) -> Result<()>;
    /// Host memory for `bytes`-byte asynchronous downloads.
    fn staging(&self, bytes: usize) -> Result<Self::Staging>;
    /// Queues a copy of the staging's length from `src` at `offset` into `dst` behind the work on
    /// the main queue so far, or behind `after` alone (a second-queue event from `launch_async`
    /// whose work is the only writer of `src`), without waiting for it (the copy may run on the
    /// second queue, so the main queue's later work does not wait for it either). Given `after`,
    /// nothing is queued on the main queue: on CUDA a marker there would stop its next kernel
    /// from overlapping the one before (`cuda/pdl.rs`).
    fn download_async(&self, src: &Self::Buffer, offset: usize, dst: &Self::Staging, after: Option<&Self::Event>) -> Result<()>;
    /// Waits for the last `download_async` into `st` (returns at once when the queue already got
    /// past it) and copies its bytes into `out` (as many as `out` holds).
    fn read_staging(&self, st: &Self::Staging, out: &mut [u8]) -> Result<()>;
    /// Host memory of `bytes` bytes that kernels write directly, with no copy queued: a buffer
    /// to pass them and the staging the host reads it through (`read_staging`, after
    /// `staging_written`). `None` where the device has no such memory: `download_async` then.
    fn host_mapped(&self, bytes: usize) -> Result<Option<(Self::Buffer, Self::Staging)>> {
        let _ = bytes;
        Ok(None)
    }
    /// Marks `st` (from `host_mapped`) as written by the work queued so far on the second
    /// queue (`second`) or the main queue: `read_staging` waits for that work.
    fn staging_written(&self, st: &Self::Staging, second: bool) -> Result<()> {
        let _ = (st, second);
        Err(dynaspa_runtime::Error::Other(format!("{} has no host-mapped memory", self.info().backend)))
    }
    /// Compiles (or fetches from the memory and disk caches) one kernel.
    fn kernel(&self, spec: &KernelSpec) -> Result<Self::Kernel>;
    /// Work-items per group `kernel` can be launched with, where the device says (its register
    /// use may put it below the device's limit); `None`: only the device's limit applies.
    fn kernel_max_threads(&self, kernel: &Self::Kernel) -> Option<u32> {
        let _ = kernel;
        None
    }
    /// Whether `capture_frame` can record graphs here.
    fn records_graphs(&self) -> bool {
        false
    }
    /// Records everything `record` queues on both queues (launches, zero fills, and the event
    /// waits ordering them) into one graph instead of running it: a whole frame. Events made
    /// while recording order work within the graph only; nothing recorded runs. `Ok(None)`
    /// where the device has no graphs or something queued cannot be recorded.
    fn capture_frame(&self, record: &mut dyn FnMut() -> Result<()>) -> Result<Option<Self::Graph>> {
        let _ = record;
        Ok(None)
    }
    /// Queues a graph from `capture_frame` on the main queue.
    fn launch_graph(&self, graph: &Self::Graph) -> Result<()> {
        let _ = graph;
        Err(dynaspa_runtime::Error::Other(format!("{} records no graphs", self.info().backend)))
    }
    /// Queues `kernel` on the main queue over `groups` work-groups of `local` work-items each.
    fn launch(&self, kernel: &Self::Kernel, groups: [u32; 3], local: [u32; 3], args: &[Arg<'_, Self::Buffer>]) -> Result<()>;
    /// Queues `kernel` on the second queue once `after` (main-queue events) are done; the
    /// returned event completes when it has run. Later main-queue work does not wait for it
    /// unless it `wait_for`s the event. Devices with one queue run it in order on it.
    fn launch_async(
        &self,
        kernel: &Self::Kernel,
        groups: [u32; 3],
        local: [u32; 3],
        args: &[Arg<'_, Self::Buffer>],
        after: &[Self::Event],
    ) -> Result<Self::Event> {
        self.wait_for(after)?;
        self.launch(kernel, groups, local, args)?;
        self.marker()
    }
    /// Zeroes `bytes` bytes at `offset` on the second queue once `after` (main-queue events) are done;
    /// the returned event completes when the buffer is zero.
    fn fill_zero_async(&self, buf: &Self::Buffer, offset: usize, bytes: usize, after: &[Self::Event]) -> Result<Self::Event>;
    /// An event that completes when everything queued on the main queue so far is done.
    fn marker(&self) -> Result<Self::Event>;
    /// Makes later main-queue work wait for `events` (without blocking the host).
    fn wait_for(&self, events: &[Self::Event]) -> Result<()>;
    /// Blocks until both queues are idle.
    fn finish(&self) -> Result<()>;
    /// A timestamp taken when the main queue reaches it, where the device has queue timestamps
    /// (`None` elsewhere): step times measured on the device rather than on the host.
    fn timestamp(&self) -> Result<Option<Self::Event>> {
        Ok(None)
    }
    /// Device time from timestamp `a` to timestamp `b`, both complete (`timestamp`).
    fn time_between(&self, a: &Self::Event, b: &Self::Event) -> Result<std::time::Duration> {
        let _ = (a, b);
        Err(dynaspa_runtime::Error::Other("this device takes no queue timestamps".into()))
    }
    /// How the lowering treats `vendor_convs` on this device unless the options say otherwise
    /// (`GpuOptions::vendor_convs`): `Never` where it has no vendor library that loads.
    fn vendor_policy(&self) -> VendorPolicy {
        VendorPolicy::Never
    }
    /// The vendor library and its version ("cuDNN 9.14.0"), part of what a remembered race
    /// between it and our kernels is keyed on; `None` where there is none.
    fn vendor_library(&self) -> Option<String> {
        None
    }
    /// The vendor library's ways to compute `desc` (none where it has none or cannot run this
    /// conv), each timed by the lowering against the others and our kernels. `x`, `w` and `y`
    /// are buffers of the conv's shapes the device may run it on to choose algorithms (`y` is
    /// overwritten).
    fn vendor_convs(
        &self,
        desc: &VendorConvDesc,
        x: &Self::Buffer,
        w: &Self::Buffer,
        y: &Self::Buffer,
    ) -> Result<Vec<VendorConv<Self::Kernel>>> {
        let _ = (desc, x, w, y);
        Ok(Vec::new())
    }
}
