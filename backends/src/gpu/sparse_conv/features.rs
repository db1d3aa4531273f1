//! The code paths of the sparse conv kernels (sparse_conv_*.cl) whose best choice depends on the
//! device, resolved once per executable from the device's description (`for_device`), with the
//! overrides a caller gives in `GpuOptions::sparse_conv`. Each default is the path measured
//! fastest on that kind of device (benches/RESULTS.md); where a device was not measured it keeps
//! the path every device runs right.

use crate::gpu::device::{DeviceInfo, KernelDialect};

/// Overrides of `SparseConvFeatures`' defaults (`None`: the device's default). A setting the
/// device's kernels cannot run (a fused finish or self-listing under WGSL) is ignored there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SparseConvOverrides {
    /// See `SparseConvFeatures::fused_finish`.
    pub fused_finish: Option<bool>,
    /// See `SparseConvFeatures::self_list`.
    pub self_list: Option<bool>,
    /// See `SparseConvFeatures::hoisted_gather`.
    pub hoisted_gather: Option<bool>,
    /// See `SparseConvFeatures::two_stages_in_flight`.
    pub two_stages_in_flight: Option<bool>,
}

/// How one executable's sparse convs run on its device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SparseConvFeatures {
    /// The kernels' language: the WGSL twins have none of the paths below, and the measured
    /// defaults belong to the compiler (NVRTC or the OpenCL driver).
    pub dialect: KernelDialect,
    /// A split reduction (KS > 1) is finished by the last of each output tile's work-groups
    /// (FUSED_FINISH: one launch) instead of a second kernel. Default: on for NVIDIA's OpenCL,
    /// where the second launch costs ~13 µs back to back and split 1x1 members only win fused
    /// (1.45-1.8x faster); off under CUDA, where the second launch overlaps the first's tail and
    /// fused was 5-16% slower (RESULTS.md, "The split-K finish folded into the GEMM"); off on
    /// PoCL, where a launch costs little next to a frame's GEMM and fusing was within ±7%
    /// ("Fused split-K finish on PoCL"), and on OpenCL devices not measured. Never under WGSL,
    /// which does not promise one workgroup sees another's writes within a dispatch.
    pub fused_finish: bool,
    /// 1x1 GEMM members find their columns in the mask themselves (SELF_LIST), so dispatch
    /// launches the bitmask kernel beside them rather than in front. Default: on under CUDA
    /// (H200, batch 1: conv3x3 at density 0.1 33.1 against 40.4 µs, conv1x1 14.9 against
    /// 18.5; RESULTS.md, "self-listing 1x1 members, on against off"); off under OpenCL, where
    /// NVIDIA's was no faster and PoCL 3.1 computes the batch-2 conv1x1 wrong
    /// (tests/gpu_sparse.rs). Never under WGSL (the twin has no SELF_LIST).
    pub self_list: bool,
    /// GEMM members work out their gather's column origin and in-bounds taps once per kernel
    /// instead of per element and stage (SPARSE_CONV_HOIST). Default: on, but for NVIDIA's OpenCL: under
    /// CUDA members got a median 3-8% faster, under NVIDIA's OpenCL the median did not move and
    /// the fastest 3x3 members at densities 0.3 and 0.5 got up to 7% slower (that compiler has
    /// no launch bound to hold the hoisted values' registers; RESULTS.md, "hoisted against per
    /// element"). Sliced members (WK > 1) under OpenCL never hoist: PoCL 3.1 computed them wrong.
    pub hoisted_gather: bool,
    /// The GEMM keeps two stages of its reduction in flight instead of one (SPARSE_CONV_DEPTH = 2).
    /// Default: on under CUDA, where the density-0.1 members got 2-6% faster; off under OpenCL,
    /// where NVIDIA's gained nothing (RESULTS.md, "Two stages of the reduction in flight").
    pub two_stages_in_flight: bool,
}

impl SparseConvFeatures {
    /// The device's defaults (see each field) with `overrides` applied where its kernels have
    /// the path.
    pub fn for_device(info: &DeviceInfo, overrides: &SparseConvOverrides) -> SparseConvFeatures {
        let dialect = info.dialect();
        let nvidia_opencl = dialect == KernelDialect::OpenCl && info.vendor.to_ascii_lowercase().contains("nvidia");
        let opencl_c = dialect != KernelDialect::Wgsl;
        SparseConvFeatures {
            dialect,
            fused_finish: opencl_c && overrides.fused_finish.unwrap_or(nvidia_opencl),
            self_list: opencl_c && overrides.self_list.unwrap_or(dialect == KernelDialect::Cuda),
            hoisted_gather: opencl_c && overrides.hoisted_gather.unwrap_or(!nvidia_opencl),
            two_stages_in_flight: opencl_c && overrides.two_stages_in_flight.unwrap_or(dialect == KernelDialect::Cuda),
        }
    }

    /// The device's defaults.
    pub fn defaults(info: &DeviceInfo) -> SparseConvFeatures {
        SparseConvFeatures::for_device(info, &SparseConvOverrides::default())
    }

    /// Sparse members' grids run column tiles slowest (SPARSE_CONV_CSLOW), so a sparse frame's working
    /// work-groups launch ahead of the empty ones: the fastest conv3x3 member at density 0.1
    /// 21.5 against 25.9 µs on NVIDIA's OpenCL, 0.5-0.6 µs faster under CUDA (RESULTS.md,
    /// "column tiles slowest against fastest"). The WGSL twin keeps column tiles fastest.
    pub(crate) fn columns_slowest(&self) -> bool {
        self.dialect != KernelDialect::Wgsl
    }

