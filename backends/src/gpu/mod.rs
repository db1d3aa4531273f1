//! Shared machinery of the GPU backends (CUDA, OpenCL, wgpu): the `GpuDevice` trait each one
//! implements, and the graph executor that lowers ops to kernel launches on it.

pub mod device;
mod dtype;
mod executor;
pub(crate) mod kernels;
pub(crate) mod lower;
mod plan;
pub(crate) mod sparse;

pub use device::{Arg, DeviceInfo, GpuDevice, KernelSpec};
pub use executor::{GpuBackend, GpuExecutable, GpuOptions, SparseOpInfo};
pub use sparse::step::CountsSync;
#[cfg(feature = "wgpu")]
pub(crate) use kernels::LINEAR_WG;
