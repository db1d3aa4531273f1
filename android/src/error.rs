//! Status codes, the per-thread last error, and `guard`, which every entry point runs its body
//! in: an error becomes a negative code with its message kept for `dynaspa_last_error`, and a
//! panic is caught there, so none unwinds into C or the JVM.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Success.
pub const DYNASPA_OK: c_int = 0;
/// A pointer argument was NULL.
pub const DYNASPA_ERR_NULL: c_int = -1;
/// An argument was wrong: an index out of range, a length or capacity that does not match, a
/// string that is not UTF-8, an option out of range.
pub const DYNASPA_ERR_ARGUMENT: c_int = -2;
/// A file could not be read (the model, a profile).
pub const DYNASPA_ERR_IO: c_int = -3;
/// The model is not valid ONNX, or uses what dynaspa does not support.
pub const DYNASPA_ERR_MODEL: c_int = -4;
/// The backend is unknown, or not available on this machine.
pub const DYNASPA_ERR_BACKEND: c_int = -5;
/// Running the model failed (or the session is unusable after an internal error).
pub const DYNASPA_ERR_RUN: c_int = -6;
/// An internal error (a bug in dynaspa): the call was abandoned and its session is unusable.
pub const DYNASPA_ERR_INTERNAL: c_int = -7;

/// A failed call: its status code and its message.
#[derive(Debug)]
pub struct Failure {
    pub code: c_int,
    pub msg: String,
}

impl Failure {
    pub fn new(code: c_int, msg: impl Into<String>) -> Failure {
        Failure { code, msg: msg.into() }
    }
    pub fn null(what: &str) -> Failure {
        Failure::new(DYNASPA_ERR_NULL, format!("{what} is NULL"))
    }
    pub fn argument(msg: impl Into<String>) -> Failure {
        Failure::new(DYNASPA_ERR_ARGUMENT, msg)
    }
}

impl From<dynaspa::Error> for Failure {
    fn from(e: dynaspa::Error) -> Failure {
        use dynaspa::Error as E;
        let code = match &e {
            E::Io { .. } => DYNASPA_ERR_IO,
            E::Decode(_) | E::InvalidModel(_) | E::Unsupported(_) | E::Node { .. } => DYNASPA_ERR_MODEL,
            E::Backend { .. } | E::Unavailable { .. } => DYNASPA_ERR_BACKEND,
            E::Input { .. } | E::Profile { .. } => DYNASPA_ERR_ARGUMENT,
            E::Other(_) => DYNASPA_ERR_RUN,
        };
        Failure::new(code, e.to_string())
    }
}

pub type Status<T> = Result<T, Failure>;

thread_local! {
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

/// Records `msg` as this thread's last error.
pub fn set_last_error(msg: &str) {
    // An interior NUL would cut the message short in C; it cannot come from dynaspa's own
    // messages, but a path given by the caller could hold one only in theory (C strings end there).
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = Some(c));
}

/// This thread's last error message, or NULL when no call on this thread has failed. Valid
/// until the next failing call on this thread.
pub fn last_error_ptr() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ref().map_or(std::ptr::null(), |c| c.as_ptr()))
}

/// The message of a caught panic.
pub fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

/// Runs `f`: `DYNASPA_OK`, or its failure's code with the message recorded for this thread.
/// A panic becomes `DYNASPA_ERR_INTERNAL` naming `entry`.
pub fn guard(entry: &str, f: impl FnOnce() -> Status<()>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => DYNASPA_OK,
        Ok(Err(fail)) => {
            set_last_error(&fail.msg);
            fail.code
        }
        Err(p) => {
            set_last_error(&format!("{entry}: internal error (please report it): {}", panic_message(p.as_ref())));
            DYNASPA_ERR_INTERNAL
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_internal_error_with_its_message() {
        let rc = guard("dynaspa_test_entry", || panic!("index 7 out of range"));
        assert_eq!(rc, DYNASPA_ERR_INTERNAL);
        let msg = unsafe { std::ffi::CStr::from_ptr(last_error_ptr()) }.to_string_lossy().into_owned();
        assert!(msg.contains("dynaspa_test_entry") && msg.contains("index 7 out of range"), "{msg}");
    }

    #[test]
    fn a_failure_keeps_its_code_and_message() {
        let rc = guard("x", || Err(Failure::argument("threads is -3")));
        assert_eq!(rc, DYNASPA_ERR_ARGUMENT);
        let msg = unsafe { std::ffi::CStr::from_ptr(last_error_ptr()) }.to_string_lossy().into_owned();
        assert_eq!(msg, "threads is -3");
        assert_eq!(guard("x", || Ok(())), DYNASPA_OK);
    }
}
