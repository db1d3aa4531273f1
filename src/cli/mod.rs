//! Command definitions and dispatch.

mod bench;
mod devices;
mod feed;
mod frames;
mod inspect;
mod node_table;
mod overlay;
mod overlay_draw;
mod profile;
mod profile_choice;
mod progress;
mod run;
mod stats;
pub mod trace;
mod tune;
mod version;

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "dynaspa", version = version::VERSION, about = "Run vision DNNs with dynamic spatial sparsity")]
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
