//! The C ABI (include/dynaspa.h is generated from this file by cbindgen). Every entry point
//! returns `DYNASPA_OK` (0) or a negative `DYNASPA_ERR_*` code with a message that
//! `dynaspa_last_error` returns on the same thread; none lets a panic cross into C. NULL
//! pointers, wrong lengths and out-of-range indices are errors, never crashes. A session may be
//! used from one thread at a time; different sessions run concurrently.

use crate::error::{guard, last_error_ptr, Failure, Status};
use crate::session::{FfiSession, ProfileChoice, Settings};
use std::ffi::{c_char, c_int, CStr};
use std::path::PathBuf;

/// A model opened on a backend (`dynaspa_open`), closed with `dynaspa_close`.
pub struct dynaspa_session(FfiSession);

/// What inactive outputs of sparse ops hold: zeros, as the model's own mask multiplication gives.
pub const DYNASPA_FILL_ZERO: c_int = 0;
/// What inactive outputs of sparse ops hold: the last frame's values where a model-input mask
/// is 0 (SIGE's cached mode).
pub const DYNASPA_FILL_CACHED: c_int = 1;

/// Options of `dynaspa_open_with`. Fill one with `dynaspa_options_init` first, then set fields,
/// so fields added later keep their defaults.
#[repr(C)]
pub struct dynaspa_options {
    /// CPU worker threads; 0: every core.
    pub threads: u32,
    /// `DYNASPA_FILL_ZERO` (default) or `DYNASPA_FILL_CACHED`.
    pub fill: c_int,
    /// Non-zero: run every op densely (the baseline sparse runs are compared with).
    pub dense: c_int,
    /// Non-zero: use no tuned profile; the sparse ops are calibrated at open.
    pub no_profile: c_int,
    /// A tuned profile file (`dynaspa tune`); refused unless made for this device and model.
    /// NULL: the profile shipped beside the model for this device, if any, else calibration.
    pub profile: *const c_char,
    /// GPU backends: the device (an index or a name, as `dynaspa devices` lists); NULL: default.
    pub device: *const c_char,
    /// Where calibrated kernels are cached across opens; NULL: `$DYNASPA_CACHE_DIR`,
    /// `$XDG_CACHE_HOME/dynaspa` or `~/.cache/dynaspa` (on Android pass the app's cache dir).
    pub cache_dir: *const c_char,
}

/// What the last frame of a session did (`dynaspa_last_report`).
#[repr(C)]
pub struct dynaspa_report {
    /// Wall time of the whole frame, in milliseconds.
    pub latency_ms: f64,
    /// Mean mask density (active fraction) over the ops that ran sparse; -1 when none did.
    pub density: f64,
    /// Ops that ran sparse.
    pub sparse_ops: u32,
    /// Time spent in sparse ops, in milliseconds.
    pub sparse_ms: f64,
}

unsafe fn str_arg<'a>(p: *const c_char, what: &str) -> Status<&'a str> {
    if p.is_null() {
        return Err(Failure::null(what));
    }
    CStr::from_ptr(p).to_str().map_err(|_| Failure::argument(format!("{what} is not valid UTF-8")))
}

unsafe fn opt_str_arg<'a>(p: *const c_char, what: &str) -> Status<Option<&'a str>> {
    if p.is_null() {
        Ok(None)
    } else {
        str_arg(p, what).map(Some)
    }
}

unsafe fn session_ref<'a>(s: *const dynaspa_session) -> Status<&'a FfiSession> {
    s.as_ref().map(|s| &s.0).ok_or_else(|| Failure::null("session"))
}

unsafe fn out_ref<'a, T>(p: *mut T, what: &str) -> Status<&'a mut T> {
    p.as_mut().ok_or_else(|| Failure::null(what))
}

unsafe fn settings(o: *const dynaspa_options) -> Status<Settings> {
    let Some(o) = o.as_ref() else {
        return Ok(Settings::default());
    };
    let cached = match o.fill {
        DYNASPA_FILL_ZERO => false,
        DYNASPA_FILL_CACHED => true,
        f => return Err(Failure::argument(format!("options.fill is {f}; expected DYNASPA_FILL_ZERO (0) or DYNASPA_FILL_CACHED (1)"))),
    };
    let file = opt_str_arg(o.profile, "options.profile")?;
    let profile = match (file, o.no_profile != 0) {
        (Some(_), true) => return Err(Failure::argument("options.profile and options.no_profile are both set; choose one")),
        (Some(f), false) => ProfileChoice::File(PathBuf::from(f)),
        (None, true) => ProfileChoice::Calibrate,
        (None, false) => ProfileChoice::Shipped,
    };
    Ok(Settings {
        threads: (o.threads > 0).then_some(o.threads as usize),
        cached,
        dense: o.dense != 0,
        profile,
        device: opt_str_arg(o.device, "options.device")?.map(String::from),
        cache_dir: opt_str_arg(o.cache_dir, "options.cache_dir")?.map(PathBuf::from),
    })
}

