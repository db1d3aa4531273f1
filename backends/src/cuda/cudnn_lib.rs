//! Finding and loading libcudnn (cuDNN 9) without ever panicking. The functions the backend
//! calls are resolved here from the library we opened, each checked before use, so a missing
//! library or an old one is a reason in `dynaspa devices`, not a crash (cudarc's `cudnn`
//! loader panics on both; it is not used).
//!
//! Where: `DYNASPA_CUDNN_LIB` (the file, or a directory holding it) alone when set; else the
//! directories of `LD_LIBRARY_PATH`, the dynamic linker's own search (ld.so.cache), `$CUDA_HOME`
//! and /usr/local/cuda, and NVIDIA's pip wheels (`nvidia/*/lib`) of the Pythons on the machine.
//!
//! cuDNN 9 is a small `libcudnn.so.9` that opens its sub-libraries (`libcudnn_graph`, `_ops`,
//! `_cnn`, `_engines_*`, `_heuristic`, `_adv`) by soname when first needed. Those are found only
//! on the linker's path, so every `libcudnn_*.so.<major>` beside the library we opened is opened
//! here by full path first (glibc then answers cuDNN's lookup by soname with the loaded copy).
//! A sub-library whose own dependency is off the path (`libcublasLt.so.13`, `libnvrtc.so.13`
//! in another wheel's `lib/`) gets that dependency opened from the sibling wheel directories.
//! What still does not load is listed in the status; cuDNN then fails when it needs that part,
//! which the backend catches (our kernels run instead).

use super::libs::{candidates_in, python_package_dirs};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

pub(crate) type Status = c_int;
pub(crate) type Handle = *mut c_void;
/// Any cuDNN descriptor (tensor, filter, convolution, activation).
pub(crate) type Desc = *mut c_void;

// Values of the cuDNN 9 headers' enums (cudnn_graph.h, cudnn_cnn.h, cudnn_ops.h).
pub(crate) const SUCCESS: Status = 0;
pub(crate) const DATA_FLOAT: c_int = 0;
pub(crate) const DATA_HALF: c_int = 2;
pub(crate) const TENSOR_NCHW: c_int = 0;
pub(crate) const CROSS_CORRELATION: c_int = 1;
/// CUDNN_FMA_MATH: FMA kernels only (no TF32 tensor cores), fp32 semantics as our kernels.
pub(crate) const FMA_MATH: c_int = 3;
/// CUDNN_DEFAULT_MATH and CUDNN_TENSOR_OP_MATH: half tensors may take tensor cores (f32
/// accumulation: the conv descriptor's compute type stays FLOAT).
pub(crate) const DEFAULT_MATH: c_int = 0;
pub(crate) const TENSOR_OP_MATH: c_int = 1;
pub(crate) const ACTIVATION_RELU: c_int = 1;
pub(crate) const ACTIVATION_IDENTITY: c_int = 5;
pub(crate) const NOT_PROPAGATE_NAN: c_int = 0;
pub(crate) const ALGO_IMPLICIT_PRECOMP_GEMM: c_int = 1;
pub(crate) const ALGO_COUNT: c_int = 8;
pub(crate) const ALGO_NAMES: [&str; 8] =
    ["IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"];

/// cudnnConvolutionFwdAlgoPerf_t, with the enums as plain ints (a value this code does not
/// know stays a number instead of an invalid Rust enum).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FwdAlgoPerf {
    pub algo: c_int,
    pub status: Status,
    pub time: f32,
    pub memory: usize,
    pub determinism: c_int,
    pub math_type: c_int,
    pub reserved: [c_int; 3],
}

type CreateFn = unsafe extern "C" fn(*mut Desc) -> Status;
type DestroyFn = unsafe extern "C" fn(Desc) -> Status;

