//! Programmatic dependent launch (sm_90+): a kernel that may start while the one before it on
//! the stream is still running, so its launch and block scheduling hide behind that kernel's
//! tail instead of following it.
//!
//! Only kernels whose first statement is `PDL_ENTRY()` get it. On sm_90 that macro (prelude.h)
//! waits until every grid before this one has finished and its writes are visible, so no
//! memory access of the kernel can overtake its predecessors'. A kernel without it launches as
//! before: it could otherwise read what its predecessor has not yet written. The next grid may
//! launch once every block has passed `PDL_TRIGGER()` or ended. One kernel defers its wait
//! past reads the host has proven safe (`PDL_ENTRY_DEFERRED()`, see `waits_first`).

use super::libs;
use crate::gpu::kernels::kernel_name;
use cudarc::driver::sys;
use std::ffi::c_void;

/// Driver function for launches with attributes (CUDA 11.8+; optional).
const LAUNCH_EX: &str = "cuLaunchKernelEx";

/// Whether launches on a device of compute capability `cc` are programmatic: wherever the
/// hardware has it (9.0+) and the driver has the launch call. On an H200 every sparse member
/// got 2.3-2.9 µs faster and the full-size DynConv 10-20% (benches/RESULTS.md, "kernels that
/// launch while the one before them ends").
pub(crate) fn available(cc: (i32, i32)) -> bool {
    cc.0 >= 9 && libs::driver_has(LAUNCH_EX)
}

/// Whether kernel `entry` of `source` (the shared dialect) begins with `PDL_ENTRY();`, or with
/// `PDL_ENTRY_DEFERRED();`: the one exception, sparse_conv_gemm.cl's GEMM, which under
/// `SL_PREWAIT` reads its mask and lists its columns before `PDL_WAIT()`, and under
/// `SPARSE_CONV_ONE_STAGE` loads its weights (constants no grid writes) before it, writing nothing
/// global before it. The host compiles that variant only where the launch ahead of the GEMM
/// does not write the mask (`MaskColumns::prewait`), and the kernel ahead has passed its own
/// wait before it lets this grid go, so every grid that could write the mask has finished.
pub(crate) fn waits_first(source: &str, entry: &str) -> bool {
    let mut heads = source.match_indices("KERNEL ").map(|(at, k)| at + k.len());
    let Some(at) = heads.find(|&at| kernel_name(&source[at..]) == Some(entry)) else { return false };
    let Some(open) = source[at..].find('{') else { return false };
    let body = &source[at + open + 1..];
    let mut rest = body.trim_start();
    // Comments before the first statement are allowed; anything else is a statement.
    loop {
        if let Some(r) = rest.strip_prefix("//") {
            rest = r.find('\n').map_or("", |n| &r[n..]).trim_start();
        } else if let Some(r) = rest.strip_prefix("/*") {
            rest = r.find("*/").map_or("", |n| &r[n + 2..]).trim_start();
        } else {
            break;
        }
    }
    rest.starts_with("PDL_ENTRY();") || rest.starts_with("PDL_ENTRY_DEFERRED();")
}

/// `cuLaunchKernelEx` with programmatic stream serialization allowed.
///
/// # Safety
/// As `cuLaunchKernel`: a live function and stream of the current context, and parameter
/// pointers the driver may read during the call. The kernel must wait first (`waits_first`)
/// and `available` must have said yes for this device.
pub(crate) unsafe fn launch(
    func: sys::CUfunction,
    groups: [u32; 3],
    local: [u32; 3],
    shared_bytes: u32,
    stream: sys::CUstream,
    params: &mut [*mut c_void],
) -> sys::CUresult {
    // SAFETY: a plain C union of integers and structs of integers: all-zero is a valid value.
    let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    let config = sys::CUlaunchConfig {
        gridDimX: groups[0],
        gridDimY: groups[1],
        gridDimZ: groups[2],
        blockDimX: local[0],
        blockDimY: local[1],
        blockDimZ: local[2],
        sharedMemBytes: shared_bytes,
        hStream: stream,
        attrs: &mut attr,
        numAttrs: 1,
    };
    // SAFETY: the caller's contract; `config` and `attr` outlive the call.
    unsafe { sys::cuLaunchKernelEx(&config, func, params.as_mut_ptr(), std::ptr::null_mut()) }
}

#[cfg(test)]
mod tests {
    use super::{kernel_name, waits_first};

    #[test]
    fn only_kernels_whose_first_statement_waits() {
        let src = "KERNEL a(GLOBAL int* x) {\n  /* why */ // more\n  PDL_ENTRY();\n  x[0] = 1;\n}\n\
                   KERNEL b(GLOBAL int* x) {\n  x[0] = 1;\n  PDL_ENTRY();\n}\n\
                   KERNEL c(GLOBAL int* x) { int i = 0; }\n";
        assert!(waits_first(src, "a"));
        assert!(!waits_first(src, "b"), "a wait after a store does not cover the store");
        assert!(!waits_first(src, "c"));
        assert!(!waits_first(src, "d"), "a missing kernel");
        let bounded = "KERNEL LAUNCH_BOUNDS(NT, (NT > 1 ? 2 : 1)) e(GLOBAL int* x) {\n  PDL_ENTRY();\n}\n";
        assert!(waits_first(bounded, "e"), "a register bound before the name");
        let shaped = "KERNEL LAUNCH_BOUNDS(NT, 2) CLUSTER_SHAPE f(GLOBAL int* x) {\n  PDL_ENTRY();\n}\n";
        assert!(waits_first(shaped, "f"), "an attribute macro after the bound");
        assert_eq!(kernel_name("lower_case g(int x)"), None, "only upper-case words are attributes");
        assert_eq!(kernel_name("CLUSTER_SHAPE"), None);
    }

    #[test]
    fn every_shared_kernel_waits_first() {
        // A kernel added without it still runs right, but loses the overlap: say so here.
        let (mut missing, mut unread) = (Vec::new(), Vec::new());
        for src in crate::gpu::kernels::Src::ALL {
            let (file, text) = (src.file(), src.source());
            for line in text.lines() {
                let Some(head) = line.strip_prefix("KERNEL ") else { continue };
                match kernel_name(head) {
                    Some(name) if !waits_first(text, name) => missing.push(format!("{file}:{name}")),
                    Some(_) => {}
                    // Its entry would be missing from CI's compile lists and from this check.
                    None => unread.push(format!("{file}: {line}")),
                }
            }
        }
        assert!(unread.is_empty(), "kernel heads whose name cannot be read: {unread:?}");
        assert!(missing.is_empty(), "kernels whose first statement is not PDL_ENTRY(): {missing:?}");
        // Its head carries a register bound, which a parse of `KERNEL name(` alone would miss.
        assert!(waits_first(crate::gpu::kernels::Src::SparseConvGemm.source(), "sparse_conv_gemm_f32"));
    }
}
