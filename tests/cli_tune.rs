//! `dynaspa tune` end to end on the CPU: a profile that loads and drives `run`/`bench`, a
//! resumed tune that replays its log instead of measuring, predicted profiles, bad input.

mod common;

use dynaspa::runtime::profile::Profile;
use std::process::Command;

fn dynaspa(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_dynaspa")).args(args).output().expect("binary runs");
    (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn measurements_taken(stdout: &str) -> usize {
    let i = stdout.find(" measurements taken").expect("summary line");
    stdout[..i].rsplit(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
}

#[test]
fn tune_writes_a_profile_that_resumes_and_drives_run_and_bench() {
    let d = tempfile::tempdir().unwrap();
    let model = common::repo_path("models/dynconv_small_d30.onnx").display().to_string();
    let masks = common::repo_path("models/masks").display().to_string();
    let out = d.path().join("cpu/dynconv_small_d30.json");
    let args = ["tune", &model, "--masks", &masks, "--trials", "6", "--threads", "2", "-o", out.to_str().unwrap()];
    let (code, stdout, stderr) = dynaspa(&args);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("speedup") && stdout.contains("/layer1.0/conv2/Conv"), "no summary table: {stdout}");
    let first = measurements_taken(&stdout);
    assert!(first > 100, "{stdout}");
    let p = Profile::load(&out).unwrap();
    assert_eq!(p.ops.len(), 12);
    assert!(!p.predicted && p.masks.tuned_on == 150 && p.masks.source.ends_with("dynconv_small_d30.dsm"));
    assert!(p.ops.iter().all(|o| o.poly.members().len() <= 6 && o.poly.members().len() >= 2), "every conv gets a sparse member");
    // The same command again replays the log: nothing is measured.
    let log = out.with_extension("log.jsonl");
    let (code, stdout, stderr) = dynaspa(&args);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("resuming"), "{stderr}");
    assert_eq!(measurements_taken(&stdout), 0, "{stdout}");
    assert_eq!(Profile::load(&out).unwrap().ops, p.ops, "a replayed tune makes the same PolyKernels");
    // Interrupted half way: the log's first half is kept, the rest is measured again.
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    std::fs::write(&log, lines[..lines.len() / 2].join("\n") + "\n{\"op\":\"/lay").unwrap();
    let (code, stdout, stderr) = dynaspa(&args);
    assert_eq!(code, 0, "{stderr}");
    let again = measurements_taken(&stdout);
    assert!(again > 0 && again < first, "resumed tune measured {again} of {first}");

    // run and bench take the profile; bench reports the speedup.
    let photo = common::repo_path("models/frames/vtest").display().to_string();
    let (code, stdout, stderr) = dynaspa(&[
        "bench",
        &model,
        "--frames",
        &photo,
        "--max-frames",
        "3",
        "--rounds",
        "1",
        "--threads",
        "2",
        "--backend",
        "cpu",
        "--profile",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("speedup_vs_dense") && stdout.contains("outputs agree"), "{stdout}");
    assert!(!stderr.contains("ignoring the profile"), "{stderr}");
    // With other threads the fingerprint differs: the named profile is refused, with the reason.
    let (code, _, stderr) = dynaspa(&[
        "run",
        &model,
        "--frames",
        &photo,
        "--max-frames",
        "1",
        "--threads",
        "1",
        "--backend",
        "cpu",
        "--profile",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("--profile") && stderr.contains("|t2'") && stderr.contains("|t1'"), "{stderr}");
}

#[test]
fn predicted_profiles_are_marked_and_bad_input_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let model = common::repo_path("models/sige_small.onnx").display().to_string();
    let dsm = common::repo_path("models/masks/sige_small_d30.dsm").display().to_string();
    let out = d.path().join("orin.json");
    let (code, stdout, stderr) = dynaspa(&["tune", &model, "--masks", &dsm, "--predict", "orin", "-o", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("roofline only"), "{stdout}");
    let p = Profile::load(&out).unwrap();
    assert!(p.predicted && p.cost_model == "roofline" && p.device.fingerprint.starts_with("predicted:"));
    // GPU schedules carry the sparse conv kernel's knobs, under its defines' names.
    let m = p
        .ops
        .iter()
        .flat_map(|o| o.poly.members())
        .find(|m| m.schedule.granularity.is_some() && !m.schedule.knobs.is_empty())
        .expect("a sparse GEMM member");
    let names: Vec<&str> = m.schedule.knobs.keys().map(String::as_str).collect();
    assert_eq!(names, ["KS", "TK", "TM", "TN", "WM", "WN"], "{m:?}");
    // A-ViT on a GPU: its token projections are the PolyKernel ops (attention has no schedule
    // to choose there), each a dense member and token GEMM tiles over single tokens, unsplit.
    let avit = common::repo_path("models/avit_small_d30.onnx").display().to_string();
    let adsm = common::repo_path("models/masks/avit_small_d30.dsm").display().to_string();
    let aout = out.with_file_name("avit_xavier.json");
    let (code, _, stderr) = dynaspa(&["tune", &avit, "--masks", &adsm, "--predict", "xavier", "-o", aout.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let p = Profile::load(&aout).unwrap();
    assert!(p.predicted);
    assert_eq!(p.ops.len(), 20, "four projections in each of five blocks");
    for o in &p.ops {
        assert_eq!(o.signature.kind, "MatMul", "{}", o.node);
        let m = o.poly.members();
        assert!(m.len() >= 2 && m[0].schedule.is_dense(), "{}: {m:?}", o.node);
        assert!(
            m[1..].iter().all(|m| m.schedule.name.starts_with("tiles1x1_") && m.schedule.knobs.get("KS") == Some(&1)),
            "{}: {m:?}",
            o.node
        );
    }

    let (code, _, stderr) = dynaspa(&["tune", &model, "--masks", &dsm, "--predict", "pixel9", "-o", out.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(stderr.contains("pixel9") && stderr.contains("adreno650"), "{stderr}");
    // The dataset of another model.
    let other = common::repo_path("models/masks/avit_small_d30.dsm").display().to_string();
    let (code, _, stderr) = dynaspa(&["tune", &model, "--masks", &other, "-o", out.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(stderr.contains("covers none"), "{stderr}");
    // A corrupt profile: exit 1 naming the file.
    let bad = d.path().join("bad.json");
    std::fs::write(&bad, "{\"format\": \"dynaspa-profile\", \"version\": 1, \"dev").unwrap();
    let frames = common::repo_path("models/frames/vtest").display().to_string();
    let dyn_model = common::repo_path("models/dynconv_small_d30.onnx").display().to_string();
    let (code, _, stderr) = dynaspa(&["bench", &dyn_model, "--frames", &frames, "--max-frames", "1", "--profile", bad.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(stderr.contains("bad.json") && stderr.contains("not valid JSON"), "{stderr}");
    // Neither masks nor frames: a usage error.
    let (code, _, _) = dynaspa(&["tune", &model, "-o", out.to_str().unwrap()]);
    assert_eq!(code, 2);
}

#[test]
fn tune_collects_masks_from_frames() {
    let d = tempfile::tempdir().unwrap();
    let model = common::repo_path("models/avit_small_d30.onnx").display().to_string();
    let frames = common::repo_path("models/frames/vtest").display().to_string();
    let out = d.path().join("avit.json");
    let (code, stdout, stderr) = dynaspa(&[
        "tune",
        &model,
        "--frames",
        &frames,
        "--max-frames",
        "8",
        "--trials",
        "2",
        "--threads",
        "2",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let p = Profile::load(&out).unwrap();
    // Every token op (projections, MLP, attention) of the 5 sparse blocks.
    assert_eq!(p.ops.len(), 25, "{stdout}");
    assert_eq!(p.masks.frames, 8);
    assert_eq!(p.masks.tuned_on, 6, "the last quarter is held out");
    assert!(p.masks.source.ends_with("vtest"));
}

/// `dynaspa tune --backend opencl` (PoCL on CI): a profile of this device's fingerprint whose
/// members are kernel schedules, a resumed tune that measures nothing, `bench --profile` taking
/// it without refusal, and a model without GPU sparse ops refused with the reason.
#[test]
fn tune_on_opencl_writes_a_profile_the_gpu_executor_takes() {
    if !common::backend_or_skip("opencl") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let model = common::repo_path("models/sige_small.onnx").display().to_string();
    let masks = common::repo_path("models/masks").display().to_string();
    let out = d.path().join("opencl/sige_small.json");
    let cache = d.path().join("cache");
    let run = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_dynaspa")).args(args).env("DYNASPA_CACHE_DIR", &cache).output().expect("binary runs");
        (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let args = [
        "tune",
        &model,
        "--masks",
        &masks,
        "--backend",
        "opencl",
        "--trials",
        "1",
        "--k",
        "3",
        "--batch",
        "4",
        "-o",
        out.to_str().unwrap(),
    ];
    let (code, stdout, stderr) = run(&args);
    assert_eq!(code, 0, "{stderr}");
    let p = Profile::load(&out).unwrap();
    assert_eq!((p.device.backend.as_str(), p.predicted), ("opencl", false));
    assert!(p.device.fingerprint.starts_with("opencl|"), "{:?}", p.device);
    assert_eq!(p.ops.len(), 8, "{stdout}");
    for o in &p.ops {
        assert!(o.poly.members().len() <= 3);
        for m in o.poly.members().iter().filter(|m| m.schedule.granularity.is_some()) {
            assert!(m.schedule.knobs.contains_key("TM") && m.schedule.knobs.contains_key("KS"), "{m:?}");
        }
    }
    assert!(stdout.contains("speedup"), "no summary table: {stdout}");
    assert!(p.ops.iter().any(|o| o.poly.members().len() > 1), "no op got a sparse member: {stdout}");
    let (code, stdout, stderr) = run(&args);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("resuming"), "{stderr}");
    assert_eq!(measurements_taken(&stdout), 0, "{stdout}");
    assert_eq!(Profile::load(&out).unwrap().ops, p.ops, "a replayed tune makes the same PolyKernels");

    let frames = common::repo_path("models/frames/vtest").display().to_string();
    let mask = common::repo_path("tests/goldens/sige_small/mask_0.npy").display().to_string();
    let (code, stdout, stderr) = run(&[
        "bench",
        &model,
        "--frames",
        &frames,
        "--input",
        &format!("mask={mask}"),
        "--max-frames",
        "2",
        "--rounds",
        "1",
        "--backend",
        "opencl",
        "--profile",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("speedup_vs_dense"), "{stdout}");
    assert!(!stderr.contains("ignoring the profile") && !stderr.contains("calibrating"), "{stderr}");
    // The CPU refuses the OpenCL profile (another backend), naming it.
    let (code, _, stderr) = run(&[
        "run",
        &model,
        "--frames",
        &frames,
        "--input",
        &format!("mask={mask}"),
        "--max-frames",
        "1",
        "--backend",
        "cpu",
        "--profile",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("made for backend 'opencl', not 'cpu'"), "{stderr}");

    // A-ViT: its token projections are tuned on the device too, and the executor takes them.
    let avit = common::repo_path("models/avit_small_d30.onnx").display().to_string();
    let aout = d.path().join("opencl/avit_small_d30.json");
    let args = [
        "tune",
        &avit,
        "--masks",
        &masks,
        "--backend",
        "opencl",
        "--trials",
        "1",
        "--k",
        "3",
        "--batch",
        "4",
        "-o",
        aout.to_str().unwrap(),
    ];
    let (code, stdout, stderr) = run(&args);
    assert_eq!(code, 0, "{stderr}");
    let p = Profile::load(&aout).unwrap();
    assert_eq!((p.device.backend.as_str(), p.ops.len()), ("opencl", 20), "{stdout}");
    assert!(p.ops.iter().all(|o| o.signature.kind == "MatMul" && o.poly.members()[0].schedule.is_dense()), "{stdout}");
    let (code, stdout, stderr) = run(&[
        "bench",
        &avit,
        "--frames",
        &frames,
        "--max-frames",
        "2",
        "--rounds",
        "1",
        "--backend",
        "opencl",
        "--profile",
        aout.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("speedup_vs_dense"), "{stdout}");
    assert!(!stderr.contains("ignoring the profile") && !stderr.contains("calibrating"), "{stderr}");
    // A model with no op the GPU runs sparsely is refused with the reason.
    let cnn = common::repo_path("models/cnn_small.onnx").display().to_string();
    let (code, _, stderr) = run(&["tune", &cnn, "--masks", &masks, "--backend", "opencl", "-o", d.path().join("c.json").to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(stderr.contains("nothing to tune"), "{stderr}");
}