macro_rules! api {
    ($($field:ident = $name:literal: fn($($arg:ty),*) -> $ret:ty;)*) => {
        /// The cuDNN functions the backend calls, resolved from the loaded library.
        pub(crate) struct Api {
            $(pub $field: unsafe extern "C" fn($($arg),*) -> $ret,)*
            /// cudnnGetLastErrorString (9.0+): the detail behind a failed call.
            pub last_error: Option<unsafe extern "C" fn(*mut c_char, usize)>,
        }

        /// Every function `Api` needs, for the check and the error.
        pub const SYMBOLS: &[&str] = &[$($name),*];

        impl Api {
            fn resolve(lib: &libloading::Library) -> Result<Api, String> {
                // SAFETY: only looks symbols up.
                let missing: Vec<&str> = SYMBOLS.iter().copied().filter(|n| unsafe { lib.get::<*const ()>(n.as_bytes()) }.is_err()).collect();
                if !missing.is_empty() {
                    return Err(format!("lacks {} (not cuDNN 9?)", missing.join(", ")));
                }
                // SAFETY: each symbol exists (checked above) and has the C signature of the
                // cuDNN 9 headers; the library stays loaded as long as `Loaded` (the process).
                unsafe {
                    Ok(Api {
                        $($field: *lib.get::<unsafe extern "C" fn($($arg),*) -> $ret>($name.as_bytes()).map_err(|e| format!("{}: {e}", $name))?,)*
                        last_error: lib.get::<unsafe extern "C" fn(*mut c_char, usize)>(b"cudnnGetLastErrorString").ok().map(|s| *s),
                    })
                }
            }
        }
    };
}

api! {
    get_version = "cudnnGetVersion": fn() -> usize;
    get_error_string = "cudnnGetErrorString": fn(Status) -> *const c_char;
    create = "cudnnCreate": fn(*mut Handle) -> Status;
    destroy = "cudnnDestroy": fn(Handle) -> Status;
    set_stream = "cudnnSetStream": fn(Handle, *mut c_void) -> Status;
    create_tensor = "cudnnCreateTensorDescriptor": fn(*mut Desc) -> Status;
    set_tensor_4d = "cudnnSetTensor4dDescriptor": fn(Desc, c_int, c_int, c_int, c_int, c_int, c_int) -> Status;
    destroy_tensor = "cudnnDestroyTensorDescriptor": fn(Desc) -> Status;
    create_filter = "cudnnCreateFilterDescriptor": fn(*mut Desc) -> Status;
    set_filter_4d = "cudnnSetFilter4dDescriptor": fn(Desc, c_int, c_int, c_int, c_int, c_int, c_int) -> Status;
    destroy_filter = "cudnnDestroyFilterDescriptor": fn(Desc) -> Status;
    create_conv = "cudnnCreateConvolutionDescriptor": fn(*mut Desc) -> Status;
    set_conv_2d = "cudnnSetConvolution2dDescriptor": fn(Desc, c_int, c_int, c_int, c_int, c_int, c_int, c_int, c_int) -> Status;
    set_conv_groups = "cudnnSetConvolutionGroupCount": fn(Desc, c_int) -> Status;
    set_conv_math = "cudnnSetConvolutionMathType": fn(Desc, c_int) -> Status;
    conv_output_dim = "cudnnGetConvolution2dForwardOutputDim": fn(Desc, Desc, Desc, *mut c_int, *mut c_int, *mut c_int, *mut c_int) -> Status;
    destroy_conv = "cudnnDestroyConvolutionDescriptor": fn(Desc) -> Status;
    create_activation = "cudnnCreateActivationDescriptor": fn(*mut Desc) -> Status;
    set_activation = "cudnnSetActivationDescriptor": fn(Desc, c_int, c_int, f64) -> Status;
    destroy_activation = "cudnnDestroyActivationDescriptor": fn(Desc) -> Status;
    find_fwd_ex = "cudnnFindConvolutionForwardAlgorithmEx": fn(Handle, Desc, *const c_void, Desc, *const c_void, Desc, Desc, *mut c_void, c_int, *mut c_int, *mut FwdAlgoPerf, *mut c_void, usize) -> Status;
    fwd_workspace = "cudnnGetConvolutionForwardWorkspaceSize": fn(Handle, Desc, Desc, Desc, Desc, c_int, *mut usize) -> Status;
    conv_fwd = "cudnnConvolutionForward": fn(Handle, *const c_void, Desc, *const c_void, Desc, *const c_void, Desc, c_int, *mut c_void, usize, *const c_void, Desc, *mut c_void) -> Status;
    conv_bias_act_fwd = "cudnnConvolutionBiasActivationForward": fn(Handle, *const c_void, Desc, *const c_void, Desc, *const c_void, Desc, c_int, *mut c_void, usize, *const c_void, Desc, *const c_void, Desc, *const c_void, Desc, Desc, *mut c_void) -> Status;
    backend_create = "cudnnBackendCreateDescriptor": fn(c_int, *mut Desc) -> Status;
    backend_destroy = "cudnnBackendDestroyDescriptor": fn(Desc) -> Status;
    backend_set = "cudnnBackendSetAttribute": fn(Desc, c_int, c_int, i64, *const c_void) -> Status;
    backend_get = "cudnnBackendGetAttribute": fn(Desc, c_int, c_int, i64, *mut i64, *mut c_void) -> Status;
    backend_finalize = "cudnnBackendFinalize": fn(Desc) -> Status;
    backend_execute = "cudnnBackendExecute": fn(Handle, Desc, Desc) -> Status;
}