    /// GEMMs of 256 to 512 work-items hold their registers to two (one) resident groups per SM
    /// (`LAUNCH_BOUNDS`, `schedules::register_bound`): CUDA only; on NVIDIA's OpenCL
    /// `-cl-nv-maxrregcount` made ptxas spend more registers, not fewer (RESULTS.md, "a register
    /// bound on NVIDIA's OpenCL"), and OpenCL C has no launch bound.
    pub(crate) fn register_bound(&self) -> bool {
        self.dialect == KernelDialect::Cuda
    }

    /// Self-listing work-groups count the mask first and leave when they have no column, before
    /// the scan (SL_EARLY): CUDA only (on an H200 members with whole grids up to 16% faster;
    /// PoCL 3.1 crashed running it).
    pub(crate) fn self_list_early(&self) -> bool {
        self.dialect == KernelDialect::Cuda
    }

    /// The split finish loads its first column's partial sums beside the column count
    /// (SPARSE_CONV_FIN_SPEC): CUDA only, where conv1x1's members at density 0.1 went a median up to 3%
    /// faster and none more than 1% slower (RESULTS.md, "The finish's speculative loads"); not
    /// measured elsewhere.
    pub(crate) fn finish_speculates(&self) -> bool {
        self.dialect == KernelDialect::Cuda
    }

    /// Kernels launch programmatically where the device can (cuda/pdl.rs), so the paths that
    /// overlap a kernel with the one ahead apply: the self-listing GEMM reading its mask before
    /// its wait (SL_PREWAIT), the split finish letting the next grid go at its start
    /// (FIN_TRIGGER), one-stage members' early trigger (knob `ET`). Together the first two took
    /// the fastest members 4-8% lower at density 0.1 on an H200 (RESULTS.md, "the self-listing
    /// GEMM lists its mask before its PDL wait"). Elsewhere there is no wait to overlap.
    pub(crate) fn overlaps_launches(&self) -> bool {
        self.dialect == KernelDialect::Cuda
    }
}

#[cfg(test)]
mod tests {
    use super::{SparseConvFeatures, SparseConvOverrides};
    use crate::gpu::device::DeviceInfo;

    fn device(backend: &str, vendor: &str, driver: &str) -> DeviceInfo {
        DeviceInfo { backend: backend.into(), vendor: vendor.into(), driver: driver.into(), ..Default::default() }
    }

    #[test]
    fn each_device_gets_the_paths_measured_fastest_on_it() {
        let cuda = SparseConvFeatures::defaults(&device("cuda", "NVIDIA", "13.0"));
        assert!(!cuda.fused_finish && cuda.self_list && cuda.hoisted_gather && cuda.two_stages_in_flight);
        let nv_cl = SparseConvFeatures::defaults(&device("opencl", "NVIDIA Corporation", "580.95 (OpenCL 3.0 CUDA 13.0.97)"));
        assert!(nv_cl.fused_finish && !nv_cl.self_list && !nv_cl.hoisted_gather && !nv_cl.two_stages_in_flight);
        let pocl = SparseConvFeatures::defaults(&device("opencl", "GenuineIntel", "6.0+debian (OpenCL 3.0 PoCL 6.0+debian  Linux)"));
        assert!(!pocl.fused_finish && !pocl.self_list && pocl.hoisted_gather && !pocl.two_stages_in_flight);
        let amd = SparseConvFeatures::defaults(&device("opencl", "Advanced Micro Devices, Inc.", "3625.0 (HSA1.1,LC)"));
        assert!(!amd.fused_finish, "unmeasured OpenCL devices keep two launches");
        assert!(cuda.register_bound() && cuda.self_list_early() && cuda.finish_speculates() && cuda.overlaps_launches());
        assert!(!nv_cl.register_bound() && !nv_cl.self_list_early() && !nv_cl.finish_speculates() && !nv_cl.overlaps_launches());
        assert!(cuda.columns_slowest() && nv_cl.columns_slowest() && pocl.columns_slowest());
    }

    #[test]
    fn overrides_apply_where_the_kernels_have_the_path() {
        let all = SparseConvOverrides {
            fused_finish: Some(true),
            self_list: Some(true),
            hoisted_gather: Some(false),
            two_stages_in_flight: Some(true),
        };
        let pocl = SparseConvFeatures::for_device(&device("opencl", "GenuineIntel", "PoCL 6.0"), &all);
        assert!(pocl.fused_finish && pocl.self_list && !pocl.hoisted_gather && pocl.two_stages_in_flight);
        let none = SparseConvOverrides {
            fused_finish: Some(false),
            self_list: Some(false),
            hoisted_gather: Some(true),
            two_stages_in_flight: Some(false),
        };
        let nv_cl = SparseConvFeatures::for_device(&device("opencl", "NVIDIA Corporation", "580"), &none);
        assert!(!nv_cl.fused_finish && !nv_cl.self_list && nv_cl.hoisted_gather && !nv_cl.two_stages_in_flight);
        // The WGSL twin has none of these paths: asking cannot turn them on.
        let wgsl = SparseConvFeatures::for_device(&device("wgpu", "NVIDIA", "Vulkan"), &all);
        assert!(!wgsl.fused_finish && !wgsl.self_list && !wgsl.hoisted_gather && !wgsl.two_stages_in_flight);
        assert!(!wgsl.columns_slowest());
    }
}
