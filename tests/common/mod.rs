//! Shared helpers of the whole-system tests.
#![allow(dead_code)]

use dynaspa::Tensor;

/// Every backend a shared suite can run on, in the order `backend_test!` declares their tests.
pub const BACKENDS: [&str; 4] = ["cpu", "opencl", "wgpu", "cuda"];

/// One `#[test]` per backend for a shared body: `backend_test!(name, |backend| body)` expands to a
/// module `name` holding `fn cpu()`, `fn opencl()`, `fn wgpu()` and `fn cuda()`, each running
/// `body` with `backend` bound to its name (`&str`) where `backend_or_skip` says the backend is
/// here, so `cargo test -- ::opencl` runs one backend and results are reported per backend.
/// `backend_test!(name, gpus, |backend| body)` declares the GPU backends' tests only, and
/// `backend_test!(name, [opencl, cuda], |backend| body)` the ones listed.
#[macro_export]
macro_rules! backend_test {
    ($name:ident, |$backend:ident| $body:expr $(,)?) => {
        $crate::backend_test!($name, [cpu, opencl, wgpu, cuda], |$backend| $body);
    };
    ($name:ident, gpus, |$backend:ident| $body:expr $(,)?) => {
        $crate::backend_test!($name, [opencl, wgpu, cuda], |$backend| $body);
    };
    ($name:ident, [$($each:ident),+ $(,)?], |$backend:ident| $body:expr $(,)?) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[test]
                fn $each() {
                    if $crate::common::backend_or_skip(stringify!($each)) {
                        let $backend: &str = stringify!($each);
                        $body
                    }
                }
            )+
        }
    };
}

/// `body` with `dev` bound to GPU backend `backend`'s shared device as its own type (an `Arc<D>`,
/// `D: GpuDevice`), for checks generic over the device: `with_gpu_device!(backend, |dev|
/// check(dev, backend))` in a `backend_test!` body, where the backend is known to be here.
#[macro_export]
macro_rules! with_gpu_device {
    ($backend:expr, |$dev:ident| $body:expr $(,)?) => {
        match $backend {
            #[cfg(feature = "opencl")]
            "opencl" => {
                let $dev = dynaspa::backends::opencl::shared_device(None, None).unwrap_or_else(|e| panic!("opencl: {e}"));
                $body
            }
            #[cfg(feature = "wgpu")]
            "wgpu" => {
                let $dev = dynaspa::backends::wgpu::shared_device(None).unwrap_or_else(|e| panic!("wgpu: {e}"));
                $body
            }
            #[cfg(feature = "cuda")]
            "cuda" => {
                let $dev = dynaspa::backends::cuda::shared_device(None, None).unwrap_or_else(|e| panic!("cuda: {e}"));
                $body
            }
            other => panic!("'{other}' is no GPU backend of this build"),
        }
    };
}

/// Whether `name` is available in this build on this machine (`dynaspa::backends::available()`,
/// probed once per test binary). A backend that `DYNASPA_REQUIRE_BACKENDS` (comma-separated)
/// names and that is missing fails the test instead, as does a name there that is no backend
/// (`nvrtc` names a capability, not a backend: the backends crate's NVRTC tests check it).
pub fn has_backend(name: &str) -> bool {
    assert!(BACKENDS.contains(&name), "'{name}' is no backend; the backends are {BACKENDS:?}");
    static AVAILABLE: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    let required = required_backends();
    let have = AVAILABLE.get_or_init(dynaspa::backends::available).contains(&name);
    if !have && required.iter().any(|b| b == name) {
        panic!("DYNASPA_REQUIRE_BACKENDS names {name}, but it is not available: {}", unavailable_reason(name));
    }
    have
}

/// `has_backend`, saying "skipped: <backend> not available: <why>" where it is not: a test
/// returns at once when this is false.
pub fn backend_or_skip(name: &str) -> bool {
    let have = has_backend(name);
    if !have {
        println!("skipped: {name} not available: {}", unavailable_reason(name));
    }
    have
}

/// The backends `DYNASPA_REQUIRE_BACKENDS` names (`nvrtc` left out); a name that is neither a
/// backend nor `nvrtc` fails.
fn required_backends() -> Vec<String> {
    let list = std::env::var("DYNASPA_REQUIRE_BACKENDS").unwrap_or_default();
    let names: Vec<String> = list.split(',').map(str::trim).filter(|s| !s.is_empty() && *s != "nvrtc").map(String::from).collect();
    for b in &names {
        assert!(
            BACKENDS.contains(&b.as_str()),
            "DYNASPA_REQUIRE_BACKENDS names '{b}', which is no backend (the backends are {BACKENDS:?}; nvrtc names the CUDA compiler)"
        );
    }
    names
}

