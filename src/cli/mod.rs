//! Command definitions and dispatch.

mod inspect;
mod run;

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "dynaspa", version, about = "Run vision DNNs with dynamic spatial sparsity")]
pub struct Cli {
    #[command(subcommand)]
    cmd: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a model on inputs (.npy or images) and write every output as .npy.
    Run(run::RunArgs),
    /// Show a model's inputs, outputs, ops, parameters and planned peak memory.
    Inspect(InspectArgs),
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

pub fn dispatch(cli: Cli) -> dynaspa::Result<()> {
    match cli.cmd {
        Command::Run(a) => run::run(a),
        Command::Inspect(a) => inspect::inspect(a),
    }
}
