//! `ai.dynaspa.Session` on the JDK: the classes under android/java and tests/java/RunModel.java
//! compiled with javac, run by java against this build's libdynaspa_ffi.so on a fresh random
//! frame; its outputs (float[] and direct FloatBuffer paths) must be what the Rust API computes.
//! Skipped where there is no JDK, unless `DYNASPA_REQUIRE_TOOLS` names `java` (CI does).

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

fn has(tool: &str) -> bool {
    Command::new(tool).arg("-version").output().is_ok_and(|o| o.status.success())
}

fn read_floats(p: &Path) -> Vec<f32> {
    std::fs::read(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .chunks_exact(4)
        .map(|b| f32::from_ne_bytes(b.try_into().unwrap()))
        .collect()
}

#[test]
fn the_java_session_computes_what_the_rust_api_computes() {
    if !has("javac") || !has("java") {
        let required = std::env::var("DYNASPA_REQUIRE_TOOLS").is_ok_and(|v| v.split(',').any(|t| t.trim() == "java"));
        assert!(!required, "java is required (DYNASPA_REQUIRE_TOOLS) but javac/java do not run");
        println!("SKIPPED the_java_session_computes_what_the_rust_api_computes: no JDK (javac, java)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let classes = dir.path().join("classes");
    let sources: Vec<_> = std::fs::read_dir(repo_path("android/java/ai/dynaspa"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .chain([repo_path("android/tests/java/RunModel.java")])
        .collect();
    let st = Command::new("javac").args(["-Xlint:all", "-Werror", "-d"]).arg(&classes).args(&sources).status().unwrap();
    assert!(st.success(), "javac failed");

    let lib = std::env::current_exe().unwrap().parent().unwrap().join("libdynaspa_ffi.so");
    assert!(lib.exists(), "{} not built", lib.display());
    let mut rng = Rng(seed());
    let input = rng.frame(3 * 72 * 96);
    let input_file = dir.path().join("input.f32");
    std::fs::write(&input_file, input.iter().flat_map(|v| v.to_ne_bytes()).collect::<Vec<u8>>()).unwrap();
    let model = repo_path("models/dynconv_small_d30.onnx");
    let cache = dir.path().join("cache");
    let want = rust_outputs(&model, &cache, false, &[input]);

    let out = Command::new("java")
        .arg(format!("-Ddynaspa.library={}", lib.display()))
        .arg("-Xcheck:jni")
        .arg("-cp")
        .arg(&classes)
        .arg("RunModel")
        .args([&model, &cache, &input_file, dir.path()])
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("{stdout}");
    assert!(out.status.success() && stdout.contains("java: ok"), "RunModel failed:\n{stdout}\n{stderr}");
    // -Xcheck:jni warns of JNI misuse, and of native code replacing the JVM's signal handlers.
    assert!(!format!("{stdout}{stderr}").to_lowercase().contains("warning"), "-Xcheck:jni warned:\n{stdout}\n{stderr}");
    for path in ["arrays", "buffers"] {
        let got: Vec<Vec<f32>> = (0..want.len()).map(|j| read_floats(&dir.path().join(format!("{path}_{j}.f32")))).collect();
        assert_matches(&got, &want, &format!("Java, {path}"));
    }
}
