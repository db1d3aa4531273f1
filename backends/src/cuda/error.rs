//! Driver and NVRTC failures as the runtime's `Error`, naming the call that failed.

use cudarc::driver::result::DriverError;
use cudarc::nvrtc::result::NvrtcError;
use dynaspa_runtime::Error;

pub(crate) fn err(msg: impl Into<String>) -> Error {
    Error::Backend { backend: "cuda".into(), msg: msg.into() }
}

/// `CUDA_ERROR_OUT_OF_MEMORY (out of memory)`, from the driver's own tables.
pub(crate) fn driver_text(e: DriverError) -> String {
    let name = e.error_name().map(|c| c.to_string_lossy().into_owned()).unwrap_or_else(|_| format!("{:?}", e.0));
    match e.error_string() {
        Ok(s) => format!("{name} ({})", s.to_string_lossy()),
        Err(_) => name,
    }
}

/// Tags a driver call's result with what was being done: `cuMemAlloc(4096 bytes): CUDA_ERROR_...`.
pub(crate) trait Ctx<T> {
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T, Error>;
}

impl<T> Ctx<T> for Result<T, DriverError> {
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T, Error> {
        self.map_err(|e| err(format!("{}: {}", what(), driver_text(e))))
    }
}

pub(crate) fn nvrtc_text(e: NvrtcError) -> String {
    // SAFETY: nvrtcGetErrorString returns a static string for any result code; only called once
    // libnvrtc was found (an NvrtcError can only come from a call into it).
    let s = unsafe { cudarc::nvrtc::sys::nvrtcGetErrorString(e.0) };
    if s.is_null() {
        format!("{:?}", e.0)
    } else {
        // SAFETY: non-null, NUL-terminated and static per the NVRTC documentation.
        unsafe { std::ffi::CStr::from_ptr(s) }.to_string_lossy().into_owned()
    }
}

impl<T> Ctx<T> for Result<T, NvrtcError> {
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T, Error> {
        self.map_err(|e| err(format!("{}: {}", what(), nvrtc_text(e))))
    }
}
