//! dynaspa-backends: the execution backends. The CPU backend is always built: it is the
//! reference every other backend is checked against and the embedded default. GPU backends
//! share `gpu` (the device trait and the graph executor) and sit behind cargo features; they
//! load their libraries at run time and are listed only where they can run.

pub mod cache_dir;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
mod disk_memo;
pub mod gpu;
#[cfg(feature = "opencl")]
pub mod opencl;
mod sparse_config;
#[cfg(feature = "wgpu")]
pub mod wgpu;

pub use gpu::Precision;
pub use sparse_config::{ForceMember, SparseConfig};

use dynaspa_runtime::backend::Backend;
use dynaspa_runtime::{Error, Result};

/// Backends this build can construct on this machine, by name.
pub fn available() -> Vec<&'static str> {
    #[allow(unused_mut)]
    let mut v = vec!["cpu"];
    #[cfg(feature = "opencl")]
    if opencl::is_available() {
        v.push("opencl");
    }
    #[cfg(feature = "cuda")]
    if cuda::probe().is_ok() {
        v.push("cuda");
    }
    #[cfg(feature = "wgpu")]
    if wgpu::is_available() {
        v.push("wgpu");
    }
    v
}

/// Everything a backend can be configured with; each backend reads what applies to it.
#[derive(Clone, Debug, Default)]
pub struct BackendOptions {
    /// CPU worker threads (`None`: every core).
    pub threads: Option<usize>,
    /// Sparse-op settings and the cache directory (`None`: from the environment). GPU backends
    /// keep their compiled programs under the same cache directory.
    pub sparse: Option<SparseConfig>,
    /// Which device a GPU backend uses: an index of `dynaspa devices`, "platform:device" (OpenCL)
    /// or part of the name (`None`: `$DYNASPA_OPENCL_DEVICE` / `$DYNASPA_CUDA_DEVICE` /
    /// `$DYNASPA_WGPU_DEVICE`, else the first GPU, else the first device).
    pub device: Option<String>,
    /// GPU backends fill each node's outputs with NaN before its kernels run, so an output a
    /// kernel does not write shows in the results (tests). Also on with `DYNASPA_GPU_POISON=1`.
    pub poison: bool,
    /// GPU backends: a time per step, on the device where it has queue timestamps (`GpuOptions::step_times`; `dynaspa profile
    /// --nodes`).
    pub step_times: bool,
    /// GPU backends: how sparse ops learn each frame's DISTile counts (`GpuOptions::counts`).
    pub counts: gpu::CountsSync,
    /// GPU backends that record graphs: frames as recorded graphs (`GpuOptions::frame_graphs`).
    pub frame_graphs: Option<bool>,
    /// GPU backends: ConvTranspose as a GEMM per output phase or as a gather
    /// (`GpuOptions::convt_gemm`; `None`: the device's default).
    pub convt_gemm: Option<bool>,
    /// GPU backends: the sparse convs' device-dependent paths (`GpuOptions::sparse_conv`).
    pub sparse_conv: gpu::SparseConvOverrides,
    /// GPU backends with a vendor library (cuDNN on CUDA): how dense convs use it
    /// (`GpuOptions::vendor_convs`; `None`: timed against our kernels).
    pub vendor_convs: Option<gpu::VendorPolicy>,
    /// GPU backends (CUDA, OpenCL): how float tensors are stored (`GpuOptions::precision`). The
    /// CPU backend computes in f32 only and refuses `F16`.
    pub precision: Precision,
}

/// `auto` picks the best backend present; today that is the CPU (the GPU backends run sparse
/// ops densely until their sparse kernels land).
pub fn create(name: &str, threads: Option<usize>) -> Result<Box<dyn Backend>> {
    create_with(name, threads, SparseConfig::from_env())
}

/// `create` with explicit settings for sparse ops (calibration cache, forced member).
pub fn create_with(name: &str, threads: Option<usize>, sparse: SparseConfig) -> Result<Box<dyn Backend>> {
    create_configured(name, &BackendOptions { threads, sparse: Some(sparse), ..Default::default() })
}

