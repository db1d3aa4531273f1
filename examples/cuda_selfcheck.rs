//! GPU self-check of the CUDA backend, built to be copied to a GPU machine without a Rust
//! toolchain: `cargo build --release --example cuda_selfcheck`, then run
//! `target/release/examples/cuda_selfcheck [--device N] [--seed S]`. Prints a PASS/FAIL line per
//! check (kernels of the shared dialect against CPU references, the zero-fill stream and its
//! events, the disk cache, the bitmask/DISTile kernel against the host's BitMask) and exits 1
//! on any failure, 2 on bad arguments. `RUST_LOG=debug` shows compiles and library lookups.

use dynaspa::backends::cuda::selfcheck;
use std::process::ExitCode;

fn parse() -> Result<(usize, u64), String> {
    let (mut device, mut seed) = (0usize, selfcheck::seed_from_env());
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match a.as_str() {
            "--device" => device = value("--device")?.parse().map_err(|e| format!("--device: {e}"))?,
            "--seed" => seed = value("--seed")?.parse().map_err(|e| format!("--seed: {e}"))?,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    Ok((device, seed))
}

fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    let (device, seed) = match parse() {
        Ok(v) => v,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("error: {e}");
            }
            eprintln!("usage: cuda_selfcheck [--device N] [--seed S]   (seed also from DYNASPA_TEST_SEED)");
            return ExitCode::from(2);
        }
    };
    println!("cuda_selfcheck: device {device}, seed {seed}");
    let failures = selfcheck::run_all(device, seed, &mut |name, outcome| match outcome {
        Ok(detail) => println!("PASS {name}: {detail}"),
        Err(why) => println!("FAIL {name}: {why}"),
    });
    if failures == 0 {
        println!("ALL PASS");
        ExitCode::SUCCESS
    } else {
        println!("{failures} FAILED (seed {seed})");
        ExitCode::from(1)
    }
}
