//! Device descriptors for the roofline model: what bounds a kernel's time on a device (lanes,
//! clock, bandwidth, occupancy limits). Read from a device where we have one (the CPU here;
//! GPUs through `DeviceInfo` plus the compute-capability tables), built in for the devices we
//! predict profiles for without reaching them.

use dynaspa_backends::gpu::sparse_conv_knobs::{GpuLimits, WGSL_MAX_STORAGE, WGSL_MAX_THREADS};
use dynaspa_backends::gpu::{DeviceInfo, KernelDialect};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceDesc {
    /// Short id: profile directory names and `--predict` take it.
    pub id: String,
    pub name: String,
    /// Backend whose kernels this describes: "cpu", "cuda", "opencl", "wgpu".
    pub backend: String,
    /// SMs / compute units / CPU cores in use.
    pub compute_units: u32,
    /// Threads that issue together: warp (32), Adreno wave (64), CPU f32 SIMD lanes.
    pub simd_width: u32,
    /// FP32 lanes per compute unit (one FMA per lane per clock).
    pub lanes_per_cu: u32,
    pub clock_ghz: f64,
    pub mem_bandwidth_gbs: f64,
    /// Bytes of one global-memory transaction (NVIDIA: 32-byte sectors; CPU: cache lines).
    pub transaction_bytes: u32,
    pub max_group_threads: u32,
    pub max_threads_per_cu: u32,
    pub max_groups_per_cu: u32,
    pub registers_per_cu: u32,
    pub max_registers_per_thread: u32,
    pub local_mem_per_cu: u32,
    pub local_mem_per_group: u32,
    pub local_banks: u32,
    /// Compute model `C * (alpha * ops * warps + gamma)`: seconds per instruction per warp on
    /// one compute unit, and seconds of fixed cost per wave.
    pub alpha_s: f64,
    pub gamma_s: f64,
    /// GPUs: seconds one dependent global-memory round trip takes (a stage of the GEMM's
    /// reduction cannot finish faster when too few warps hide it).
    #[serde(default)]
    pub latency_s: f64,
    /// GPUs: seconds per counted operation of one work-item when nothing hides it (few warps
    /// resident): a reduction stage takes at least its work-item's operations one after another.
    #[serde(default)]
    pub serial_op_s: f64,
    /// "fitted" when alpha/gamma come from a micro-benchmark on the device, "spec" when derived
    /// from published peak figures (devices we cannot run on).
    pub alpha_source: String,
}

impl DeviceDesc {
    /// Peak FP32 multiply-adds per second, from lanes and clock.
    pub fn peak_macs(&self) -> f64 {
        self.compute_units as f64 * self.lanes_per_cu as f64 * self.clock_ghz * 1e9
    }

    /// The language the device's kernels are compiled from; `None` for the CPU backend, whose
    /// kernels are Rust. Resolved here once from the backend the descriptor was made for.
    pub fn dialect(&self) -> Option<KernelDialect> {
        match self.backend.as_str() {
            "cpu" => None,
            "cuda" => Some(KernelDialect::Cuda),
            "wgpu" => Some(KernelDialect::Wgsl),
            _ => Some(KernelDialect::OpenCl),
        }
    }

    /// The CPU backend's own kernels (no work-groups, no GPU schedule knobs).
    pub fn cpu_kernels(&self) -> bool {
        self.dialect().is_none()
    }

    /// Kernels in WGSL, whose limits are tighter than the device's own.
    pub fn wgsl(&self) -> bool {
        self.dialect() == Some(KernelDialect::Wgsl)
    }

    /// What bounds a GPU sparse conv schedule on this device, as the executor checks it
    /// (`max_registers_per_thread` 0: registers are not checked).
    pub fn limits(&self) -> GpuLimits {
        let wgsl = self.wgsl();
        let regs = self.max_registers_per_thread > 0;
        GpuLimits {
            wgsl,
            max_group_threads: if wgsl { self.max_group_threads.min(WGSL_MAX_THREADS) } else { self.max_group_threads },
            local_mem_bytes: if wgsl { (self.local_mem_per_group as u64).min(WGSL_MAX_STORAGE) } else { self.local_mem_per_group as u64 },
            // The model's tiles stay within the static limit.
            launch_local_bytes: 0,
            registers_per_group: if regs { self.registers_per_cu } else { 0 },
            registers_per_thread: self.max_registers_per_thread,
            // The model costs the GEMM; how a member finds its columns is the executor's.
            self_list: false,
        }
    }

