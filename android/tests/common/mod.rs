//! Shared by the ffi crate's tests: the shipped models, fresh random frames, the Rust result
//! to match, and calls through the C ABI.
#![allow(dead_code)]

use dynaspa_ffi::*;
use std::ffi::{c_int, CStr, CString};
use std::path::{Path, PathBuf};

/// Worker threads of every session in these tests (the same count on both sides of a
/// comparison, so the same calibration cache entries apply).
pub const THREADS: u32 = 2;

pub fn repo_path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

/// `DYNASPA_TEST_SEED`, else the clock; printed so a failure can be replayed.
pub fn seed() -> u64 {
    let s = std::env::var("DYNASPA_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64));
    eprintln!("seed {s} (replay with DYNASPA_TEST_SEED={s})");
    s | 1
}

/// Xorshift floats, roughly N(0, 1) (sum of uniforms): inputs as a normalised image gives.
pub struct Rng(pub u64);

impl Rng {
    pub fn uniform(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32
    }
    pub fn frame(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| (0..4).map(|_| self.uniform()).sum::<f32>() - 2.0).collect()
    }
}

/// The model's result computed through the Rust API with the same settings the C side uses:
/// no profile, calibration cached under `cache` (the C session then reads the same choices).
pub fn rust_outputs(model: &Path, cache: &Path, dense: bool, inputs: &[Vec<f32>]) -> Vec<Vec<f32>> {
    let mut s = dynaspa::Session::builder()
        .backend(dynaspa::Backend::Cpu)
        .threads(THREADS as usize)
        .dense(dense)
        .cache_dir(cache)
        .profile_choice(dynaspa::ProfileChoice::Calibrate)
        .open(model)
        .expect("the Rust API opens the model");
    let g = s.graph();
    let feeds = g
        .inputs
        .iter()
        .zip(inputs)
        .map(|(&i, v)| (g.values[i].name.clone(), dynaspa::Tensor::from_f32(g.values[i].shape.clone(), v.clone()).unwrap()))
        .collect();
    s.run(feeds).expect("the Rust API runs").into_iter().map(|(_, t)| t.as_f32().unwrap().to_vec()).collect()
}

pub fn last_error() -> String {
    let p = dynaspa_last_error();
    assert!(!p.is_null(), "a failed call left no message");
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// Asserts a call failed with `code` and a message containing every one of `words`.
pub fn assert_fails(rc: c_int, code: c_int, words: &[&str]) -> String {
    let msg = if rc == DYNASPA_OK { String::new() } else { last_error() };
    assert_eq!(rc, code, "expected code {code}, got {rc} ({msg})");
    for w in words {
        assert!(msg.contains(w), "message '{msg}' does not name '{w}'");
    }
    msg
}

pub fn ok(rc: c_int) {
    if rc != DYNASPA_OK {
        panic!("call failed with {rc}: {}", last_error());
    }
}

/// A session through the C ABI, closed on drop.
pub struct CSession(pub *mut dynaspa_session);

unsafe impl Send for CSession {}

impl CSession {
    pub fn open(model: &Path, cache: &Path, dense: bool) -> CSession {
        let (m, b, c) = (cstr(model.to_str().unwrap()), cstr("cpu"), cstr(cache.to_str().unwrap()));
        let mut o = std::mem::MaybeUninit::<dynaspa_options>::uninit();
        unsafe {
            ok(dynaspa_options_init(o.as_mut_ptr()));
            let mut o = o.assume_init();
            o.threads = THREADS;
            o.no_profile = 1;
            o.dense = dense as c_int;
            o.cache_dir = c.as_ptr();
            let mut s = std::ptr::null_mut();
            ok(dynaspa_open_with(m.as_ptr(), b.as_ptr(), &o, &mut s));
            assert!(!s.is_null());
            CSession(s)
        }
    }
    fn shape(&self, output: bool, i: usize) -> Vec<usize> {
        let mut dims = [0i64; 8];
        let mut rank = dims.len();
        let f = if output { dynaspa_output_shape } else { dynaspa_input_shape };
        ok(unsafe { f(self.0, i, dims.as_mut_ptr(), &mut rank) });
        dims[..rank].iter().map(|&d| d as usize).collect()
    }
    pub fn input_shapes(&self) -> Vec<Vec<usize>> {
        let mut n = 0;
        ok(unsafe { dynaspa_input_count(self.0, &mut n) });
        (0..n).map(|i| self.shape(false, i)).collect()
    }
    pub fn output_shapes(&self) -> Vec<Vec<usize>> {
        let mut n = 0;
        ok(unsafe { dynaspa_output_count(self.0, &mut n) });
        (0..n).map(|j| self.shape(true, j)).collect()
    }
    /// Runs a frame into NaN-poisoned output buffers and returns them.
    pub fn run(&mut self, inputs: &[Vec<f32>]) -> Vec<Vec<f32>> {
        let mut outs: Vec<Vec<f32>> = self.output_shapes().iter().map(|s| vec![f32::NAN; s.iter().product()]).collect();
        ok(self.try_run(inputs, &mut outs));
        for (j, o) in outs.iter().enumerate() {
            assert!(o.iter().all(|v| v.is_finite()), "output {j} was not (entirely) written");
        }
        outs
    }
    pub fn try_run(&mut self, inputs: &[Vec<f32>], outs: &mut [Vec<f32>]) -> c_int {
        let ins: Vec<*const f32> = inputs.iter().map(|v| v.as_ptr()).collect();
        let in_lens: Vec<usize> = inputs.iter().map(Vec::len).collect();
        let out_ptrs: Vec<*mut f32> = outs.iter_mut().map(|v| v.as_mut_ptr()).collect();
        let out_lens: Vec<usize> = outs.iter().map(Vec::len).collect();
        unsafe { dynaspa_run_f32(self.0, ins.as_ptr(), in_lens.as_ptr(), out_ptrs.as_ptr(), out_lens.as_ptr()) }
    }
}

impl Drop for CSession {
    fn drop(&mut self) {
        unsafe { dynaspa_close(self.0) }
    }
}

pub fn cstr(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// Fresh random inputs for `shapes`.
pub fn random_inputs(rng: &mut Rng, shapes: &[Vec<usize>]) -> Vec<Vec<f32>> {
    shapes.iter().map(|s| rng.frame(s.iter().product())).collect()
}

/// Asserts `got` equals `want` output by output (same members chosen, same threads: the same
/// arithmetic), allowing only float rounding of a different summation order.
pub fn assert_matches(got: &[Vec<f32>], want: &[Vec<f32>], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: output count");
    for (j, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.len(), w.len(), "{what}: output {j} length");
        let num: f64 = g.iter().zip(w).map(|(a, b)| ((a - b) as f64).powi(2)).sum();
        let den: f64 = w.iter().map(|b| (*b as f64).powi(2)).sum();
        let rel = (num / den.max(1e-30)).sqrt();
        assert!(rel <= 1e-6, "{what}: output {j} differs from the Rust result: relative L2 {rel:.3e}");
    }
}
