//! Which tuned profile a session uses. Shipped profiles live in a `profiles/<device>/<model>.json`
//! tree; the one for a model is the file named after the model's stem whose device is this
//! device. Every profile, shipped or named by the caller, is checked before use: its format
//! version is the one this build reads, it was made for this device (backend and fingerprint),
//! its members are named as this build's kernels name them, and it covers some of the model's
//! sparse ops. A profile that fails a check is refused with the reason, never used in part.

use crate::backends::{self, gpu::sparse_conv_knobs};
use crate::options::ProfileChoice;
use dynaspa_runtime::dispatch::Schedule;
use dynaspa_runtime::graph::Graph;
use dynaspa_runtime::profile::{DeviceId, MaskSetInfo, OpSignature, Profile};
use dynaspa_runtime::{Error, Result};
use std::path::{Path, PathBuf};

/// The device a session on `backend` ("auto", "cpu", "opencl", ...) would run on, with the
/// fingerprint profiles are matched by. The CPU's includes the worker count (`threads`, `None`:
/// every core); a GPU backend is opened once to ask (`device` selects as `--device` does), and its
/// fingerprint names the precision past f32 (profiles of one precision say nothing of another).
pub fn this_device(backend: &str, threads: Option<usize>, device: Option<&str>, precision: backends::Precision) -> Result<DeviceId> {
    let opts = backends::BackendOptions { threads, device: device.map(String::from), ..Default::default() };
    let name = match backend {
        "opencl" | "cuda" | "wgpu" | "cpu" => backend.to_string(),
        // `auto`'s choice, and the error naming an unknown backend, come from the backends.
        other => backends::create_configured(other, &opts)?.name().to_string(),
    };
    if name == "cpu" {
        let cpu = backends::cpu::CpuBackend::new(threads)?;
        return Ok(backends::cpu::cpu_device_id(cpu.threads()));
    }
    let (info, _) = backends::gpu_sparse_op_timers(&name, &opts, &Graph::default())?;
    Ok(DeviceId { backend: info.backend.clone(), name: info.name.clone(), fingerprint: backends::gpu::fingerprint_at(&info, precision) })
}

/// A profile that passed every check.
#[derive(Debug)]
pub struct Checked {
    pub path: PathBuf,
    pub profile: Profile,
    /// Sparse ops of the model it has a PolyKernel for, of how many.
    pub covers: (usize, usize),
}

/// What [`find_shipped`] found.
#[derive(Debug)]
pub enum Shipped {
    Use(Checked),
    /// No usable profile, and why (no tree, none for this model or device, or refused).
    None(String),
}

/// Reads `path` and runs every check against `device` and the graph `g` (with its sparse ops
/// found); the error names the file and what does not match.
pub fn check_file(path: &Path, device: &DeviceId, g: &Graph) -> Result<Checked> {
    check(read(path)?, path, device, g)
}

/// Reads and parses a profile file; the error names the file.
pub fn read(path: &Path) -> Result<Profile> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    Profile::from_json(&bytes).map_err(|reason| refused(path, reason))
}

/// Runs every check of a parsed profile (`path` names it in messages).
pub fn check(profile: Profile, path: &Path, device: &DeviceId, g: &Graph) -> Result<Checked> {
    let bad = |reason: String| refused(path, reason);
    profile.check_device(&device.backend, &device.fingerprint, &device.name).map_err(|e| bad(e.to_string()))?;
    check_kernels(&profile).map_err(|e| bad(format!("made for kernels this build no longer has: {e}; re-tune with `dynaspa tune`")))?;
    let covers = coverage(&profile, g);
    if covers.0 == 0 && covers.1 > 0 {
        return Err(bad(format!(
            "has no PolyKernel for any of the model's {} sparse ops (it was made for model '{}', whose ops differ in name and shape)",
            covers.1, profile.model
        )));
    }
    Ok(Checked { path: path.to_path_buf(), profile, covers })
}

fn refused(path: &Path, reason: impl ToString) -> Error {
    Error::Profile { path: path.display().to_string(), reason: reason.to_string() }
}