/// Why `dynaspa devices` says backend `name` cannot run here.
fn unavailable_reason(name: &str) -> String {
    dynaspa::backends::devices()
        .into_iter()
        .find(|d| d.backend == name && d.unavailable.is_some())
        .and_then(|d| d.unavailable)
        .unwrap_or_else(|| "its devices are listed, but it did not probe as usable".into())
}

/// How the tests open models on `backend`: calibrated, never a shipped profile, so what a test
/// checks does not depend on the profiles a checkout holds.
pub fn open_on(backend: &str) -> dynaspa::SessionBuilder {
    let backend: dynaspa::Backend = backend.parse().unwrap_or_else(|e| panic!("{e}"));
    dynaspa::Session::builder().backend(backend).profile_choice(dynaspa::ProfileChoice::Calibrate)
}

/// [`open_on`] with every node's outputs filled with NaN before its kernels run (GPU
/// backends), so an output a kernel does not write shows in the results.
pub fn poisoned(backend: &str) -> dynaspa::SessionBuilder {
    open_on(backend).debug(dynaspa::DebugOptions { poison: true, ..Default::default() })
}

/// A session on `backend` created with exactly these backend settings, a profile among them
/// handed over as is: for tests of what the backends themselves do with a profile.
pub fn session_with(model: &std::path::Path, backend: &str, opts: &dynaspa::backends::BackendOptions) -> dynaspa::Session {
    let g = open_on(backend).load(model).unwrap_or_else(|e| panic!("{}: {e}", model.display()));
    let b = dynaspa::backends::create_configured(backend, opts).unwrap_or_else(|e| panic!("{backend}: {e}"));
    dynaspa::Session::new(g, b.as_ref()).unwrap_or_else(|e| panic!("{backend}: {e}"))
}

pub fn repo_path(rel: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// Relative L2 error ||a - b|| / ||b||.
pub fn rel_l2(a: &[f32], b: &[f32]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| ((*x as f64) - (*y as f64)).powi(2)).sum();
    let den: f64 = b.iter().map(|y| (*y as f64).powi(2)).sum();
    (num / den.max(1e-30)).sqrt()
}

/// Element-wise closeness as the ONNX backend tests define it (NaNs equal).
pub fn close(a: &Tensor, b: &Tensor, rtol: f64, atol: f64) -> Result<(), String> {
    if a.dtype() != b.dtype() || a.shape() != b.shape() {
        return Err(format!("got {} {:?}, expected {} {:?}", a.dtype(), a.shape(), b.dtype(), b.shape()));
    }
    use dynaspa::TensorData as D;
    match (a.data(), b.data()) {
        (D::F32(_), _) | (D::F64(_), _) => {
            let (x, y) = (a.to_f64_vec(), b.to_f64_vec());
            for (i, (p, q)) in x.iter().zip(&y).enumerate() {
                let ok = (p.is_nan() && q.is_nan()) || p == q || (p - q).abs() <= atol + rtol * q.abs();
                if !ok {
                    return Err(format!("element {i}: got {p}, expected {q}"));
                }
            }
            Ok(())
        }
        _ if a == b => Ok(()),
        _ => {
            let (x, y) = (a.to_f64_vec(), b.to_f64_vec());
            let i = x.iter().zip(&y).position(|(p, q)| p != q).unwrap_or(0);
            Err(format!("element {i}: got {:?}, expected {:?}", x.get(i), y.get(i)))
        }
    }
}

/// The seed of a test's random inputs: `DYNASPA_TEST_SEED`, else the clock; printed so a
/// failure can be replayed.
pub fn seed() -> u64 {
    let s = std::env::var("DYNASPA_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64));
    eprintln!("seed {s} (replay with DYNASPA_TEST_SEED={s})");
    s | 1
}

/// Xorshift: the tests' random inputs (files add their own methods: masks, tensors).
pub struct Rng(pub u64);

impl Rng {
    /// Uniform in [0, 1).
    pub fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    /// `n` values uniform in [-1, 1).
    pub fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| (self.next() * 2.0 - 1.0) as f32).collect()
    }
}

/// Whether the comma-separated list in environment variable `var` names `name`.
fn listed(var: &str, name: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v.split(',').any(|b| b.trim() == name))
}

/// A test whose external tool (or data package) is missing: skipped with the reason, unless
/// `DYNASPA_REQUIRE_TOOLS` names the tool (CI lists what it installs), then failed.
pub fn skip_tool(test: &str, tool: &str, why: &str) {
    assert!(!listed("DYNASPA_REQUIRE_TOOLS", tool), "{test}: {tool} is required: {why}");
    println!("SKIPPED {test}: {why}");
}
