//! The CUDA backend: the shared GPU executor on a `CudaDevice` (cudarc's driver API and NVRTC,
//! both loaded at run time: no link-time CUDA dependency), so a build with this feature still
//! starts on machines without NVIDIA libraries and reports CUDA as unavailable, with the reason.
//!
//! - `probe` / `libs`: whether CUDA can run here, checked before cudarc is touched;
//! - `context`: the retained primary context and its events, the layer everything else holds;
//! - `buffer`: device memory of a context (under the device, so cuDNN allocates without it);
//! - `device`: `CudaDevice`, the shared `GpuDevice` trait on one GPU;
//! - `nvrtc` + `prelude.h`: kernel sources of the shared dialect (`gpu/kernels/*.cl`) and
//!   CUDA-only ones (`cuda/kernels/*.cu`) to CUBIN; `kernel_cache`: those CUBINs on disk;
//! - `pdl`: which kernels may launch while the one before them still runs (sm_90+);
//! - `kernels`: the CUDA-only kernels (bitmask + DISTile generation);
//! - `cudnn_lib` / `cudnn_handle` / `cudnn`: cuDNN found and loaded as carefully as the driver,
//!   its handle on a context and a stream, and dense convs through it (`cudnn_graph`: the backend
//!   API's engines, `cudnn_plan` their plans; the lowering races them against our kernels:
//!   `gpu/lower/vendor_conv.rs`);
//! - `selfcheck`: checks against CPU references that the GPU self-check runs.

mod buffer;
mod context;
pub mod cudnn;
mod cudnn_graph;
mod cudnn_handle;
pub mod cudnn_lib;
mod cudnn_plan;
pub mod device;
mod error;
pub mod graph;
pub mod kernel_cache;
pub mod kernels;
mod launch_local;
mod libs;
pub mod nvrtc;
pub(crate) mod pdl;
pub mod probe;
pub mod selfcheck;
pub mod selfcheck_cudnn;
mod selfcheck_cudnn_half;
mod selfcheck_kit;
mod staging;
mod upload_ring;

#[cfg(test)]
mod nvrtc_tests;
#[cfg(test)]
mod selfcheck_test;

pub use device::{CudaBuffer, CudaDevice, CudaEvent, CudaKernel};
pub use kernel_cache::{CacheStats, KernelCache};
pub use probe::{probe, Unavailable};
pub use staging::CudaStaging;

use crate::gpu::{GpuBackend, GpuOptions};
use dynaspa_runtime::Result;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Devices opened so far, by (ordinal, cache root): sessions share a device's context, streams
/// and loaded kernels instead of opening it again.
static OPEN: Mutex<Vec<(usize, Option<PathBuf>, Arc<CudaDevice>)>> = Mutex::new(Vec::new());

/// The ordinal `selector` names: a device number of `dynaspa devices`, or part of a device's
/// name (case-insensitive, first match). `None`: `$DYNASPA_CUDA_DEVICE`, else device 0.
pub fn select(selector: Option<&str>) -> Result<usize> {
    let env = std::env::var("DYNASPA_CUDA_DEVICE").ok().filter(|v| !v.trim().is_empty());
    let Some(sel) = selector.or(env.as_deref()).map(str::trim) else {
        probe::require()?;
        return Ok(0);
    };
    let list = probe::list().map_err(|m| error::err(format!("unavailable: {m}")))?;
    let names = || list.iter().enumerate().map(|(i, d)| format!("[{i}] {}", d.name)).collect::<Vec<_>>().join(", ");
    if let Ok(i) = sel.parse::<usize>() {
        return if i < list.len() { Ok(i) } else { Err(error::err(format!("no CUDA device {i}; this machine has {}", names()))) };
    }
    let lower = sel.to_lowercase();
    list.iter()
        .position(|d| d.name.to_lowercase().contains(&lower))
        .ok_or_else(|| error::err(format!("no CUDA device matches '{sel}'; this machine has {}", names())))
}

/// The device `selector` names (see [`select`]), opened once per process and cache root
/// (compiled kernels go under `<cache root>/cuda`).
pub fn shared_device(selector: Option<&str>, cache_root: Option<&Path>) -> Result<Arc<CudaDevice>> {
    let ordinal = select(selector)?;
    let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, _, d)) = open.iter().find(|(i, c, _)| *i == ordinal && c.as_deref() == cache_root) {
        return Ok(d.clone());
    }
    let cache = KernelCache::new(cache_root.map(|r| r.join("cuda")));
    let dev = Arc::new(CudaDevice::with_cache(ordinal, cache)?);
    open.push((ordinal, cache_root.map(Path::to_path_buf), dev.clone()));
    Ok(dev)
}

/// The CUDA backend on the selected device.
pub fn backend(selector: Option<&str>, cache_root: Option<&Path>, opts: GpuOptions) -> Result<GpuBackend<CudaDevice>> {
    Ok(GpuBackend::new(shared_device(selector, cache_root)?, "cuda", opts))
}
