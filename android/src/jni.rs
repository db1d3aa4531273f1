//! JNI glue for `ai.dynaspa.Session` (android/java/): the class's `native` methods, written
//! against the raw JNI function table. A handle is a `Box<FfiSession>` as a `long`. Errors and
//! caught panics become Java exceptions: NullPointerException for a null argument,
//! IllegalArgumentException for a wrong one, `ai.dynaspa.DynaspaException` for the rest.

use crate::error::{panic_message, Failure, Status, DYNASPA_ERR_ARGUMENT, DYNASPA_ERR_NULL};
use crate::session::{FfiSession, Port, ProfileChoice, Settings};
use jni_sys::{jboolean, jclass, jdouble, jdoubleArray, jint, jlong, jlongArray, jobject, jobjectArray, jsize, jstring, JNIEnv};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

type Env = *mut JNIEnv;

/// Runs `f`; on an error or a panic throws the matching Java exception (unless one is already
/// pending, e.g. from a failed JNI call) and returns `default`.
unsafe fn jni_guard<T>(env: Env, default: T, f: impl FnOnce() -> Status<T>) -> T {
    let fail = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => return v,
        Ok(Err(fail)) => fail,
        Err(p) => {
            Failure::new(crate::error::DYNASPA_ERR_INTERNAL, format!("internal error (please report it): {}", panic_message(p.as_ref())))
        }
    };
    let t = (**env).v1_2;
    if !(t.ExceptionCheck)(env) {
        let class: &[u8] = match fail.code {
            DYNASPA_ERR_NULL => b"java/lang/NullPointerException\0",
            DYNASPA_ERR_ARGUMENT => b"java/lang/IllegalArgumentException\0",
            _ => b"ai/dynaspa/DynaspaException\0",
        };
        let msg = std::ffi::CString::new(fail.msg.replace('\0', " ")).unwrap_or_default();
        let cls = (t.FindClass)(env, class.as_ptr().cast());
        // FindClass failing leaves its own NoClassDefFoundError pending, which is thrown instead.
        if !cls.is_null() {
            (t.ThrowNew)(env, cls, msg.as_ptr());
        }
    }
    default
}

/// A Java exception is pending (a JNI call failed): stop, and let the JVM throw it.
unsafe fn pending(env: Env) -> Status<()> {
    if ((**env).v1_2.ExceptionCheck)(env) {
        return Err(Failure::new(DYNASPA_ERR_ARGUMENT, "a JNI call failed"));
    }
    Ok(())
}

unsafe fn string(env: Env, s: jstring, what: &str) -> Status<Option<String>> {
    if s.is_null() {
        return Ok(None);
    }
    let t = (**env).v1_2;
    let n = (t.GetStringLength)(env, s);
    let mut buf = vec![0u16; n as usize];
    (t.GetStringRegion)(env, s, 0, n, buf.as_mut_ptr());
    pending(env)?;
    String::from_utf16(&buf).map(Some).map_err(|_| Failure::argument(format!("{what} is not valid UTF-16")))
}

unsafe fn required(env: Env, s: jstring, what: &str) -> Status<String> {
    string(env, s, what)?.ok_or_else(|| Failure::null(what))
}

unsafe fn session<'a>(handle: jlong) -> Status<&'a mut FfiSession> {
    (handle as *mut FfiSession).as_mut().ok_or_else(|| Failure::new(crate::error::DYNASPA_ERR_RUN, "the session is closed"))
}

/// Input or output `index` of the session behind `handle`.
unsafe fn port<'a>(handle: jlong, output: jboolean, index: jint) -> Status<&'a Port> {
    let s: &'a FfiSession = session(handle)?;
    let i = port_index(index)?;
    if output {
        s.output(i)
    } else {
        s.input(i)
    }
}

