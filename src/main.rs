//! The `dynaspa` command line.

mod cli;

use clap::Parser;
use std::process::ExitCode;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

fn main() -> ExitCode {
    let args = cli::Cli::parse(); // usage errors exit with status 2 here
    let env_filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // The console keeps RUST_LOG's level; the trace recorder (profile --trace only) sees every
    // span, the runtime's trace-level `node` spans included.
    let recorder = args.wants_trace().then(cli::trace::Recorder::new);
    tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_filter(env_filter))
        .with(recorder.as_ref().map(|r| r.layer()))
        .init();
    match cli::dispatch(args, recorder) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
