//! The WGSL kernels: a twin of each program of `gpu/kernels.rs` that declares one, with the same
//! entry points and argument order, so the shared executor's `KernelSpec`s (named after the .cl
//! files) select them; a twin is `common.wgsl` and its files, as a program is its headers. Buffers bind at 0.. in argument order, scalars form one uniform struct at binding 8;
//! schedule defines become override constants of the same names, and every entry point's
//! work-group shape is the overrides `WG_X`, `WG_Y`, `WG_Z`, set per pipeline from the launch.

use crate::gpu::KernelSpec;

macro_rules! wgsl {
    ($($file:literal),+) => {
        concat!(include_str!("kernels/common.wgsl") $(, "\n", include_str!(concat!("kernels/", $file)))+)
    };
}

/// The WGSL source standing in for the executor's `file` (e.g. "conv.cl").
pub(crate) fn source(file: &str) -> Option<&'static str> {
    Some(match file {
        "elementwise.cl" => wgsl!("elementwise.wgsl"),
        "movement.cl" => wgsl!("movement.wgsl"),
        "reduce.cl" => wgsl!("reduce.wgsl"),
        "matmul.cl" => wgsl!("matmul.wgsl"),
        "conv.cl" => wgsl!("conv.wgsl"),
        "pool.cl" => wgsl!("pool.wgsl"),
        "attention.cl" => wgsl!("attention.wgsl"),
        "sparse_conv_gemm.cl" => wgsl!("sparse_conv_common.wgsl", "sparse_conv_gemm.wgsl"),
        "sparse_conv_dw.cl" => wgsl!("sparse_conv_common.wgsl", "sparse_conv_dw.wgsl"),
        "sparse_conv_fill.cl" => wgsl!("sparse_conv_common.wgsl", "sparse_conv_fill.wgsl"),
        "bitmask.cl" => wgsl!("bitmask.wgsl"),
        "token.cl" => wgsl!("token.wgsl"),
        _ => return None,
    })
}

/// The file name errors and logs show.
pub(crate) fn wgsl_name(file: &str) -> String {
    format!("{}.wgsl", file.trim_end_matches(".cl"))
}

/// The work-group shape the executor launches `spec` with, derived from its schedule as
/// `gpu::kernels` does (tiles: TN/WN x TM/WM; reductions: WG; else the linear group), so the
/// first pipeline is built (and any error shows) when the kernel is compiled.
pub(crate) fn default_local(spec: &KernelSpec) -> [u32; 3] {
    let get = |k: &str| spec.defines.iter().find(|(n, _)| n == k).and_then(|(_, v)| v.parse::<u32>().ok());
    match (get("TM"), get("TN"), get("WM"), get("WN"), get("WG")) {
        (Some(tm), Some(tn), Some(wm), Some(wn), _) if wm > 0 && wn > 0 => [tn / wn, tm / wm, 1],
        (_, _, _, _, Some(wg)) if spec.file == "attention.cl" || spec.file == "token.cl" => [wg, 1, 1],
        _ if spec.file == "token.cl" => [get("BLOCK").unwrap_or(crate::gpu::LINEAR_WG), 1, 1],
        _ => [crate::gpu::LINEAR_WG, 1, 1],
    }
}

/// Schedules the WGSL kernels cannot hold, as an error message: the GEMM kernels keep at most
/// 16 accumulators per invocation and the reductions a scratch array of 256 words.
pub(crate) fn check_schedule(spec: &KernelSpec) -> Result<(), String> {
    let get = |k: &str| spec.defines.iter().find(|(n, _)| n == k).and_then(|(_, v)| v.parse::<i64>().ok());
    if let (Some(wm), Some(wn)) = (get("WM"), get("WN")) {
        if wm * wn > 16 || wm <= 0 || wn <= 0 {
            return Err(format!("{}: WM x WN = {wm} x {wn} outputs per invocation; the WGSL kernels hold at most 16", spec.entry));
        }
    }
    if let Some(wg) = get("WG") {
        if !(1..=256).contains(&wg) || wg & (wg - 1) != 0 {
            return Err(format!("{}: WG = {wg}; the WGSL reductions need a power of two up to 256", spec.entry));
        }
    }
    Ok(())
}

/// Entry points of a WGSL source (`@compute ... fn NAME(`), for tests and listings.
#[cfg(test)]
pub(crate) fn entries(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut compute = false;
    for line in source.lines() {
        let l = line.trim();
        if l.starts_with("@compute") {
            compute = true;
        } else if compute && l.starts_with("fn ") {
            out.push(l[3..].split('(').next().unwrap_or("").trim().to_string());
            compute = false;
        }
    }
    out
}
