//! Compiled program binaries on disk, so a second start skips the driver's compiler (PoCL takes
//! seconds per program). One file per (device fingerprint, prelude + source, build options); the
//! file starts with the full key, so a hash collision or a file from another device is a miss,
//! never a wrong kernel, and ends the header with a checksum of the binary: drivers are not
//! robust to damaged binaries (PoCL aborts the process on a truncated one).

use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"DYNCLB02";

pub(crate) struct ProgramCache {
    dir: Option<PathBuf>,
}

/// FNV-1a, 64-bit: stable across Rust releases (std's hasher is not), which file names need.
pub(crate) fn fnv64(parts: &[&[u8]]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for p in parts {
        for &b in *p {
            h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
        // Separator, so ("ab", "c") and ("a", "bc") differ.
        h = (h ^ 0xff).wrapping_mul(0x100_0000_01b3);
    }
    h
}

impl ProgramCache {
    /// `root`: the dynaspa cache directory; binaries go to `root/opencl`. `None` disables the cache.
    pub(crate) fn new(root: Option<&Path>) -> ProgramCache {
        ProgramCache { dir: root.map(|r| r.join("opencl")) }
    }

    /// The key names everything the binary depends on.
    pub(crate) fn key(fingerprint: &str, source: &str, options: &str) -> String {
        format!("{fingerprint}\n{options}\n{:016x}\n{}", fnv64(&[source.as_bytes()]), source.len())
    }

    fn path(&self, key: &str) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join(format!("{:016x}.clbin", fnv64(&[key.as_bytes()]))))
    }

    pub(crate) fn load(&self, key: &str) -> Option<Vec<u8>> {
        let bytes = std::fs::read(self.path(key)?).ok()?;
        let rest = bytes.strip_prefix(MAGIC.as_slice())?;
        let (len, rest) = rest.split_at_checked(4)?;
        let klen = u32::from_le_bytes(len.try_into().ok()?) as usize;
        let (k, rest) = rest.split_at_checked(klen)?;
        let (sum, bin) = rest.split_at_checked(8)?;
        let ok = k == key.as_bytes() && !bin.is_empty() && sum == fnv64(&[bin]).to_le_bytes();
        ok.then(|| bin.to_vec())
    }

    /// Best effort: a cache that cannot be written only costs the next start a compile.
    pub(crate) fn store(&self, key: &str, binary: &[u8]) {
        let Some(path) = self.path(key) else { return };
        let mut data = Vec::with_capacity(MAGIC.len() + 12 + key.len() + binary.len());
        data.extend_from_slice(MAGIC);
        data.extend_from_slice(&(key.len() as u32).to_le_bytes());
        data.extend_from_slice(key.as_bytes());
        data.extend_from_slice(&fnv64(&[binary]).to_le_bytes());
        data.extend_from_slice(binary);
        // Renamed into place whole, so a concurrent reader never sees half a file.
        if let Err(e) = crate::cache_dir::write_atomic(&path, &data) {
            tracing::warn!("could not cache an OpenCL program binary at {}: {e}", path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_key_mismatch() {
        let dir = std::env::temp_dir().join(format!("dynaspa-clcache-{}", std::process::id()));
        let c = ProgramCache::new(Some(&dir));
        let k = ProgramCache::key("dev|1", "kernel void f() {}", "-D A=1");
        assert!(c.load(&k).is_none());
        c.store(&k, b"binary");
        assert_eq!(c.load(&k).as_deref(), Some(&b"binary"[..]));
        let other = ProgramCache::key("dev|2", "kernel void f() {}", "-D A=1");
        assert!(c.load(&other).is_none());
        // A file holding another key under the same name is a miss.
        std::fs::write(c.path(&other).unwrap(), std::fs::read(c.path(&k).unwrap()).unwrap()).unwrap();
        assert!(c.load(&other).is_none());
        assert!(ProgramCache::new(None).load(&k).is_none());
        // A damaged binary is a miss (the checksum), never handed to the driver.
        let p = c.path(&k).unwrap();
        let mut bytes = std::fs::read(&p).unwrap();
        *bytes.last_mut().unwrap() ^= 1;
        std::fs::write(&p, &bytes).unwrap();
        assert!(c.load(&k).is_none());
        bytes.truncate(bytes.len() - 2);
        std::fs::write(&p, &bytes).unwrap();
        assert!(c.load(&k).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
