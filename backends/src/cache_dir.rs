//! The one on-disk cache directory of dynaspa, shared by every backend (CPU calibrations,
//! compiled GPU kernels), each under its own subdirectory.

use std::path::PathBuf;

/// `$DYNASPA_CACHE_DIR`, else `$XDG_CACHE_HOME/dynaspa`, else `~/.cache/dynaspa`; `None` when
/// none can be found (callers then recompute what they would have cached, every start).
pub fn cache_root() -> Option<PathBuf> {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    env("DYNASPA_CACHE_DIR")
        .or_else(|| env("XDG_CACHE_HOME").map(|p| p.join("dynaspa")))
        .or_else(|| env("HOME").map(|p| p.join(".cache").join("dynaspa")))
}

/// FNV-1a over `bytes` from `seed`: stable across Rust releases (std's hasher is not), so it
/// can name cache files. Two seeds give two independent 64-bit hashes where one is too few.
pub(crate) fn fnv1a(seed: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(seed, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

pub(crate) const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// Writes `data` to `path` (creating its directory) under a temporary name in the same
/// directory and renames it, so a concurrent reader (another start, another device of this
/// process) never reads half a file. The temporary name is unique to the process and the call
/// (a counter): two writers of one file each rename a whole file of their own. On failure the
/// temporary file is removed.
pub(crate) fn write_atomic(path: &std::path::Path, data: &[u8]) -> std::io::Result<()> {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.{seq}.tmp", std::process::id()));
    let res = std::fs::create_dir_all(dir).and_then(|_| std::fs::write(&tmp, data)).and_then(|_| std::fs::rename(&tmp, path));
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

#[cfg(test)]
mod tests {
    use super::write_atomic;

    fn scratch(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("dynaspa-atomic-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn concurrent_writers_of_one_file_leave_one_whole_file_and_no_temporaries() {
        let dir = scratch("race");
        let path = dir.join("sub").join("entry.bin");
        std::thread::scope(|s| {
            for t in 0..8u8 {
                let path = &path;
                s.spawn(move || {
                    for i in 0..25u8 {
                        // Each writer's file is one byte value throughout, of its own length.
                        let v = t.wrapping_mul(31).wrapping_add(i);
                        write_atomic(path, &vec![v; 4096 + 64 * t as usize + i as usize]).unwrap();
                    }
                });
            }
        });
        let data = std::fs::read(&path).unwrap();
        assert!(data.len() >= 4096 && data.iter().all(|&b| b == data[0]), "a mixed or partial file");
        let left: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("entry.bin")], "temporaries left behind");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_failed_write_leaves_no_temporary_and_keeps_what_was_there() {
        let dir = scratch("fail");
        // The target is a non-empty directory: the rename fails.
        let path = dir.join("taken");
        std::fs::create_dir_all(path.join("inside")).unwrap();
        assert!(write_atomic(&path, b"data").is_err());
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("taken")], "a temporary was left behind");
        assert!(path.join("inside").is_dir());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
