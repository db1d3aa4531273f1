//! Profiles as `run`, `bench` and `profile` choose them: the shipped profile for this device and
//! model by default (from the `profiles/` tree beside the model), `--profile FILE` and
//! `--no-profile`, and profiles refused because they were made for another device, in an older
//! format or for kernels this build no longer has. Each case prints its choice on one line.

mod common;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

const STEM: &str = "dynconv_small_d30";
/// The CPU profile shipped for this model (another machine's; its PolyKernels fit the model).
const SHIPPED: &str = "profiles/cpu-intel-xeon-avx512-t2/dynconv_small_d30.json";

fn dynaspa(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_dynaspa")).args(args).output().expect("binary runs");
    (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// This machine's CPU as a profile names it, at 2 threads (the tests run with `--threads 2`).
fn this_cpu() -> Value {
    serde_json::to_value(dynaspa::backends::cpu::cpu_device_id(2)).unwrap()
}

/// The shipped profile with its device replaced and every op's PolyKernel made of the dense
/// member and a 2x1 member that always wins, so a run that uses it shows `tiles2x1` (which
/// calibration never makes: its members are 1x1, 2x8 and 4x4).
fn profile_for(device: Value) -> Value {
    let mut p: Value = serde_json::from_slice(&std::fs::read(common::repo_path(SHIPPED)).unwrap()).unwrap();
    p["device"] = device;
    for op in p["ops"].as_array_mut().unwrap() {
        op["poly"]["members"] = json!([
            { "schedule": { "name": "dense", "granularity": null, "knobs": {} }, "table": { "points": [[0, 1000.0]] } },
            { "schedule": { "name": "tiles2x1", "granularity": { "h": 2, "w": 1 }, "knobs": {} }, "table": { "points": [[1, 0.001]] } }
        ]);
    }
    p
}

/// A checkout-like tree: `models/<STEM>.onnx` and `profiles/<dir>/<STEM>.json` for each
/// (dir, profile).
fn tree(profiles: &[(&str, &Value)]) -> (tempfile::TempDir, String) {
    let t = tempfile::tempdir().unwrap();
    let model = t.path().join("models").join(format!("{STEM}.onnx"));
    std::fs::create_dir_all(model.parent().unwrap()).unwrap();
    std::fs::copy(common::repo_path(&format!("models/{STEM}.onnx")), &model).unwrap();
    for (dir, p) in profiles {
        write(&t.path().join("profiles").join(dir).join(format!("{STEM}.json")), p);
    }
    (t, model.display().to_string())
}

fn write(path: &Path, p: &Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_string_pretty(p).unwrap()).unwrap();
}

fn frames() -> String {
    common::repo_path("models/frames/vtest").display().to_string()
}

/// The `profile: ...` line.
fn choice(stdout: &str) -> &str {
    stdout.lines().find(|l| l.starts_with("profile: ")).unwrap_or_else(|| panic!("no profile line: {stdout}"))
}

/// The kernels of every `frame` line of `run --frames`.
fn kernels(stdout: &str) -> Vec<&str> {
    stdout.lines().filter(|l| l.starts_with("frame ")).map(|l| l.split("kernels ").nth(1).unwrap_or_else(|| panic!("{l}"))).collect()
}

fn run_args<'a>(model: &'a str, frames: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["run", model, "--frames", frames, "--max-frames", "2", "--threads", "2", "--backend", "cpu"];
    v.extend_from_slice(extra);
    v
}

