//! The C ABI called as C calls it: results match the Rust API, bad arguments fail with a code
//! and a message naming the problem, and sessions run concurrently on threads.

mod common;

use common::*;
use dynaspa_ffi::*;
use std::ffi::c_int;
use std::ptr::{null, null_mut};

const SPARSE_MODEL: &str = "models/dynconv_small_d30.onnx";
const DENSE_MODEL: &str = "models/cnn_small.onnx";

#[test]
fn frames_match_the_rust_api_sparse_and_dense() {
    let mut rng = Rng(seed());
    let cache = tempfile::tempdir().unwrap();
    for (model, dense) in [(SPARSE_MODEL, false), (SPARSE_MODEL, true), (DENSE_MODEL, false)] {
        let path = repo_path(model);
        let what = format!("{model} dense={dense}");
        let frames: Vec<Vec<Vec<f32>>> = (0..3).map(|_| random_inputs(&mut rng, &[input_shape(model)])).collect();
        let want: Vec<_> = frames.iter().map(|f| rust_outputs(&path, cache.path(), dense, f)).collect();
        let mut s = CSession::open(&path, cache.path(), dense);
        assert_eq!(s.input_shapes(), vec![input_shape(model)], "{what}");
        for (f, w) in frames.iter().zip(&want) {
            assert_matches(&s.run(f), w, &what);
        }
        let mut r = dynaspa_report { latency_ms: -1.0, density: f64::NAN, sparse_ops: 99, sparse_ms: -1.0 };
        ok(unsafe { dynaspa_last_report(s.0, &mut r) });
        assert!(r.latency_ms > 0.0, "{what}: latency {}", r.latency_ms);
        if dense || model == DENSE_MODEL {
            assert_eq!((r.sparse_ops, r.density), (0, -1.0), "{what}: a dense run reports no sparse op");
        } else {
            assert!(r.sparse_ops > 0, "{what}: no sparse op reported");
            assert!(r.density > 0.0 && r.density <= 1.0, "{what}: density {}", r.density);
            assert!(r.sparse_ms > 0.0 && r.sparse_ms <= r.latency_ms, "{what}: sparse time {} of {}", r.sparse_ms, r.latency_ms);
        }
    }
}

fn input_shape(model: &str) -> Vec<usize> {
    if model == SPARSE_MODEL {
        vec![1, 3, 72, 96]
    } else {
        vec![1, 3, 96, 96]
    }
}

#[test]
fn names_shapes_and_counts_describe_the_model() {
    let cache = tempfile::tempdir().unwrap();
    let s = CSession::open(&repo_path(SPARSE_MODEL), cache.path(), false);
    let outs = s.output_shapes();
    assert_eq!(outs.len(), 9);
    assert_eq!(outs[0], vec![1, 10]);
    assert_eq!(outs[1], vec![1, 1, 18, 24]);
    let name = |f: unsafe extern "C" fn(*const dynaspa_session, usize, *mut *const std::ffi::c_char) -> c_int, i| {
        let mut p = null();
        ok(unsafe { f(s.0, i, &mut p) });
        unsafe { std::ffi::CStr::from_ptr(p) }.to_str().unwrap().to_string()
    };
    assert_eq!(name(dynaspa_input_name, 0), "input");
    assert_eq!(name(dynaspa_output_name, 0), "logits");
    assert_eq!(name(dynaspa_output_name, 2), "mask_layer1_0_dil");
    let v = unsafe { std::ffi::CStr::from_ptr(dynaspa_version()) };
    assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
}

