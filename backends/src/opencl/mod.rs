//! The OpenCL backend: the shared GPU executor on an `OpenClDevice` (opencl3, with libOpenCL
//! loaded at run time, so a build with this feature starts on machines without OpenCL and only
//! this backend reports it missing).

mod device;
mod launch;
mod platform;
mod program_cache;
mod staging;

pub use device::{ClBuffer, ClEvent, ClKernel, OpenClDevice, ProgramStats};
pub use platform::{list, runtime_loaded, select, ClDeviceEntry};
pub use staging::ClStaging;

use crate::gpu::{GpuBackend, GpuOptions};
use dynaspa_runtime::Result;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Devices opened so far in this process, by (listing index, cache directory): sessions share a
/// device's context and its compiled programs instead of building them again.
static OPEN: Mutex<Vec<OpenDevice>> = Mutex::new(Vec::new());

/// (listing index, cache directory, device).
type OpenDevice = (usize, Option<PathBuf>, Arc<OpenClDevice>);

/// The device `selector` names (see [`select`]; `None` falls back to `$DYNASPA_OPENCL_DEVICE`,
/// then to the first GPU), opened once per process.
pub fn shared_device(selector: Option<&str>, cache_root: Option<&Path>) -> Result<Arc<OpenClDevice>> {
    let env = std::env::var("DYNASPA_OPENCL_DEVICE").ok();
    let entry = select(&list()?, selector.or(env.as_deref()))?;
    let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, _, d)) = open.iter().find(|(i, c, _)| *i == entry.index && c.as_deref() == cache_root) {
        return Ok(d.clone());
    }
    let dev = Arc::new(OpenClDevice::open(&entry, cache_root)?);
    open.push((entry.index, cache_root.map(Path::to_path_buf), dev.clone()));
    Ok(dev)
}

pub fn backend(selector: Option<&str>, cache_root: Option<&Path>, opts: GpuOptions) -> Result<GpuBackend<OpenClDevice>> {
    Ok(GpuBackend::new(shared_device(selector, cache_root)?, "opencl", opts))
}

/// True when libOpenCL loads and lists at least one device.
pub fn is_available() -> bool {
    list().is_ok_and(|d| !d.is_empty())
}
