//! dynaspa for C, Java and Kotlin: the C ABI of `include/dynaspa.h` (`c_api`) and the JNI
//! glue of `ai.dynaspa.Session` (`jni`), both over one session type (`session`). Built as
//! `libdynaspa_ffi.so` (apps, the JVM) and `libdynaspa_ffi.a` (native binaries); the same
//! library serves Android and Jetson. Usage and the ABI's rules: docs/embedding.md.

#![allow(non_camel_case_types)]
// Every `extern "C"` fn takes raw pointers from C and checks them; their safety contract is the
// header's documentation, not a Rust `# Safety` section.
#![allow(clippy::missing_safety_doc)]

pub mod c_api;
pub mod error;
/// cbindgen:ignore
mod jni;
pub mod session;

pub use c_api::*;
pub use error::*;
