//! `dynaspa run`: feed inputs, run, write outputs, report timing. With `--frames` the loop over
//! frames lives in `frames.rs`.

use super::delta_opts::DeltaOpts;
use super::feed;
use super::open_session::{self, ProfileOpts};
use dynaspa::io::{npy, write_atomic};
use dynaspa::{Backend, Error, LoadOptions, Result, Tensor};
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(clap::Args)]
#[command(after_help = "\
With --frames, every frame is decoded, resized to the frame input's H x W and fed to it; other
inputs (e.g. SIGE's mask) come from --input and stay the same for every frame. Each frame prints
its latency, the mean mask density of the sparse ops and the kernels chosen (from the backend's
frame report; '-' when no op ran sparsely).

--overlay writes each frame as a PNG: the mask of one sparse op (--overlay-op, default the first)
tinted over the frame, the DISTiles the op ran on outlined (the granularity the frame's report
gives; none where the dense member ran) and a strip below with the frame's latency and mask
density, and the op's density and tile count. The mask is the runtime's own (fetched from the
session every frame), so any model with sparse ops can be drawn. --overlay-op may also name a
mask the model publishes as a graph output (mask*: [N, 1, h, w] maps, or A-ViT's [N, T] token
masks, whose token 0 is the class token and tokens 1.. the patch grid, taken from the model's
dynaspa.token_grid metadata or inferred from T - 1 and the frame's aspect). Frames narrower
than 384 pixels are enlarged by a whole factor to at least 384.

Profiles: by default the shipped profile for this device and model is used (profiles/<device>/
<model>.json in the nearest profiles/ folder at or above the model's folder); --profile FILE
names another, --no-profile calibrates instead. The first line says which, or why none.")]
pub struct RunArgs {
    /// ONNX model file.
    pub model: PathBuf,
    /// NAME=PATH (repeatable); PATH is a float32 .npy or an image (png, jpg, bmp). A bare PATH
    /// feeds a model that has exactly one input. With --frames: the inputs other than the frames.
    #[arg(long = "input", short = 'i', required_unless_present = "frames")]
    pub inputs: Vec<String>,
    /// Run every frame of a directory of images (png/jpg/bmp, file-name order), a video file
    /// (decoded by ffmpeg) or a camera /dev/videoN (ffmpeg, V4L2).
    #[arg(long, value_name = "DIR|VIDEO|/dev/videoN")]
    pub frames: Option<PathBuf>,
    /// The input frames feed (default: the only [N, 3, H, W] float input not given by --input).
    #[arg(long, value_name = "NAME", requires = "frames")]
    pub frame_input: Option<String>,
    /// Stop after this many frames.
    #[arg(long, value_name = "N", requires = "frames", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_frames: Option<u32>,
    /// Write each frame as PNG here, with a sparse op's mask tinted over it, its DISTiles
    /// outlined and a strip with the frame's latency and mask density.
    #[arg(long, value_name = "DIR", requires = "frames")]
    pub overlay: Option<PathBuf>,
    /// Which mask to draw: a sparse op's name (default: the first sparse op) or a mask
    /// output's name.
    #[arg(long, value_name = "NAME", requires = "overlay")]
    pub overlay_op: Option<String>,
    /// Backend: auto, cpu, opencl, cuda or wgpu (`dynaspa devices` lists what this machine has).
    #[arg(long, default_value = "auto")]
    pub backend: Backend,
    /// Float precision: f32, or f16 (GPU backends: weights and activations stored as half,
    /// arithmetic in f32; the CPU computes in f32 only).
    #[arg(long, default_value = "f32")]
    pub precision: dynaspa::Precision,
    /// GPU device: a number from `dynaspa devices`, PLATFORM:DEVICE (OpenCL), or part of its
    /// name (default: $DYNASPA_OPENCL_DEVICE / $DYNASPA_CUDA_DEVICE / $DYNASPA_WGPU_DEVICE, else
    /// the first GPU).
    #[arg(long, value_name = "SEL")]
    pub device: Option<String>,
    /// Write each graph output here as <name>.npy (with --frames: <frame>/<name>.npy).
    #[arg(long)]
    pub output_dir: Option<PathBuf>,
    /// Per-channel mean for image inputs, e.g. 0.485,0.456,0.406 (default: model metadata).
    #[arg(long, value_delimiter = ',')]
    pub mean: Option<Vec<f32>>,
    /// Per-channel std for image inputs (default: model metadata).
    #[arg(long, value_delimiter = ',')]
    pub std: Option<Vec<f32>>,
    /// Batch size for a symbolic first input dimension.
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// CPU worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    #[command(flatten)]
    pub profiles: ProfileOpts,
    /// Run this many times and report the median (the first run is a warm-up when > 1).
    #[arg(long, default_value_t = 1, conflicts_with = "frames")]
    pub repeat: usize,
    #[command(flatten)]
    pub delta: DeltaOpts,
    /// With --delta or --reference: also run densely and print how far the outputs are from it
    /// (relative L2).
    #[arg(long)]
    pub check: bool,
    /// An edit, as SIGE runs it: the frame input from this file (image or .npy) is computed
    /// whole first, then the --input file recomputes only where it differs from it (by more
    /// than --delta T, default 0), keeping the reference's activations elsewhere.
    #[arg(long, value_name = "PATH", conflicts_with = "frames")]
    pub reference: Option<PathBuf>,
    /// With --reference: also print the N slowest nodes of the edit (dense and sparse, with the
    /// density each sparse op ran at) by median time over the repeats.
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "25", requires = "reference")]
    pub nodes: Option<usize>,
}

/// Output names become file names: anything outside [A-Za-z0-9._-] turns into '_'.
pub fn file_name_for(output: &str) -> String {
    let s: String = output.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' }).collect();
    if s.is_empty() || s == "." || s == ".." {
        format!("output{s}")
    } else {
        s
    }
}

/// Writes every output as `<dir>/<name>.npy`.
pub fn write_outputs(dir: &Path, outs: &[(String, Tensor)]) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    for (name, t) in outs {
        let p = dir.join(format!("{}.npy", file_name_for(name)));
        write_atomic(&p, &npy::encode(t)).map_err(|e| Error::io(&p, e))?;
    }
    Ok(())
}