    /// alpha from the lanes: a warp instruction occupies `simd_width / lanes_per_cu` clocks
    /// of a compute unit.
    fn spec_alpha(simd: u32, lanes: u32, ghz: f64) -> f64 {
        simd as f64 / lanes as f64 / (ghz * 1e9)
    }
}

/// Limits per CUDA compute capability, from the CUDA C++ Programming Guide, "Technical
/// Specifications per Compute Capability": (max resident warps per SM, max resident blocks
/// per SM, shared memory per SM in KiB, max shared memory per block in KiB (opt-in), FP32
/// lanes per SM (the guide's arithmetic-instruction throughput table)).
fn cc_limits(cc: &str) -> Option<(u32, u32, u32, u32, u32)> {
    Some(match cc {
        "7.0" => (64, 32, 96, 96, 64),
        "7.2" => (64, 32, 96, 96, 64),
        "7.5" => (32, 16, 64, 64, 64),
        "8.0" => (64, 32, 164, 163, 64),
        "8.6" => (48, 16, 100, 99, 128),
        "8.7" => (48, 16, 164, 163, 128),
        "8.9" => (48, 24, 100, 99, 128),
        "9.0" => (64, 32, 228, 227, 128),
        _ => return None,
    })
}

fn cuda_like(id: &str, name: &str, cc: &str, sms: u32, ghz: f64, bw: f64) -> DeviceDesc {
    let (warps, blocks, smem, smem_block, lanes) = cc_limits(cc).unwrap_or((48, 16, 100, 99, 128));
    DeviceDesc {
        id: id.into(),
        name: name.into(),
        backend: "cuda".into(),
        compute_units: sms,
        simd_width: 32,
        lanes_per_cu: lanes,
        clock_ghz: ghz,
        mem_bandwidth_gbs: bw,
        transaction_bytes: 32,
        max_group_threads: 1024,
        max_threads_per_cu: warps * 32,
        max_groups_per_cu: blocks,
        // 64K 32-bit registers per SM and at most 255 per thread for every cc >= 5.0 (same table).
        registers_per_cu: 65536,
        max_registers_per_thread: 255,
        local_mem_per_cu: smem * 1024,
        local_mem_per_group: smem_block * 1024,
        local_banks: 32,
        alpha_s: DeviceDesc::spec_alpha(32, lanes, ghz),
        // Assumed: ~2 µs of launch and tail per wave, the order measured for small kernels on
        // Jetson-class GPUs; replaced by the fitted value where the device can be reached.
        gamma_s: 2e-6,
        // ~500 clocks of global-memory latency (the order microbenchmarks report for Volta to
        // Hopper: Jia et al., "Dissecting the NVIDIA Volta GPU Architecture via
        // Microbenchmarking", 2018, and their Turing/Ampere follow-ups).
        latency_s: 500.0 / (ghz * 1e9),
        // ~16 clocks per counted operation of a lone work-item: what the H100 fit gave (8 ns
        // at 1.98 GHz; RESULTS.md, "the roofline's serial stage"); an operation here is an FMA
        // with its operand reads, so dependent issue and local-memory latency both land in it.
        serial_op_s: 16.0 / (ghz * 1e9),
        alpha_source: "spec".into(),
    }
}

