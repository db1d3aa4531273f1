//! Shared helpers of the whole-system tests.
#![allow(dead_code)]

use dynaspa::Tensor;

/// Backends the tests run on: every backend this build has. `DYNASPA_REQUIRE_BACKENDS`
/// (comma-separated) names backends that must be present: a missing one fails the test run
/// instead of being skipped silently.
pub fn backends() -> Vec<String> {
    let have: Vec<String> = dynaspa::backends::available().into_iter().map(String::from).collect();
    if let Ok(req) = std::env::var("DYNASPA_REQUIRE_BACKENDS") {
        // `nvrtc` names a capability, not a backend: the backends crate's NVRTC tests check it.
        for b in req.split(',').map(str::trim).filter(|s| !s.is_empty() && *s != "nvrtc") {
            assert!(
                have.iter().any(|h| h == b),
                "DYNASPA_REQUIRE_BACKENDS names '{b}', but this build/machine only has {have:?}"
            );
        }
    }
    have
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
    let s = std::env::var("DYNASPA_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    });
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

/// A GPU test whose backend did not open: skipped with the reason, unless
/// `DYNASPA_REQUIRE_BACKENDS` names it, then failed.
pub fn skip(name: &str, e: impl std::fmt::Display) {
    assert!(!listed("DYNASPA_REQUIRE_BACKENDS", name), "{name} is required: {e}");
    eprintln!("skipped {name}: {e}");
}

/// A test whose external tool (or data package) is missing: skipped with the reason, unless
/// `DYNASPA_REQUIRE_TOOLS` names the tool (CI lists what it installs), then failed.
pub fn skip_tool(test: &str, tool: &str, why: &str) {
    assert!(!listed("DYNASPA_REQUIRE_TOOLS", tool), "{test}: {tool} is required: {why}");
    println!("SKIPPED {test}: {why}");
}
