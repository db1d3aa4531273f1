//! `dynaspa --version`: the version and the backends compiled into this binary (the cargo
//! features it was built with; `dynaspa devices` says which of them can run on this machine).

#[cfg(feature = "cuda")]
macro_rules! cuda {
    () => {
        ", cuda"
    };
}
#[cfg(not(feature = "cuda"))]
macro_rules! cuda {
    () => {
        ""
    };
}
#[cfg(feature = "opencl")]
macro_rules! opencl {
    () => {
        ", opencl"
    };
}
#[cfg(not(feature = "opencl"))]
macro_rules! opencl {
    () => {
        ""
    };
}
#[cfg(feature = "wgpu")]
macro_rules! wgpu {
    () => {
        ", wgpu"
    };
}
#[cfg(not(feature = "wgpu"))]
macro_rules! wgpu {
    () => {
        ""
    };
}

/// `0.1.0 (backends: cpu, cuda, opencl, wgpu)`; clap prefixes the command name.
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (backends: cpu", cuda!(), opencl!(), wgpu!(), ")");
