//! `--profile FILE` / `--no-profile` of `run`, `bench` and `profile`, and the shipped profile
//! they use by default (`dynaspa::profiles`). The choice is printed as one line: the profile
//! used, or why there is none and the sparse ops are calibrated.

use dynaspa::backends::cpu::SparseConfig;
use dynaspa::profiles::{self, Checked, Shipped};
use dynaspa::runtime::graph::Graph;
use dynaspa::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

/// Where the session runs, as the profile checks need it.
pub struct Target<'a> {
    pub model: &'a Path,
    pub backend: &'a str,
    pub threads: Option<usize>,
    pub device: Option<&'a str>,
}

/// Picks the profile for `g` (the model with its sparse ops found), prints the choice and
/// returns the sparse settings carrying it (`None`: calibrate, settings from the environment).
pub fn choose(opts: &ProfileOpts, g: &Graph, t: &Target) -> Result<Option<SparseConfig>> {
    let (line, checked) = decide(opts, g, t)?;
    println!("profile: {line}");
    Ok(checked.map(|c| {
        let mut cfg = SparseConfig::from_env();
        cfg.profile = Some(Arc::new(c.profile));
        cfg
    }))
}

fn decide(opts: &ProfileOpts, g: &Graph, t: &Target) -> Result<(String, Option<Checked>)> {
    let device = || profiles::this_device(t.backend, t.threads, t.device);
    if let Some(path) = &opts.profile {
        let c = profiles::check_file(path, &device()?, g)
            .map_err(|e| Error::Other(format!("--profile: {e} (run without --profile to use the shipped one, or --no-profile to calibrate)")))?;
        return Ok((used(&c, "--profile"), Some(c)));
    }
    if opts.no_profile {
        return Ok(("none (--no-profile); calibrating".into(), None));
    }
    if !g.nodes.iter().any(|n| n.sparse.is_some()) {
        return Ok(("none (the model has no sparse ops)".into(), None));
    }
    Ok(match profiles::find_shipped(t.model, g, device)? {
        Shipped::Use(c) => (used(&c, "shipped"), Some(c)),
        Shipped::None(why) => (format!("none ({why}); calibrating"), None),
    })
}

fn used(c: &Checked, how: &str) -> String {
    let d = &c.profile.device;
    format!(
        "{} ({how}, {} for {} '{}', {} of {} sparse ops)",
        c.path.display(),
        if c.profile.predicted { "predicted" } else { "tuned" },
        d.backend,
        d.name,
        c.covers.0,
        c.covers.1
    )
}
