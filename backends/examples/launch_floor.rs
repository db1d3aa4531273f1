//! What one kernel launch costs on a GPU backend when the kernel does next to nothing: the floor
//! under every member of a PolyKernel, and what the host spends setting arguments.
//!
//!     cargo build --release -p dynaspa-backends --example launch_floor
//!     target/release/examples/launch_floor --backend cuda|opencl [--device SEL] [--samples 30] [--runs 50]
//!
//! A kernel of 24 arguments (8 buffers, 16 ints, as many as a sparse GEMM member takes) whose
//! work-items only compare one argument, launched `--runs` times back to back and then waited
//! for; µs per launch is the median over `--samples` of (elapsed / runs), after a warm-up.
//! Cases: `same` (identical arguments each launch), `changed` (two buffer sets and an int
//! alternating, 9 arguments new per launch), `wave` (same arguments, 132 groups of 256), and
//! `round_trip` (one launch, then wait: what a blocking readback per op would add).
//! OpenCL launches set only the arguments that changed and ask no event (opencl/launch.rs).

use dynaspa_backends::gpu::{Arg, GpuDevice, KernelSpec};
use dynaspa_runtime::Result;
use std::time::Instant;

const SOURCE: &str = "
KERNEL floor_k(GLOBAL float* y, GLOBAL const float* a, GLOBAL const float* b, GLOBAL const float* c,
               GLOBAL const float* d, GLOBAL const float* e, GLOBAL const float* f, GLOBAL const float* g,
               int n0, int n1, int n2, int n3, int n4, int n5, int n6, int n7,
               int n8, int n9, int n10, int n11, int n12, int n13, int n14, int n15) {
    /* Never true for the arguments given: the launch does no memory traffic, yet no argument
       can be dropped by the compiler. */
    if (GLOBAL_ID(0) == n0 && n1 < 0)
        y[0] = a[n2] + b[n3] + c[n4] + d[n5] + e[n6] + f[n7] + g[n8] + (float)(n9 + n10 + n11 + n12 + n13 + n14 + n15);
}
";

struct Opts {
    backend: String,
    device: Option<String>,
    samples: usize,
    runs: usize,
}

fn usage(msg: &str) -> ! {
    eprintln!("launch_floor: {msg}");
    eprintln!("usage: launch_floor --backend cuda|opencl [--device SEL] [--samples N] [--runs N]");
    std::process::exit(2)
}

fn parse() -> Opts {
    let mut o = Opts { backend: String::new(), device: None, samples: 30, runs: 50 };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| usage(&format!("{k} needs a value")));
        let count = |v: String| v.parse::<usize>().ok().filter(|&n| n > 0).unwrap_or_else(|| usage(&format!("bad count '{v}'")));
        match k.as_str() {
            "--backend" => o.backend = val(),
            "--device" => o.device = Some(val()),
            "--samples" => o.samples = count(val()),
            "--runs" => o.runs = count(val()),
            _ => usage(&format!("unknown argument '{k}'")),
        }
    }
    if o.backend.is_empty() {
        usage("--backend is required");
    }
    o
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn run<D: GpuDevice>(d: &D, o: &Opts) -> Result<()> {
    let spec = KernelSpec { file: "launch_floor.cl", source: SOURCE, entry: "floor_k", defines: vec![] };
    let k = d.kernel(&spec)?;
    let bufs: Vec<D::Buffer> = (0..16).map(|_| d.alloc(1024)).collect::<Result<_>>()?;
    let args = |set: usize, n1: i32| -> Vec<Arg<'_, D::Buffer>> {
        let mut a: Vec<Arg<'_, D::Buffer>> = bufs[set * 8..set * 8 + 8].iter().map(Arg::Buf).collect();
        a.push(Arg::I32(-1));
        a.push(Arg::I32(n1));
        a.extend((2..16).map(|i| Arg::I32(i % 7)));
        a
    };
    let time = |runs: usize, groups: u32, local: u32, change: bool| -> Result<f64> {
        let mut per = Vec::with_capacity(o.samples);
        for s in 0..o.samples + 3 {
            let t = Instant::now();
            for r in 0..runs {
                let set = if change { r % 2 } else { 0 };
                d.launch(&k, [groups, 1, 1], [local, 1, 1], &args(set, if change { r as i32 } else { 1 }))?;
            }
            d.finish()?;
            // The first samples warm the driver's caches.
            if s >= 3 {
                per.push(t.elapsed().as_secs_f64() * 1e6 / runs as f64);
            }
        }
        Ok(median(per))
    };
    println!("device: {}", d.info().name);
    for (case, runs, groups, local, change) in [
        ("same", o.runs, 1, 64, false),
        ("changed", o.runs, 1, 64, true),
        ("wave", o.runs, 132, 256, false),
        ("round_trip", 1, 1, 64, false),
    ] {
        println!("{case:<10} {:>8.2} us per launch", time(runs, groups, local, change)?);
    }
    Ok(())
}

fn main() {
    let o = parse();
    let r = match o.backend.as_str() {
        #[cfg(feature = "cuda")]
        "cuda" => dynaspa_backends::cuda::shared_device(o.device.as_deref(), None).and_then(|d| run(&*d, &o)),
        #[cfg(feature = "opencl")]
        "opencl" => dynaspa_backends::opencl::shared_device(o.device.as_deref(), None).and_then(|d| run(&*d, &o)),
        other => usage(&format!("backend '{other}' is not cuda or opencl in this build")),
    };
    if let Err(e) = r {
        eprintln!("launch_floor: {e}");
        std::process::exit(1);
    }
}
