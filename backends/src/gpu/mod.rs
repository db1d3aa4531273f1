//! Shared machinery of the GPU backends (CUDA, OpenCL, wgpu): the `GpuDevice` trait each one
//! implements, and the graph executor that lowers ops to kernel launches on it.

pub mod device;
pub(crate) mod dtype;
mod executor;
pub(crate) mod kernels;
pub(crate) mod lower;
mod plan;
pub(crate) mod sparse;
pub(crate) mod sparse_conv;
pub(crate) mod token;
mod wide;

pub use device::{Arg, DeviceInfo, GpuDevice, KernelDialect, KernelSpec, VendorConv, VendorConvDesc, VendorFused, VendorPolicy};
pub use dtype::{fingerprint_at, Precision};
pub use executor::{FrameGraphStats, GpuBackend, GpuExecutable, GpuOptions, NodePart, SparseOpInfo, TokenOpInfo};
pub use sparse::step::CountsSync;
pub use sparse::timer::{SparseOpTimer, RUNS_PER_CALL};
pub use sparse_conv::features::{SparseConvFeatures, SparseConvOverrides};
pub use token::knobs as token_knobs;

/// Whether the GPU backends run node `n` of `g` sparsely (a 2-D float conv, one group with
/// constant weights or depthwise, over a spatial mask): the ops they have schedules to tune for.
pub fn runs_sparse(g: &dynaspa_runtime::graph::Graph, n: &dynaspa_runtime::graph::Node) -> bool {
    sparse_conv::select::runs_sparse(g, n)
}
/// Whether node `n` of `g` is a PolyKernel op on the GPU backends, with schedules to tune: a
/// sparse conv (`runs_sparse`) or a token projection (a MatMul over an in-graph token mask).
pub fn runs_polykernel(g: &dynaspa_runtime::graph::Graph, n: &dynaspa_runtime::graph::Node) -> bool {
    runs_sparse(g, n) || token::select::runs_token_projection(g, n)
}
/// The sparse conv's schedule knobs as profiles and the tuner name them (the knobs' legend is
/// `sparse_conv/knobs.rs`), with the knobs the executor uses where a profile names none.
pub mod sparse_conv_knobs {
    pub use super::sparse_conv::knobs::*;
    pub use super::sparse_conv::schedule::default_gemm;
}

#[cfg(feature = "wgpu")]
pub(crate) use kernels::LINEAR_WG;

#[cfg(test)]
mod test_compare;
#[cfg(test)]
pub(crate) mod test_rng;
#[cfg(all(test, feature = "opencl"))]
mod vendor_tests;
