//! Shared machinery of the GPU backends (CUDA, OpenCL, wgpu): the `GpuDevice` trait each one
//! implements, and the graph executor that lowers ops to kernel launches on it.

pub mod device;
mod dtype;
mod executor;
pub(crate) mod kernels;
pub(crate) mod lower;
mod plan;
pub(crate) mod sparse;

pub use device::{Arg, DeviceInfo, GpuDevice, KernelSpec, VendorConv, VendorConvDesc, VendorFused, VendorPolicy};
pub use executor::{GpuBackend, GpuExecutable, GpuOptions, SparseOpInfo};
#[cfg(feature = "wgpu")]
pub(crate) use kernels::LINEAR_WG;

#[cfg(all(test, feature = "opencl"))]
mod vendor_tests;
