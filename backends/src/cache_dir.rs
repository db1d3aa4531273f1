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