/// The library's version, e.g. "0.1.0" (a static string).
#[no_mangle]
pub extern "C" fn dynaspa_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// Fills `options` with the defaults: every core, zero fill, sparse, the shipped profile.
#[no_mangle]
pub unsafe extern "C" fn dynaspa_options_init(options: *mut dynaspa_options) -> c_int {
    guard("dynaspa_options_init", || {
        let o = out_ref(options, "options")?;
        *o = dynaspa_options {
            threads: 0,
            fill: DYNASPA_FILL_ZERO,
            dense: 0,
            no_profile: 0,
            profile: std::ptr::null(),
            device: std::ptr::null(),
            cache_dir: std::ptr::null(),
        };
        Ok(())
    })
}

/// Opens the ONNX model at `model_path` on `backend` ("auto", "cpu", "cuda", "opencl", "wgpu")
/// with the default options. On success `*out` is the session; on failure it is NULL.
#[no_mangle]
pub unsafe extern "C" fn dynaspa_open(model_path: *const c_char, backend: *const c_char, out: *mut *mut dynaspa_session) -> c_int {
    dynaspa_open_with(model_path, backend, std::ptr::null(), out)
}

/// `dynaspa_open` with options (NULL: the defaults of `dynaspa_options_init`).
#[no_mangle]
pub unsafe extern "C" fn dynaspa_open_with(
    model_path: *const c_char,
    backend: *const c_char,
    options: *const dynaspa_options,
    out: *mut *mut dynaspa_session,
) -> c_int {
    guard("dynaspa_open", || {
        let out = out_ref(out, "out")?;
        *out = std::ptr::null_mut();
        let path = str_arg(model_path, "model_path")?;
        let backend = str_arg(backend, "backend")?;
        let s = FfiSession::open(path.as_ref(), backend, &settings(options)?)?;
        *out = Box::into_raw(Box::new(dynaspa_session(s)));
        Ok(())
    })
}

/// Closes a session and frees it; NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn dynaspa_close(s: *mut dynaspa_session) {
    if !s.is_null() {
        guard("dynaspa_close", || {
            drop(Box::from_raw(s));
            Ok(())
        });
    }
}

/// This thread's last error message (NULL if no call on this thread failed yet). The string
/// stays valid until the next failing call on this thread.
#[no_mangle]
pub extern "C" fn dynaspa_last_error() -> *const c_char {
    last_error_ptr()
}

/// The number of model inputs.
#[no_mangle]
pub unsafe extern "C" fn dynaspa_input_count(s: *const dynaspa_session, n: *mut usize) -> c_int {
    guard("dynaspa_input_count", || {
        let s = session_ref(s)?;
        *out_ref(n, "n")? = s.inputs.len();
        Ok(())
    })
}

/// The number of model outputs.
#[no_mangle]
pub unsafe extern "C" fn dynaspa_output_count(s: *const dynaspa_session, n: *mut usize) -> c_int {
    guard("dynaspa_output_count", || {
        let s = session_ref(s)?;
        *out_ref(n, "n")? = s.outputs.len();
        Ok(())
    })
}

/// The name of input `index`; `*name` stays valid until the session is closed.
#[no_mangle]
pub unsafe extern "C" fn dynaspa_input_name(s: *const dynaspa_session, index: usize, name: *mut *const c_char) -> c_int {
    guard("dynaspa_input_name", || {
        let s = session_ref(s)?;
        let out = out_ref(name, "name")?;
        *out = s.input(index)?.name.as_ptr();
        Ok(())
    })
}

/// The name of output `index`; `*name` stays valid until the session is closed.
#[no_mangle]
pub unsafe extern "C" fn dynaspa_output_name(s: *const dynaspa_session, index: usize, name: *mut *const c_char) -> c_int {
    guard("dynaspa_output_name", || {
        let s = session_ref(s)?;
        let out = out_ref(name, "name")?;
        *out = s.output(index)?.name.as_ptr();
        Ok(())
    })
}

unsafe fn write_shape(shape: &[usize], dims: *mut i64, rank: *mut usize) -> Status<()> {
    let rank = out_ref(rank, "rank")?;
    let capacity = *rank;
    *rank = shape.len();
    if capacity < shape.len() {
        return Err(Failure::argument(format!(
            "dims has room for {capacity} dimensions; the shape {shape:?} has {} (*rank now holds it)",
            shape.len()
        )));
    }
    if dims.is_null() {
        return Err(Failure::null("dims"));
    }
    for (i, &d) in shape.iter().enumerate() {
        *dims.add(i) = d as i64;
    }
    Ok(())
}