/// Values of the backend (graph) API's enums (cudnn_graph.h, cuDNN 9).
pub(crate) mod graph {
    use std::ffi::c_int;
    // cudnnBackendDescriptorType_t
    pub const CONVOLUTION_DESCRIPTOR: c_int = 1;
    pub const ENGINE_DESCRIPTOR: c_int = 2;
    pub const ENGINECFG_DESCRIPTOR: c_int = 3;
    pub const ENGINEHEUR_DESCRIPTOR: c_int = 4;
    pub const EXECUTION_PLAN_DESCRIPTOR: c_int = 5;
    pub const OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR: c_int = 10;
    pub const OPERATIONGRAPH_DESCRIPTOR: c_int = 15;
    pub const VARIANT_PACK_DESCRIPTOR: c_int = 16;
    pub const TENSOR_DESCRIPTOR: c_int = 17;
    // cudnnBackendAttributeType_t
    pub const TYPE_HANDLE: c_int = 0;
    pub const TYPE_DATA_TYPE: c_int = 1;
    pub const TYPE_INT64: c_int = 3;
    pub const TYPE_FLOAT: c_int = 4;
    pub const TYPE_VOID_PTR: c_int = 6;
    pub const TYPE_CONVOLUTION_MODE: c_int = 7;
    pub const TYPE_HEUR_MODE: c_int = 8;
    pub const TYPE_NUMERICAL_NOTE: c_int = 11;
    pub const TYPE_BACKEND_DESCRIPTOR: c_int = 15;
    // cudnnBackendAttributeName_t
    pub const CONVOLUTION_COMP_TYPE: c_int = 100;
    pub const CONVOLUTION_CONV_MODE: c_int = 101;
    pub const CONVOLUTION_DILATIONS: c_int = 102;
    pub const CONVOLUTION_FILTER_STRIDES: c_int = 103;
    pub const CONVOLUTION_POST_PADDINGS: c_int = 104;
    pub const CONVOLUTION_PRE_PADDINGS: c_int = 105;
    pub const CONVOLUTION_SPATIAL_DIMS: c_int = 106;
    pub const ENGINEHEUR_MODE: c_int = 200;
    pub const ENGINEHEUR_OPERATION_GRAPH: c_int = 201;
    pub const ENGINEHEUR_RESULTS: c_int = 202;
    pub const ENGINECFG_ENGINE: c_int = 300;
    pub const EXECUTION_PLAN_HANDLE: c_int = 400;
    pub const EXECUTION_PLAN_ENGINE_CONFIG: c_int = 401;
    pub const EXECUTION_PLAN_WORKSPACE_SIZE: c_int = 402;
    pub const OPERATION_CONVOLUTION_FORWARD_ALPHA: c_int = 700;
    pub const OPERATION_CONVOLUTION_FORWARD_BETA: c_int = 701;
    pub const OPERATION_CONVOLUTION_FORWARD_CONV_DESC: c_int = 702;
    pub const OPERATION_CONVOLUTION_FORWARD_W: c_int = 703;
    pub const OPERATION_CONVOLUTION_FORWARD_X: c_int = 704;
    pub const OPERATION_CONVOLUTION_FORWARD_Y: c_int = 705;
    pub const OPERATIONGRAPH_HANDLE: c_int = 800;
    pub const OPERATIONGRAPH_OPS: c_int = 801;
    pub const TENSOR_BYTE_ALIGNMENT: c_int = 900;
    pub const TENSOR_DATA_TYPE: c_int = 901;
    pub const TENSOR_DIMENSIONS: c_int = 902;
    pub const TENSOR_STRIDES: c_int = 903;
    pub const TENSOR_UNIQUE_ID: c_int = 906;
    pub const VARIANT_PACK_UNIQUE_IDS: c_int = 1000;
    pub const VARIANT_PACK_DATA_POINTERS: c_int = 1001;
    pub const VARIANT_PACK_WORKSPACE: c_int = 1003;
    pub const ENGINE_GLOBAL_INDEX: c_int = 1301;
    pub const ENGINE_NUMERICAL_NOTE: c_int = 1303;
    // cudnnBackendHeurMode_t
    pub const HEUR_MODE_FALLBACK: c_int = 2;
    pub const HEUR_MODE_A: c_int = 3;
    // cudnnBackendNumericalNote_t: engines with these do not keep fp32 semantics.
    pub const NOTE_TENSOR_CORE: c_int = 0;
    pub const NOTE_DOWN_CONVERT_INPUTS: c_int = 1;
    pub const NOTE_REDUCED_PRECISION_REDUCTION: c_int = 2;
}

