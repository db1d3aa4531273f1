//! The wgpu backend: the shared GPU executor on a `WgpuDevice` (Vulkan on Linux and Android,
//! Metal on Apple), running the WGSL kernels under `kernels/`. A build with this feature starts
//! on machines without a Vulkan driver; only this backend reports it missing.

mod adapter;
mod device;
mod shaders;
mod staging;

pub use adapter::{list, WgpuAdapterEntry};
pub use device::{WgpuBuffer, WgpuDevice, WgpuEvent, WgpuKernel};
pub use staging::WgpuStaging;

use crate::gpu::{GpuBackend, GpuOptions};
use dynaspa_runtime::Result;
use std::sync::{Arc, Mutex};

/// Devices opened so far in this process, by listing index: sessions share a device and its
/// compiled kernels instead of building them again.
static OPEN: Mutex<Vec<(usize, Arc<WgpuDevice>)>> = Mutex::new(Vec::new());

/// The adapter `selector` names (an index of `list` or part of a name; `None` falls back to
/// `$DYNASPA_WGPU_DEVICE`, then to the first GPU, then to the first adapter), opened once.
pub fn shared_device(selector: Option<&str>) -> Result<Arc<WgpuDevice>> {
    let env = std::env::var("DYNASPA_WGPU_DEVICE").ok();
    let (a, entry) = adapter::select(selector.or(env.as_deref()))?;
    let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, d)) = open.iter().find(|(i, _)| *i == entry.index) {
        return Ok(d.clone());
    }
    let dev = Arc::new(WgpuDevice::open(&a, &entry)?);
    open.push((entry.index, dev.clone()));
    Ok(dev)
}

pub fn backend(selector: Option<&str>, opts: GpuOptions) -> Result<GpuBackend<WgpuDevice>> {
    Ok(GpuBackend::new(shared_device(selector)?, "wgpu", opts))
}

/// True when wgpu finds at least one Vulkan or Metal adapter.
pub fn is_available() -> bool {
    list().is_ok_and(|l| !l.is_empty())
}

#[cfg(test)]
mod device_tests;
