//! The CUDA backend: cudarc's driver API and NVRTC, both loaded at run time (no link-time CUDA
//! dependency), so a build with this feature still starts on machines without NVIDIA
//! libraries and reports CUDA as unavailable, with the reason.
//!
//! - `probe` / `libs`: whether CUDA can run here, checked before cudarc is touched;
//! - `device`: `CudaDevice`, the shared `GpuDevice` trait on one GPU;
//! - `nvrtc` + `prelude.h`: kernel sources of the shared dialect (`gpu/kernels/*.cl`) and
//!   CUDA-only ones (`cuda/kernels/*.cu`) to CUBIN; `kernel_cache`: those CUBINs on disk;
//! - `kernels`: the CUDA-only kernels (bitmask + DISTile generation);
//! - `selfcheck`: checks against CPU references that the GPU self-check runs.

mod backend;
pub mod device;
mod error;
pub mod kernel_cache;
pub mod kernels;
mod libs;
pub mod nvrtc;
pub mod probe;
pub mod selfcheck;

#[cfg(test)]
mod nvrtc_tests;
#[cfg(test)]
mod selfcheck_test;

pub use backend::CudaBackend;
pub use device::{CudaBuffer, CudaDevice, CudaEvent, CudaKernel};
pub use kernel_cache::{CacheStats, KernelCache};
pub use probe::{probe, Unavailable};

/// This backend's entry in `dynaspa devices`.
pub fn device_listing() -> crate::DeviceListing {
    crate::DeviceListing { backend: "cuda", devices: probe::list() }
}
