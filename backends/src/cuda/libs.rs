//! Finding libcuda and libnvrtc before cudarc touches them. cudarc opens its libraries by bare
//! names (`libnvrtc.so.13`, `libcuda.so.1`, ...) and panics when none opens, so nothing may
//! call into it before these checks said yes.
//!
//! Where the dynamic linker would not look (a toolkit under `/usr/local/cuda`, the NVRTC pip
//! wheel), the library is opened here by its full path first: glibc then answers cudarc's later
//! `dlopen` by soname with the already loaded copy. `DYNASPA_NVRTC_LIB` / `DYNASPA_CUDA_LIB`
//! (a file, or a directory holding it) name a library explicitly and win over the search.
//!
//! Every symbol this backend calls is checked here too, so an old driver or NVRTC is reported
//! as unavailable (naming the missing function) instead of panicking in cudarc's loader.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Driver API functions the backend calls (cudarc resolves each by exactly this name).
const DRIVER_SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceGetAttribute",
    "cuDeviceTotalMem_v2",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxSetCurrent",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamSynchronize",
    "cuStreamWaitEvent",
    "cuEventCreate",
    "cuEventRecord",
    "cuEventDestroy_v2",
    "cuEventSynchronize",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemHostAlloc",
    "cuMemFreeHost",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuMemsetD8Async",
    "cuMemsetD32Async",
    "cuModuleLoadData",
    "cuModuleGetFunction",
    "cuModuleUnload",
    "cuFuncGetAttribute",
    "cuFuncSetAttribute",
    "cuLaunchKernel",
    "cuGetErrorName",
    "cuGetErrorString",
];

/// NVRTC functions the backend calls.
const NVRTC_SYMBOLS: &[&str] = &[
    "nvrtcVersion",
    "nvrtcCreateProgram",
    "nvrtcCompileProgram",
    "nvrtcDestroyProgram",
    "nvrtcGetProgramLogSize",
    "nvrtcGetProgramLog",
    "nvrtcGetCUBINSize",
    "nvrtcGetCUBIN",
    "nvrtcGetErrorString",
];

/// Optional driver functions: used when present (checked again where used).
pub(crate) const OPT_FUNC_PARAM_INFO: &str = "cuFuncGetParamInfo";
// cuLaunchKernelEx is optional too: `pdl` checks for it.
/// Optional NVRTC functions.
pub(crate) const OPT_SUPPORTED_ARCHS: [&str; 2] = ["nvrtcGetNumSupportedArchs", "nvrtcGetSupportedArchs"];

/// Libraries opened by full path, kept open for the life of the process so the soname lookup
/// keeps finding them.
static PRELOADED: OnceLock<std::sync::Mutex<Vec<libloading::Library>>> = OnceLock::new();

fn keep(lib: libloading::Library) {
    if let Ok(mut v) = PRELOADED.get_or_init(Default::default).lock() {
        v.push(lib);
    }
}

/// Whether cudarc's own search (bare names through the dynamic linker) finds the library.
fn cudarc_finds(which: Which) -> bool {
    // SAFETY: these only dlopen candidates by name and close them again.
    unsafe {
        match which {
            Which::Driver => cudarc::driver::sys::is_culib_present(),
            Which::Nvrtc => cudarc::nvrtc::sys::is_culib_present(),
        }
    }
}

#[derive(Clone, Copy)]
enum Which {
    Driver,
    Nvrtc,
}

impl Which {
    fn env(self) -> &'static str {
        match self {
            Which::Driver => "DYNASPA_CUDA_LIB",
            Which::Nvrtc => "DYNASPA_NVRTC_LIB",
        }
    }
    /// A function every version of the library has: identifies which copy is loaded.
    fn marker(self) -> &'static str {
        match self {
            Which::Driver => "cuInit",
            Which::Nvrtc => "nvrtcVersion",
        }
    }
    fn stem(self) -> &'static str {
        match self {
            Which::Driver => "libcuda.so",
            Which::Nvrtc => "libnvrtc.so",
        }
    }
    /// Where `ensure` looked, for the error.
    fn searched(self) -> &'static str {
        match self {
            Which::Driver => "the dynamic linker's path and the usual driver directories (is the NVIDIA driver installed?)",
            Which::Nvrtc => "the dynamic linker's path, $CUDA_HOME, /usr/local/cuda and the nvidia pip wheels",
        }
    }
    fn what(self) -> &'static str {
        match self {
            Which::Driver => "libcuda (the NVIDIA driver)",
            Which::Nvrtc => "libnvrtc (the CUDA runtime compiler)",
        }
    }
}