/// GPU settings from the options, with `$DYNASPA_GPU_POISON` (set, not empty and not "0")
/// turning on output poisoning: a debugging aid for any run.
#[allow(dead_code)]
fn gpu_options(o: &BackendOptions) -> gpu::GpuOptions {
    gpu::GpuOptions {
        poison: o.poison || std::env::var("DYNASPA_GPU_POISON").is_ok_and(|v| !v.is_empty() && v != "0"),
        sparse: o.sparse.clone().unwrap_or_default(),
        counts: o.counts,
        step_times: o.step_times,
        sparse_conv: o.sparse_conv,
        frame_graphs: o.frame_graphs,
        convt_gemm: o.convt_gemm,
        vendor_convs: o.vendor_convs,
        precision: o.precision,
    }
}

pub fn create_configured(name: &str, o: &BackendOptions) -> Result<Box<dyn Backend>> {
    let sparse = o.sparse.clone().unwrap_or_else(SparseConfig::from_env);
    match name {
        "auto" | "cpu" if o.precision == Precision::F16 => {
            Err(unavailable_error("cpu", "the CPU backend computes in f32 only; fp16 runs on the cuda and opencl backends"))
        }
        "auto" | "cpu" => Ok(Box::new(cpu::CpuBackend::new(o.threads)?.with_sparse_config(sparse))),
        "opencl" => {
            #[cfg(feature = "opencl")]
            {
                match opencl::list() {
                    Ok(l) if l.is_empty() => {
                        return Err(unavailable_error("opencl", "the OpenCL loader lists no platform or device (no driver installed)"))
                    }
                    Err(e) => return Err(unavailable_error("opencl", &reason_of(e))),
                    Ok(_) => {}
                }
                let b = opencl::backend(o.device.as_deref(), sparse.cache_dir.as_deref(), gpu_options(o))?;
                Ok(Box::new(b))
            }
            #[cfg(not(feature = "opencl"))]
            Err(unavailable_error("opencl", "this build has no OpenCL support (cargo feature 'opencl')"))
        }
        "cuda" => {
            #[cfg(feature = "cuda")]
            {
                if let Err(why) = cuda::probe::list() {
                    return Err(unavailable_error("cuda", &why));
                }
                let b = cuda::backend(o.device.as_deref(), sparse.cache_dir.as_deref(), gpu_options(o))?;
                Ok(Box::new(b))
            }
            #[cfg(not(feature = "cuda"))]
            Err(unavailable_error("cuda", "this build has no CUDA support (cargo feature 'cuda')"))
        }
        "wgpu" => {
            #[cfg(feature = "wgpu")]
            {
                match wgpu::list() {
                    Ok(l) if l.is_empty() => {
                        return Err(unavailable_error("wgpu", "wgpu finds no Vulkan or Metal adapter (no driver installed)"))
                    }
                    Err(e) => return Err(unavailable_error("wgpu", &reason_of(e))),
                    Ok(_) => {}
                }
                Ok(Box::new(wgpu::backend(o.device.as_deref(), gpu_options(o))?))
            }
            #[cfg(not(feature = "wgpu"))]
            Err(unavailable_error("wgpu", "this build has no wgpu support (cargo feature 'wgpu')"))
        }
        other => Err(Error::Other(format!("unknown backend '{other}'; this build has: auto, {}", available().join(", ")))),
    }
}

/// The PolyKernel ops (sparse convs, token projections) of `graph` on the GPU backend `name` ("opencl", "cuda", "wgpu") and the
/// device they run on, ready to time at any schedule (the tuner's measurements).
pub fn gpu_sparse_op_timers(
    name: &str,
    o: &BackendOptions,
    graph: &dynaspa_runtime::graph::Graph,
) -> Result<(gpu::DeviceInfo, Vec<Box<dyn gpu::SparseOpTimer>>)> {
    #[allow(unused_variables)]
    let (sparse, graph) = (o.sparse.clone().unwrap_or_else(SparseConfig::from_env), graph);
    match name {
        #[cfg(feature = "opencl")]
        "opencl" => {
            let b = opencl::backend(o.device.as_deref(), sparse.cache_dir.as_deref(), gpu_options(o))?;
            Ok((gpu::GpuDevice::info(&**b.device()).clone(), b.sparse_op_timers(graph)?))
        }
        #[cfg(feature = "cuda")]
        "cuda" => {
            let b = cuda::backend(o.device.as_deref(), sparse.cache_dir.as_deref(), gpu_options(o))?;
            Ok((gpu::GpuDevice::info(&**b.device()).clone(), b.sparse_op_timers(graph)?))
        }
        #[cfg(feature = "wgpu")]
        "wgpu" => {
            let b = wgpu::backend(o.device.as_deref(), gpu_options(o))?;
            Ok((gpu::GpuDevice::info(&**b.device()).clone(), b.sparse_op_timers(graph)?))
        }
        #[allow(unreachable_patterns)]
        "opencl" | "cuda" | "wgpu" => Err(Error::Other(format!("backend '{name}': this build does not have it (cargo feature '{name}')"))),
        other => Err(Error::Other(format!("'{other}' is not a GPU backend; the GPU backends are opencl, cuda and wgpu"))),
    }
}

