//! Whether CUDA can run here, and what its devices are, without ever panicking: the libraries
//! are found and checked (see `libs`) before the first call into cudarc, and the answer is
//! computed once per process (cuInit is process-wide anyway).

use super::error::{driver_text, err, Ctx};
use super::libs;
use crate::gpu::DeviceInfo;
use cudarc::driver::{result, sys};
use dynaspa_runtime::Result;
use std::sync::OnceLock;

/// Why the CUDA backend cannot run on this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unavailable {
    /// libcuda (the driver) cannot be loaded or lacks functions we call.
    Driver(String),
    /// libnvrtc cannot be loaded or lacks functions we call: kernels could not be compiled.
    Nvrtc(String),
    /// cuInit or the device count failed (driver/kernel module mismatch, stub library, ...).
    Init(String),
    /// The driver works but sees no CUDA device (or `CUDA_VISIBLE_DEVICES` hides them all).
    NoDevice,
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unavailable::Driver(m) => write!(f, "no usable CUDA driver: {m}"),
            Unavailable::Nvrtc(m) => write!(f, "no usable NVRTC: {m}"),
            Unavailable::Init(m) => write!(f, "CUDA driver initialisation failed: {m}"),
            Unavailable::NoDevice => write!(f, "the CUDA driver reports no devices"),
        }
    }
}

/// The number of CUDA devices, or why CUDA cannot be used. Cheap after the first call.
pub fn probe() -> Result<usize, Unavailable> {
    static R: OnceLock<Result<usize, Unavailable>> = OnceLock::new();
    R.get_or_init(|| {
        libs::driver().map_err(Unavailable::Driver)?;
        libs::nvrtc().map_err(Unavailable::Nvrtc)?;
        result::init().map_err(|e| match e.0 {
            sys::CUresult::CUDA_ERROR_NO_DEVICE => Unavailable::NoDevice,
            _ => Unavailable::Init(format!("cuInit: {}", driver_text(e))),
        })?;
        let n = result::device::get_count().map_err(|e| Unavailable::Init(format!("cuDeviceGetCount: {}", driver_text(e))))?;
        if n <= 0 {
            return Err(Unavailable::NoDevice);
        }
        Ok(n as usize)
    })
    .clone()
}

/// The probe's verdict as the runtime's error (for callers that need CUDA).
pub(crate) fn require() -> Result<usize> {
    probe().map_err(|u| err(format!("unavailable: {u}")))
}

/// "13.0" from the driver's 13000.
fn version_text(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

pub(crate) fn driver_version() -> Result<i32> {
    let mut v = 0;
    // SAFETY: probe() succeeded before any caller gets here, so the symbol exists.
    unsafe { sys::cuDriverGetVersion(&mut v) }.result().ctx(|| "cuDriverGetVersion".into())?;
    Ok(v)
}

pub(crate) fn attribute(dev: sys::CUdevice, a: sys::CUdevice_attribute) -> Result<i32> {
    // SAFETY: `dev` comes from cuDeviceGet.
    unsafe { result::device::get_attribute(dev, a) }.ctx(|| format!("cuDeviceGetAttribute({a:?})"))
}

/// What the device is, read from its attributes (no context is created).
pub fn device_info(ordinal: usize) -> Result<DeviceInfo> {
    let n = require()?;
    if ordinal >= n {
        return Err(err(format!("no CUDA device {ordinal}: this machine has {n} (0..{})", n - 1)));
    }
    let dev = result::device::get(ordinal as i32).ctx(|| format!("cuDeviceGet({ordinal})"))?;
    use sys::CUdevice_attribute as A;
    let major = attribute(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attribute(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    // SAFETY: `dev` comes from cuDeviceGet.
    let total = unsafe { result::device::total_mem(dev) }.ctx(|| "cuDeviceTotalMem".into())?;
    Ok(DeviceInfo {
        backend: "cuda".into(),
        name: result::device::get_name(dev).ctx(|| "cuDeviceGetName".into())?,
        vendor: "NVIDIA".into(),
        driver: format!("CUDA {}", version_text(driver_version()?)),
        kind: "gpu".into(),
        compute_units: attribute(dev, A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
        // The static limit: kernels declare their shared arrays statically (no opt-in launch).
        local_mem_bytes: attribute(dev, A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)? as u64,
        // Past it, dynamic shared memory a launch provides (GEMM tiles whose weights' stage
        // does not fit beside the rest: `GpuLimits::fits_local`).
        local_mem_launch_bytes: attribute(dev, A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN).map_or(0, |v| v.max(0) as u64),
        max_work_group_size: attribute(dev, A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)? as u32,
        global_mem_bytes: total as u64,
        arch: format!("{major}.{minor}"),
    })
}

/// Every device, or why there are none.
pub fn list() -> std::result::Result<Vec<DeviceInfo>, String> {
    let n = probe().map_err(|u| u.to_string())?;
    (0..n).map(|i| device_info(i).map_err(|e| e.to_string())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_answers_without_panicking_and_names_the_reason() {
        match probe() {
            Ok(n) => assert!(n > 0),
            Err(u) => {
                let text = u.to_string();
                assert!(text.len() > 20, "{text}");
                // Asking again gives the same answer (and touches nothing).
                assert_eq!(probe(), Err(u));
                assert!(device_info(0).unwrap_err().to_string().contains("unavailable"));
            }
        }
    }

    #[test]
    fn driver_versions_read_as_major_minor() {
        assert_eq!(version_text(13000), "13.0");
        assert_eq!(version_text(12060), "12.6");
    }
}
