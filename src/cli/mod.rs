//! Command definitions and dispatch.

mod bench;
mod delta_opts;
mod devices;
mod edit;
mod feed;
mod frames;
mod inspect;
mod node_table;
mod open_session;
mod overlay;
mod overlay_draw;
mod profile;
mod progress;
mod run;
mod stats;
pub mod trace;
mod tune;
mod version;

use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// The environment the library reads (docs/configuration.md has the library options too).
const ENVIRONMENT: &str = "\
Environment (docs/configuration.md):
  DYNASPA_CACHE_DIR      calibration and compiled-kernel cache (default $XDG_CACHE_HOME/dynaspa or ~/.cache/dynaspa)
  DYNASPA_CUDA_LIB       libcuda to load, file or directory (default: the linker's path, $CUDA_HOME, /usr/local/cuda)
  DYNASPA_NVRTC_LIB      libnvrtc to load, file or directory (default: as libcuda, then NVIDIA's pip wheels)
  DYNASPA_CUDNN_LIB      libcudnn to load, file or directory (default: LD_LIBRARY_PATH, $CUDA_HOME, pip wheels)
  DYNASPA_CUDA_DEVICE    default --device for cuda (default 0)
  DYNASPA_OPENCL_DEVICE  default --device for opencl (default: the first GPU)
  DYNASPA_WGPU_DEVICE    default --device for wgpu (default: the first GPU)
  RUST_LOG               log filter (default warn)
Debugging aids:
  DYNASPA_GPU_POISON=1       NaN-fill every node's outputs before its kernels run (default off)
  DYNASPA_FORCE_MEMBER=HxW   run that PolyKernel member, or `dense`, for every sparse op (default: dispatch picks)
  DYNASPA_NVRTC_LINEINFO=1   compile CUDA kernels with line tables for Nsight Compute (default off)";

#[derive(Parser)]
#[command(name = "dynaspa", version = version::VERSION, about = "Run vision DNNs with dynamic spatial sparsity", after_help = ENVIRONMENT)]
pub struct Cli {
    #[command(subcommand)]
    cmd: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a model on inputs (.npy or images) and write every output as .npy, or on every frame
    /// of a directory, video or camera (--frames).
    Run(run::RunArgs),
    /// Show a model's inputs, outputs, ops, parameters and planned peak memory.
    Inspect(InspectArgs),
    /// Run frames and print the overhead breakdown per sparse op (DynaSpa's Table 4); --trace
    /// writes a Chrome trace.
    Profile(profile::ProfileArgs),
    /// Time the same frames sparse and dense, interleaved; prints speedup_vs_dense.
    Bench(bench::BenchArgs),
    /// List every backend of this build and its devices (the OpenCL ones with their limits);
    /// `--device` of the other commands takes the number in brackets.
    Devices(devices::DevicesArgs),
    /// Tune the model's sparse ops on a backend (or predict for a built-in device) and write a
    /// profile for `run --profile` / `bench --profile`.
    Tune(Box<tune::TuneArgs>),
}

#[derive(clap::Args)]
pub struct InspectArgs {
    /// ONNX model file.
    model: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Batch size for a symbolic first input dimension.
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Show the graph delta mode runs (`run --delta`): which convs the frame's change map
    /// reaches, and the activations it keeps between frames. The value is not used here.
    #[arg(long, value_name = "T")]
    delta: Option<f32>,
    /// With --delta: the frame input (default: the only [N, C, H, W] FLOAT input).
    #[arg(long, value_name = "NAME", requires = "delta")]
    frame_input: Option<String>,
}

impl Cli {
    /// True when the command records a trace, so `main` installs the recording layer.
    pub fn wants_trace(&self) -> bool {
        matches!(&self.cmd, Command::Profile(p) if p.trace.is_some())
    }
}

pub fn dispatch(cli: Cli, recorder: Option<trace::Recorder>) -> dynaspa::Result<()> {
    match cli.cmd {
        Command::Run(a) => run::run(a),
        Command::Inspect(a) => inspect::inspect(a),
        Command::Profile(a) => profile::profile(a, recorder),
        Command::Bench(a) => bench::bench(a),
        Command::Devices(a) => devices::devices_cmd(a),
        Command::Tune(a) => tune::tune(*a),
    }
}