/// One line of `dynaspa devices`: a device a backend can run on, or why a backend has none.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DeviceListing {
    pub backend: String,
    /// What `--device` takes to pick this device (`None` for the CPU backend).
    pub selector: Option<String>,
    /// Where the device comes from (the OpenCL platform), when there is more than the device.
    pub platform: Option<String>,
    pub info: Option<gpu::DeviceInfo>,
    /// Set when the backend cannot run here, saying why.
    pub unavailable: Option<String>,
    /// Vendor libraries the backend uses beside its own kernels, or why not (CUDA: cuDNN).
    pub libraries: Option<String>,
}

/// Every backend of this build with its devices. Each backend adds its own lines.
pub fn devices() -> Vec<DeviceListing> {
    let mut out = vec![cpu_listing()];
    #[cfg(feature = "opencl")]
    match opencl::list() {
        Ok(list) if !list.is_empty() => out.extend(list.into_iter().map(|d| DeviceListing {
            backend: "opencl".into(),
            selector: Some(d.index.to_string()),
            platform: Some(d.platform.clone()),
            info: Some(d.info),
            unavailable: None,
            libraries: None,
        })),
        Ok(_) => out.push(unavailable("opencl", "the OpenCL loader lists no platform or device (no driver installed)")),
        Err(e) => out.push(unavailable("opencl", &e.to_string())),
    }
    #[cfg(not(feature = "opencl"))]
    out.push(unavailable("opencl", "this build has no OpenCL support (cargo feature 'opencl')"));
    #[cfg(feature = "cuda")]
    {
        let cudnn = cuda::cudnn_lib::describe();
        match cuda::probe::list() {
            Ok(list) => out.extend(list.into_iter().enumerate().map(|(i, info)| DeviceListing {
                backend: "cuda".into(),
                selector: Some(i.to_string()),
                platform: None,
                info: Some(info),
                unavailable: None,
                libraries: Some(cudnn.clone()),
            })),
            Err(why) => out.push(DeviceListing { libraries: Some(cudnn), ..unavailable("cuda", &why) }),
        }
    }
    #[cfg(not(feature = "cuda"))]
    out.push(unavailable("cuda", "this build has no CUDA support (cargo feature 'cuda')"));
    #[cfg(feature = "wgpu")]
    match wgpu::list() {
        Ok(list) if !list.is_empty() => out.extend(list.into_iter().map(|d| DeviceListing {
            backend: "wgpu".into(),
            selector: Some(d.index.to_string()),
            platform: Some(d.info.arch.clone()),
            info: Some(d.info),
            unavailable: None,
            libraries: None,
        })),
        Ok(_) => out.push(unavailable("wgpu", "wgpu finds no Vulkan or Metal adapter (no driver installed)")),
        Err(e) => out.push(unavailable("wgpu", &e.to_string())),
    }
    #[cfg(not(feature = "wgpu"))]
    out.push(unavailable("wgpu", "this build has no wgpu support (cargo feature 'wgpu')"));
    out
}

/// What went wrong, without the "backend X:" an `Error::Backend` puts before it.
#[allow(dead_code)]
fn reason_of(e: Error) -> String {
    match e {
        Error::Backend { msg, .. } => msg,
        e => e.to_string(),
    }
}

#[allow(dead_code)]
fn unavailable_error(backend: &str, reason: &str) -> Error {
    Error::Unavailable { backend: backend.into(), reason: reason.into() }
}

fn unavailable(backend: &str, why: &str) -> DeviceListing {
    DeviceListing { backend: backend.into(), selector: None, platform: None, info: None, unavailable: Some(why.into()), libraries: None }
}

fn cpu_listing() -> DeviceListing {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split(':').nth(1)).map(|m| m.trim().to_string()))
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    DeviceListing {
        backend: "cpu".into(),
        selector: None,
        platform: None,
        info: Some(gpu::DeviceInfo {
            backend: "cpu".into(),
            name: model,
            kind: "cpu".into(),
            compute_units: threads,
            ..Default::default()
        }),
        unavailable: None,
        libraries: None,
    }
}
