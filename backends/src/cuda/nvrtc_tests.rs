//! NVRTC without a GPU (CI): every kernel source compiles with the CUDA prelude for every
//! schedule it is used with, compile errors carry NVRTC's log, and the disk cache answers a
//! second request. Skipped where libnvrtc is missing, unless `DYNASPA_REQUIRE_BACKENDS` names
//! `nvrtc`: then a missing NVRTC fails.

use super::kernel_cache::{KernelCache, Origin};
use super::{kernels, nvrtc};
use crate::gpu::KernelSpec;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn required(name: &str) -> bool {
    std::env::var("DYNASPA_REQUIRE_BACKENDS").is_ok_and(|v| v.split(',').any(|b| b.trim() == name))
}

/// True when NVRTC is here; otherwise skips (prints why) or fails when it is required.
fn have_nvrtc() -> bool {
    match nvrtc::available() {
        Ok(()) => true,
        Err(m) => {
            assert!(!required("nvrtc"), "DYNASPA_REQUIRE_BACKENDS names nvrtc, but: {m}");
            eprintln!("skipped: {m}");
            false
        }
    }
}

/// Schedules of the shared-dialect kernels in `gpu/kernels/` as the GPU executor uses them.
/// Empty until the executor lands; a kernel file there without schedules fails the test below.
fn shared_dialect_specs() -> Vec<KernelSpec> {
    Vec::new()
}

fn all_specs() -> Vec<KernelSpec> {
    let mut v = kernels::all_specs();
    v.extend(shared_dialect_specs());
    v
}

