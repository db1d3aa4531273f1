//! `dynaspa devices`, `--device`, and a machine whose libOpenCL is not an OpenCL library: the
//! binary still starts, lists the backend as unavailable with the reason, and runs on the CPU.

mod common;

use std::process::Command;

fn dynaspa(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dynaspa"));
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().expect("binary runs");
    (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stdout).into(), String::from_utf8_lossy(&o.stderr).into())
}

#[test]
fn devices_lists_every_backend() {
    let (code, out, err) = dynaspa(&["devices"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.lines().any(|l| l.starts_with("cpu ")), "{out}");
    let opencl: Vec<&str> = out.lines().filter(|l| l.starts_with("opencl ")).collect();
    assert!(!opencl.is_empty(), "one line per OpenCL device or one saying why there is none: {out}");
    if common::has_backend("opencl") {
        assert!(opencl[0].contains("[0]") && opencl[0].contains("compute units") && opencl[0].contains("local memory"), "{out}");
    }
    let wgpu: Vec<&str> = out.lines().filter(|l| l.starts_with("wgpu ")).collect();
    assert!(!wgpu.is_empty(), "one line per wgpu adapter or one saying why there is none: {out}");
    if common::has_backend("wgpu") {
        assert!(wgpu[0].contains("[0]") && wgpu[0].contains("local memory"), "{out}");
    } else {
        assert!(wgpu[0].contains("unavailable"), "{out}");
    }
    let (code, out, _) = dynaspa(&["devices", "--json"], &[]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let list = v.as_array().unwrap();
    assert!(list.iter().any(|d| d["backend"] == "cpu"));
    if common::has_backend("opencl") {
        let d = list.iter().find(|d| d["backend"] == "opencl").unwrap();
        assert!(d["info"]["max_work_group_size"].as_u64().unwrap() > 0, "{d}");
        assert!(d["info"]["local_mem_bytes"].as_u64().unwrap() > 0, "{d}");
    }
    if let Some(d) = list.iter().find(|d| d["backend"] == "wgpu" && d["info"].is_object()) {
        // Opened with WebGPU's default limits, whatever the adapter could do.
        assert_eq!(d["info"]["max_work_group_size"].as_u64(), Some(256), "{d}");
        assert_eq!(d["info"]["local_mem_bytes"].as_u64(), Some(16384), "{d}");
    }
}

#[test]
fn device_selection_by_flag_and_environment() {
    if !common::backend_or_skip("opencl") {
        return;
    }
    let model = common::repo_path("models/cnn_small.onnx");
    let img = common::repo_path("models/frames/photos/astronaut.png");
    let (m, i) = (model.to_str().unwrap(), img.to_str().unwrap());
    let (code, out, err) = dynaspa(&["run", m, "--input", i, "--backend", "opencl", "--device", "0"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("backend opencl"), "{out}");
    let (code, _, err) = dynaspa(&["run", m, "--input", i, "--backend", "opencl", "--device", "99"], &[]);
    assert_eq!(code, 1);
    assert!(err.contains("no OpenCL device matches '99'"), "{err}");
    let (code, _, err) = dynaspa(&["run", m, "--input", i, "--backend", "opencl"], &[("DYNASPA_OPENCL_DEVICE", "no such device")]);
    assert_eq!(code, 1);
    assert!(err.contains("'no such device'"), "{err}");
}

/// An empty shared library named libOpenCL.so.1 first on the library path stands for a broken
/// or missing OpenCL installation.
#[test]
fn a_machine_without_opencl_still_runs_on_the_cpu() {
    let dir = std::env::temp_dir().join(format!("dynaspa-nocl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("empty.c");
    std::fs::write(&src, "int dynaspa_not_opencl(void) { return 0; }\n").unwrap();
    let lib = dir.join("libOpenCL.so.1");
    let built = Command::new("cc").args(["-shared", "-fPIC", "-o"]).arg(&lib).arg(&src).status();
    if !built.is_ok_and(|s| s.success()) {
        eprintln!("skipped: no C compiler to build a stand-in library");
        return;
    }
    let env = [("LD_LIBRARY_PATH", dir.to_str().unwrap()), ("OPENCL_DYLIB_PATH", lib.to_str().unwrap())];
    let (code, out, err) = dynaspa(&["devices"], &env);
    assert_eq!(code, 0, "{err}");
    let line = out.lines().find(|l| l.starts_with("opencl ")).unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains("unavailable") && line.contains("not an OpenCL ICD loader"), "{line}");
    let model = common::repo_path("models/cnn_small.onnx");
    let img = common::repo_path("models/frames/photos/astronaut.png");
    let (m, i) = (model.to_str().unwrap(), img.to_str().unwrap());
    let (code, _, err) = dynaspa(&["run", m, "--input", i, "--backend", "opencl"], &env);
    assert_eq!(code, 1, "{err}");
    assert!(err.starts_with("error: backend opencl is not available:") && err.contains("not an OpenCL ICD loader"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let (code, out, err) = dynaspa(&["run", m, "--input", i, "--backend", "cpu"], &env);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("backend cpu"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
