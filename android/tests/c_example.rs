//! examples/c/run_frames.c compiled with the system C compiler against include/dynaspa.h alone,
//! linked once to the shared and once to the static library, run on fresh random frames (.npy
//! and raw files): it prints what the Rust API computes.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where cargo put this build's libdynaspa_ffi.{so,a}: beside the test binary.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().to_path_buf();
    assert!(dir.join("libdynaspa_ffi.so").exists(), "no libdynaspa_ffi.so in {}", dir.display());
    dir
}

fn compile(out: &Path, link: &[&str]) {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", "-I"])
        .arg(repo_path("android/include"))
        .arg(repo_path("examples/c/run_frames.c"))
        .arg("-o")
        .arg(out)
        .args(link)
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler '{cc}': {e}"));
    assert!(status.success(), "{cc} failed to build run_frames.c ({link:?})");
}

/// Parses run_frames' output: per frame, per output, the values.
fn parse(stdout: &str) -> Vec<Vec<Vec<f32>>> {
    let mut frames: Vec<Vec<Vec<f32>>> = Vec::new();
    for line in stdout.lines() {
        if line.starts_with("frame ") {
            frames.push(Vec::new());
        } else if let Some(rest) = line.strip_prefix("output ") {
            let values = rest.split(' ').skip(2).map(|v| v.parse().unwrap_or_else(|_| panic!("not a float: {v}"))).collect();
            frames.last_mut().expect("an output line before any frame line").push(values);
        }
    }
    frames
}

#[test]
fn the_c_example_prints_what_the_rust_api_computes() {
    let dir = tempfile::tempdir().unwrap();
    let libs = lib_dir();
    let shared = dir.path().join("run_frames");
    compile(&shared, &["-L", libs.to_str().unwrap(), "-ldynaspa_ffi", &format!("-Wl,-rpath,{}", libs.display())]);
    let stat = dir.path().join("run_frames_static");
    compile(&stat, &[libs.join("libdynaspa_ffi.a").to_str().unwrap(), "-lm", "-lpthread", "-ldl"]);

    let mut rng = Rng(seed());
    let model = repo_path("models/dynconv_small_d30.onnx");
    let cache = dir.path().join("cache");
    let frames: Vec<Vec<f32>> = (0..3).map(|_| rng.frame(3 * 72 * 96)).collect();
    let mut files = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        let path = if i == 1 {
            let p = dir.path().join(format!("frame{i}.f32"));
            std::fs::write(&p, f.iter().flat_map(|v| v.to_ne_bytes()).collect::<Vec<u8>>()).unwrap();
            p
        } else {
            let p = dir.path().join(format!("frame{i}.npy"));
            let t = dynaspa::Tensor::from_f32(vec![1, 3, 72, 96], f.clone()).unwrap();
            std::fs::write(&p, dynaspa::io::npy::encode(&t)).unwrap();
            p
        };
        files.push(path);
    }
    let want: Vec<_> = frames.iter().map(|f| rust_outputs(&model, &cache, false, std::slice::from_ref(f))).collect();

    for exe in [&shared, &stat] {
        let out = Command::new(exe)
            .args(["-t", &THREADS.to_string(), "-n"])
            .arg(&model)
            .args(&files)
            .env("DYNASPA_CACHE_DIR", &cache)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{} failed: {}{stdout}", exe.display(), String::from_utf8_lossy(&out.stderr));
        let got = parse(&stdout);
        assert_eq!(got.len(), frames.len(), "frames printed:\n{stdout}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_matches(g, w, &format!("{} frame {i}", exe.display()));
        }
        assert!(stdout.contains("density 0.") || stdout.contains("density 1.000"), "no density printed:\n{stdout}");
    }

    // A bad frame file is reported with the library's or the example's message, not a crash.
    let short = dir.path().join("short.f32");
    std::fs::write(&short, [0u8; 12]).unwrap();
    let out = Command::new(&shared).arg(&model).arg(&short).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("20736 floats"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new(&shared).args(["-b", "tpu"]).arg(&model).arg(&files[0]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown backend 'tpu'"));
}