/// Built-in descriptors of devices we predict for: `orin`, `xavier`, `adreno650`.
pub fn builtin(id: &str) -> Option<DeviceDesc> {
    Some(match id {
        // NVIDIA Jetson AGX Orin 64GB data sheet (DS-10662-001) / Jetson AGX Orin technical
        // brief: Ampere GPU with 2048 CUDA cores in 16 SMs, up to 1.3 GHz; 256-bit LPDDR5 at
        // 204.8 GB/s. Compute capability 8.7.
        "orin" => cuda_like("jetson-agx-orin", "Orin", "8.7", 16, 1.3, 204.8),
        // NVIDIA Jetson AGX Xavier data sheet (DS-09654-001): Volta GPU with 512 CUDA cores in
        // 8 SMs, up to 1377 MHz; 256-bit LPDDR4x at 137 GB/s. Compute capability 7.2.
        "xavier" => cuda_like("jetson-agx-xavier", "Xavier", "7.2", 8, 1.377, 137.0),
        // Adreno 650 (Snapdragon 865). Qualcomm publishes no ALU count; figures here are the
        // commonly reported ones and are estimates: ~1.2 TFLOPS FP32 at 587 MHz (Wikipedia's
        // Adreno table) -> 1024 FP32 lanes, over 3 compute units as OpenCL reports them on
        // Snapdragon 865 devices; waves of 64 threads and 32 KiB of local memory per compute unit
        // and a 1024-thread work-group limit (Qualcomm Snapdragon Mobile Platform OpenCL General
        // Programming and Optimization guide, 80-NB295-11, for Adreno A6x); LPDDR5-5500 on a
        // 64-bit bus: 44 GB/s (Snapdragon 865 product brief). Registers per thread: estimate.
        "adreno650" => DeviceDesc {
            id: "adreno-650".into(),
            name: "Adreno (TM) 650".into(),
            backend: "opencl".into(),
            compute_units: 3,
            simd_width: 64,
            lanes_per_cu: 341,
            clock_ghz: 0.587,
            mem_bandwidth_gbs: 44.0,
            transaction_bytes: 64,
            max_group_threads: 1024,
            max_threads_per_cu: 1536,
            max_groups_per_cu: 16,
            registers_per_cu: 65536,
            max_registers_per_thread: 128,
            local_mem_per_cu: 32 * 1024,
            local_mem_per_group: 32 * 1024,
            local_banks: 32,
            alpha_s: DeviceDesc::spec_alpha(64, 341, 0.587),
            gamma_s: 5e-6,
            // Assumed: ~300 clocks to LPDDR5 (no published figure).
            latency_s: 300.0 / 0.587e9,
            // Assumed as for NVIDIA parts: ~16 clocks per operation of a lone work-item.
            serial_op_s: 16.0 / 0.587e9,
            alpha_source: "spec".into(),
        },
        _ => return None,
    })
}

pub const BUILTIN_IDS: [&str; 3] = ["orin", "xavier", "adreno650"];

/// A GPU descriptor from what the backend reads off the device. Clock and bandwidth are not
/// in `DeviceInfo`: they come from a table of known parts by name, else a conservative guess
/// (the roofline then ranks schedules correctly but its absolute times are off).
pub fn from_device_info(info: &DeviceInfo) -> DeviceDesc {
    // (name part, clock GHz, bandwidth GB/s): NVIDIA H100 SXM5 / H200 SXM product pages.
    const KNOWN: [(&str, f64, f64); 3] = [("H100", 1.98, 3350.0), ("H200", 1.98, 4800.0), ("Orin", 1.3, 204.8)];
    let (ghz, bw) = KNOWN.iter().find(|k| info.name.contains(k.0)).map_or((1.0, 100.0), |k| (k.1, k.2));
    // `arch` is the compute capability where the kernels go through NVRTC.
    let cc = if info.dialect() == KernelDialect::Cuda { info.arch.as_str() } else { "" };
    let mut d = cuda_like(&slug(&info.name), &info.name, cc, info.compute_units.max(1), ghz, bw);
    d.backend = info.backend.clone();
    if info.max_work_group_size > 0 {
        d.max_group_threads = info.max_work_group_size;
    }
    if info.local_mem_bytes > 0 {
        // The device's own per-group limit (CUDA reports the default 48 KiB, not the opt-in).
        d.local_mem_per_group = info.local_mem_bytes.min(u32::MAX as u64) as u32;
        d.local_mem_per_cu = d.local_mem_per_cu.max(d.local_mem_per_group);
    }
    // Register files are known for NVIDIA only (CUDA or NVIDIA's OpenCL); elsewhere the space
    // does not check them (as the executor does not), and occupancy keeps the generic figure.
    if !(info.dialect() == KernelDialect::Cuda || info.vendor.to_ascii_lowercase().contains("nvidia")) {
        d.max_registers_per_thread = 0;
    }
    if info.kind == "cpu" {
        // PoCL and lavapipe run work-groups on CPU cores: no warps to hide latency with, and
        // a work-item loop per group rather than lanes.
        d.simd_width = 16;
        d.latency_s = 100e-9;
        // A work-group's items run as a loop on one core: the compute term already counts
        // them one after another, and no lone warp waits on its own issue.
        d.serial_op_s = 0.0;
    }
    d
}