#[test]
fn opening_bad_arguments_fails_with_a_message_naming_them() {
    let model = cstr(repo_path(DENSE_MODEL).to_str().unwrap());
    let cpu = cstr("cpu");
    let mut s = std::ptr::dangling_mut::<dynaspa_session>();
    unsafe {
        assert_fails(dynaspa_open(null(), cpu.as_ptr(), &mut s), DYNASPA_ERR_NULL, &["model_path"]);
        assert!(s.is_null(), "*out is NULL after a failed open");
        assert_fails(dynaspa_open(model.as_ptr(), null(), &mut s), DYNASPA_ERR_NULL, &["backend"]);
        assert_fails(dynaspa_open(model.as_ptr(), cpu.as_ptr(), null_mut()), DYNASPA_ERR_NULL, &["out"]);

        let missing = cstr("/nonexistent/model.onnx");
        assert_fails(dynaspa_open(missing.as_ptr(), cpu.as_ptr(), &mut s), DYNASPA_ERR_IO, &["/nonexistent/model.onnx"]);

        let tpu = cstr("tpu");
        assert_fails(dynaspa_open(model.as_ptr(), tpu.as_ptr(), &mut s), DYNASPA_ERR_BACKEND, &["'tpu'", "cpu"]);

        let dir = tempfile::tempdir().unwrap();
        let corrupt = dir.path().join("corrupt.onnx");
        let mut bytes = std::fs::read(repo_path(DENSE_MODEL)).unwrap();
        bytes.truncate(bytes.len() / 3);
        std::fs::write(&corrupt, &bytes).unwrap();
        let c = cstr(corrupt.to_str().unwrap());
        assert_fails(dynaspa_open(c.as_ptr(), cpu.as_ptr(), &mut s), DYNASPA_ERR_MODEL, &["ONNX"]);
        let garbage = dir.path().join("garbage.onnx");
        std::fs::write(&garbage, b"not a model at all").unwrap();
        let g = cstr(garbage.to_str().unwrap());
        assert_fails(dynaspa_open(g.as_ptr(), cpu.as_ptr(), &mut s), DYNASPA_ERR_MODEL, &[]);
        assert!(s.is_null());

        let bad_utf8 = [0xffu8, 0xfe, 0];
        assert_fails(dynaspa_open(bad_utf8.as_ptr().cast(), cpu.as_ptr(), &mut s), DYNASPA_ERR_ARGUMENT, &["UTF-8"]);

        let mut o = std::mem::zeroed::<dynaspa_options>();
        ok(dynaspa_options_init(&mut o));
        o.fill = 7;
        assert_fails(dynaspa_open_with(model.as_ptr(), cpu.as_ptr(), &o, &mut s), DYNASPA_ERR_ARGUMENT, &["fill", "7"]);
        ok(dynaspa_options_init(&mut o));
        let profile = cstr("/nonexistent/profile.json");
        o.profile = profile.as_ptr();
        o.no_profile = 1;
        assert_fails(dynaspa_open_with(model.as_ptr(), cpu.as_ptr(), &o, &mut s), DYNASPA_ERR_ARGUMENT, &["no_profile"]);
        assert_fails(dynaspa_options_init(null_mut()), DYNASPA_ERR_NULL, &["options"]);
        dynaspa_close(null_mut());
    }
}

#[test]
fn a_profile_for_another_device_is_refused() {
    let model = repo_path(SPARSE_MODEL);
    let shipped = std::fs::read_dir(repo_path("profiles"))
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).into_iter().flatten())
        .map(|f| f.unwrap().path())
        .find(|p| p.ends_with("adreno-650/dynconv_small_d30.json"))
        .expect("the shipped Adreno 650 profile of the model");
    let (m, cpu, p) = (cstr(model.to_str().unwrap()), cstr("cpu"), cstr(shipped.to_str().unwrap()));
    unsafe {
        let mut o = std::mem::zeroed::<dynaspa_options>();
        ok(dynaspa_options_init(&mut o));
        o.profile = p.as_ptr();
        let mut s = null_mut();
        assert_fails(dynaspa_open_with(m.as_ptr(), cpu.as_ptr(), &o, &mut s), DYNASPA_ERR_ARGUMENT, &["adreno-650", "'opencl'", "'cpu'"]);
    }
}

