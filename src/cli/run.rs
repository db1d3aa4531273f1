//! `dynaspa run`: feed inputs, run, write outputs, report timing.

use dynaspa::io::{image, npy, write_atomic};
use dynaspa::{Error, LoadOptions, OpenOptions, Result, Tensor};
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(clap::Args)]
pub struct RunArgs {
    /// ONNX model file.
    model: PathBuf,
    /// NAME=PATH (repeatable); PATH is a float32 .npy or an image (png, jpg, bmp). A bare PATH
    /// feeds a model that has exactly one input.
    #[arg(long = "input", short = 'i', required = true)]
    inputs: Vec<String>,
    /// Backend: auto or cpu.
    #[arg(long, default_value = "auto")]
    backend: String,
    /// Write each graph output here as <name>.npy.
    #[arg(long)]
    output_dir: Option<PathBuf>,
    /// Per-channel mean for image inputs, e.g. 0.485,0.456,0.406 (default: model metadata).
    #[arg(long, value_delimiter = ',')]
    mean: Option<Vec<f32>>,
    /// Per-channel std for image inputs (default: model metadata).
    #[arg(long, value_delimiter = ',')]
    std: Option<Vec<f32>>,
    /// Batch size for a symbolic first input dimension.
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// CPU worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Run this many times and report the median (the first run is a warm-up when > 1).
    #[arg(long, default_value_t = 1)]
    repeat: usize,
}

/// Output names become file names: anything outside [A-Za-z0-9._-] turns into '_'.
pub fn file_name_for(output: &str) -> String {
    let s: String =
        output.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' }).collect();
    if s.is_empty() || s == "." || s == ".." {
        format!("output{s}")
    } else {
        s
    }
}

fn parse_floats(s: &str) -> Option<Vec<f32>> {
    s.split(',').map(|p| p.trim().parse().ok()).collect()
}

pub fn run(a: RunArgs) -> Result<()> {
    let t0 = Instant::now();
    let opts = OpenOptions { load: LoadOptions { batch: a.batch, ..Default::default() }, threads: a.threads, ..Default::default() };
    let mut session = dynaspa::open(&a.model, &a.backend, &opts)?;
    let load_ms = t0.elapsed().as_secs_f64() * 1e3;
    let g = session.graph();
    let meta = |k: &str| g.metadata.get(k).and_then(|s| parse_floats(s));
    let mean = a.mean.clone().or_else(|| meta("dynaspa.mean")).unwrap_or_else(|| vec![0.0; 3]);
    let std = a.std.clone().or_else(|| meta("dynaspa.std")).unwrap_or_else(|| vec![1.0; 3]);

    let mut feeds = Vec::new();
    for spec in &a.inputs {
        let (name, path) = match spec.split_once('=') {
            Some((n, p)) => (n.to_string(), PathBuf::from(p)),
            None if g.inputs.len() == 1 => (g.values[g.inputs[0]].name.clone(), PathBuf::from(spec)),
            None => {
                return Err(Error::Other(format!(
                    "--input '{spec}' needs the form NAME=PATH; the model's inputs are: {}",
                    g.input_names().join(", ")
                )))
            }
        };
        let id = g.inputs.iter().copied().find(|&i| g.values[i].name == name).ok_or_else(|| Error::Input {
            name: name.clone(),
            msg: format!("the model has no such input; its inputs are: {}", g.input_names().join(", ")),
        })?;
        let t = read_input(&path, &g.values[id].shape, &mean, &std)
            .map_err(|e| Error::Input { name: name.clone(), msg: e.to_string() })?;
        feeds.push((name, t));
    }

    let repeat = a.repeat.max(1);
    let mut times = Vec::with_capacity(repeat);
    let mut outs = Vec::new();
    for i in 0..repeat {
        let t = Instant::now();
        outs = session.run(feeds.clone())?;
        if repeat == 1 || i > 0 {
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];

    let mut written = Vec::new();
    if let Some(dir) = &a.output_dir {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        for (name, t) in &outs {
            let p = dir.join(format!("{}.npy", file_name_for(name)));
            write_atomic(&p, &npy::encode(t)).map_err(|e| Error::io(&p, e))?;
            written.push(p.display().to_string());
        }
    }
    for (name, t) in &outs {
        println!("output {name} {} {:?}{}", t.dtype(), t.shape(), top_k(t));
    }
    println!(
        "{}: backend {}, load {:.1} ms, run {:.2} ms (median of {}), {} output(s){}",
        a.model.display(),
        session.backend_name(),
        load_ms,
        median,
        times.len(),
        outs.len(),
        if written.is_empty() { String::new() } else { format!(" written to {}", a.output_dir.as_ref().unwrap().display()) }
    );
    Ok(())
}

fn read_input(path: &Path, shape: &[usize], mean: &[f32], std: &[f32]) -> Result<Tensor> {
    if image::is_image(path) {
        image::load_for_input(path, shape, mean, std)
    } else {
        npy::read(path)
    }
}

/// For classifier-like outputs ([1, K] floats), the five best classes.
fn top_k(t: &Tensor) -> String {
    let (Ok(v), [1, k]) = (t.as_f32(), t.shape()) else { return String::new() };
    if *k < 2 {
        return String::new();
    }
    let mut idx: Vec<usize> = (0..*k).collect();
    idx.sort_by(|&a, &b| v[b].total_cmp(&v[a]));
    let best: Vec<String> = idx.iter().take(5).map(|&i| format!("{i}:{:.3}", v[i])).collect();
    format!("  top-5 {}", best.join(" "))
}