pub fn run(a: RunArgs) -> Result<()> {
    let t0 = Instant::now();
    if a.delta.delta.is_some() && a.frames.is_none() && a.reference.is_none() {
        return Err(Error::Other(
            "--delta needs --frames (each frame against the last) or --reference (an edit against its original)".into(),
        ));
    }
    if a.check && a.delta.delta.is_none() && a.reference.is_none() {
        return Err(Error::Other("--check compares delta mode with dense: give --delta or --reference".into()));
    }
    let builder = open_session::builder(a.backend, a.device.as_deref(), a.threads, a.precision)
        .load_options(LoadOptions { batch: a.batch, ..Default::default() })
        .delta(a.delta.options(None).or_else(|| a.reference.as_ref().map(|_| dynaspa::DeltaOptions::new(0.0))));
    let g = builder.load(&a.model)?;
    if let Some(src) = a.frames.clone() {
        return super::frames::run_frames(&a, &src, g, builder, t0);
    }
    if let Some(reference) = a.reference.clone() {
        return super::edit::run_edit(&a, &reference, g, builder, t0);
    }
    let mut session = open_session::open(builder, &a.profiles, g, &a.model)?;
    let load_ms = t0.elapsed().as_secs_f64() * 1e3;
    let g = session.graph();
    let (mean, std) = feed::normalisation(g, a.mean.as_deref(), a.std.as_deref());
    let feeds = feed::read_inputs(g, &a.inputs, &mean, &std)?;

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

    if let Some(dir) = &a.output_dir {
        write_outputs(dir, &outs)?;
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
        a.output_dir.as_ref().map_or_else(String::new, |d| format!(" written to {}", d.display()))
    );
    Ok(())
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
