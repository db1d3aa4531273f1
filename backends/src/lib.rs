//! dynaspa-backends: the execution backends. The CPU backend is always built: it is the
//! reference every other backend is checked against and the embedded default. GPU backends sit
//! behind cargo features and load their libraries at run time, so they are listed here only
//! where they can run.

pub mod cache_dir;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod gpu;

use dynaspa_runtime::backend::Backend;
use dynaspa_runtime::{Error, Result};

/// One backend's devices for `dynaspa devices`, or why it has none here.
#[derive(Clone, Debug)]
pub struct DeviceListing {
    pub backend: &'static str,
    pub devices: std::result::Result<Vec<gpu::DeviceInfo>, String>,
}

/// Every backend this crate knows, built or not, with its devices or the reason it is unusable.
pub fn devices() -> Vec<DeviceListing> {
    vec![cpu::device_listing(), cuda_listing()]
}

#[cfg(feature = "cuda")]
fn cuda_listing() -> DeviceListing {
    cuda::device_listing()
}

#[cfg(not(feature = "cuda"))]
fn cuda_listing() -> DeviceListing {
    DeviceListing { backend: "cuda", devices: Err("not in this build (cargo feature 'cuda' is off)".into()) }
}

/// Backends this build can construct on this machine, by name.
pub fn available() -> Vec<&'static str> {
    let mut v = vec!["cpu"];
    #[cfg(feature = "cuda")]
    if cuda::probe().is_ok() {
        v.push("cuda");
    }
    v
}

/// `auto` picks the best backend present; today that is the CPU (GPU backends run kernels but
/// not yet whole models).
pub fn create(name: &str, threads: Option<usize>) -> Result<Box<dyn Backend>> {
    create_with(name, threads, cpu::SparseConfig::from_env())
}

/// `create` with explicit settings for sparse ops (calibration cache, forced member).
/// GPU backends take a device index: `cuda` is `cuda:0`.
pub fn create_with(name: &str, threads: Option<usize>, sparse: cpu::SparseConfig) -> Result<Box<dyn Backend>> {
    let (family, ordinal) = match name.split_once(':') {
        Some((f, n)) => match n.parse::<usize>() {
            Ok(i) => (f, Some(i)),
            Err(_) => return Err(Error::Other(format!("backend '{name}': '{n}' is not a device index"))),
        },
        None => (name, None),
    };
    match family {
        "auto" | "cpu" if ordinal.is_none() => Ok(Box::new(cpu::CpuBackend::new(threads)?.with_sparse_config(sparse))),
        #[cfg(feature = "cuda")]
        "cuda" => Ok(Box::new(cuda::CudaBackend::new(ordinal.unwrap_or(0))?)),
        #[cfg(not(feature = "cuda"))]
        "cuda" => Err(Error::Other("backend cuda: not in this build (cargo feature 'cuda' is off)".into())),
        _ => Err(Error::Other(format!(
            "unknown backend '{name}'; this build has: auto, {}",
            available().join(", ")
        ))),
    }
}
