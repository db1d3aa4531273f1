//! Finding wgpu adapters (Vulkan and Metal only) and describing them as `DeviceInfo`.

use crate::gpu::DeviceInfo;
use dynaspa_runtime::{Error, Result};

pub(crate) fn wgpu_err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Backend { backend: "wgpu".into(), msg: format!("{what}: {e}") }
}

/// One adapter as `list` reports it.
#[derive(Clone, Debug)]
pub struct WgpuAdapterEntry {
    /// Position in the listing: what `--device N` / `DYNASPA_WGPU_DEVICE=N` select.
    pub index: usize,
    pub info: DeviceInfo,
}

pub(crate) fn instance() -> wgpu::Instance {
    // Vulkan covers Linux and Android, Metal Apple; GL and DX12 are not targets (the build has
    // no support for them either, see backends/Cargo.toml).
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::VULKAN | wgpu::Backends::METAL;
    wgpu::Instance::new(desc)
}

/// Adapters in the driver's order. Instance creation and enumeration can panic inside wgpu
/// when the Vulkan loader is broken rather than absent; that becomes an error.
pub(crate) fn adapters() -> Result<Vec<wgpu::Adapter>> {
    std::panic::catch_unwind(|| pollster::block_on(instance().enumerate_adapters(wgpu::Backends::VULKAN | wgpu::Backends::METAL)))
        .map_err(|p| wgpu_err("enumerating adapters", panic_text(&p)))
}

pub(crate) fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "wgpu panicked".into())
}

pub(crate) fn describe(a: &wgpu::Adapter) -> DeviceInfo {
    let i = a.get_info();
    // What the device is opened with (WebGPU's defaults), not what the adapter could do: kernels
    // and the lowering's limits must hold on the mobile drivers that only promise these.
    let l = wgpu::Limits::default();
    let kind = match i.device_type {
        wgpu::DeviceType::DiscreteGpu | wgpu::DeviceType::IntegratedGpu | wgpu::DeviceType::VirtualGpu => "gpu",
        wgpu::DeviceType::Cpu => "cpu",
        wgpu::DeviceType::Other => "other",
    };
    DeviceInfo {
        backend: "wgpu".into(),
        name: i.name.clone(),
        vendor: format!("0x{:04x}", i.vendor),
        driver: format!("{} {}", i.driver, i.driver_info).trim().to_string(),
        kind: kind.into(),
        // wgpu does not report compute units.
        compute_units: 0,
        local_mem_bytes: l.max_compute_workgroup_storage_size as u64,
        local_mem_launch_bytes: 0,
        max_work_group_size: l.max_compute_invocations_per_workgroup,
        global_mem_bytes: l.max_buffer_size,
        arch: format!("{:?}", i.backend).to_lowercase(),
    }
}

/// Every adapter this machine has; none is an empty list, not an error.
pub fn list() -> Result<Vec<WgpuAdapterEntry>> {
    Ok(adapters()?.iter().enumerate().map(|(index, a)| WgpuAdapterEntry { index, info: describe(a) }).collect())
}

/// The adapter `selector` names: an index of `list`, or part of its name (case-insensitive);
/// `None` takes the first GPU, else the first adapter.
pub(crate) fn select(selector: Option<&str>) -> Result<(wgpu::Adapter, WgpuAdapterEntry)> {
    let all = adapters()?;
    if all.is_empty() {
        return Err(wgpu_err(
            "no adapter",
            "wgpu finds no Vulkan or Metal device (on Linux install a Vulkan driver, e.g. apt-get install mesa-vulkan-drivers libvulkan1)",
        ));
    }
    let infos: Vec<DeviceInfo> = all.iter().map(describe).collect();
    let pick = match selector {
        None => infos.iter().position(|i| i.kind == "gpu").unwrap_or(0),
        Some(s) => match s.parse::<usize>() {
            Ok(n) if n < all.len() => n,
            Ok(n) => return Err(wgpu_err("device selection", format!("there is no adapter {n}; this machine has {}", all.len()))),
            Err(_) => infos.iter().position(|i| i.name.to_lowercase().contains(&s.to_lowercase())).ok_or_else(|| {
                let names: Vec<&str> = infos.iter().map(|i| i.name.as_str()).collect();
                wgpu_err("device selection", format!("no adapter's name contains '{s}'; adapters: {names:?}"))
            })?,
        },
    };
    let info = infos[pick].clone();
    Ok((all.into_iter().nth(pick).expect("index in range"), WgpuAdapterEntry { index: pick, info }))
}
