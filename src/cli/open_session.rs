//! How the commands open sessions: `--backend`, `--device`, `--threads`, `--precision` and `--profile FILE` /
//! `--no-profile` become a `SessionBuilder`; the profile the session uses (shipped for this
//! device by default) is printed as one line.

use dynaspa::runtime::graph::Graph;
use dynaspa::{Backend, Error, Precision, ProfileChoice, Result, Session, SessionBuilder};
use std::path::{Path, PathBuf};

#[derive(clap::Args, Clone, Debug, Default)]
pub struct ProfileOpts {
    /// Tuned PolyKernels (`dynaspa tune`) for the sparse ops instead of the shipped profile for
    /// this device; a profile made for another device, an older profile format or kernels this
    /// build no longer has is an error.
    #[arg(long, value_name = "FILE", conflicts_with = "no_profile")]
    pub profile: Option<PathBuf>,
    /// Calibrate the sparse ops on this machine instead of using any profile.
    #[arg(long)]
    pub no_profile: bool,
}

impl ProfileOpts {
    pub fn choice(&self) -> ProfileChoice {
        match (&self.profile, self.no_profile) {
            (Some(p), _) => ProfileChoice::File(p.clone()),
            (None, true) => ProfileChoice::Calibrate,
            (None, false) => ProfileChoice::Shipped,
        }
    }
}

/// The builder for `--backend`, `--device`, `--threads` and `--precision`.
pub fn builder(backend: Backend, device: Option<&str>, threads: Option<usize>, precision: Precision) -> SessionBuilder {
    let b = Session::builder().backend(backend).threads_opt(threads).precision(precision);
    match device {
        Some(d) => b.device(d),
        None => b,
    }
}

/// Opens `g` (loaded from `model` by `b`) with the profile `opts` choose and prints which one
/// it uses.
pub fn open(b: SessionBuilder, opts: &ProfileOpts, g: Graph, model: &Path) -> Result<Session> {
    let session = b.profile_choice(opts.choice()).open_graph(g, Some(model)).map_err(|e| match e {
        Error::Profile { path, reason } if opts.profile.is_some() => Error::Profile {
            path,
            reason: format!("{reason} (run without --profile to use the shipped one, or --no-profile to calibrate)"),
        },
        e => e,
    })?;
    if let Some(line) = session.profile_used() {
        println!("profile: {line}");
    }
    Ok(session)
}