/// Files in `dir` that look like the library (`libnvrtc.so`, `libnvrtc.so.13`, ...; never
/// `libnvrtc-builtins`), highest version first.
pub(crate) fn candidates_in(dir: &Path, stem: &str) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut found: Vec<(Vec<u32>, PathBuf)> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let rest = name.strip_prefix(stem)?;
            let version: Option<Vec<u32>> =
                if rest.is_empty() { Some(Vec::new()) } else { rest.strip_prefix('.')?.split('.').map(|p| p.parse().ok()).collect() };
            Some((version?, e.path()))
        })
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0));
    found.into_iter().map(|(_, p)| p).collect()
}

/// Directories where CUDA libraries live when the dynamic linker is not told about them.
fn fallback_dirs(which: Which) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"] {
        if let Some(root) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            let root = PathBuf::from(root);
            dirs.push(root.join("lib64"));
            dirs.push(root.join("lib"));
        }
    }
    match which {
        Which::Driver => {
            dirs.push("/usr/lib/x86_64-linux-gnu".into());
            dirs.push("/usr/lib64".into());
            dirs.push("/usr/lib/wsl/lib".into());
        }
        Which::Nvrtc => {
            dirs.push("/usr/local/cuda/lib64".into());
            // The pip wheels: nvidia-cuda-nvrtc (CUDA 13 puts it under nvidia/cu13/lib, 12 under
            // nvidia/cuda_nvrtc/lib).
            for pkgs in python_package_dirs() {
                for sub in ["nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"] {
                    dirs.push(pkgs.join(sub));
                }
            }
        }
    }
    dirs
}

/// Every Python's site- and dist-packages this process can guess without running Python:
/// under /usr, /usr/local, ~/.local, $VIRTUAL_ENV, pyenv's versions and the prefix of every
/// `python3*` on `PATH` (a venv's bin/ or a toolchain's), where NVIDIA's pip wheels put their
/// libraries (`nvidia/<package>/lib`).
pub(crate) fn python_package_dirs() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = vec!["/usr/lib".into(), "/usr/local/lib".into()];
    if let Some(home) = std::env::var_os("HOME") {
        roots.push(PathBuf::from(home).join(".local/lib"));
    }
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV") {
        roots.push(PathBuf::from(venv).join("lib"));
    }
    let pyenv =
        std::env::var_os("PYENV_ROOT").map(PathBuf::from).or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pyenv")));
    if let Some(Ok(rd)) = pyenv.map(|p| std::fs::read_dir(p.join("versions"))) {
        roots.extend(rd.filter_map(|e| e.ok()).map(|e| e.path().join("lib")));
    }
    for bin in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        let Ok(rd) = std::fs::read_dir(&bin) else { continue };
        let pythons: Vec<PathBuf> =
            rd.filter_map(|e| e.ok()).filter(|e| e.file_name().to_string_lossy().starts_with("python3")).map(|e| e.path()).collect();
        if pythons.is_empty() {
            continue;
        }
        // The prefix of bin/ (a venv keeps its packages there even when python3 links out)
        // and of each interpreter it links to.
        let mut prefixes: Vec<PathBuf> = bin.parent().map(Path::to_path_buf).into_iter().collect();
        prefixes.extend(pythons.iter().filter_map(|p| std::fs::canonicalize(p).ok()?.parent()?.parent().map(Path::to_path_buf)));
        for p in prefixes {
            roots.push(p.join("lib"));
            roots.push(p.join("local/lib"));
        }
    }
    let mut out: Vec<PathBuf> = Vec::new();
    for root in roots {
        let Ok(rd) = std::fs::read_dir(&root) else { continue };
        for e in rd.filter_map(|e| e.ok()) {
            if !e.file_name().to_string_lossy().starts_with("python3") {
                continue;
            }
            for pkgs in ["site-packages", "dist-packages"] {
                let d = e.path().join(pkgs);
                if d.is_dir() && !out.contains(&d) {
                    out.push(d);
                }
            }
        }
    }
    out
}

/// Opens `path` and keeps it open; returns the address of the library's first function (see
/// `Which::marker`) to compare with what cudarc resolves.
fn preload(path: &Path, which: Which) -> Result<usize, String> {
    // SAFETY: loading a CUDA library runs its initialisers, which is what using it means anyway.
    let lib = unsafe { libloading::Library::new(path) }.map_err(|e| format!("{}: {e}", path.display()))?;
    // SAFETY: only looks the symbol up.
    let addr = unsafe { lib.get::<*const ()>(which.marker().as_bytes()) }
        .map(|s| *s as usize)
        .map_err(|_| format!("{} has no {}", path.display(), which.marker()))?;
    keep(lib);
    Ok(addr)
}

/// The address cudarc's loader resolves the marker function to (fixing cudarc's choice of
/// library for the process).
fn cudarc_marker(which: Which) -> Option<usize> {
    // SAFETY: called only after cudarc_finds() said a library opens.
    let lib = unsafe {
        match which {
            Which::Driver => cudarc::driver::sys::culib(),
            Which::Nvrtc => cudarc::nvrtc::sys::culib(),
        }
    };
    // SAFETY: only looks the symbol up.
    unsafe { lib.get::<*const ()>(which.marker().as_bytes()) }.ok().map(|s| *s as usize)
}

