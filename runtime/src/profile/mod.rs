//! Profiles: tuned PolyKernels for one device and model, written by `dynaspa tune` and read by
//! the backends instead of calibrating. A profile is reviewable JSON (see [`Profile`]); loading
//! checks the format, the version and every PolyKernel, and a backend checks the device
//! fingerprint before using one, so timings from another machine never pick kernels here.

mod signature;

pub use signature::OpSignature;

use crate::dispatch::PolyKernel;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Value of the `format` field: a JSON file that is not a profile says so instead of failing
/// on some missing field.
pub const FORMAT: &str = "dynaspa-profile";
/// Schema version this build reads and writes. Bump on any change an older reader would
/// misread; readers refuse other versions rather than guess.
pub const VERSION: u32 = 1;

/// The device a profile was tuned on (or predicted for).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceId {
    /// Backend name as `--backend` takes it: "cpu", "opencl", "cuda", "wgpu".
    pub backend: String,
    /// Human-readable device name.
    pub name: String,
    /// The backend's fingerprint of the device (CPU: model, vector extension, threads; GPUs:
    /// `DeviceInfo::fingerprint`). A measured profile is used only where it is equal.
    pub fingerprint: String,
}

/// The masks a profile was tuned on: a profile is only as good as their likeness to the masks
/// it meets, so the file says which they were.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MaskSetInfo {
    /// `.dsm` file or frame directory.
    pub source: String,
    /// Frames in the set, and how many of them the search used (the rest were held out).
    pub frames: usize,
    pub tuned_on: usize,
    /// CRC-32 of the mask bits, hex: two profiles with the same value saw the same masks.
    #[serde(default)]
    pub checksum: String,
}

/// Tuning outcome of one op, for review (not read by the runtime).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OpStats {
    /// Median dense time, µs.
    pub dense_us: f64,
    /// Mean over the tuning masks of the time of the member dispatch picks, µs.
    pub poly_mean_us: f64,
    /// Schedules measured and measurements taken for this op.
    pub schedules_measured: usize,
    pub measurements: usize,
}

/// One sparse op of the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpProfile {
    /// Graph node name (the ONNX node name of the op).
    pub node: String,
    pub signature: OpSignature,
    pub poly: PolyKernel,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<OpStats>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub format: String,
    pub version: u32,
    pub device: DeviceId,
    /// Model file stem the profile was tuned for.
    pub model: String,
    /// `true` for a profile made from the roofline model alone (a device we could not measure
    /// on): its dispatch tables are estimates, and a backend uses it only when the device name
    /// matches (see [`Profile::check_device`]).
    pub predicted: bool,
    /// Which cost model (and version) guided the search; "roofline" for predicted profiles.
    pub cost_model: String,
    pub masks: MaskSetInfo,
    /// The tool that wrote the file, with its version.
    #[serde(default)]
    pub created_by: String,
    pub ops: Vec<OpProfile>,
}

fn bad(path: &Path, msg: impl std::fmt::Display) -> Error {
    Error::Other(format!("profile {}: {msg}", path.display()))
}

impl Profile {
    pub fn new(device: DeviceId, model: impl Into<String>, predicted: bool, cost_model: impl Into<String>, masks: MaskSetInfo) -> Profile {
        Profile {
            format: FORMAT.into(),
            version: VERSION,
            device,
            model: model.into(),
            predicted,
            cost_model: cost_model.into(),
            masks,
            created_by: format!("dynaspa {}", env!("CARGO_PKG_VERSION")),
            ops: vec![],
        }
    }

    /// Reads and validates a profile file (format, version, every PolyKernel, unique nodes).
    /// Does not check the device: see [`Profile::check_device`].
    pub fn load(path: impl AsRef<Path>) -> Result<Profile> {
        let path = path.as_ref();
        let text = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        Profile::from_json(&text).map_err(|e| bad(path, e))
    }

