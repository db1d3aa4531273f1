//! The CPU backend's entry in `dynaspa devices`.

use crate::gpu::DeviceInfo;

pub fn device_listing() -> crate::DeviceListing {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split(':').nth(1)).map(|m| m.trim().to_string()))
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let simd = if super::kernel_util::has_avx512() { "avx512" } else { "portable kernels" };
    let info = DeviceInfo {
        backend: "cpu".into(),
        name: model,
        vendor: String::new(),
        driver: simd.into(),
        kind: "cpu".into(),
        compute_units: std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1),
        local_mem_bytes: 0,
        max_work_group_size: 1,
        global_mem_bytes: 0,
        arch: std::env::consts::ARCH.into(),
    };
    crate::DeviceListing { backend: "cpu", devices: Ok(vec![info]) }
}