/// A file-name-safe lower-case id for a device name: profiles live in `profiles/<id>/`.
pub fn slug(name: &str) -> String {
    let mut s = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            s.push(c.to_ascii_lowercase());
        } else if !s.ends_with('-') && !s.is_empty() {
            s.push('-');
        }
    }
    s.trim_end_matches('-').chars().take(64).collect()
}

/// This machine's CPU at `threads` workers. Clock from /proc/cpuinfo; lanes from the vector
/// extension the kernels use (AVX-512: 16 f32 lanes, two FMA ports assumed); alpha, gamma
/// and bandwidth stay at spec values until [`crate::microbench`] fits them.
pub fn cpu(threads: usize) -> DeviceDesc {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |k: &str| info.lines().find(|l| l.starts_with(k)).and_then(|l| l.split(':').nth(1)).map(|v| v.trim().to_string());
    let name = field("model name").unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let ghz = field("cpu MHz").and_then(|v| v.parse::<f64>().ok()).map_or(2.5, |m| m / 1000.0);
    let avx512 = info.contains(" avx512f");
    let simd = if avx512 { 16 } else { 8 };
    DeviceDesc {
        id: slug(&name),
        name,
        backend: "cpu".into(),
        compute_units: threads.max(1) as u32,
        simd_width: simd,
        lanes_per_cu: simd * 2,
        clock_ghz: ghz,
        mem_bandwidth_gbs: 10.0,
        transaction_bytes: 64,
        max_group_threads: 1,
        max_threads_per_cu: 1,
        max_groups_per_cu: 1,
        registers_per_cu: 32,
        max_registers_per_thread: 32,
        local_mem_per_cu: 0,
        local_mem_per_group: 0,
        local_banks: 1,
        alpha_s: DeviceDesc::spec_alpha(simd, simd * 2, ghz),
        gamma_s: 1e-6,
        latency_s: 0.0,
        serial_op_s: 0.0,
        alpha_source: "spec".into(),
    }
}

/// What CUDA reports for an H100 SXM (the figures the GPU model tests are written against).
#[cfg(test)]
pub(crate) fn h100_info() -> DeviceInfo {
    DeviceInfo {
        backend: "cuda".into(),
        name: "NVIDIA H100 80GB HBM3".into(),
        compute_units: 132,
        local_mem_bytes: 49152,
        max_work_group_size: 1024,
        arch: "9.0".into(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_match_their_published_peaks() {
        // Orin: 2048 lanes x 1.3 GHz = 2.66 T MAC/s (5.3 TFLOPS FP32, as NVIDIA states).
        let o = builtin("orin").unwrap();
        assert!((o.peak_macs() / 1e12 - 2.66).abs() < 0.01, "{}", o.peak_macs());
        // Xavier: 512 x 1.377 GHz = 0.705 T MAC/s (1.4 TFLOPS FP32).
        let x = builtin("xavier").unwrap();
        assert!((x.peak_macs() / 1e12 - 0.705).abs() < 0.01);
        // Adreno 650: ~1.2 TFLOPS.
        let a = builtin("adreno650").unwrap();
        assert!((a.peak_macs() * 2.0 / 1e12 - 1.2).abs() < 0.05, "{}", a.peak_macs());
        assert_eq!(o.max_threads_per_cu, 1536);
        assert!(builtin("nonesuch").is_none());
        assert_eq!(slug("AMD EPYC 9B14 96-Core Processor"), "amd-epyc-9b14-96-core-processor");
    }

    #[test]
    fn device_info_fills_limits_from_the_cc_table() {
        let info = h100_info();
        let d = from_device_info(&info);
        assert_eq!((d.compute_units, d.max_threads_per_cu, d.lanes_per_cu), (132, 2048, 128));
        assert_eq!(d.mem_bandwidth_gbs, 3350.0);
        assert_eq!(d.id, "nvidia-h100-80gb-hbm3");
    }
}
