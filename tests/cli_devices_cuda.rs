//! `dynaspa devices` and `--backend cuda` on any machine (the CUDA side; cli_devices.rs has
//! the OpenCL one): listing exits 0 whatever is missing, asking for an unusable backend is a
//! clear error (exit 1), nothing panics. Broken CUDA installs are imitated with stub libraries
//! built here (a libcuda lacking functions, one that fails cuInit, one with no devices), loaded
//! through DYNASPA_CUDA_LIB / DYNASPA_NVRTC_LIB.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn dynaspa(args: &[&str], env: &[(&str, &Path)]) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dynaspa"));
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().expect("binary runs");
    (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn no_panic(out: &str, err: &str) {
    assert!(!out.contains("panicked") && !err.contains("panicked"), "panic:\n{out}\n{err}");
}

fn cuda_built() -> bool {
    cfg!(feature = "cuda")
}

/// The `dynaspa devices` lines of one backend.
fn lines_of<'a>(out: &'a str, backend: &str) -> Vec<&'a str> {
    out.lines().filter(|l| l.split_whitespace().next() == Some(backend)).collect()
}

#[test]
fn devices_lists_every_backend_and_exits_0() {
    let (code, out, err) = dynaspa(&["devices"], &[]);
    no_panic(&out, &err);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(lines_of(&out, "cpu").len(), 1, "{out}");
    let cuda = lines_of(&out, "cuda");
    assert!(!cuda.is_empty(), "no cuda line: {out}");
    for l in &cuda {
        // A device with its number and limits, or unavailable with a reason worth reading.
        let device = l.contains(" [") && l.contains("compute units") && l.contains("driver CUDA ");
        let reason = l.split_once("unavailable: ").is_some_and(|(_, why)| why.len() > 30);
        assert!(device || reason, "{l}");
    }
    let (code, json, err) = dynaspa(&["devices", "--json"], &[]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let backends: Vec<&str> = v.as_array().unwrap().iter().map(|b| b["backend"].as_str().unwrap()).collect();
    assert!(backends.contains(&"cpu") && backends.contains(&"cuda"), "{backends:?}");
}

#[test]
fn backend_cuda_is_a_clear_error_where_it_cannot_run() {
    let model = common::repo_path("models/cnn_small.onnx");
    let input = common::repo_path("models/frames/photos/astronaut.png");
    let run = |extra: &[&str]| {
        let mut args = vec!["run", model.to_str().unwrap(), "--input", input.to_str().unwrap(), "--backend", "cuda"];
        args.extend_from_slice(extra);
        dynaspa(&args, &[])
    };
    if common::has_backend("cuda") {
        // A GPU machine: only a device that is not there is an error.
        let (code, out, err) = run(&["--device", "99"]);
        no_panic(&out, &err);
        assert_eq!((code, err.contains("no CUDA device 99")), (1, true), "{err}");
        return;
    }
    for extra in [&[][..], &["--device", "3"][..], &["--device", "h100"][..]] {
        let (code, out, err) = run(extra);
        no_panic(&out, &err);
        assert_eq!(code, 1, "{extra:?}: {out}{err}");
        let clear = ["backend cuda is not available: ", "no CUDA support"];
        assert!(clear.iter().any(|c| err.contains(c)), "{extra:?}: {err}");
    }
}

/// Stub of the driver API. `MODE` picks the failure: 0 cuInit fails with
/// CUDA_ERROR_INSUFFICIENT_DRIVER, 1 it reports no device, 2 it succeeds with zero devices.
const FAKE_CUDA: &str = r#"
static const char *NAME = "CUDA_ERROR_INSUFFICIENT_DRIVER";
static const char *TEXT = "CUDA driver version is insufficient for CUDA runtime version";
int cuInit(unsigned f) { (void)f; return MODE == 0 ? 35 : MODE == 1 ? 100 : 0; }
int cuDeviceGetCount(int *n) { *n = 0; return 0; }
int cuGetErrorName(int e, const char **s) { (void)e; *s = NAME; return 0; }
int cuGetErrorString(int e, const char **s) { (void)e; *s = TEXT; return 0; }
#define STUB(f) int f(void) { return 999; }
STUB(cuDriverGetVersion) STUB(cuDeviceGet) STUB(cuDeviceGetName) STUB(cuDeviceGetAttribute)
STUB(cuDeviceTotalMem_v2) STUB(cuDevicePrimaryCtxRetain) STUB(cuDevicePrimaryCtxRelease_v2)
STUB(cuCtxSetCurrent) STUB(cuStreamCreate) STUB(cuStreamDestroy_v2) STUB(cuStreamSynchronize)
STUB(cuStreamWaitEvent) STUB(cuEventCreate) STUB(cuEventRecord) STUB(cuEventDestroy_v2) STUB(cuEventSynchronize)
STUB(cuMemAlloc_v2) STUB(cuMemFree_v2) STUB(cuMemcpyHtoDAsync_v2) STUB(cuMemcpyDtoHAsync_v2)
STUB(cuMemsetD8Async) STUB(cuMemsetD32Async) STUB(cuModuleLoadData) STUB(cuModuleGetFunction)
STUB(cuModuleUnload) STUB(cuFuncGetAttribute) STUB(cuFuncSetAttribute) STUB(cuLaunchKernel) STUB(cuMemHostAlloc) STUB(cuMemFreeHost)
"#;

/// A libcuda from before most of the API: cudarc would panic on the first missing function.
const OLD_CUDA: &str = "int cuInit(unsigned f) { (void)f; return 0; }\n";

const FAKE_NVRTC: &str = r#"
#define STUB(f) int f(void) { return 0; }
STUB(nvrtcVersion) STUB(nvrtcCreateProgram) STUB(nvrtcCompileProgram) STUB(nvrtcDestroyProgram)
STUB(nvrtcGetProgramLogSize) STUB(nvrtcGetProgramLog) STUB(nvrtcGetCUBINSize) STUB(nvrtcGetCUBIN)
STUB(nvrtcGetErrorString)
"#;

/// Builds `source` as a shared library with `soname`; None where there is no C compiler.
fn build_lib(dir: &Path, name: &str, soname: &str, source: &str, defines: &[&str]) -> Option<PathBuf> {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, source).unwrap();
    let out = dir.join(name);
    let mut cmd = Command::new("cc");
    cmd.args(["-shared", "-fPIC", "-o"]).arg(&out).arg(&c).arg(format!("-Wl,-soname,{soname}"));
    for d in defines {
        cmd.arg(format!("-D{d}"));
    }
    match cmd.output() {
        Ok(o) if o.status.success() => Some(out),
        Ok(o) => panic!("cc failed: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => {
            eprintln!("skipped: no C compiler ({e})");
            None
        }
    }
}