#[test]
fn running_with_bad_buffers_fails_and_writes_no_output() {
    let mut rng = Rng(seed());
    let cache = tempfile::tempdir().unwrap();
    let mut s = CSession::open(&repo_path(SPARSE_MODEL), cache.path(), false);
    let shapes = s.output_shapes();
    let poisoned = || -> Vec<Vec<f32>> { shapes.iter().map(|sh| vec![f32::NAN; sh.iter().product()]).collect() };
    let input = random_inputs(&mut rng, &s.input_shapes());
    let untouched = |outs: &[Vec<f32>]| outs.iter().all(|o| o.iter().all(|v| v.is_nan()));

    let mut short = input.clone();
    short[0].pop();
    let mut outs = poisoned();
    assert_fails(s.try_run(&short, &mut outs), DYNASPA_ERR_ARGUMENT, &["inputs_lens[0]", "'input'", "20735", "20736"]);
    assert!(untouched(&outs));

    let mut outs = poisoned();
    outs[3].push(f32::NAN);
    assert_fails(s.try_run(&input, &mut outs), DYNASPA_ERR_ARGUMENT, &["outputs_lens[3]", "mask_layer1_1", "433"]);
    assert!(untouched(&outs));

    let mut nan = input.clone();
    nan[0][17] = f32::NAN;
    let mut outs = poisoned();
    assert_fails(s.try_run(&nan, &mut outs), DYNASPA_ERR_ARGUMENT, &["input", "NaN"]);
    assert!(untouched(&outs));

    let mut outs = poisoned();
    let lens: Vec<usize> = outs.iter().map(Vec::len).collect();
    let mut ptrs: Vec<*mut f32> = outs.iter_mut().map(|o| o.as_mut_ptr()).collect();
    let (ip, il) = ([input[0].as_ptr()], [input[0].len()]);
    unsafe {
        assert_fails(dynaspa_run_f32(null_mut(), ip.as_ptr(), il.as_ptr(), ptrs.as_ptr(), lens.as_ptr()), DYNASPA_ERR_NULL, &["session"]);
        assert_fails(dynaspa_run_f32(s.0, null(), il.as_ptr(), ptrs.as_ptr(), lens.as_ptr()), DYNASPA_ERR_NULL, &["inputs"]);
        assert_fails(dynaspa_run_f32(s.0, ip.as_ptr(), null(), ptrs.as_ptr(), lens.as_ptr()), DYNASPA_ERR_NULL, &["inputs_lens"]);
        assert_fails(dynaspa_run_f32(s.0, ip.as_ptr(), il.as_ptr(), null(), lens.as_ptr()), DYNASPA_ERR_NULL, &["outputs"]);
        assert_fails(dynaspa_run_f32(s.0, [null()].as_ptr(), il.as_ptr(), ptrs.as_ptr(), lens.as_ptr()), DYNASPA_ERR_NULL, &["inputs[0]"]);
        let misaligned = [input[0].as_ptr().cast::<u8>().add(1).cast::<f32>()];
        assert_fails(
            dynaspa_run_f32(s.0, misaligned.as_ptr(), il.as_ptr(), ptrs.as_ptr(), lens.as_ptr()),
            DYNASPA_ERR_ARGUMENT,
            &["aligned"],
        );
        let p5 = ptrs[5];
        ptrs[5] = null_mut();
        assert_fails(
            dynaspa_run_f32(s.0, ip.as_ptr(), il.as_ptr(), ptrs.as_ptr(), lens.as_ptr()),
            DYNASPA_ERR_NULL,
            &["outputs[5]", "mask_layer2_1"],
        );
        ptrs[5] = ptrs[4];
        assert_fails(dynaspa_run_f32(s.0, ip.as_ptr(), il.as_ptr(), ptrs.as_ptr(), lens.as_ptr()), DYNASPA_ERR_ARGUMENT, &["overlap"]);
        ptrs[5] = p5;
    }
    for (j, o) in outs.iter().enumerate() {
        assert!(o.iter().all(|v| v.is_nan()), "output {j} written by a failed call: {:?}", &o[..4]);
    }
    // The session still runs after every refusal.
    let good = s.run(&input);
    assert!(good[0].iter().any(|&v| v != 0.0));
}

