//! Finding OpenCL devices: every platform's devices in a stable order, their limits, and the
//! choice of one by index, "platform:device" pair or name.

use crate::gpu::DeviceInfo;
use dynaspa_runtime::{Error, Result};
use opencl3::device::{Device, CL_DEVICE_TYPE_ACCELERATOR, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_CPU, CL_DEVICE_TYPE_GPU};
use opencl3::types::cl_device_id;

/// One device as `list` reports it.
#[derive(Clone, Debug)]
pub struct ClDeviceEntry {
    /// Position in the flattened listing (platform order, then device order): what
    /// `--device N` / `DYNASPA_OPENCL_DEVICE=N` select.
    pub index: usize,
    pub platform_index: usize,
    pub device_index: usize,
    pub platform: String,
    pub info: DeviceInfo,
    pub(crate) id: cl_device_id,
}

// `cl_device_id` is a handle the driver owns for the process lifetime; it can be shared.
unsafe impl Send for ClDeviceEntry {}
unsafe impl Sync for ClDeviceEntry {}

pub(crate) fn cl_err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Backend { backend: "opencl".into(), msg: format!("{what}: {e}") }
}

/// Fails with an explanation when libOpenCL cannot be loaded (no ICD loader installed).
pub fn runtime_loaded() -> Result<()> {
    // Any call loads the library; this one is cheap and answers a distinct code when it is missing.
    match opencl3::platform::get_platforms() {
        Err(e) if e.0 == opencl3::error_codes::DLOPEN_RUNTIME_LOAD_FAILED => Err(Error::Backend {
            backend: "opencl".into(),
            msg: "the OpenCL library (libOpenCL.so.1) could not be loaded; install an ICD loader and a driver \
                  (e.g. apt-get install ocl-icd-libopencl1 pocl-opencl-icd) or set OPENCL_DYLIB_PATH"
                .into(),
        }),
        Err(e) if e.0 == opencl3::error_codes::DLOPEN_FUNCTION_NOT_AVAILABLE => Err(Error::Backend {
            backend: "opencl".into(),
            msg: "the library loaded as libOpenCL.so.1 lacks clGetPlatformIDs: it is not an OpenCL ICD loader".into(),
        }),
        _ => Ok(()),
    }
}

/// Listing runs one thread at a time: PoCL 3.1 initialises its devices lazily on the first
/// query and crashes (NULL device name) when two threads race through that.
static LIST_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Every device of every platform. An ICD loader without drivers gives an empty list, not an error.
pub fn list() -> Result<Vec<ClDeviceEntry>> {
    let _one = LIST_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    runtime_loaded()?;
    let platforms = match opencl3::platform::get_platforms() {
        Ok(p) => p,
        // -1001 (CL_PLATFORM_NOT_FOUND_KHR): the loader found no driver.
        Err(e) if e.0 == -1001 => return Ok(Vec::new()),
        Err(e) => return Err(cl_err("listing platforms", e)),
    };
    let mut out = Vec::new();
    for (pi, p) in platforms.iter().enumerate() {
        let pname = p.name().unwrap_or_else(|_| format!("platform {pi}"));
        let pversion = p.version().unwrap_or_default();
        // A platform without devices of any type answers CL_DEVICE_NOT_FOUND.
        let ids = p.get_devices(CL_DEVICE_TYPE_ALL).unwrap_or_default();
        for (di, &id) in ids.iter().enumerate() {
            let info = describe(id, &pversion).map_err(|e| cl_err(&format!("querying device {di} of '{pname}'"), e))?;
            out.push(ClDeviceEntry { index: out.len(), platform_index: pi, device_index: di, platform: pname.clone(), info, id });
        }
    }
    Ok(out)
}

