//! Kernel sources to CUBIN with NVRTC. Needs only libnvrtc (no driver, no GPU), so CI compiles
//! every kernel and schedule here.
//!
//! CUBIN rather than PTX: a CUBIN loads on any driver of the same CUDA major version, whereas
//! PTX from a newer NVRTC (the pip wheel is 13.2) is refused by an older driver's JIT (580 is
//! 13.0).

use super::error::{err, Ctx};
use super::libs;
use crate::gpu::KernelSpec;
use cudarc::nvrtc::{result, sys};
use dynaspa_runtime::Result;
use std::ffi::{c_char, CString};

/// The CUDA spelling of the shared dialect's macros and OpenCL built-ins.
pub const PRELUDE: &str = include_str!("prelude.h");

/// Whether kernels can be compiled here; the reason when not.
pub fn available() -> std::result::Result<(), String> {
    libs::nvrtc()
}

fn require() -> Result<()> {
    available().map_err(|m| err(format!("cannot compile kernels: {m}")))
}

/// NVRTC's (major, minor).
pub fn version() -> Result<(i32, i32)> {
    require()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: libnvrtc was found with this symbol.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }.result().ctx(|| "nvrtcVersion".into())?;
    Ok((major, minor))
}

/// The real architectures (`75` for sm_75) this NVRTC can emit CUBIN for; `None` when it
/// cannot say (NVRTC before 11.2).
pub fn supported_archs() -> Result<Option<Vec<i32>>> {
    require()?;
    if !libs::OPT_SUPPORTED_ARCHS.iter().all(|s| libs::nvrtc_has(s)) {
        return Ok(None);
    }
    let mut n = 0;
    // SAFETY: both symbols exist (checked above); the buffer holds the `n` entries asked for.
    unsafe { sys::nvrtcGetNumSupportedArchs(&mut n) }.result().ctx(|| "nvrtcGetNumSupportedArchs".into())?;
    let mut archs = vec![0i32; n.max(0) as usize];
    unsafe { sys::nvrtcGetSupportedArchs(archs.as_mut_ptr()) }.result().ctx(|| "nvrtcGetSupportedArchs".into())?;
    Ok(Some(archs))
}

/// The `sm_XY` to compile for on a device of compute capability `cc`: the device's own when
/// NVRTC supports it, else the newest supported one of the same major version at or below it
/// (a CUBIN runs on later minor versions of its major), else an error naming both.
pub fn arch_for(cc: (i32, i32)) -> Result<String> {
    let want = cc.0 * 10 + cc.1;
    let Some(archs) = supported_archs()? else { return Ok(format!("sm_{want}")) };
    if archs.contains(&want) {
        return Ok(format!("sm_{want}"));
    }
    match archs.iter().copied().filter(|a| a / 10 == cc.0 && *a <= want).max() {
        Some(a) => Ok(format!("sm_{a}")),
        None => {
            Err(err(format!("NVRTC {:?} cannot compile for compute capability {}.{} (it supports sm_{:?})", version()?, cc.0, cc.1, archs)))
        }
    }
}

/// `NAME` must be a C identifier and `VALUE` one line: anything else would inject code or
/// options.
fn check_define(name: &str, value: &str) -> Result<()> {
    let ident = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ident {
        return Err(err(format!("kernel define '{name}' is not a C identifier")));
    }
    if value.contains(['\n', '\r', '\0']) {
        return Err(err(format!("kernel define {name}: value {value:?} spans lines")));
    }
    Ok(())
}

/// Whether kernels carry line tables (`DYNASPA_NVRTC_LINEINFO=1`, read once): Nsight Compute
/// then attributes its samples to lines of the kernel sources. The code is the same.
fn line_info() -> bool {
    static ASKED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ASKED.get_or_init(|| std::env::var("DYNASPA_NVRTC_LINEINFO").is_ok_and(|v| v.trim() == "1"))
}

