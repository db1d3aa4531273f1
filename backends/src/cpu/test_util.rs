//! Helpers shared by the kernel unit tests: a tiny deterministic RNG and tolerant comparison.

use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::{DType, Tensor};

/// xorshift64*; every case seeds its own so failures reproduce.
pub(crate) struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [-1, 1).
    pub fn f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
    pub fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.f32()).collect()
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    pub fn tensor(&mut self, shape: &[usize]) -> Tensor {
        let n = shape.iter().product();
        Tensor::from_f32(shape.to_vec(), self.vec(n)).unwrap()
    }
}

pub(crate) fn spec(shape: &[usize]) -> TensorSpec {
    TensorSpec { dtype: DType::F32, shape: shape.to_vec() }
}

/// Relative-to-magnitude comparison: |a - b| <= tol * max(1, |b|).
pub(crate) fn assert_close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= tol * w.abs().max(1.0) || (g.is_nan() && w.is_nan()) || g == w;
        assert!(ok, "{what}: element {i}: got {g}, want {w}");
    }
}

/// On-CPU seconds of the calling thread: with BENCH_THREADS=1 this times the kernel itself
/// even when other processes share the cores.
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
pub(crate) fn thread_cpu_secs() -> Option<f64> {
    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }
    extern "C" {
        fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: plain libc call writing into a properly laid out timespec.
    let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (rc == 0).then_some(ts.sec as f64 + ts.nsec as f64 * 1e-9)
}
#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
pub(crate) fn thread_cpu_secs() -> Option<f64> {
    None
}

/// Best of `iters` runs: the box is shared, and the minimum is the least disturbed run
/// (BENCH_MEDIAN=1: the median instead).
pub(crate) fn time_it(iters: usize, f: impl FnMut()) -> f64 {
    time_with_setup(iters, || {}, f)
}

/// `time_it` with an untimed `setup` before every run.
pub(crate) fn time_with_setup(iters: usize, mut setup: impl FnMut(), mut f: impl FnMut()) -> f64 {
    for _ in 0..3 {
        f();
    }
    let cpu = rayon::current_num_threads() == 1 && thread_cpu_secs().is_some();
    let median = std::env::var("BENCH_MEDIAN").is_ok();
    let mut ts: Vec<f64> = (0..iters)
        .map(|_| {
            setup();
            let (c0, t0) = (thread_cpu_secs(), std::time::Instant::now());
            f();
            if cpu {
                thread_cpu_secs().unwrap() - c0.unwrap()
            } else {
                t0.elapsed().as_secs_f64()
            }
        })
        .collect();
    ts.sort_by(f64::total_cmp);
    match ts.len() {
        0 => 0.0,
        n if median => ts[n / 2],
        _ => ts[0],
    }
}