impl Api {
    /// "CUDNN_STATUS_BAD_PARAM (detail)" for a failed call.
    pub(crate) fn status_text(&self, s: Status) -> String {
        // SAFETY: returns a static string for any code.
        let name = unsafe { (self.get_error_string)(s) };
        let mut text = if name.is_null() {
            format!("cuDNN status {s}")
        } else {
            // SAFETY: non-null, NUL-terminated, static.
            unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned()
        };
        if let Some(f) = self.last_error {
            let mut buf = vec![0 as c_char; 512];
            // SAFETY: writes at most buf.len() bytes, NUL-terminated.
            unsafe { f(buf.as_mut_ptr(), buf.len()) };
            // SAFETY: NUL-terminated within buf (zeroed, and the call terminates what it writes).
            let detail = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().trim().to_string();
            if !detail.is_empty() {
                text = format!("{text} ({detail})");
            }
        }
        text
    }

    pub(crate) fn tensor_fns(&self) -> (CreateFn, DestroyFn) {
        (self.create_tensor, self.destroy_tensor)
    }
    pub(crate) fn filter_fns(&self) -> (CreateFn, DestroyFn) {
        (self.create_filter, self.destroy_filter)
    }
    pub(crate) fn conv_fns(&self) -> (CreateFn, DestroyFn) {
        (self.create_conv, self.destroy_conv)
    }
    pub(crate) fn activation_fns(&self) -> (CreateFn, DestroyFn) {
        (self.create_activation, self.destroy_activation)
    }
}

/// The loaded library.
pub(crate) struct Loaded {
    pub api: Api,
    /// (major, minor, patch).
    pub version: (usize, usize, usize),
    pub path: PathBuf,
    /// Sub-libraries opened here (file names), and those that did not open, with the reason.
    pub sublibs: Vec<String>,
    pub problems: Vec<String>,
    _lib: libloading::Library,
}

/// Libraries opened by full path for the process's lifetime (the sub-libraries and their
/// dependencies), so cuDNN's later lookups by soname find them.
static KEPT: Mutex<Vec<libloading::os::unix::Library>> = Mutex::new(Vec::new());

/// Opens `path` with its symbols global (as Python's preloading of the wheels does) and keeps it.
fn open_global(path: &Path) -> Result<(), String> {
    use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_LAZY};
    // SAFETY: loading a cuDNN library runs its initialisers, which is what using it means.
    let lib = unsafe { Library::open(Some(path), RTLD_LAZY | RTLD_GLOBAL) }.map_err(|e| dl_text(&e))?;
    if let Ok(mut k) = KEPT.lock() {
        k.push(lib);
    }
    Ok(())
}

/// Whether libcudnn loads here (its version), or why not.
pub fn load_status() -> Result<(usize, usize, usize), String> {
    load().map(|l| l.version)
}

/// The loader's own message (libloading keeps it as the error's source).
fn dl_text(e: &libloading::Error) -> String {
    std::error::Error::source(e).map_or_else(|| e.to_string(), |s| s.to_string())
}

/// libcudnn once per process: the library and its functions, or why not.
pub(crate) fn load() -> Result<&'static Loaded, String> {
    static R: OnceLock<Result<Loaded, String>> = OnceLock::new();
    R.get_or_init(find).as_ref().map_err(Clone::clone)
}

const STEM: &str = "libcudnn.so";

