//! Shared machinery of the GPU backends (CUDA, OpenCL, wgpu): the `GpuDevice` trait each one
//! implements, and (to come) the graph executor that lowers ops to kernel launches on it.

pub mod device;

pub use device::{Arg, DeviceInfo, GpuDevice, KernelSpec};
