//! The typed choices a session is opened with: backend, precision, profile, and the debugging
//! aids kept apart from them.

use crate::backends::ForceMember;
use dynaspa_runtime::profile::Profile;
use dynaspa_runtime::Error;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

/// Where a session runs. `Auto` picks the best backend this build and machine have.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Backend {
    #[default]
    Auto,
    Cpu,
    OpenCl,
    Cuda,
    Wgpu,
}

impl Backend {
    pub const ALL: [Backend; 5] = [Backend::Auto, Backend::Cpu, Backend::OpenCl, Backend::Cuda, Backend::Wgpu];

    /// The name the CLI, the C ABI and device listings use ("opencl").
    pub fn name(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Cpu => "cpu",
            Backend::OpenCl => "opencl",
            Backend::Cuda => "cuda",
            Backend::Wgpu => "wgpu",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = Error;
    /// Parses a backend name; whether the backend is present is asked when a session opens.
    fn from_str(s: &str) -> Result<Backend, Error> {
        let lower = s.trim().to_ascii_lowercase();
        Backend::ALL.into_iter().find(|b| b.name() == lower).ok_or_else(|| {
            let names: Vec<&str> = Backend::ALL.iter().map(|b| b.name()).collect();
            Error::Other(format!("unknown backend '{s}'; the backends are {}", names.join(", ")))
        })
    }
}

/// Which tuned profile the sparse ops use.
#[derive(Clone, Debug, Default)]
pub enum ProfileChoice {
    /// The profile shipped for this device and model (`profiles/<device>/<model stem>.json` in
    /// the model's folder or above it); without one the sparse ops are calibrated at open.
    #[default]
    Shipped,
    /// This file; refused (an error at open) unless it was made for this device, this build's
    /// kernels and the model's sparse ops.
    File(PathBuf),
    /// A profile already in memory, checked as a file is; `name` stands for its path in messages.
    Loaded { name: String, profile: Arc<Profile> },
    /// No profile: calibrate at open.
    Calibrate,
}

/// Debugging aids, apart from the user's options: none changes results, only what is checked
/// or reported.
#[derive(Clone, Debug, Default)]
pub struct DebugOptions {
    /// GPU backends: fill node outputs with NaN before their kernels run, so an output a kernel
    /// does not write shows in the results.
    pub poison: bool,
    /// GPU backends: time every step (on the device where it has queue timestamps, else a sync per step; `FrameReport::step_times`).
    pub step_times: bool,
    /// Run this member of every sparse op's PolyKernel instead of dispatching per frame.
    pub force_member: Option<ForceMember>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_parse_from_their_names_and_refuse_others() {
        for b in Backend::ALL {
            assert_eq!(b.name().parse::<Backend>().unwrap(), b);
            assert_eq!(b.to_string().to_uppercase().parse::<Backend>().unwrap(), b);
        }
        let e = "tpu".parse::<Backend>().unwrap_err().to_string();
        assert!(e.contains("unknown backend 'tpu'") && e.contains("opencl"), "{e}");
    }
}