#[test]
fn the_shipped_profile_for_this_device_is_used_by_default() {
    let other_cpu = json!({ "backend": "cpu", "name": "Another CPU", "fingerprint": "Another CPU|avx512|t2" });
    let (ours, theirs) = (profile_for(this_cpu()), profile_for(other_cpu));
    let (t, model) = tree(&[("another-cpu", &theirs), ("this-cpu", &ours)]);
    let frames = frames();
    let ours_path = t.path().join("profiles/this-cpu").join(format!("{STEM}.json"));

    let (code, stdout, stderr) = dynaspa(&run_args(&model, &frames, &[]));
    assert_eq!(code, 0, "{stderr}");
    let line = choice(&stdout);
    assert!(line.contains(&ours_path.display().to_string()) && line.contains("shipped") && line.contains("12 of 12 sparse ops"), "{line}");
    let k = kernels(&stdout);
    assert_eq!(k.len(), 2, "{stdout}");
    assert!(k.iter().all(|k| k.starts_with("tiles2x1 ×12")), "the profile's members run: {k:?}");

    // bench and profile pick it the same way.
    let (code, stdout, stderr) =
        dynaspa(&["bench", &model, "--frames", &frames, "--max-frames", "2", "--rounds", "1", "--threads", "2", "--backend", "cpu"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(choice(&stdout).contains(&ours_path.display().to_string()), "{stdout}");
    let (code, stdout, stderr) =
        dynaspa(&["profile", &model, "--frames", &frames, "--max-frames", "2", "--warmup", "0", "--threads", "2", "--backend", "cpu"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(choice(&stdout).contains(&ours_path.display().to_string()), "{stdout}");
    assert!(stdout.contains("tiles2x1"), "{stdout}");

    // --no-profile calibrates; --profile names another file of this device.
    let (code, stdout, stderr) = dynaspa(&run_args(&model, &frames, &["--no-profile"]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(choice(&stdout), "profile: none (calibration asked for); calibrating");
    assert!(kernels(&stdout).iter().all(|k| !k.contains("tiles2x1")), "{stdout}");
    let copy = t.path().join("mine.json");
    std::fs::copy(&ours_path, &copy).unwrap();
    let (code, stdout, stderr) = dynaspa(&run_args(&model, &frames, &["--profile", copy.to_str().unwrap()]));
    assert_eq!(code, 0, "{stderr}");
    assert!(choice(&stdout).contains("mine.json (named"), "{stdout}");

    // Without this device's profile: none, saying whose there are, and the run calibrates.
    std::fs::remove_file(&ours_path).unwrap();
    let (code, stdout, stderr) = dynaspa(&run_args(&model, &frames, &[]));
    assert_eq!(code, 0, "{stderr}");
    let line = choice(&stdout);
    assert!(
        line.contains("none of the 1 profiles for 'dynconv_small_d30'")
            && line.contains("was made for this device")
            && line.ends_with("calibrating"),
        "{line}"
    );
    // A model with no profiles/ folder above it.
    let lone = tempfile::tempdir().unwrap();
    let lone_model = lone.path().join(format!("{STEM}.onnx"));
    std::fs::copy(&model, &lone_model).unwrap();
    let (code, stdout, stderr) = dynaspa(&run_args(lone_model.to_str().unwrap(), &frames, &[]));
    assert_eq!(code, 0, "{stderr}");
    assert!(choice(&stdout).contains("no profiles/ folder beside the model or above it"), "{stdout}");
}

#[test]
fn a_profile_for_another_device_is_refused_naming_both() {
    let other_cpu = json!({ "backend": "cpu", "name": "Another CPU", "fingerprint": "Another CPU|avx512|t2" });
    let (t, model) = tree(&[]);
    let frames = frames();
    let theirs: PathBuf = t.path().join("theirs.json");
    write(&theirs, &profile_for(other_cpu));
    let (code, stdout, stderr) = dynaspa(&run_args(&model, &frames, &["--profile", theirs.to_str().unwrap()]));
    assert_eq!(code, 1, "{stdout}");
    assert!(stderr.contains("theirs.json") && stderr.contains("'Another CPU'") && stderr.contains("this device is"), "{stderr}");
    assert!(!stdout.contains("frame "), "nothing ran: {stdout}");
    // Another backend: the OpenCL profile shipped for PoCL, on the CPU backend.
    let pocl = common::repo_path("profiles/opencl-pocl-xeon-avx512/dynconv_small_d30.json");
    let (code, _, stderr) = dynaspa(&run_args(&model, &frames, &["--profile", pocl.to_str().unwrap()]));
    assert_eq!(code, 1);
    assert!(stderr.contains("made for backend 'opencl', not 'cpu'"), "{stderr}");
}

#[test]
fn a_profile_for_older_kernels_is_refused_naming_what_changed() {
    let frames = frames();
    // A member named as older kernels named it: the shipped profile is refused, the run
    // calibrates, and the line says what changed.
    let mut renamed = profile_for(this_cpu());
    renamed["ops"][3]["poly"]["members"][1]["schedule"]["name"] = json!("gather2x1");
    let node = renamed["ops"][3]["node"].as_str().unwrap().to_string();
    let (t, model) = tree(&[("this-cpu", &renamed)]);
    let (code, stdout, stderr) = dynaspa(&run_args(&model, &frames, &[]));
    assert_eq!(code, 0, "{stderr}");
    let line = choice(&stdout);
    assert!(line.contains("refused") && line.contains("kernels this build no longer has"), "{line}");
    assert!(
        line.contains(&format!("op '{node}'")) && line.contains("member 'gather2x1'") && line.contains("names that schedule 'tiles2x1'"),
        "{line}"
    );
    assert!(line.ends_with("calibrating"), "{line}");
    assert!(kernels(&stdout).iter().all(|k| !k.contains("2x1")), "nothing of the refused profile runs: {stdout}");

    // Named with --profile, the same file is an error.
    let path = t.path().join("profiles/this-cpu").join(format!("{STEM}.json"));
    let (code, _, stderr) = dynaspa(&run_args(&model, &frames, &["--profile", path.to_str().unwrap()]));
    assert_eq!(code, 1);
    assert!(stderr.contains("member 'gather2x1'") && stderr.contains("re-tune"), "{stderr}");

    // A knob the CPU kernels do not have.
    let mut knob = profile_for(this_cpu());
    knob["ops"][0]["poly"]["members"][1]["schedule"]["knobs"] = json!({ "UNROLL": 4 });
    write(&path, &knob);
    let (code, _, stderr) = dynaspa(&run_args(&model, &frames, &["--profile", path.to_str().unwrap()]));
    assert_eq!(code, 1);
    assert!(stderr.contains("knob 'UNROLL'"), "{stderr}");

    // An older format version: refused by the shipped search too, naming both versions.
    let mut old = profile_for(this_cpu());
    old["version"] = json!(0);
    write(&path, &old);
    let (code, stdout, stderr) = dynaspa(&run_args(&model, &frames, &[]));
    assert_eq!(code, 0, "{stderr}");
    let line = choice(&stdout);
    assert!(line.contains("refused") && line.contains("schema version 0; this build reads version 1"), "{line}");
    let (code, _, stderr) = dynaspa(&run_args(&model, &frames, &["--profile", path.to_str().unwrap()]));
    assert_eq!(code, 1);
    assert!(stderr.contains("schema version 0"), "{stderr}");

    // --profile and --no-profile together: a usage error.
    let (code, _, _) = dynaspa(&run_args(&model, &frames, &["--no-profile", "--profile", path.to_str().unwrap()]));
    assert_eq!(code, 2);
}

/// Every profile shipped under `profiles/` reads, names only schedules this build's kernels
/// run, and has a PolyKernel for every sparse op of its model (a profile left behind by a
/// kernel or model change fails here, not on the device that would have used it).
#[test]
fn every_shipped_profile_fits_this_build_and_its_model() {
    let root = common::repo_path("profiles");
    let mut checked = 0;
    for dir in std::fs::read_dir(&root).unwrap() {
        let dir = dir.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&dir).unwrap() {
            let path = f.unwrap().path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let what = path.display().to_string();
            let p = dynaspa::profiles::read(&path).unwrap_or_else(|e| panic!("{what}: {e}"));
            dynaspa::profiles::check_kernels(&p).unwrap_or_else(|e| panic!("{what}: {e}"));
            let model = common::repo_path(&format!("models/{}.onnx", path.file_stem().unwrap().to_string_lossy()));
            let g = dynaspa::Session::builder().load(&model).unwrap_or_else(|e| panic!("{what}: model {}: {e}", model.display()));
            let (covered, sparse) = dynaspa::profiles::coverage(&p, &g);
            assert!(sparse > 0 && covered > 0, "{what}: PolyKernels for {covered} of the model's {sparse} sparse ops");
            checked += 1;
        }
    }
    assert!(checked >= 20, "{checked} shipped profiles found under {}", root.display());
}