/// After preloading a library at `addr`: Ok when cudarc will use exactly that one. cudarc asks
/// for `libnvrtc.so` / `libcuda.so` before the versioned names, so another copy on the linker
/// path can win over the one we opened.
fn cudarc_uses(which: Which, addr: usize, path: &Path) -> Result<(), String> {
    if !cudarc_finds(which) {
        return Err(format!(
            "{}: opened, but its soname is not one cudarc asks for (libnvrtc.so.13/.12/.11, libcuda.so.1)",
            path.display()
        ));
    }
    if cudarc_marker(which) != Some(addr) {
        return Err(format!("{}: cudarc would use another {} found on the linker path instead", path.display(), which.stem()));
    }
    Ok(())
}

/// Makes the library findable by cudarc, or says why it is not.
fn ensure(which: Which) -> Result<(), String> {
    if let Some(v) = std::env::var_os(which.env()).filter(|v| !v.is_empty()) {
        let p = PathBuf::from(&v);
        let files = if p.is_dir() { candidates_in(&p, which.stem()) } else { vec![p.clone()] };
        let Some(file) = files.first() else {
            return Err(format!("{}={} holds no {}*", which.env(), p.display(), which.stem()));
        };
        let addr = preload(file, which).map_err(|e| format!("{}={}: cannot use {e}", which.env(), p.display()))?;
        return cudarc_uses(which, addr, file).map_err(|e| format!("{}={}: {e}", which.env(), p.display()));
    }
    if cudarc_finds(which) {
        return Ok(());
    }
    let mut tried = Vec::new();
    for dir in fallback_dirs(which) {
        for file in candidates_in(&dir, which.stem()) {
            match preload(&file, which).and_then(|addr| cudarc_uses(which, addr, &file)) {
                Ok(()) => {
                    tracing::debug!(lib = %file.display(), "found {} outside the linker path", which.what());
                    return Ok(());
                }
                Err(e) => tried.push(e),
            }
        }
    }
    let extra = if tried.is_empty() { String::new() } else { format!("; tried {}", tried.join("; ")) };
    Err(format!("{} not found in {} (set {} to its path){extra}", which.what(), which.searched(), which.env()))
}

fn missing_symbols(lib: &libloading::Library, names: &[&str]) -> Vec<String> {
    names
        .iter()
        // SAFETY: only looks the symbol up; nothing is called.
        .filter(|n| unsafe { lib.get::<*const ()>(n.as_bytes()) }.is_err())
        .map(|n| n.to_string())
        .collect()
}

/// True when the loaded library exports `name` (for optional functions).
pub(crate) fn driver_has(name: &str) -> bool {
    // SAFETY: only called after `driver()` said Ok, so culib() finds the library.
    driver().is_ok() && unsafe { cudarc::driver::sys::culib().get::<*const ()>(name.as_bytes()) }.is_ok()
}

pub(crate) fn nvrtc_has(name: &str) -> bool {
    // SAFETY: as above, after `nvrtc()` said Ok.
    nvrtc().is_ok() && unsafe { cudarc::nvrtc::sys::culib().get::<*const ()>(name.as_bytes()) }.is_ok()
}

/// Ok when libcuda is loadable and has every function the backend calls; checked once.
pub fn driver() -> Result<(), String> {
    static R: OnceLock<Result<(), String>> = OnceLock::new();
    R.get_or_init(|| {
        ensure(Which::Driver)?;
        // SAFETY: ensure() just checked that cudarc's loader finds a library.
        let missing = missing_symbols(unsafe { cudarc::driver::sys::culib() }, DRIVER_SYMBOLS);
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!("libcuda lacks {} (driver too old?)", missing.join(", ")))
        }
    })
    .clone()
}

/// Ok when libnvrtc is loadable and has every function the backend calls; checked once.
pub fn nvrtc() -> Result<(), String> {
    static R: OnceLock<Result<(), String>> = OnceLock::new();
    R.get_or_init(|| {
        ensure(Which::Nvrtc)?;
        // SAFETY: as in driver().
        let missing = missing_symbols(unsafe { cudarc::nvrtc::sys::culib() }, NVRTC_SYMBOLS);
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!("libnvrtc lacks {} (NVRTC too old?)", missing.join(", ")))
        }
    })
    .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_are_the_library_versions_highest_first() {
        let dir = std::env::temp_dir().join(format!("dynaspa-libs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for f in ["libnvrtc.so.12", "libnvrtc.so", "libnvrtc.so.13", "libnvrtc-builtins.so.13.2", "libnvrtc.so.13.x"] {
            std::fs::write(dir.join(f), b"").unwrap();
        }
        let names: Vec<String> =
            candidates_in(&dir, "libnvrtc.so").iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(names, ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"]);
    }
}
