//! Tensor data stored beside the model file (ONNX `external_data`: `location`, `offset`, `length`).
//!
//! Contract: a location is a relative path resolved against the model's folder and must stay inside
//! it, after symlinks too (a model is untrusted input; it must not read arbitrary files). Each data
//! file is read once per load, however many tensors it holds (exporters put every weight of a model
//! in one file of hundreds of MB). Every failure is an `Error::InvalidModel` naming the tensor and
//! the file.

use super::proto::onnx::TensorProto;
use crate::error::{Error, Result};
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

/// Where external data is looked up during one import, and the files read so far.
pub struct ExternalData {
    /// The model's folder; `None` when the model came as bytes with no folder.
    dir: Option<PathBuf>,
    /// The folder after resolving symlinks, computed on first use.
    canonical_dir: Option<PathBuf>,
    files: HashMap<PathBuf, Vec<u8>>,
}

/// The parsed `external_data` entries of one tensor.
struct Location {
    location: String,
    offset: u64,
    length: Option<u64>,
}

impl ExternalData {
    pub fn new(dir: Option<&Path>) -> Self {
        let dir = dir.map(|d| if d.as_os_str().is_empty() { PathBuf::from(".") } else { d.to_path_buf() });
        ExternalData { dir, canonical_dir: None, files: HashMap::new() }
    }

    /// The raw bytes of tensor `t`, which stores its data externally; `what` names it in errors.
    pub fn bytes(&mut self, t: &TensorProto, what: &str) -> Result<&[u8]> {
        let loc = parse(t, what)?;
        let file = &loc.location;
        let err = |msg: String| Error::InvalidModel(format!("{what}: external data file '{file}': {msg}"));
        let Some(dir) = &self.dir else {
            return Err(err("the model was given as bytes, with no folder to find it in; load it from its path".into()));
        };
        check_relative(file).map_err(err)?;
        let root: &Path = match &mut self.canonical_dir {
            Some(c) => c,
            slot => slot.insert(dir.canonicalize().map_err(|e| err(format!("cannot resolve the model's folder {}: {e}", dir.display())))?),
        };
        let path = dir.join(file);
        let real = path.canonicalize().map_err(|e| err(format!("cannot open {}: {e}", path.display())))?;
        if !real.starts_with(root) {
            return Err(err(format!("resolves to {}, outside the model's folder {}", real.display(), root.display())));
        }
        if !self.files.contains_key(&real) {
            let data = std::fs::read(&real).map_err(|e| err(format!("cannot read {}: {e}", path.display())))?;
            self.files.insert(real.clone(), data);
        }
        let data = &self.files[&real];
        let size = data.len() as u64;
        let end = match loc.length {
            Some(n) => loc.offset.checked_add(n),
            None => Some(size.max(loc.offset)),
        };
        match end {
            Some(end) if loc.offset <= size && end <= size => Ok(&data[loc.offset as usize..end as usize]),
            _ => Err(err(format!(
                "offset {} + length {} is past its end ({size} bytes)",
                loc.offset,
                loc.length.map_or("(rest)".to_string(), |n| n.to_string())
            ))),
        }
    }
}

/// True when the tensor says its data is stored externally.
pub fn is_external(t: &TensorProto) -> bool {
    !t.external_data.is_empty() || t.data_location.map(|l| l.value()) == Some(1)
}

fn parse(t: &TensorProto, what: &str) -> Result<Location> {
    let bad = |msg: String| Error::InvalidModel(format!("{what}: external data {msg}"));
    let (mut location, mut offset, mut length) = (None, 0u64, None);
    for e in &t.external_data {
        let number = |v: &str| v.parse::<u64>().map_err(|_| bad(format!("'{}' is not a byte count: '{v}'", e.key())));
        match e.key() {
            "location" => location = Some(e.value().to_string()),
            "offset" => offset = number(e.value())?,
            "length" => length = Some(number(e.value())?),
            _ => {} // `checksum` and writers' own keys do not change where the bytes are
        }
    }
    let location = location.filter(|l| !l.is_empty()).ok_or_else(|| bad("has no 'location'".into()))?;
    Ok(Location { location, offset, length })
}