/// Kernel source files on disk: shared dialect and CUDA-only.
fn kernel_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for (dir, exts) in [("gpu/kernels", &["cl"][..]), ("cuda/kernels", &["cu", "cl"][..])] {
        let Ok(rd) = std::fs::read_dir(root.join(dir)) else { continue };
        for e in rd.filter_map(|e| e.ok()) {
            let p = e.path();
            if p.extension().and_then(|x| x.to_str()).is_some_and(|x| exts.contains(&x)) {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}

/// sm_90 (the H100/H200 the backend is run on) and the oldest architecture this NVRTC emits,
/// so neither newer-only intrinsics nor removed ones slip in.
fn test_archs() -> Vec<String> {
    let mut archs = vec!["sm_90".to_string()];
    if let Ok(Some(supported)) = nvrtc::supported_archs() {
        if let Some(min) = supported.iter().min() {
            archs.push(format!("sm_{min}"));
        }
    }
    archs.dedup();
    archs
}

#[test]
fn every_kernel_source_compiles_for_every_schedule() {
    if !have_nvrtc() {
        return;
    }
    let specs = all_specs();
    let files = kernel_files();
    assert!(files.len() >= 2, "kernel files not found: {files:?}");
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy();
        let of_file: Vec<&KernelSpec> = specs.iter().filter(|s| s.file == name).collect();
        assert!(!of_file.is_empty(), "{} has no schedules listed (add them to the spec lists CI compiles)", f.display());
        let on_disk = std::fs::read_to_string(f).unwrap();
        for s in of_file {
            assert_eq!(s.source, on_disk, "{}: the embedded source is not the file's", s.file);
        }
    }
    // One program per source, schedule and architecture; each entry using it must be in it.
    let mut programs: BTreeMap<(String, &str, Vec<(String, String)>), Vec<&KernelSpec>> = BTreeMap::new();
    for arch in test_archs() {
        for s in &specs {
            programs.entry((arch.clone(), s.file, s.defines.clone())).or_default().push(s);
        }
    }
    for ((arch, file, _), users) in &programs {
        let c = nvrtc::compile(users[0], arch).unwrap_or_else(|e| panic!("{e}"));
        for s in users {
            let entry = s.entry.as_bytes();
            assert!(c.cubin.windows(entry.len()).any(|w| w == entry), "{file} for {arch}: entry {} not in the CUBIN", s.entry);
        }
    }
    let compiled = programs.len();
    eprintln!("compiled {compiled} kernel programs from {:?}", files.iter().map(|f| f.file_name().unwrap()).collect::<Vec<_>>());
}

#[test]
fn prelude_maps_the_opencl_builtins_kernels_use() {
    if !have_nvrtc() {
        return;
    }
    let source = r#"
float helper(float x) { return fmax(x, 0.0f); }
KERNEL void builtins(GLOBAL float *f, GLOBAL uint *u, GLOBAL int *i, int n) {
    LOCAL float scratch[64];
    size_t g = GLOBAL_ID(0), l = LOCAL_ID(0);
    uint gid = (uint)GROUP_ID(0) + (uint)NUM_GROUPS(0) + (uint)LOCAL_SIZE(0) + (uint)GLOBAL_SIZE(0);
    scratch[l % 64] = f[g];
    LOCAL_BARRIER();
    float x = scratch[(l + 1) % 64];
    x = helper(x) + fmin(x, 1.0f) + exp(x) + log(fabs(x) + 1.0f) + sqrt(fabs(x)) + rsqrt(fabs(x) + 1.0f);
    x += tanh(x) + erf(x) + pow(fabs(x), 0.5f) + floor(x) + ceil(x) + round(x) + clamp(x, -1.0f, 1.0f);
    x += mad(x, 2.0f, 1.0f) + mix(x, 1.0f, 0.25f) + step(0.0f, x) + sign(x) + native_exp(x) + native_recip(x + 2.0f);
    x += native_divide(x, 3.0f) + native_sqrt(fabs(x)) + native_rsqrt(fabs(x) + 1.0f) + as_float(as_uint(x));
    x += isnan(x) ? 0.0f : FLT_MAX * 0.0f + M_PI_F;
    x = isinf(x) ? INFINITY : x;
    uchar c = (uchar)gid; ushort s = (ushort)gid; ulong big = (ulong)gid << 40;
    uint w = popcount(gid) + clz(gid) + mul24(gid, 3u) + mad24(gid, 3u, 1u) + clamp(gid, 1u, 9u) + min(gid, 4u) + max(gid, 2u);
    int k = clamp((int)gid, -3, 3) + mul24((int)gid, 2) + mad24((int)gid, 2, 1) + convert_int(x) + as_int(x) + min(k, 1);
    atomic_add(&u[0], w + c + s + (uint)(big >> 40));
    atomic_inc(&u[1]);
    atomic_min(&i[0], k); atomic_max(&i[1], k); atomic_or(&u[2], w); atomic_and(&u[3], w);
    atomic_xchg(&u[4], w); atomic_cmpxchg(&i[2], 0, k); atomic_add(&i[3], 1);
    if ((int)g < n) f[g] = x + convert_float(k) + (float)convert_uint(w);
}
"#;
    let spec = KernelSpec { file: "builtins.cl", source, entry: "builtins", defines: vec![] };
    if let Err(e) = nvrtc::compile(&spec, "sm_90") {
        panic!("{e}");
    }
}

#[test]
fn compile_errors_carry_nvrtc_log_and_the_file_line() {
    if !have_nvrtc() {
        return;
    }
    let spec = KernelSpec {
        file: "broken.cl",
        source: "KERNEL void f(GLOBAL float *x) {\n    x[0] = not_declared_here;\n}\n",
        entry: "f",
        defines: vec![("TILE".into(), "8".into())],
    };
    let e = nvrtc::compile(&spec, "sm_90").err().expect("an undeclared name compiled").to_string();
    for want in ["broken.cl", "not_declared_here", "TILE=8", "sm_90", "(2)"] {
        assert!(e.contains(want), "compile error lacks '{want}': {e}");
    }
}

#[test]
fn defines_that_are_not_identifiers_or_span_lines_are_refused() {
    if !have_nvrtc() {
        return;
    }
    for (k, v) in [("A B", "1"), ("1X", "1"), ("", "1"), ("X", "1\n#include <x>")] {
        let spec = KernelSpec { defines: vec![(k.into(), v.into())], ..kernels::axpb_act_spec(0) };
        assert!(nvrtc::compile(&spec, "sm_90").is_err(), "define {k:?}={v:?} accepted");
    }
}

#[test]
fn architectures_follow_the_compute_capability() {
    if !have_nvrtc() {
        return;
    }
    assert_eq!(nvrtc::arch_for((9, 0)).unwrap(), "sm_90");
    let supported = nvrtc::supported_archs().unwrap();
    if let Some(s) = supported {
        assert!(s.contains(&90), "NVRTC without sm_90: {s:?}");
        // Compute capability 1.0 is long gone from every NVRTC that can list its archs.
        let e = nvrtc::arch_for((1, 0)).unwrap_err().to_string();
        assert!(e.contains("1.0"), "{e}");
        // An unknown minor version of a known major falls back to the newest of that major.
        let newest_9 = s.iter().filter(|a| **a / 10 == 9).max().unwrap();
        assert_eq!(nvrtc::arch_for((9, 9)).unwrap(), format!("sm_{newest_9}"));
    }
}

#[test]
fn the_disk_cache_answers_the_second_request_and_ignores_other_keys() {
    if !have_nvrtc() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("dynaspa-kcache-{}-{:?}", std::process::id(), std::thread::current().id()));
    let _ = std::fs::remove_dir_all(&dir);
    let spec = kernels::transpose_spec(16);
    let cache = KernelCache::new(Some(dir.clone()));
    let key = cache.key(&spec, "sm_90").unwrap();
    let (first, o1) = cache.load_or_compile(&spec, "sm_90", &key).unwrap();
    assert_eq!(o1, Origin::Compiled);
    // A fresh cache object on the same directory: what a second start sees.
    let again = KernelCache::new(Some(dir.clone()));
    let (second, o2) = again.load_or_compile(&spec, "sm_90", &key).unwrap();
    assert_eq!((o2, &second), (Origin::Disk, &first));
    assert_eq!((again.stats().disk_hits, again.stats().compiles), (1, 0));
    // Another schedule, another architecture: other keys, other files.
    let other = kernels::transpose_spec(8);
    let k2 = cache.key(&other, "sm_90").unwrap();
    let k3 = cache.key(&spec, "sm_80").unwrap();
    assert!(key.text != k2.text && key.text != k3.text && k2.text != k3.text);
    // An entry whose stored key differs (collision, older format) is a miss.
    let file = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[0] ^= 1;
    std::fs::write(&file, &bytes).unwrap();
    let (_, o3) = again.load_or_compile(&spec, "sm_90", &key).unwrap();
    assert_eq!(o3, Origin::Compiled);
    let (_, o4) = again.load_or_compile(&spec, "sm_90", &key).unwrap();
    assert_eq!(o4, Origin::Disk, "the recompiled entry was not written back");
    let _ = std::fs::remove_dir_all(&dir);
}