/// The shape of input `index`: `*rank` is the capacity of `dims` on entry and the rank on
/// return (also when the capacity is too small, which is an error).
#[no_mangle]
pub unsafe extern "C" fn dynaspa_input_shape(s: *const dynaspa_session, index: usize, dims: *mut i64, rank: *mut usize) -> c_int {
    guard("dynaspa_input_shape", || write_shape(&session_ref(s)?.input(index)?.shape, dims, rank))
}

/// The shape of output `index`, as `dynaspa_input_shape`.
#[no_mangle]
pub unsafe extern "C" fn dynaspa_output_shape(s: *const dynaspa_session, index: usize, dims: *mut i64, rank: *mut usize) -> c_int {
    guard("dynaspa_output_shape", || write_shape(&session_ref(s)?.output(index)?.shape, dims, rank))
}

/// Checks one array of buffers against the model's ports: none NULL or misaligned, each length
/// (in floats) the port's element count.
unsafe fn check_buffers<T>(
    what: &str,
    ptrs: *const *const T,
    lens: *const usize,
    ports: &[crate::session::Port],
) -> Status<Vec<(*const T, usize)>> {
    if ptrs.is_null() {
        return Err(Failure::null(what));
    }
    if lens.is_null() {
        return Err(Failure::null(&format!("{}_lens", what)));
    }
    let mut v = Vec::with_capacity(ports.len());
    for (i, p) in ports.iter().enumerate() {
        let (ptr, len) = (*ptrs.add(i), *lens.add(i));
        let name = p.name.to_string_lossy();
        if ptr.is_null() {
            return Err(Failure::null(&format!("{what}[{i}] ('{name}')")));
        }
        if !ptr.is_aligned() {
            return Err(Failure::argument(format!("{what}[{i}] ('{name}') is not aligned for float")));
        }
        if len != p.len {
            return Err(Failure::argument(format!("{what}_lens[{i}] ('{name}') is {len} floats; its shape {:?} has {}", p.shape, p.len)));
        }
        v.push((ptr, len));
    }
    Ok(v)
}

/// Runs one frame: `inputs[i]` holds input i (float32, C order) with `input_lens[i]` floats;
/// `outputs[j]` receives output j and has room for `output_lens[j]` floats. Each length must be
/// the element count of its shape. Outputs of another type (an int64 class index, a bool mask)
/// are converted to float32. On an error no output buffer has been written.
#[no_mangle]
pub unsafe extern "C" fn dynaspa_run_f32(
    s: *mut dynaspa_session,
    inputs: *const *const f32,
    input_lens: *const usize,
    outputs: *const *mut f32,
    output_lens: *const usize,
) -> c_int {
    guard("dynaspa_run_f32", || {
        let s = &mut s.as_mut().ok_or_else(|| Failure::null("session"))?.0;
        let ins = check_buffers("inputs", inputs, input_lens, &s.inputs)?;
        let outs = check_buffers("outputs", outputs.cast::<*const f32>(), output_lens, &s.outputs)?;
        for (j, &(p, n)) in outs.iter().enumerate() {
            let (a, b) = (p as usize, p as usize + 4 * n);
            if let Some(k) = outs[..j].iter().position(|&(q, m)| (q as usize) < b && a < q as usize + 4 * m) {
                return Err(Failure::argument(format!("outputs[{j}] and outputs[{k}] overlap")));
            }
        }
        // Inputs are copied before any output slice exists, so an input may share memory with
        // an output buffer.
        let feeds: Vec<Vec<f32>> = ins.iter().map(|&(p, n)| std::slice::from_raw_parts(p, n).to_vec()).collect();
        let mut bufs: Vec<&mut [f32]> = outs.iter().map(|&(p, n)| std::slice::from_raw_parts_mut(p.cast_mut(), n)).collect();
        s.run(feeds, &mut bufs)
    })
}

/// What the last frame did; an error before the first frame.
#[no_mangle]
pub unsafe extern "C" fn dynaspa_last_report(s: *const dynaspa_session, report: *mut dynaspa_report) -> c_int {
    guard("dynaspa_last_report", || {
        let r = session_ref(s)?.report()?;
        *out_ref(report, "report")? = dynaspa_report {
            latency_ms: r.latency.as_secs_f64() * 1e3,
            density: r.density.unwrap_or(-1.0),
            sparse_ops: r.sparse_ops as u32,
            sparse_ms: r.sparse_time.as_secs_f64() * 1e3,
        };
        Ok(())
    })
}