#[test]
fn broken_cuda_installs_are_reported_not_fatal() {
    if !cuda_built() || !cfg!(target_os = "linux") {
        return;
    }
    // Where a real libcuda is on the linker path it is found first (by the unversioned name
    // cudarc asks for) and the stubs cannot stand in for it; the check below then says so.
    let d = tempfile::tempdir().unwrap();
    let Some(nvrtc) = build_lib(d.path(), "libnvrtc.so.13", "libnvrtc.so.13", FAKE_NVRTC, &[]) else { return };
    let cases = [
        (OLD_CUDA, "MODE=0", "libcuda lacks cuDriverGetVersion"),
        (
            FAKE_CUDA,
            "MODE=0",
            "CUDA driver initialisation failed: cuInit: CUDA_ERROR_INSUFFICIENT_DRIVER (CUDA driver version is insufficient",
        ),
        (FAKE_CUDA, "MODE=1", "the CUDA driver reports no devices"),
        (FAKE_CUDA, "MODE=2", "the CUDA driver reports no devices"),
    ];
    for (i, (src, mode, want)) in cases.iter().enumerate() {
        let sub = d.path().join(format!("case{i}"));
        std::fs::create_dir_all(&sub).unwrap();
        let lib = build_lib(&sub, "libcuda.so.1", "libcuda.so.1", src, &[mode]).unwrap();
        let env = [("DYNASPA_CUDA_LIB", lib.as_path()), ("DYNASPA_NVRTC_LIB", nvrtc.as_path())];
        let (code, out, err) = dynaspa(&["devices"], &env);
        no_panic(&out, &err);
        assert_eq!(code, 0, "{out}{err}");
        let line = lines_of(&out, "cuda").join("\n");
        if line.contains("would use another") {
            eprintln!("skipped case {i}: a real libcuda shadows the stub ({line})");
            continue;
        }
        assert!(line.contains(want), "case {i}: expected '{want}' in:\n{line}");
        let model = common::repo_path("models/cnn_small.onnx");
        let (code, out, err) = dynaspa(&["run", model.to_str().unwrap(), "--input", "x.npy", "--backend", "cuda"], &env);
        no_panic(&out, &err);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains(want), "case {i}: run error lacks '{want}': {err}");
    }
    // A library path that is not a library, and a directory without one.
    let (code, out, err) = dynaspa(&["devices"], &[("DYNASPA_CUDA_LIB", d.path().join("case0/libcuda.so.1.c").as_path())]);
    no_panic(&out, &err);
    assert_eq!(code, 0);
    assert!(lines_of(&out, "cuda")[0].contains("unavailable: no usable CUDA driver: DYNASPA_CUDA_LIB="), "{out}");
    let empty = d.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let (_, out, _) = dynaspa(&["devices"], &[("DYNASPA_NVRTC_LIB", empty.as_path())]);
    // The driver is checked first: where it is missing, that is the reason given.
    assert!(out.contains("holds no libnvrtc.so") || out.contains("no usable CUDA driver"), "{out}");
}