/// The options one spec compiles with; part of the cache key.
pub fn options(spec: &KernelSpec, arch: &str) -> Result<Vec<String>> {
    let mut o = vec![
        format!("--gpu-architecture={arch}"),
        // Helpers without __device__ (plain OpenCL C functions) become device functions.
        "--device-as-default-execution-space".to_string(),
    ];
    if line_info() {
        o.push("--generate-line-info".to_string());
    }
    for (name, value) in &spec.defines {
        check_define(name, value)?;
        o.push(format!("-D{name}={value}"));
    }
    Ok(o)
}

/// The prelude, then the kernel file with its own line numbers, so NVRTC's messages point into
/// the file the error names.
pub fn full_source(spec: &KernelSpec) -> String {
    format!("{PRELUDE}\n#line 1 \"{}\"\n{}", spec.file, spec.source)
}

/// One compiled program.
pub struct Compiled {
    pub cubin: Vec<u8>,
    /// NVRTC's messages (warnings); empty when it had none.
    pub log: String,
}

/// Destroys the program on every path out of `compile`.
struct Program(sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: created by nvrtcCreateProgram and destroyed only here.
        let _ = unsafe { result::destroy_program(self.0) };
    }
}

fn program_log(p: &Program) -> String {
    // SAFETY: `p` is a live program.
    match unsafe { result::get_program_log(p.0) } {
        Ok(chars) => {
            let bytes: Vec<u8> = chars.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
            String::from_utf8_lossy(&bytes).trim().to_string()
        }
        Err(_) => String::new(),
    }
}

/// Compiles `spec` for `arch` ("sm_90"). A compile error carries NVRTC's log.
pub fn compile(spec: &KernelSpec, arch: &str) -> Result<Compiled> {
    require()?;
    let opts = options(spec, arch)?;
    let src = CString::new(full_source(spec)).map_err(|_| err(format!("{}: source contains a NUL byte", spec.file)))?;
    let name = CString::new(spec.file).map_err(|_| err(format!("kernel file name {:?} contains NUL", spec.file)))?;
    let prog = Program(result::create_program(&src, Some(&name)).ctx(|| format!("nvrtcCreateProgram({})", spec.file))?);
    let c_opts: Vec<CString> =
        opts.iter().map(|o| CString::new(o.as_str())).collect::<Result<_, _>>().map_err(|_| err("NUL in an NVRTC option"))?;
    let ptrs: Vec<*const c_char> = c_opts.iter().map(|c| c.as_ptr()).collect();
    // SAFETY: `prog` is live; `ptrs` point into `c_opts`, which outlives the call.
    let status = unsafe { sys::nvrtcCompileProgram(prog.0, ptrs.len() as i32, ptrs.as_ptr()) };
    let log = program_log(&prog);
    if status != sys::nvrtcResult::NVRTC_SUCCESS {
        let defines: Vec<String> = spec.defines.iter().map(|(k, v)| format!("{k}={v}")).collect();
        return Err(err(format!(
            "NVRTC could not compile {} (entry {}, defines [{}]) for {arch}: {}\n{log}",
            spec.file,
            spec.entry,
            defines.join(", "),
            super::error::nvrtc_text(result::NvrtcError(status)),
        )));
    }
    let mut size = 0usize;
    // SAFETY: compiled program; the buffer is sized as NVRTC says.
    unsafe { sys::nvrtcGetCUBINSize(prog.0, &mut size) }.result().ctx(|| format!("nvrtcGetCUBINSize({})", spec.file))?;
    let mut cubin = vec![0u8; size];
    unsafe { sys::nvrtcGetCUBIN(prog.0, cubin.as_mut_ptr() as *mut c_char) }.result().ctx(|| format!("nvrtcGetCUBIN({})", spec.file))?;
    if cubin.is_empty() {
        return Err(err(format!("NVRTC returned an empty CUBIN for {} ({arch})", spec.file)));
    }
    Ok(Compiled { cubin, log })
}