/// A location must be a plain relative path below the model's folder.
fn check_relative(file: &str) -> std::result::Result<(), String> {
    let p = Path::new(file);
    // Windows drive and UNC forms are refused on every host, so one model behaves the same anywhere.
    let looks_absolute = file.starts_with('/') || file.starts_with('\\') || file.as_bytes().get(1) == Some(&b':');
    if p.is_absolute() || looks_absolute {
        return Err("is an absolute path; external data must be relative to the model's folder".into());
    }
    if file.contains('\0') {
        return Err("contains a NUL byte".into());
    }
    for c in p.components().chain(Path::new(&file.replace('\\', "/")).components()) {
        match c {
            Component::Normal(_) | Component::CurDir => {}
            _ => return Err("leaves the model's folder ('..' or a root); external data must stay inside it".into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::proto::onnx::{tensor_proto::DataLocation, StringStringEntryProto};

    fn tensor(entries: &[(&str, &str)]) -> TensorProto {
        let mut t = TensorProto::new();
        t.name = Some("w".into());
        t.data_location = Some(DataLocation::EXTERNAL.into());
        for (k, v) in entries {
            let mut e = StringStringEntryProto::new();
            e.key = Some(k.to_string());
            e.value = Some(v.to_string());
            t.external_data.push(e);
        }
        t
    }

    fn folder(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("dynaspa-external-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("model")).unwrap();
        d
    }

    fn message(r: Result<&[u8]>) -> String {
        match r {
            Err(Error::InvalidModel(m)) => m,
            Err(e) => panic!("wrong error variant: {e}"),
            Ok(b) => panic!("expected an error, got {} bytes", b.len()),
        }
    }

    #[test]
    fn reads_a_slice_of_the_file_and_reads_the_file_once() {
        let d = folder("slice");
        std::fs::write(d.join("model/w.bin"), [0u8, 1, 2, 3, 4, 5, 6, 7]).unwrap();
        let mut x = ExternalData::new(Some(&d.join("model")));
        let a = x.bytes(&tensor(&[("location", "w.bin"), ("offset", "2"), ("length", "4")]), "initializer 'w'").unwrap();
        assert_eq!(a, &[2, 3, 4, 5]);
        let b = x.bytes(&tensor(&[("location", "./w.bin"), ("offset", "6")]), "initializer 'w'").unwrap();
        assert_eq!(b, &[6, 7], "no length means to the end of the file");
        assert_eq!(x.files.len(), 1, "the same file under two spellings is read once");
    }

    #[test]
    fn a_missing_file_names_the_tensor_and_the_file() {
        let d = folder("missing");
        let mut x = ExternalData::new(Some(&d.join("model")));
        let m = message(x.bytes(&tensor(&[("location", "gone.bin")]), "initializer 'conv.weight'"));
        assert!(m.contains("initializer 'conv.weight'") && m.contains("gone.bin") && m.contains("cannot open"), "{m}");
    }

    #[test]
    fn a_short_file_is_refused() {
        let d = folder("short");
        std::fs::write(d.join("model/w.bin"), [0u8; 10]).unwrap();
        let mut x = ExternalData::new(Some(&d.join("model")));
        for (off, len) in [("8", "4"), ("11", "0"), ("18446744073709551615", "2")] {
            let m = message(x.bytes(&tensor(&[("location", "w.bin"), ("offset", off), ("length", len)]), "initializer 'w'"));
            assert!(m.contains("past its end (10 bytes)") && m.contains("w.bin"), "{m}");
        }
        let m = message(x.bytes(&tensor(&[("location", "w.bin"), ("offset", "12")]), "initializer 'w'"));
        assert!(m.contains("past its end"), "{m}");
    }

    #[test]
    fn paths_outside_the_models_folder_are_refused() {
        let d = folder("outside");
        std::fs::write(d.join("secret.bin"), [1u8; 16]).unwrap();
        let mut x = ExternalData::new(Some(&d.join("model")));
        for loc in ["../secret.bin", "sub/../../secret.bin", "..\\secret.bin"] {
            let m = message(x.bytes(&tensor(&[("location", loc)]), "initializer 'w'"));
            assert!(m.contains("leaves the model's folder") && m.contains(loc), "{loc}: {m}");
        }
        let abs = d.join("secret.bin").display().to_string();
        for loc in [abs.as_str(), "/etc/passwd", "C:\\w.bin", "\\\\host\\share\\w.bin"] {
            let m = message(x.bytes(&tensor(&[("location", loc)]), "initializer 'w'"));
            assert!(m.contains("absolute path"), "{loc}: {m}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_out_of_the_folder_is_refused() {
        let d = folder("symlink");
        std::fs::write(d.join("secret.bin"), [1u8; 16]).unwrap();
        std::os::unix::fs::symlink(d.join("secret.bin"), d.join("model/w.bin")).unwrap();
        std::os::unix::fs::symlink(&d, d.join("model/up")).unwrap();
        let mut x = ExternalData::new(Some(&d.join("model")));
        for loc in ["w.bin", "up/secret.bin"] {
            let m = message(x.bytes(&tensor(&[("location", loc)]), "initializer 'w'"));
            assert!(m.contains("outside the model's folder"), "{loc}: {m}");
        }
    }

    #[test]
    fn bytes_without_a_folder_are_refused() {
        let mut x = ExternalData::new(None);
        let m = message(x.bytes(&tensor(&[("location", "w.bin")]), "initializer 'w'"));
        assert!(m.contains("given as bytes") && m.contains("w.bin") && m.contains("initializer 'w'"), "{m}");
    }

    #[test]
    fn malformed_entries_are_refused() {
        let mut x = ExternalData::new(Some(Path::new(".")));
        let m = message(x.bytes(&tensor(&[("offset", "0")]), "initializer 'w'"));
        assert!(m.contains("no 'location'"), "{m}");
        let m = message(x.bytes(&tensor(&[("location", "w.bin"), ("offset", "-4")]), "initializer 'w'"));
        assert!(m.contains("'offset' is not a byte count"), "{m}");
    }
}