fn find() -> Result<Loaded, String> {
    if let Some(v) = std::env::var_os("DYNASPA_CUDNN_LIB").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(&v);
        let tag = format!("DYNASPA_CUDNN_LIB={}", p.display());
        if !p.exists() {
            return Err(format!("{tag}: no such file or directory"));
        }
        let files = if p.is_dir() { candidates_in(&p, STEM) } else { vec![p.clone()] };
        let file = files.first().ok_or_else(|| format!("{tag}: holds no {STEM}*"))?;
        return open_at(file).map_err(|e| format!("{tag}: {e}"));
    }
    let mut tried = Vec::new();
    let ld_path = std::env::var_os("LD_LIBRARY_PATH").unwrap_or_default();
    for dir in std::env::split_paths(&ld_path) {
        for f in candidates_in(&dir, STEM) {
            match open_at(&f) {
                Ok(l) => return Ok(l),
                Err(e) => tried.push(e),
            }
        }
    }
    for name in ["libcudnn.so.9", STEM] {
        match open_by_name(name) {
            Ok(Some(l)) => return Ok(l),
            Ok(None) => {}
            Err(e) => tried.push(e),
        }
    }
    for dir in fallback_dirs() {
        for f in candidates_in(&dir, STEM) {
            match open_at(&f) {
                Ok(l) => return Ok(l),
                Err(e) => tried.push(e),
            }
        }
    }
    let extra = if tried.is_empty() { String::new() } else { format!("; tried {}", tried.join("; ")) };
    Err(format!(
        "libcudnn (cuDNN 9) not found on LD_LIBRARY_PATH, the linker path, $CUDA_HOME, /usr/local/cuda or the nvidia pip wheels (pip install nvidia-cudnn-cu13, or set DYNASPA_CUDNN_LIB to its file or directory){extra}"
    ))
}

/// Toolkit and pip-wheel directories the linker does not search.
fn fallback_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for var in ["CUDNN_HOME", "CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"] {
        if let Some(root) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            let root = PathBuf::from(root);
            dirs.push(root.join("lib64"));
            dirs.push(root.join("lib"));
        }
    }
    dirs.push("/usr/local/cuda/lib64".into());
    for pkgs in python_package_dirs() {
        dirs.extend(wheel_lib_dirs(&pkgs.join("nvidia")));
    }
    dirs
}

/// `<nvidia>/*/lib`: where each of NVIDIA's wheels keeps its libraries (nvidia/cudnn/lib,
/// nvidia/cu13/lib, ...).
fn wheel_lib_dirs(nvidia: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(nvidia) else { return Vec::new() };
    let mut v: Vec<PathBuf> = rd.filter_map(|e| e.ok()).map(|e| e.path().join("lib")).filter(|p| p.is_dir()).collect();
    // nvidia/cudnn first: where a wheel of that name exists, it is the one.
    v.sort_by_key(|p| (!p.to_string_lossy().contains("/cudnn/"), p.clone()));
    v
}

/// By soname through the dynamic linker: `Ok(None)` when it finds nothing.
fn open_by_name(name: &str) -> Result<Option<Loaded>, String> {
    // SAFETY: as in open_at.
    let Ok(lib) = (unsafe { libloading::Library::new(name) }) else { return Ok(None) };
    let path = mapped_path(name).unwrap_or_else(|| PathBuf::from(name));
    finish(lib, path).map(Some)
}

/// Where the loaded library `name` lives, from /proc/self/maps (the linker does not say).
fn mapped_path(name: &str) -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .map(PathBuf::from)
        .find(|p| p.file_name().is_some_and(|f| f.to_string_lossy().starts_with(name)))
}

fn open_at(path: &Path) -> Result<Loaded, String> {
    // SAFETY: loading cuDNN runs its initialisers, which is what using it means anyway.
    let lib = unsafe { libloading::Library::new(path) }.map_err(|e| format!("{}: {}", path.display(), dl_text(&e)))?;
    finish(lib, path.to_path_buf())
}

/// Checks the library's functions and version, then opens its sub-libraries.
fn finish(lib: libloading::Library, path: PathBuf) -> Result<Loaded, String> {
    let api = Api::resolve(&lib).map_err(|e| format!("{}: {e}", path.display()))?;
    // SAFETY: resolved above; takes no arguments.
    let v = unsafe { (api.get_version)() };
    // cuDNN 9 numbers versions major * 10000 + minor * 100 + patch, 8 major * 1000 + ...
    let version = if v >= 10000 { (v / 10000, v / 100 % 100, v % 100) } else { (v / 1000, v / 100 % 10, v % 100) };
    if version.0 < 9 {
        return Err(format!("{} is cuDNN {}.{}.{}; dynaspa needs cuDNN 9", path.display(), version.0, version.1, version.2));
    }
    let (sublibs, problems) = match path.parent().filter(|d| d.is_dir()) {
        Some(dir) => preload_sublibs(dir, version.0),
        None => (Vec::new(), Vec::new()),
    };
    for p in &problems {
        tracing::warn!("cuDNN sub-library not loaded: {p}");
    }
    tracing::debug!(lib = %path.display(), ?version, sublibs = sublibs.len(), "cuDNN loaded");
    Ok(Loaded { api, version, path, sublibs, problems, _lib: lib })
}