    /// Parses a profile from JSON bytes; errors name the problem (and line/column for syntax).
    pub fn from_json(bytes: &[u8]) -> std::result::Result<Profile, String> {
        // Format and version first, from the untyped value: a profile of another version may
        // not parse as this one, and "version 2" says more than a missing-field error would.
        let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| format!("not valid JSON: {e}"))?;
        let obj = v.as_object().ok_or("not a JSON object")?;
        match obj.get("format").and_then(|f| f.as_str()) {
            Some(FORMAT) => {}
            Some(other) => return Err(format!("format is '{other}', expected '{FORMAT}'")),
            None => return Err(format!("no \"format\": \"{FORMAT}\" field; this is not a dynaspa profile")),
        }
        match obj.get("version").and_then(|f| f.as_u64()) {
            Some(n) if n == VERSION as u64 => {}
            Some(n) => return Err(format!("schema version {n}; this build reads version {VERSION} (re-tune with `dynaspa tune`)")),
            None => return Err("no numeric \"version\" field".into()),
        }
        let p: Profile = serde_json::from_value(v).map_err(|e| format!("invalid profile: {e}"))?;
        p.validate()?;
        Ok(p)
    }

    fn validate(&self) -> std::result::Result<(), String> {
        if self.device.backend.trim().is_empty() {
            return Err("device.backend is empty".into());
        }
        if self.device.fingerprint.trim().is_empty() {
            return Err("device.fingerprint is empty".into());
        }
        for (i, op) in self.ops.iter().enumerate() {
            if op.node.is_empty() {
                return Err(format!("ops[{i}]: empty node name"));
            }
            if self.ops[..i].iter().any(|o| o.node == op.node) {
                return Err(format!("ops[{i}]: node '{}' appears twice", op.node));
            }
        }
        Ok(())
    }

    /// Pretty JSON with arrays of plain numbers on one line (shapes, table points), so a
    /// profile reads as a review document rather than a column of numbers.
    pub fn to_json(&self) -> String {
        collapse_number_arrays(&serde_json::to_string_pretty(self).expect("profiles serialise: every field is plain data"))
    }

    /// Writes through a temporary file in the same directory and a rename, so a reader (or an
    /// interrupted tune) never sees half a profile.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        write_atomic(path.as_ref(), self.to_json().as_bytes())
    }

    /// Whether this profile may drive `backend` on the device with `fingerprint` and `name`.
    /// A measured profile needs the same backend and fingerprint; a predicted one the same
    /// backend and a device name containing the profile's (predicted profiles carry no real
    /// fingerprint: nobody measured on the device). The error says what differs.
    pub fn check_device(&self, backend: &str, fingerprint: &str, name: &str) -> Result<()> {
        let d = &self.device;
        if d.backend != backend {
            return Err(Error::Other(format!("profile for model '{}' was made for backend '{}', not '{backend}'", self.model, d.backend)));
        }
        let ok = if self.predicted {
            !d.name.is_empty() && name.to_lowercase().contains(&d.name.to_lowercase())
        } else {
            d.fingerprint == fingerprint
        };
        if ok {
            return Ok(());
        }
        Err(Error::Other(format!(
            "profile for model '{}' was {} for device '{}' (fingerprint '{}'); this device is '{name}' (fingerprint \
             '{fingerprint}'). Its timings would pick the wrong kernels here: tune this device with `dynaspa tune`",
            self.model,
            if self.predicted { "predicted" } else { "tuned" },
            d.name,
            d.fingerprint
        )))
    }

    /// The PolyKernel for node `node` with signature `sig`: the entry of that node when its
    /// signature matches, else any entry with the same signature (an op identical in kind,
    /// shapes and window costs the same). `None` when nothing matches.
    pub fn poly_for(&self, node: &str, sig: &OpSignature) -> Option<&PolyKernel> {
        self.ops
            .iter()
            .find(|o| o.node == node && &o.signature == sig)
            .or_else(|| self.ops.iter().find(|o| &o.signature == sig))
            .map(|o| &o.poly)
    }
}

/// Joins every `[...]` holding only numbers onto one line (strings are left alone: the text
/// between a `[` and its `]` must be digits, signs, dots, exponents, commas and whitespace).
fn collapse_number_arrays(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'[' {
            let end = b[i + 1..].iter().position(|&c| !(c.is_ascii_digit() || b".,-+eE \n\t\r".contains(&c)));
            if let Some(e) = end.map(|e| i + 1 + e).filter(|&e| b[e] == b']') {
                let inner: Vec<&str> = s[i + 1..e].split(',').map(str::trim).collect();
                out.push('[');
                out.push_str(&inner.join(", "));
                out.push(']');
                i = e + 1;
                continue;
            }
        }
        let ch = s[i..].chars().next().expect("in bounds");
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// Writes `bytes` to `path` through a temporary sibling and a rename (atomic on POSIX within
/// one file system); the temporary is removed on failure.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    let res = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = res {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(path, e));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
