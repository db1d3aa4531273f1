//! Dynamic shared memory for kernels whose source asks their launches to provide it
//! (`DSP_DYN_SMEM`, sparse_conv_gemm.cl's GEMM tiles past 48 KiB): the function's allowance.

use super::error::{err, Ctx};
use crate::gpu::{DeviceInfo, KernelSpec};
use cudarc::driver::{result, sys};
use dynaspa_runtime::Result;

/// The dynamic shared memory `spec` asks its launches to provide (`DSP_DYN_SMEM`, bytes; 0
/// without), allowed for `func` past the static limit of the device `info` describes. The
/// caller has bound `func`'s context.
pub(crate) fn allow(func: sys::CUfunction, spec: &KernelSpec, info: &DeviceInfo) -> Result<u32> {
    let Some((_, v)) = spec.defines.iter().find(|(k, _)| k == "DSP_DYN_SMEM") else {
        return Ok(0);
    };
    let bytes: u32 = v.parse().map_err(|_| err(format!("{}: DSP_DYN_SMEM={v} is not a byte count", spec.file)))?;
    let most = info.local_mem_launch_bytes;
    if bytes as u64 > most {
        return Err(err(format!(
            "{}:{} asks its launches for {bytes} B of shared memory; {} allows {most} B per block",
            spec.file, spec.entry, info.name
        )));
    }
    // SAFETY: live function of this context (bound by the caller).
    unsafe {
        result::function::set_function_attribute(
            func,
            sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            bytes as i32,
        )
    }
    .ctx(|| format!("cuFuncSetAttribute({}:{}, {bytes} B of dynamic shared memory)", spec.file, spec.entry))?;
    Ok(bytes)
}