fn describe(id: cl_device_id, platform_version: &str) -> std::result::Result<DeviceInfo, opencl3::error_codes::ClError> {
    let d = Device::new(id);
    let t = d.dev_type()?;
    let kind = if t & CL_DEVICE_TYPE_GPU != 0 {
        "gpu"
    } else if t & CL_DEVICE_TYPE_CPU != 0 {
        "cpu"
    } else if t & CL_DEVICE_TYPE_ACCELERATOR != 0 {
        "accelerator"
    } else {
        "other"
    };
    Ok(DeviceInfo {
        backend: "opencl".into(),
        name: d.name()?.trim().to_string(),
        vendor: d.vendor()?.trim().to_string(),
        driver: format!("{} ({})", d.driver_version()?.trim(), platform_version.trim()),
        kind: kind.into(),
        compute_units: d.max_compute_units()?,
        local_mem_bytes: d.local_mem_size()?,
        local_mem_launch_bytes: 0,
        max_work_group_size: d.max_work_group_size()?.min(u32::MAX as usize) as u32,
        global_mem_bytes: d.global_mem_size()?,
        arch: d.opencl_c_version()?.trim().to_string(),
    })
}

/// Picks a device. `selector`: `None` prefers the first GPU, else the first device; `"N"` is the
/// N-th device of the listing; `"P:D"` device D of platform P; anything else is matched
/// (case-insensitively) against "platform device-name".
pub fn select(devices: &[ClDeviceEntry], selector: Option<&str>) -> Result<ClDeviceEntry> {
    let names = || {
        devices
            .iter()
            .map(|d| {
                format!("{} = {}:{} '{}' on '{}' ({})", d.index, d.platform_index, d.device_index, d.info.name, d.platform, d.info.kind)
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    if devices.is_empty() {
        return Err(Error::Backend {
            backend: "opencl".into(),
            msg: "no OpenCL device found (the ICD loader is present, but no driver lists a device; \
                  install one, e.g. pocl-opencl-icd)"
                .into(),
        });
    }
    let none = |s: &str| Error::Backend { backend: "opencl".into(), msg: format!("no OpenCL device matches '{s}'; devices: {}", names()) };
    let sel = match selector.map(str::trim).filter(|s| !s.is_empty()) {
        None => devices.iter().find(|d| d.info.kind == "gpu").unwrap_or(&devices[0]),
        Some(s) => {
            if let Ok(i) = s.parse::<usize>() {
                devices.get(i).ok_or_else(|| none(s))?
            } else if let Some((p, d)) = s.split_once(':').and_then(|(p, d)| Some((p.parse::<usize>().ok()?, d.parse::<usize>().ok()?))) {
                devices.iter().find(|e| e.platform_index == p && e.device_index == d).ok_or_else(|| none(s))?
            } else {
                let low = s.to_lowercase();
                devices.iter().find(|e| format!("{} {}", e.platform, e.info.name).to_lowercase().contains(&low)).ok_or_else(|| none(s))?
            }
        }
    };
    Ok(sel.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(i: usize, p: usize, d: usize, kind: &str, name: &str) -> ClDeviceEntry {
        ClDeviceEntry {
            index: i,
            platform_index: p,
            device_index: d,
            platform: format!("Plat{p}"),
            info: DeviceInfo { name: name.into(), kind: kind.into(), ..Default::default() },
            id: std::ptr::null_mut(),
        }
    }

    #[test]
    fn selection_prefers_gpus_and_takes_index_pair_or_name() {
        let devs = vec![entry(0, 0, 0, "cpu", "Some CPU"), entry(1, 1, 0, "gpu", "Big GPU"), entry(2, 1, 1, "gpu", "Small GPU")];
        assert_eq!(select(&devs, None).unwrap().index, 1);
        assert_eq!(select(&devs, Some("0")).unwrap().index, 0);
        assert_eq!(select(&devs, Some("1:1")).unwrap().index, 2);
        assert_eq!(select(&devs, Some("small")).unwrap().index, 2);
        assert_eq!(select(&devs, Some("plat0")).unwrap().index, 0);
        let e = select(&devs, Some("7")).unwrap_err().to_string();
        assert!(e.contains("'7'") && e.contains("Big GPU"), "{e}");
        assert!(select(&devs, Some("tpu")).is_err());
        assert!(select(&[], None).unwrap_err().to_string().contains("no OpenCL device"));
        let cpus = vec![entry(0, 0, 0, "cpu", "A"), entry(1, 0, 1, "cpu", "B")];
        assert_eq!(select(&cpus, None).unwrap().index, 0);
    }
}
