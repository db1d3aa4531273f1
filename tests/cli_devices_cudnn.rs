//! `dynaspa devices` on cuDNN, on any machine: where libcudnn is missing, old or incomplete the
//! CUDA entry says so (and nothing panics); a library found only by its directory gets its
//! sub-libraries opened by full path, their dependencies fetched from sibling wheel
//! directories. cuDNN installs are imitated with stub libraries built here (C compiler
//! needed; skipped without one) and named through DYNASPA_CUDNN_LIB.

use std::path::{Path, PathBuf};
use std::process::Command;

fn cuda_line(env: &[(&str, &str)]) -> String {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dynaspa"));
    c.arg("devices");
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().expect("binary runs");
    let (out, err) = (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned());
    assert!(!out.contains("panicked") && !err.contains("panicked"), "panic:\n{out}\n{err}");
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    out.lines().filter(|l| l.split_whitespace().next() == Some("cuda")).collect::<Vec<_>>().join("\n")
}

/// Builds a shared library `name` (soname the same) in `dir` from `source`, linked with `libs`
/// (`-L dir -l:file` pairs); None without a C compiler.
fn build(dir: &Path, name: &str, source: &str, libs: &[(&Path, &str)]) -> Option<PathBuf> {
    std::fs::create_dir_all(dir).unwrap();
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, source).unwrap();
    let out = dir.join(name);
    let mut cmd = Command::new("cc");
    cmd.args(["-shared", "-fPIC", "-o"]).arg(&out).arg(&c).arg(format!("-Wl,-soname,{name}"));
    for (d, l) in libs {
        cmd.arg("-L").arg(d).arg(format!("-l:{l}"));
    }
    match cmd.output() {
        Ok(o) if o.status.success() => {
            std::fs::remove_file(&c).unwrap();
            Some(out)
        }
        Ok(o) => panic!("cc failed: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => {
            eprintln!("skipped: no C compiler ({e})");
            None
        }
    }
}

/// A libcudnn exporting every function the backend checks for, reporting `version`, minus `omit`.
fn stub_cudnn(version: usize, omit: &[&str]) -> String {
    let mut s = format!("#include <stddef.h>\nsize_t cudnnGetVersion(void) {{ return {version}; }}\n");
    s.push_str("const char *cudnnGetErrorString(int s) { (void)s; return \"stub\"; }\n");
    for f in dynaspa::backends::cuda::cudnn_lib::SYMBOLS {
        if !["cudnnGetVersion", "cudnnGetErrorString"].contains(f) && !omit.contains(f) {
            s.push_str(&format!("int {f}(void) {{ return 0; }}\n"));
        }
    }
    s
}

#[test]
fn cudnn_missing_old_or_incomplete_is_a_reason_not_a_crash() {
    if !cfg!(feature = "cuda") || !cfg!(target_os = "linux") {
        return;
    }
    let line = cuda_line(&[("DYNASPA_CUDNN_LIB", "/nonexistent")]);
    assert!(line.contains("cuDNN unavailable: DYNASPA_CUDNN_LIB=/nonexistent: no such file or directory"), "{line}");
    let d = tempfile::tempdir().unwrap();
    let empty = d.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let line = cuda_line(&[("DYNASPA_CUDNN_LIB", empty.to_str().unwrap())]);
    assert!(line.contains("holds no libcudnn.so"), "{line}");
    let Some(old) = build(&d.path().join("old"), "libcudnn.so.8", &stub_cudnn(8907, &[]), &[]) else { return };
    let line = cuda_line(&[("DYNASPA_CUDNN_LIB", old.to_str().unwrap())]);
    assert!(line.contains("is cuDNN 8.9.7; dynaspa needs cuDNN 9"), "{line}");
    let partial =
        build(&d.path().join("partial"), "libcudnn.so.9", &stub_cudnn(90100, &["cudnnConvolutionBiasActivationForward"]), &[]).unwrap();
    let line = cuda_line(&[("DYNASPA_CUDNN_LIB", partial.to_str().unwrap())]);
    assert!(line.contains("lacks cudnnConvolutionBiasActivationForward"), "{line}");
}

#[test]
fn sub_libraries_and_their_dependencies_open_from_the_wheel_layout() {
    if !cfg!(feature = "cuda") || !cfg!(target_os = "linux") {
        return;
    }
    // site-packages/nvidia/{cudnn,dep}/lib as NVIDIA's pip wheels lay them out: libcudnn_cnn
    // needs libcudnn_ops (beside it) and libdynaspa_dep (another wheel); libcudnn_adv needs a
    // library nowhere to be found.
    let d = tempfile::tempdir().unwrap();
    let lib = d.path().join("site-packages/nvidia/cudnn/lib");
    let dep = d.path().join("site-packages/nvidia/dep/lib");
    let Some(_) = build(&dep, "libdynaspa_dep.so.1", "int dynaspa_dep(void) { return 1; }\n", &[]) else { return };
    build(&d.path().join("elsewhere"), "libdynaspa_nowhere.so.1", "int dynaspa_nowhere(void) { return 2; }\n", &[]).unwrap();
    build(&lib, "libcudnn_ops.so.9", "int cudnn_ops_stub(void) { return 3; }\n", &[]).unwrap();
    let cnn = "int dynaspa_dep(void); int cudnn_cnn_stub(void) { return dynaspa_dep(); }\n";
    build(&lib, "libcudnn_cnn.so.9", cnn, &[(&lib, "libcudnn_ops.so.9"), (&dep, "libdynaspa_dep.so.1")]).unwrap();
    let adv = "int dynaspa_nowhere(void); int cudnn_adv_stub(void) { return dynaspa_nowhere(); }\n";
    build(&lib, "libcudnn_adv.so.9", adv, &[(&d.path().join("elsewhere"), "libdynaspa_nowhere.so.1")]).unwrap();
    build(&lib, "libcudnn.so.9", &stub_cudnn(91302, &[]), &[]).unwrap();
    let line = cuda_line(&[("DYNASPA_CUDNN_LIB", lib.to_str().unwrap())]);
    assert!(line.contains(&format!("cuDNN 9.13.2 ({}/libcudnn.so.9; 2 sub-libraries preloaded", lib.display())), "{line}");
    assert!(line.contains("not loaded: libcudnn_adv.so.9") && line.contains("libdynaspa_nowhere.so.1"), "{line}");
    let mut c = Command::new(env!("CARGO_BIN_EXE_dynaspa"));
    let o = c.args(["devices", "--json"]).env("DYNASPA_CUDNN_LIB", &lib).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let cuda = v.as_array().unwrap().iter().find(|d| d["backend"] == "cuda").unwrap();
    assert!(cuda["libraries"].as_str().unwrap().starts_with("cuDNN 9.13.2"), "{cuda}");
}
