//! GPU self-check of the CUDA backend, built to be copied to a GPU machine without a Rust
//! toolchain: `cargo build --release --example cuda_selfcheck`, then, from a copy of the
//! repository (for the models and goldens), run
//! `target/release/examples/cuda_selfcheck [--device N] [--seed S] [--repo DIR]`
//! (`--goldens-backend cpu` runs the goldens part on another backend: a check of this harness;
//! `--precision f16` runs the goldens in half precision, within the half-storage floor 2e-2).
//!
//! Prints a PASS/FAIL line per check and exits 1 on any failure, 2 on bad arguments:
//! - the device layer (dynaspa_backends::cuda::selfcheck): shared-dialect kernels against CPU
//!   references on random data with poisoned outputs, the zero-fill stream and its events, the
//!   disk kernel cache, the bitmask/DISTile kernel against the host's BitMask, misuse errors;
//! - the executor end to end: every model of tests/goldens/ on the `cuda` backend (outputs
//!   poisoned before each node) against the ONNX Runtime goldens, as tests/goldens.rs does;
//!   where cuDNN loads, again with every conv it can run forced onto it.
//!
//! `RUST_LOG=debug` shows compiles and library lookups.

use dynaspa::backends::cuda::{cudnn, cudnn_lib, selfcheck};
use dynaspa::backends::gpu::VendorPolicy;
use dynaspa::io::npy;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

struct Args {
    device: usize,
    seed: u64,
    repo: PathBuf,
    /// The backend the goldens run on (`cpu` checks this harness itself without a GPU).
    backend: String,
    precision: dynaspa::Precision,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        device: 0,
        seed: selfcheck::seed_from_env(),
        repo: PathBuf::from("."),
        backend: "cuda".into(),
        precision: dynaspa::Precision::F32,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--device" => a.device = value("--device")?.parse().map_err(|e| format!("--device: {e}"))?,
            "--seed" => a.seed = value("--seed")?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--repo" => a.repo = PathBuf::from(value("--repo")?),
            "--goldens-backend" => a.backend = value("--goldens-backend")?,
            "--precision" => a.precision = value("--precision")?.parse().map_err(|e: dynaspa::Error| e.to_string())?,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    Ok(a)
}

/// Relative L2 error ||a - b|| / ||b||.
fn rel_l2(a: &[f32], b: &[f32]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| ((*x as f64) - (*y as f64)).powi(2)).sum();
    let den: f64 = b.iter().map(|y| (*y as f64).powi(2)).sum();
    (num / den.max(1e-30)).sqrt()
}

fn names(meta: &serde_json::Value, plural: &str, singular: &str) -> Result<Vec<String>, String> {
    match meta[plural].as_array() {
        Some(a) => Ok(a.iter().filter_map(|v| v.as_str().map(String::from)).collect()),
        None => meta[singular].as_str().map(|s| vec![s.to_string()]).ok_or_else(|| format!("meta.json lacks '{plural}'")),
    }
}