#[test]
fn queries_with_bad_arguments_fail_with_a_message() {
    let cache = tempfile::tempdir().unwrap();
    let s = CSession::open(&repo_path(SPARSE_MODEL), cache.path(), false);
    let mut dims = [0i64; 4];
    let mut n = 0usize;
    unsafe {
        assert_fails(dynaspa_input_count(null(), &mut n), DYNASPA_ERR_NULL, &["session"]);
        assert_fails(dynaspa_output_count(s.0, null_mut()), DYNASPA_ERR_NULL, &["n"]);
        let mut rank = 2usize;
        assert_fails(dynaspa_input_shape(s.0, 0, dims.as_mut_ptr(), &mut rank), DYNASPA_ERR_ARGUMENT, &["room for 2", "has 4"]);
        assert_eq!(rank, 4, "the rank comes back when the capacity is too small");
        rank = 4;
        assert_fails(dynaspa_input_shape(s.0, 1, dims.as_mut_ptr(), &mut rank), DYNASPA_ERR_ARGUMENT, &["index 1", "1 inputs"]);
        assert_fails(dynaspa_output_shape(s.0, 9, dims.as_mut_ptr(), &mut rank), DYNASPA_ERR_ARGUMENT, &["index 9", "9 outputs"]);
        rank = 4;
        assert_fails(dynaspa_output_shape(s.0, 0, null_mut(), &mut rank), DYNASPA_ERR_NULL, &["dims"]);
        assert_fails(dynaspa_output_shape(s.0, 0, dims.as_mut_ptr(), null_mut()), DYNASPA_ERR_NULL, &["rank"]);
        let mut name = null();
        assert_fails(dynaspa_output_name(s.0, 12, &mut name), DYNASPA_ERR_ARGUMENT, &["index 12"]);
        let mut r = std::mem::zeroed::<dynaspa_report>();
        assert_fails(dynaspa_last_report(s.0, &mut r), DYNASPA_ERR_RUN, &["not run a frame"]);
        assert_fails(dynaspa_last_report(s.0, null_mut()), DYNASPA_ERR_RUN, &[]);
    }
}

#[test]
fn the_last_error_belongs_to_the_thread_that_failed() {
    let mut n = 0;
    assert_fails(unsafe { dynaspa_input_count(null(), &mut n) }, DYNASPA_ERR_NULL, &["session"]);
    std::thread::spawn(|| assert!(dynaspa_last_error().is_null(), "a fresh thread has no error")).join().unwrap();
    assert!(last_error().contains("session"));
}

#[test]
fn sessions_run_concurrently_and_move_between_threads() {
    let mut rng = Rng(seed());
    let cache = tempfile::tempdir().unwrap();
    let model = repo_path(SPARSE_MODEL);
    let frames: Vec<Vec<Vec<f32>>> = (0..4).map(|_| random_inputs(&mut rng, &[input_shape(SPARSE_MODEL)])).collect();
    let want: Vec<_> = frames.iter().map(|f| rust_outputs(&model, cache.path(), false, f)).collect();
    // Four sessions at once, each running every frame several times in its own order.
    std::thread::scope(|sc| {
        for t in 0..4 {
            let (model, cache, frames, want) = (&model, cache.path(), &frames, &want);
            sc.spawn(move || {
                let mut s = CSession::open(model, cache, false);
                for k in 0..8 {
                    let i = (t + k) % frames.len();
                    assert_matches(&s.run(&frames[i]), &want[i], &format!("thread {t} frame {i}"));
                }
            });
        }
    });
    // One session handed from thread to thread, one at a time.
    let mut s = CSession::open(&model, cache.path(), false);
    for (i, f) in frames.iter().enumerate() {
        s = std::thread::spawn({
            let f = f.clone();
            move || {
                let got = s.run(&f);
                (s, got)
            }
        })
        .join()
        .map(|(s, got)| {
            assert_matches(&got, &want[i], &format!("moved session, frame {i}"));
            s
        })
        .unwrap();
    }
}