fn port_index(i: jint) -> Status<usize> {
    usize::try_from(i).map_err(|_| Failure::argument(format!("index {i} is negative")))
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "system" fn Java_ai_dynaspa_Session_nativeOpen(
    env: Env,
    _: jclass,
    model: jstring,
    backend: jstring,
    threads: jint,
    cached: jboolean,
    dense: jboolean,
    profile: jstring,
    no_profile: jboolean,
    device: jstring,
    cache_dir: jstring,
) -> jlong {
    jni_guard(env, 0, || {
        let model = required(env, model, "modelPath")?;
        let backend = required(env, backend, "backend")?;
        let profile = match (string(env, profile, "profile")?, no_profile) {
            (Some(_), true) => return Err(Failure::argument("profile and noProfile are both set; choose one")),
            (Some(f), false) => ProfileChoice::File(PathBuf::from(f)),
            (None, true) => ProfileChoice::Calibrate,
            (None, false) => ProfileChoice::Shipped,
        };
        let settings = Settings {
            threads: match threads {
                0 => None,
                t if t > 0 => Some(t as usize),
                t => return Err(Failure::argument(format!("threads is {t}; expected 0 (every core) or more"))),
            },
            cached,
            dense,
            profile,
            device: string(env, device, "device")?,
            cache_dir: string(env, cache_dir, "cacheDir")?.map(PathBuf::from),
        };
        let s = FfiSession::open(model.as_ref(), &backend, &settings)?;
        Ok(Box::into_raw(Box::new(s)) as jlong)
    })
}

#[no_mangle]
pub unsafe extern "system" fn Java_ai_dynaspa_Session_nativeClose(env: Env, _: jclass, handle: jlong) {
    jni_guard(env, (), || {
        if handle != 0 {
            drop(Box::from_raw(handle as *mut FfiSession));
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "system" fn Java_ai_dynaspa_Session_nativeCount(env: Env, _: jclass, handle: jlong, output: jboolean) -> jint {
    jni_guard(env, 0, || {
        let s = session(handle)?;
        Ok((if output { s.outputs.len() } else { s.inputs.len() }) as jint)
    })
}

#[no_mangle]
pub unsafe extern "system" fn Java_ai_dynaspa_Session_nativeName(
    env: Env,
    _: jclass,
    handle: jlong,
    output: jboolean,
    index: jint,
) -> jstring {
    jni_guard(env, std::ptr::null_mut(), || {
        let p = port(handle, output, index)?;
        let utf16: Vec<u16> = p.name.to_string_lossy().encode_utf16().collect();
        let js = ((**env).v1_1.NewString)(env, utf16.as_ptr(), utf16.len() as jsize);
        pending(env)?;
        Ok(js)
    })
}

#[no_mangle]
pub unsafe extern "system" fn Java_ai_dynaspa_Session_nativeShape(
    env: Env,
    _: jclass,
    handle: jlong,
    output: jboolean,
    index: jint,
) -> jlongArray {
    jni_guard(env, std::ptr::null_mut(), || {
        let p = port(handle, output, index)?;
        let dims: Vec<jlong> = p.shape.iter().map(|&d| d as jlong).collect();
        let t = (**env).v1_1;
        let a = (t.NewLongArray)(env, dims.len() as jsize);
        pending(env)?;
        (t.SetLongArrayRegion)(env, a, 0, dims.len() as jsize, dims.as_ptr());
        pending(env)?;
        Ok(a)
    })
}

/// The elements of a Java `Object[]` (null itself is an error naming `what`).
unsafe fn elements(env: Env, a: jobjectArray, what: &str) -> Status<Vec<jobject>> {
    if a.is_null() {
        return Err(Failure::null(what));
    }
    let t = (**env).v1_1;
    let n = (t.GetArrayLength)(env, a);
    let mut v = Vec::with_capacity(n as usize);
    for i in 0..n {
        let e = (t.GetObjectArrayElement)(env, a, i);
        pending(env)?;
        if e.is_null() {
            return Err(Failure::null(&format!("{what}[{i}]")));
        }
        v.push(e);
    }
    Ok(v)
}

#[no_mangle]
pub unsafe extern "system" fn Java_ai_dynaspa_Session_nativeRunArrays(
    env: Env,
    _: jclass,
    handle: jlong,
    inputs: jobjectArray,
    outputs: jobjectArray,
) {
    jni_guard(env, (), || {
        let s = session(handle)?;
        let t = (**env).v1_1;
        let mut feeds = Vec::new();
        for a in elements(env, inputs, "inputs")? {
            let n = (t.GetArrayLength)(env, a);
            let mut v = vec![0f32; n as usize];
            (t.GetFloatArrayRegion)(env, a, 0, n, v.as_mut_ptr());
            pending(env)?;
            feeds.push(v);
        }
        let outs = elements(env, outputs, "outputs")?;
        let mut bufs: Vec<Vec<f32>> = outs.iter().map(|&a| vec![0f32; (t.GetArrayLength)(env, a) as usize]).collect();
        let mut slices: Vec<&mut [f32]> = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
        s.run(feeds, &mut slices)?;
        for (&a, b) in outs.iter().zip(&bufs) {
            (t.SetFloatArrayRegion)(env, a, 0, b.len() as jsize, b.as_ptr());
            pending(env)?;
        }
        Ok(())
    })
}

/// A direct `FloatBuffer`'s memory: address and capacity in floats.
unsafe fn direct(env: Env, b: jobject, what: &str, i: usize) -> Status<(*mut f32, usize)> {
    let t = (**env).v1_4;
    let p = (t.GetDirectBufferAddress)(env, b).cast::<f32>();
    let n = (t.GetDirectBufferCapacity)(env, b);
    if p.is_null() || n < 0 {
        return Err(Failure::argument(format!("{what}[{i}] is not a direct buffer (allocate it with ByteBuffer.allocateDirect(..).order(ByteOrder.nativeOrder()).asFloatBuffer())")));
    }
    if !p.is_aligned() {
        return Err(Failure::argument(format!("{what}[{i}] is not aligned for float")));
    }
    Ok((p, n as usize))
}

#[no_mangle]
pub unsafe extern "system" fn Java_ai_dynaspa_Session_nativeRunBuffers(
    env: Env,
    _: jclass,
    handle: jlong,
    inputs: jobjectArray,
    outputs: jobjectArray,
) {
    jni_guard(env, (), || {
        let s = session(handle)?;
        let mut feeds = Vec::new();
        for (i, b) in elements(env, inputs, "inputs")?.into_iter().enumerate() {
            let (p, n) = direct(env, b, "inputs", i)?;
            feeds.push(std::slice::from_raw_parts(p, n).to_vec());
        }
        let mut outs = Vec::new();
        for (j, b) in elements(env, outputs, "outputs")?.into_iter().enumerate() {
            let (p, n) = direct(env, b, "outputs", j)?;
            if let Some(k) =
                outs.iter().position(|&(q, m): &(*mut f32, usize)| (q as usize) < p as usize + 4 * n && (p as usize) < q as usize + 4 * m)
            {
                return Err(Failure::argument(format!("outputs[{j}] and outputs[{k}] share memory")));
            }
            outs.push((p, n));
        }
        let mut slices: Vec<&mut [f32]> = outs.iter().map(|&(p, n)| std::slice::from_raw_parts_mut(p, n)).collect();
        s.run(feeds, &mut slices)
    })
}

/// `[latency ms, density (-1: no op ran sparse), sparse ops, sparse ms]` of the last frame.
#[no_mangle]
pub unsafe extern "system" fn Java_ai_dynaspa_Session_nativeReport(env: Env, _: jclass, handle: jlong) -> jdoubleArray {
    jni_guard(env, std::ptr::null_mut(), || {
        let r = session(handle)?.report()?;
        let v: [jdouble; 4] =
            [r.latency.as_secs_f64() * 1e3, r.density.unwrap_or(-1.0), r.sparse_ops as f64, r.sparse_time.as_secs_f64() * 1e3];
        let t = (**env).v1_1;
        let a = (t.NewDoubleArray)(env, 4);
        pending(env)?;
        (t.SetDoubleArrayRegion)(env, a, 0, 4, v.as_ptr());
        pending(env)?;
        Ok(a)
    })
}