/// The soname in a loader error ("libcublasLt.so.13: cannot open shared object file: ...").
fn missing_soname(err: &str) -> Option<String> {
    let i = err.find(": cannot open shared object file")?;
    let name = err[..i].rsplit([' ', ':']).next()?.trim();
    (name.starts_with("lib") && name.contains(".so") && !name.contains('/')).then(|| name.to_string())
}

/// Opens every `libcudnn_*.so.<major>` of `dir` (each may need others first: retried until no
/// more open), fetching missing dependencies from sibling wheel and toolkit directories.
fn preload_sublibs(dir: &Path, major: usize) -> (Vec<String>, Vec<String>) {
    let suffix = format!(".so.{major}");
    let Ok(rd) = std::fs::read_dir(dir) else { return (Vec::new(), Vec::new()) };
    let mut pending: Vec<PathBuf> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|f| f.to_string_lossy().starts_with("libcudnn_") && f.to_string_lossy().ends_with(&suffix)))
        .collect();
    pending.sort();
    let mut dep_dirs: Vec<PathBuf> = vec![dir.to_path_buf()];
    if let Some(nvidia) = dir.parent().and_then(Path::parent) {
        dep_dirs.extend(wheel_lib_dirs(nvidia));
    }
    dep_dirs.extend(fallback_dirs());
    let name = |p: &Path| p.file_name().map_or_else(String::new, |f| f.to_string_lossy().into_owned());
    let (mut loaded, mut errors) = (Vec::new(), Vec::new());
    loop {
        let mut progress = false;
        let mut still = Vec::new();
        errors.clear();
        for f in pending {
            match open_global(&f) {
                Ok(()) => {
                    loaded.push(name(&f));
                    progress = true;
                }
                Err(e) => {
                    let dep = missing_soname(&e).and_then(|s| dep_dirs.iter().map(|d| d.join(&s)).find(|p| p.is_file()));
                    if let Some(dep) = dep {
                        if open_global(&dep).is_ok() {
                            tracing::debug!(dep = %dep.display(), "opened a cuDNN sub-library's dependency");
                            progress = true;
                        }
                    }
                    errors.push(format!("{}: {e}", name(&f)));
                    still.push(f);
                }
            }
        }
        pending = still;
        if pending.is_empty() || !progress {
            break;
        }
    }
    (loaded, if pending.is_empty() { Vec::new() } else { errors })
}

/// One line for `dynaspa devices`: the version and where it came from, that it is off, or why
/// it cannot be used.
pub fn describe() -> String {
    match load() {
        Ok(l) => {
            let (a, b, c) = l.version;
            let mut s = format!(
                "cuDNN {a}.{b}.{c} ({}; {} sub-libraries preloaded; for dense convs where faster)",
                l.path.display(),
                l.sublibs.len()
            );
            if !l.problems.is_empty() {
                s.push_str(&format!("; not loaded: {}", l.problems.join("; ")));
            }
            s
        }
        Err(e) => format!("cuDNN unavailable: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_missing_dependency_is_read_from_the_loader_error() {
        let e = "/x/libcudnn_graph.so.9: libcublasLt.so.13: cannot open shared object file: No such file or directory";
        assert_eq!(missing_soname(e).as_deref(), Some("libcublasLt.so.13"));
        assert_eq!(missing_soname("libfoo.so.1: cannot open shared object file").as_deref(), Some("libfoo.so.1"));
        assert_eq!(missing_soname("/x/libcudnn_cnn.so.9: undefined symbol: foo"), None);
    }

    #[test]
    fn load_answers_without_panicking_and_says_why_not() {
        match load() {
            Ok(l) => assert!(l.version.0 >= 9),
            Err(e) => {
                assert!(e.len() > 30, "{e}");
                assert!(describe().contains("unavailable"), "{}", describe());
            }
        }
    }
}
