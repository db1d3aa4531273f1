//! dynaspa-backends: the execution backends. The CPU backend is always built: it is the
//! reference every other backend is checked against and the embedded default.

pub mod cpu;
pub mod gpu;

use dynaspa_runtime::backend::Backend;
use dynaspa_runtime::{Error, Result};

/// Backends this build can construct, by name.
pub fn available() -> Vec<&'static str> {
    vec!["cpu"]
}

/// `auto` picks the best backend present; today that is the CPU.
pub fn create(name: &str, threads: Option<usize>) -> Result<Box<dyn Backend>> {
    create_with(name, threads, cpu::SparseConfig::from_env())
}

/// `create` with explicit settings for sparse ops (calibration cache, forced member).
pub fn create_with(name: &str, threads: Option<usize>, sparse: cpu::SparseConfig) -> Result<Box<dyn Backend>> {
    match name {
        "auto" | "cpu" => Ok(Box::new(cpu::CpuBackend::new(threads)?.with_sparse_config(sparse))),
        other => Err(Error::Other(format!(
            "unknown backend '{other}'; this build has: auto, {}",
            available().join(", ")
        ))),
    }
}