/// One golden model on `backend`, with the limits of tests/goldens.rs: relative L2 at most the
/// model's tolerance (1e-4 by default), masks flipping at most 1e-3 of their positions (and
/// then the case's other outputs within 5e-2). In half precision the limits are the floor of
/// half storage: 2e-2, and masks flipping at most 1e-2.
fn check_golden(a: &Args, dir: &Path, vendor_convs: Option<VendorPolicy>) -> selfcheck::Outcome {
    let (repo, backend, device) = (a.repo.as_path(), a.backend.as_str(), a.device);
    let half = a.precision == dynaspa::Precision::F16;
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).map_err(|e| format!("{}: {e}", dir.display()))?)
            .map_err(|e| e.to_string())?;
    let model = repo.join(meta["model"].as_str().ok_or("meta.json lacks 'model'")?);
    let (inputs, outputs) = (names(&meta, "inputs", "input")?, names(&meta, "outputs", "output")?);
    let masks: Vec<String> =
        meta["masks"].as_array().map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect()).unwrap_or_default();
    let tol = meta["tolerance_rel_l2"].as_f64().unwrap_or(1e-4).max(if half { 2e-2 } else { 0.0 });
    let cases = meta["cases"].as_array().map_or(0, |c| c.len());
    let mut builder = dynaspa::Session::builder()
        .backend(backend.parse().map_err(|e: dynaspa::Error| e.to_string())?)
        .device(device)
        .precision(a.precision)
        .profile_choice(dynaspa::ProfileChoice::Calibrate)
        .debug(dynaspa::DebugOptions { poison: true, ..Default::default() });
    if let Some(p) = vendor_convs {
        builder = builder.vendor_convs(p);
    }
    let t0 = std::time::Instant::now();
    let mut s = builder.open(&model).map_err(|e| format!("open {}: {e}", model.display()))?;
    let load_ms = t0.elapsed().as_secs_f64() * 1e3;
    let (mut worst, mut flips, mut cells) = (0f64, 0usize, 0usize);
    let read = |n: &str, i: usize| npy::read(&dir.join(format!("{n}_{i}.npy"))).map_err(|e| e.to_string());
    for i in 0..cases {
        let feeds = inputs.iter().map(|n| Ok((n.clone(), read(n, i)?))).collect::<Result<Vec<_>, String>>()?;
        let outs = s.run(feeds).map_err(|e| format!("case {i}: {e}"))?;
        let get = |n: &str| outs.iter().find(|(o, _)| o == n).map(|(_, t)| t).ok_or_else(|| format!("no output {n}"));
        let mut case_flips = 0;
        for m in &masks {
            let (got, want) = (get(m)?, read(m, i)?);
            let (g, w) = (got.as_f32().map_err(|e| e.to_string())?, want.as_f32().map_err(|e| e.to_string())?);
            if got.shape() != want.shape() || g.iter().any(|&v| v != 0.0 && v != 1.0) {
                return Err(format!("case {i}: mask {m} is {:?} / not binary", got.shape()));
            }
            case_flips += g.iter().zip(w).filter(|(a, b)| a != b).count();
            cells += g.len();
        }
        flips += case_flips;
        for o in outputs.iter().filter(|o| !masks.contains(o)) {
            let (got, want) = (get(o)?, read(o, i)?);
            if got.shape() != want.shape() {
                return Err(format!("case {i}: {o} has shape {:?}, golden {:?}", got.shape(), want.shape()));
            }
            let err = rel_l2(got.as_f32().map_err(|e| e.to_string())?, want.as_f32().map_err(|e| e.to_string())?);
            let limit = if case_flips == 0 { tol } else { 5e-2 };
            if err.is_nan() || err > limit {
                return Err(format!("case {i}: {o} relative L2 {err:.2e} > {limit:.0e} ({case_flips} mask flips)"));
            }
            if case_flips == 0 {
                worst = worst.max(err);
            }
        }
    }
    let rate = if cells > 0 { flips as f64 / cells as f64 } else { 0.0 };
    let max_rate = if half { 1e-2 } else { 1e-3 };
    if rate > max_rate {
        return Err(format!("mask flip rate {rate:.2e} > {max_rate:.0e}"));
    }
    Ok(format!("{cases} cases, worst relative L2 {worst:.2e}, mask flips {flips}/{cells}, load {load_ms:.0} ms"))
}

fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    let a = match parse() {
        Ok(v) => v,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("error: {e}");
            }
            eprintln!("usage: cuda_selfcheck [--device N] [--seed S] [--repo DIR] [--goldens-backend cuda|opencl|cpu] [--precision f32|f16]\n  (seed also from DYNASPA_TEST_SEED)");
            return ExitCode::from(2);
        }
    };
    println!("cuda_selfcheck: device {}, seed {}, repository {}", a.device, a.seed, a.repo.display());
    println!("{}", cudnn_lib::describe());
    let mut report = |name: &str, outcome: &selfcheck::Outcome| match outcome {
        Ok(detail) => println!("PASS {name}: {detail}"),
        Err(why) => println!("FAIL {name}: {why}"),
    };
    let mut failures = selfcheck::run_all(a.device, a.seed, &mut report);
    if a.backend != "cuda" || dynaspa::backends::cuda::probe().is_ok() {
        let goldens = a.repo.join("tests/goldens");
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(&goldens)
            .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.join("meta.json").is_file()).collect())
            .unwrap_or_default();
        dirs.sort();
        if dirs.is_empty() {
            report("goldens", &Err(format!("no tests/goldens/*/meta.json under {} (pass --repo)", a.repo.display())));
            failures += 1;
        }
        for d in &dirs {
            let name = format!("golden {} [{}, {}]", d.file_name().unwrap_or_default().to_string_lossy(), a.backend, a.precision);
            let o = check_golden(&a, d, None);
            failures += o.is_err() as usize;
            report(&name, &o);
        }
        // Again with every conv cuDNN can run on cuDNN, where it loads.
        if a.backend == "cuda" && cudnn_lib::load_status().is_ok() {
            let before = cudnn::stats().launches;
            for d in &dirs {
                let name = format!("golden {} [cuda, {}, cuDNN forced]", d.file_name().unwrap_or_default().to_string_lossy(), a.precision);
                let o = check_golden(&a, d, Some(VendorPolicy::Always));
                failures += o.is_err() as usize;
                report(&name, &o);
            }
            let calls = cudnn::stats().launches - before;
            let o = if calls > 0 {
                Ok(format!("{calls} cuDNN conv calls in the forced golden runs"))
            } else {
                Err("cuDNN forced, but the goldens made no cuDNN call".to_string())
            };
            failures += o.is_err() as usize;
            report("goldens used cuDNN", &o);
        }
    }
    if failures == 0 {
        println!("ALL PASS");
        ExitCode::SUCCESS
    } else {
        println!("{failures} FAILED (seed {})", a.seed);
        ExitCode::from(1)
    }
}
