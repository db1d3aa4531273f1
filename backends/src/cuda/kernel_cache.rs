//! Compiled kernels on disk, so a second start does not run NVRTC again. One CUBIN per kernel
//! source and schedule, keyed by everything that changes the binary: the source with the
//! prelude (two independent 64-bit hashes and its length), the NVRTC options (defines,
//! architecture) and the NVRTC version. The file holds the key text before the CUBIN, and a
//! file whose key differs (a hash collision, an older format) is a miss, never a wrong kernel.
//!
//! Works without a driver or GPU (only NVRTC), which is how CI tests it.

use super::nvrtc;
use crate::cache_dir::{fnv1a, FNV_OFFSET};
use crate::gpu::KernelSpec;
use dynaspa_runtime::Result;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Bumped when the file layout or the meaning of the key changes.
const FORMAT: &str = "dynaspa-cubin 1";
/// Seed of the second source hash (any constant other than FNV's own offset).
const SEED2: u64 = 0x9e37_79b9_7f4a_7c15;

/// Where a CUBIN came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    Disk,
    Compiled,
}

/// The disk cache (or none) plus counters of what it did.
pub struct KernelCache {
    dir: Option<PathBuf>,
    disk_hits: AtomicUsize,
    compiles: AtomicUsize,
}

/// What the cache did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub memory_hits: usize,
    pub disk_hits: usize,
    pub compiles: usize,
}

/// One spec compiled for one architecture: the key text and the file it lives in.
pub struct CacheKey {
    pub text: String,
    file_name: String,
}

impl KernelCache {
    /// CUBINs under `dir` (created on first write); `None` keeps nothing on disk.
    pub fn new(dir: Option<PathBuf>) -> KernelCache {
        KernelCache { dir, disk_hits: AtomicUsize::new(0), compiles: AtomicUsize::new(0) }
    }

    /// `<cache root>/cuda` (see `cache_dir::cache_root`).
    pub fn from_env() -> KernelCache {
        KernelCache::new(crate::cache_dir::cache_root().map(|r| r.join("cuda")))
    }

    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats { memory_hits: 0, disk_hits: self.disk_hits.load(Ordering::Relaxed), compiles: self.compiles.load(Ordering::Relaxed) }
    }

    pub fn key(&self, spec: &KernelSpec, arch: &str) -> Result<CacheKey> {
        let src = nvrtc::full_source(spec);
        let (major, minor) = nvrtc::version()?;
        let text = format!(
            "{FORMAT}\nfile {}\nsource {} bytes {:016x}{:016x}\noptions {}\nnvrtc {major}.{minor}\n",
            spec.file,
            src.len(),
            fnv1a(FNV_OFFSET, src.as_bytes()),
            fnv1a(SEED2, src.as_bytes()),
            nvrtc::options(spec, arch)?.join(" "),
        );
        let file_name = format!("{:016x}.cubin", fnv1a(FNV_OFFSET, text.as_bytes()));
        Ok(CacheKey { text, file_name })
    }

    fn read(&self, key: &CacheKey) -> Option<Vec<u8>> {
        let path = self.dir.as_ref()?.join(&key.file_name);
        let bytes = std::fs::read(&path).ok()?;
        let split = bytes.iter().position(|&b| b == 0)?;
        if &bytes[..split] != key.text.as_bytes() || split + 1 == bytes.len() {
            tracing::debug!(file = %path.display(), "kernel cache entry for another key; compiling");
            return None;
        }
        Some(bytes[split + 1..].to_vec())
    }

    /// Written through a temporary name and renamed (`write_atomic`), so a concurrent start
    /// never reads half a file. Failing to write only costs the next start a compile.
    fn write(&self, key: &CacheKey, cubin: &[u8]) {
        let Some(dir) = &self.dir else { return };
        let path = dir.join(&key.file_name);
        let mut data = Vec::with_capacity(key.text.len() + 1 + cubin.len());
        data.extend_from_slice(key.text.as_bytes());
        data.push(0);
        data.extend_from_slice(cubin);
        if let Err(e) = crate::cache_dir::write_atomic(&path, &data) {
            tracing::warn!(file = %path.display(), "cannot write the kernel cache: {e}");
        }
    }

    /// The CUBIN from disk, or compiled now (and written to disk).
    pub fn load_or_compile(&self, spec: &KernelSpec, arch: &str, key: &CacheKey) -> Result<(Vec<u8>, Origin)> {
        if let Some(cubin) = self.read(key) {
            self.disk_hits.fetch_add(1, Ordering::Relaxed);
            return Ok((cubin, Origin::Disk));
        }
        Ok((self.compile(spec, arch, key)?, Origin::Compiled))
    }

    /// Compiles regardless of the disk (e.g. when the driver refused a cached CUBIN) and
    /// replaces the disk entry.
    pub fn compile(&self, spec: &KernelSpec, arch: &str, key: &CacheKey) -> Result<Vec<u8>> {
        let t0 = std::time::Instant::now();
        let c = nvrtc::compile(spec, arch)?;
        self.compiles.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(file = spec.file, arch, ms = t0.elapsed().as_secs_f64() * 1e3, "compiled kernel");
        if !c.log.is_empty() {
            tracing::debug!(file = spec.file, "NVRTC: {}", c.log);
        }
        self.write(key, &c.cubin);
        Ok(c.cubin)
    }
}