/// The profile a session uses for `choice`, and the line saying so: "<file> (<how>, tuned for
/// <backend> '<device>', <n> of <m> sparse ops)", or "none (<why>); calibrating". `model` is the
/// model file the shipped profile is looked up by; `device` is asked only when a check needs it.
pub fn choose(
    choice: &ProfileChoice,
    model: Option<&Path>,
    g: &Graph,
    device: impl FnOnce() -> Result<DeviceId>,
) -> Result<(String, Option<Checked>)> {
    let sparse = g.nodes.iter().any(|n| n.sparse.is_some());
    match choice {
        ProfileChoice::File(path) => {
            let c = check_file(path, &device()?, g)?;
            Ok((used(&c, "named"), Some(c)))
        }
        ProfileChoice::Loaded { name, profile } => {
            let c = check((**profile).clone(), Path::new(name), &device()?, g)?;
            Ok((used(&c, "named"), Some(c)))
        }
        _ if !sparse => Ok(("none (the model has no sparse ops)".into(), None)),
        ProfileChoice::Calibrate => Ok(("none (calibration asked for); calibrating".into(), None)),
        ProfileChoice::Shipped => match model {
            None => Ok(("none (no model file to look up a shipped profile by); calibrating".into(), None)),
            Some(model) => Ok(match find_shipped(model, g, device)? {
                Shipped::Use(c) => (used(&c, "shipped"), Some(c)),
                Shipped::None(why) => (format!("none ({why}); calibrating"), None),
            }),
        },
    }
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

/// Checks every member of `p` against the schedules this build's kernels for `p`'s backend
/// run, as they name them: on the CPU `dense` and `tiles<HxW>` without knobs; on the GPU
/// backends knobs the sparse kernels read (`gpu::sparse_conv_knobs`, the tuner's own definition),
/// and names spelled from them (`tiles1x1_m64n32k16_w4x2_s4`). The error names op and member.
pub fn check_kernels(p: &Profile) -> std::result::Result<(), String> {
    for op in &p.ops {
        for m in op.poly.members() {
            member_matches(&p.device.backend, &m.schedule).map_err(|e| format!("op '{}': member '{}': {e}", op.node, m.schedule.name))?;
        }
    }
    Ok(())
}

fn member_matches(backend: &str, s: &Schedule) -> std::result::Result<(), String> {
    let base = s.granularity.map_or_else(|| "dense".to_string(), |g| format!("tiles{g}"));
    if backend == "cpu" {
        if let Some(k) = s.knobs.keys().next() {
            return Err(format!("knob '{k}', but the CPU kernels have none besides the granularity"));
        }
        return if s.name == base { Ok(()) } else { Err(format!("this build names that schedule '{base}'")) };
    }
    let defaults = sparse_conv_knobs::GemmKnobs { tm: 1, tn: 1, tk: 1, wm: 1, wn: 1, ks: 1, wk: 1, et: false };
    let knobs = sparse_conv_knobs::GemmKnobs::from_map(&s.knobs, defaults)?;
    let complete = sparse_conv_knobs::GEMM_DOMAINS.iter().all(|(k, _)| s.knobs.contains_key(*k));
    let expected = match (s.granularity, complete) {
        // The dense member may carry knobs for its GEMM; its name stays `dense`.
        (None, _) => base,
        (Some(g), true) => sparse_conv_knobs::schedule_name(Some(g), Some(&knobs)),
        (Some(_), false) if s.knobs.is_empty() => base,
        // Some knobs over the kernel's defaults: the name cannot be spelled from them alone.
        (Some(_), false) => return Ok(()),
    };
    if s.name == expected {
        Ok(())
    } else {
        Err(format!("this build names that schedule '{expected}'"))
    }
}

/// (sparse ops of `g` the profile has a PolyKernel for, sparse ops of `g`): by node name or by
/// signature, as the backends look them up.
pub fn coverage(p: &Profile, g: &Graph) -> (usize, usize) {
    let sparse: Vec<_> = g.nodes.iter().filter(|n| n.sparse.is_some()).collect();
    let covered = sparse
        .iter()
        .filter(|n| {
            let sig = OpSignature::of(g, n);
            p.ops.iter().any(|o| o.node == n.name || o.signature == sig)
        })
        .count();
    (covered, sparse.len())
}

/// The `profiles` folder of the model's folder or the nearest folder above it that has one
/// (a checkout keeps `models/` and `profiles/` side by side); relative to the working
/// directory when it lies under it, so messages name it as a user would.
pub fn shipped_root(model: &Path) -> Option<PathBuf> {
    let dir = model.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let abs = std::path::absolute(dir).ok()?;
    let found = abs.ancestors().map(|d| d.join("profiles")).find(|p| p.is_dir())?;
    let cwd = std::env::current_dir().ok();
    Some(cwd.and_then(|c| found.strip_prefix(&c).ok().map(Path::to_path_buf)).unwrap_or(found))
}

/// The shipped profile for `model` on `device`, or why there is none. Candidates are
/// `<root>/*/<model stem>.json` in name order; those made for another device are passed over,
/// the first for this device that passes every check is used, and one for this device that
/// fails a check (an older format or kernels) is reported, not used.
pub fn find_shipped(model: &Path, g: &Graph, device: impl FnOnce() -> Result<DeviceId>) -> Result<Shipped> {
    let stem = model.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let Some(root) = shipped_root(model) else {
        return Ok(Shipped::None("no profiles/ folder beside the model or above it".into()));
    };
    let mut candidates: Vec<PathBuf> = std::fs::read_dir(&root)
        .map_err(|e| Error::io(&root, e))?
        .filter_map(|e| e.ok().map(|e| e.path().join(format!("{stem}.json"))))
        .filter(|p| p.is_file())
        .collect();
    candidates.sort();
    if candidates.is_empty() {
        return Ok(Shipped::None(format!("no profile for model '{stem}' under {}", root.display())));
    }
    let device = device()?;
    let mut refused = Vec::new();
    for path in &candidates {
        if !made_for(path, &device) {
            continue;
        }
        match check_file(path, &device, g) {
            Ok(c) => return Ok(Shipped::Use(c)),
            Err(e) => refused.push(e.to_string()),
        }
    }
    Ok(Shipped::None(if refused.is_empty() {
        format!(
            "none of the {} profiles for '{stem}' under {} was made for this device ({} '{}', fingerprint '{}')",
            candidates.len(),
            root.display(),
            device.backend,
            device.name,
            device.fingerprint
        )
    } else {
        format!("refused {}", refused.join("; refused "))
    }))
}

/// Whether the file at `path` says it was made for `device`, read from its `device` field alone
/// so that a profile of another format version still shows whose it is.
fn made_for(path: &Path, device: &DeviceId) -> bool {
    let Ok(bytes) = std::fs::read(path) else { return false };
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&bytes) else { return false };
    let Some(d) = v.get("device").and_then(|d| serde_json::from_value::<DeviceId>(d.clone()).ok()) else { return false };
    let predicted = v.get("predicted").and_then(|p| p.as_bool()).unwrap_or(false);
    Profile::new(d, "", predicted, "", MaskSetInfo::default()).check_device(&device.backend, &device.fingerprint, &device.name).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use dynaspa_runtime::sparsity::Granularity;

    fn sched(name: &str, g: Option<(u16, u16)>, knobs: &[(&str, i64)]) -> Schedule {
        let mut s = match g {
            Some((h, w)) => Schedule::sparse(name, Granularity::new(h, w)),
            None => Schedule::dense(name),
        };
        for &(k, v) in knobs {
            s = s.with_knob(k, v);
        }
        s
    }

    #[test]
    fn members_are_checked_against_the_kernels_names() {
        assert!(member_matches("cpu", &sched("dense", None, &[])).is_ok());
        assert!(member_matches("cpu", &sched("tiles2x8", Some((2, 8)), &[])).is_ok());
        let e = member_matches("cpu", &sched("gather2x8", Some((2, 8)), &[])).unwrap_err();
        assert!(e.contains("'tiles2x8'"), "{e}");
        let e = member_matches("cpu", &sched("tiles2x8", Some((2, 8)), &[("UNROLL", 4)])).unwrap_err();
        assert!(e.contains("UNROLL"), "{e}");

        let gemm = [("TM", 64), ("TN", 32), ("TK", 16), ("WM", 4), ("WN", 2), ("KS", 4)];
        assert!(member_matches("opencl", &sched("tiles1x1_m64n32k16_w4x2_s4", Some((1, 1)), &gemm)).is_ok());
        assert!(member_matches("wgpu", &sched("tiles2x2", Some((2, 2)), &[])).is_ok());
        let e = member_matches("cuda", &sched("tiles1x1_64x32x16", Some((1, 1)), &gemm)).unwrap_err();
        assert!(e.contains("tiles1x1_m64n32k16_w4x2_s4"), "{e}");
        let e = member_matches("cuda", &sched("tiles1x1_x", Some((1, 1)), &[("BM", 64)])).unwrap_err();
        assert!(e.contains("unknown knob 'BM'"), "{e}");
    }
}
