//! NVRTC without a GPU (CI): every kernel source compiles with the CUDA prelude for every
//! schedule it is used with, compile errors carry NVRTC's log, and the disk cache answers a
//! second request. Skipped where libnvrtc is missing, unless `DYNASPA_REQUIRE_BACKENDS` names
//! `nvrtc`: then a missing NVRTC fails.

use super::kernel_cache::{KernelCache, Origin};
use super::{kernels, nvrtc};
use crate::gpu::KernelSpec;
use std::collections::{BTreeMap, BTreeSet};
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

fn all_specs() -> Vec<KernelSpec> {
    let mut v = kernels::all_specs();
    v.extend(crate::gpu::kernels::all_specs());
    v
}

/// Names of the kernels a source defines (`KERNEL [bound] name(`, `gpu::kernels::kernel_name`).
fn entry_points(source: &str) -> Vec<String> {
    source.split("KERNEL ").skip(1).filter_map(crate::gpu::kernels::kernel_name).map(str::to_string).collect()
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
        // Shared kernels are compiled after gpu/kernels/common.h.
        for s in &of_file {
            assert!(s.source.ends_with(&on_disk), "{}: the embedded source is not the file's", s.file);
        }
        for entry in entry_points(&on_disk) {
            assert!(
                of_file.iter().any(|s| s.entry == entry),
                "{name}: kernel {entry} has no schedule in the lists CI compiles (gpu::kernels::schedules / cuda::kernels::all_specs)"
            );
        }
    }
    // One program per source, schedule and architecture; each entry using it must be in it.
    // Past the first architecture, one per source and code path (`gpu::kernels::code_path`): a tile's sizes
    // do not decide which intrinsics it uses.
    let mut programs: BTreeMap<(String, &str, Vec<(String, String)>), Vec<&KernelSpec>> = BTreeMap::new();
    for (i, arch) in test_archs().into_iter().enumerate() {
        let mut paths = BTreeSet::new();
        for s in &specs {
            let key = (arch.clone(), s.file, s.defines.clone());
            if i == 0 || programs.contains_key(&key) || paths.insert((s.file, crate::gpu::kernels::code_path(&s.defines))) {
                programs.entry(key).or_default().push(s);
            }
        }
    }
    // Test filters, for quick checks while editing a kernel (CI compiles them all):
    // `DYNASPA_TEST_NVRTC_FILE=sparse_conv_gemm.cl` compiles one file's programs, and
    // `DYNASPA_TEST_NVRTC_DEFINES=SELF_LIST=1,KS=4` only those with every define named.
    let only = std::env::var("DYNASPA_TEST_NVRTC_FILE").ok();
    let wanted = std::env::var("DYNASPA_TEST_NVRTC_DEFINES").unwrap_or_default();
    let wanted: Vec<(String, String)> =
        wanted.split(',').filter_map(|d| d.split_once('=')).map(|(k, v)| (k.trim().to_string(), v.trim().to_string())).collect();
    programs.retain(|(_, file, defines), _| only.as_deref().is_none_or(|o| o == *file) && wanted.iter().all(|w| defines.contains(w)));
    // The slowest programs are named at the end: CI's time here grows with the schedule lists.
    // On every core: NVRTC compiles programs of its own concurrently.
    let programs: Vec<_> = programs.into_iter().collect();
    let (next, done) = (std::sync::atomic::AtomicUsize::new(0), std::sync::atomic::AtomicUsize::new(0));
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
    let compile_some = || {
        let mut times: Vec<(f64, String)> = Vec::new();
        while let Some(((arch, file, defines), users)) = programs.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) {
            let t0 = std::time::Instant::now();
            let c = nvrtc::compile(users[0], arch).unwrap_or_else(|e| panic!("{e}"));
            times.push((t0.elapsed().as_secs_f64(), format!("{file} {arch} {defines:?}")));
            if (done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1) % 100 == 0 {
                eprintln!("nvrtc: {} of {} programs compiled", done.load(std::sync::atomic::Ordering::Relaxed), programs.len());
            }
            for s in users {
                let entry = s.entry.as_bytes();
                assert!(c.cubin.windows(entry.len()).any(|w| w == entry), "{file} for {arch}: entry {} not in the CUBIN", s.entry);
            }
        }
        times
    };
    let t0 = std::time::Instant::now();
    let mut slowest: Vec<(f64, String)> = std::thread::scope(|sc| {
        let workers: Vec<_> = (0..threads).map(|_| sc.spawn(compile_some)).collect();
        workers.into_iter().flat_map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
    });
    let compiled = programs.len();
    assert_eq!(slowest.len(), compiled);
    let total: f64 = slowest.iter().map(|s| s.0).sum();
    eprintln!("{:.0} s on {threads} threads", t0.elapsed().as_secs_f64());
    eprintln!(
        "compiled {compiled} kernel programs in {total:.0} s from {:?}",
        files.iter().map(|f| f.file_name().unwrap()).collect::<Vec<_>>()
    );
    slowest.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (t, what) in slowest.iter().take(5) {
        eprintln!("  {t:.2} s  {what}");
    }
}

/// fp16 storage (`DSP_HALF`, and `MOVE16`'s 16-bit words) on every code path of every shared
/// source: the half prelude's element type is a struct, so an access that bypasses LDF/STF
/// does not compile.
#[test]
fn every_shared_kernel_compiles_with_half_storage() {
    if !have_nvrtc() {
        return;
    }
    // One program per source and schedule, then one per source and code path.
    let mut by_program: BTreeMap<(&str, Vec<(String, String)>), Vec<KernelSpec>> = BTreeMap::new();
    for mut s in crate::gpu::kernels::all_specs() {
        s.defines.extend([("DSP_HALF".to_string(), "1".to_string()), ("MOVE16".to_string(), "1".to_string())]);
        s.defines.sort();
        by_program.entry((s.file, s.defines.clone())).or_default().push(s);
    }
    let mut paths = BTreeSet::new();
    let programs: Vec<Vec<KernelSpec>> = by_program
        .into_iter()
        .filter(|((file, defines), _)| paths.insert((*file, crate::gpu::kernels::code_path(defines))))
        .map(|(_, v)| v)
        .collect();
    assert!(programs.len() >= crate::gpu::kernels::Src::ALL.len(), "{}", programs.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
    std::thread::scope(|sc| {
        for _ in 0..threads {
            sc.spawn(|| {
                while let Some(users) = programs.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) {
                    let c = nvrtc::compile(&users[0], "sm_90").unwrap_or_else(|e| panic!("half storage: {e}"));
                    for s in users {
                        let entry = s.entry.as_bytes();
                        assert!(c.cubin.windows(entry.len()).any(|w| w == entry), "{}: entry {} not in the CUBIN", s.file, s.entry);
                    }
                }
            });
        }
    });
    eprintln!("compiled {} half-storage programs", programs.len());
}

/// Names a prelude `#define`s.
fn defined_macros(prelude: &str) -> BTreeSet<String> {
    prelude
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("#define "))
        .map(|rest| rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).next().unwrap_or("").to_string())
        .collect()
}

#[test]
fn the_cuda_prelude_defines_every_name_of_the_opencl_one() {
    let opencl = include_str!("../gpu/kernels/prelude_opencl.h");
    let (ocl, cuda) = (defined_macros(opencl), defined_macros(nvrtc::PRELUDE));
    assert!(ocl.len() > 20, "{ocl:?}");
    let missing: Vec<&String> = ocl.difference(&cuda).collect();
    assert!(missing.is_empty(), "the CUDA prelude lacks {missing:?} (defined in prelude_opencl.h)");
}

#[test]
fn every_prelude_name_compiles_and_means_what_it_means_in_opencl() {
    if !have_nvrtc() {
        return;
    }
    // Return types and argument types as OpenCL gives them, checked at compile time: ids are
    // int, the maths is single precision, LOCAL_PTR points into LOCAL memory.
    let source = r#"
template <typename A, typename B> struct same { static const bool value = false; };
template <typename A> struct same<A, A> { static const bool value = true; };
#define IS(T, e) static_assert(same<T, decltype(e)>::value, #e " is not " #T)
FUNC float sum_local(LOCAL_PTR float* s, int n) { float t = 0.0f; for (int i = 0; i < n; ++i) t += s[i]; return t; }
KERNEL dialect(GLOBAL const float* RESTRICT x, GLOBAL float* y, GLOBAL int* z, int n) {
    LOCAL float scratch[64];
    int i = GLOBAL_ID(0), l = LOCAL_ID(0);
    IS(int, GLOBAL_ID(0)); IS(int, LOCAL_ID(1)); IS(int, GROUP_ID(2)); IS(int, LOCAL_SIZE(0)); IS(int, NUM_GROUPS(1));
    IS(float, EXPF(1.0f)); IS(float, LOGF(1.0f)); IS(float, SQRTF(1.0f)); IS(float, TANHF(1.0f)); IS(float, ERFF(1.0f));
    IS(float, ERFCF(1.0f)); IS(float, POWF(1.0f, 2.0f)); IS(float, FABSF(1.0f)); IS(float, FLOORF(1.0f));
    IS(float, CEILF(1.0f)); IS(float, FMAXF(1.0f, 2.0f)); IS(float, FMINF(1.0f, 2.0f)); IS(float, F32_INF);
    IS(float, LOG1PF(1.0f)); IS(float, RINTF(1.5f)); IS(float, SINF(1.0f)); IS(float, COSF(1.0f));
    IS(float, F32_NAN); IS(int, IMIN(1u, 2)); IS(int, IMAX(1, 2u)); IS(float, AS_FLOAT(1)); IS(int, AS_INT(1.0f));
    uint u = 1u; uchar c = 2; ushort s = 3; ulong big = (ulong)u << 40;
    scratch[l % 64] = i < n ? x[i] : 0.0f;
    LOCAL_BARRIER();
    float v = sum_local(scratch, 64) + (ISNAN(x[0]) ? 0.0f : 1.0f);
    if (i < n) { y[i] = v; z[i] = (int)(c + s + (big >> 40)); }
    GLOBAL_FENCE();
    IS(int, ATOMIC_INC(z));
    if (i == 0) ATOMIC_INC(z + n);
}
"#;
    let spec = KernelSpec { file: "dialect.cl", source, entry: "dialect", defines: vec![] };
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

/// The first GEMM schedules of the compile-all test above, compiled again with `name=value`
/// added: a variant only an option (`SparseConvOverrides`) gives CUDA, which that test's lists
/// carry only in OpenCL's form.
fn gemm_variant_compiles(name: &str, value: &str) {
    if !have_nvrtc() {
        return;
    }
    let specs: Vec<KernelSpec> =
        crate::gpu::kernels::all_specs().into_iter().filter(|s| s.entry == "sparse_conv_gemm_f32").take(4).collect();
    assert!(!specs.is_empty(), "no sparse GEMM schedules");
    for mut spec in specs {
        spec.defines.push((name.into(), value.into()));
        if let Err(e) = nvrtc::compile(&spec, "sm_90") {
            panic!("{name}={value}: {e}");
        }
    }
}

/// `hoisted_gather: Some(false)`: the gather's indices worked out per element and stage.
#[test]
fn the_per_element_gather_variant_compiles() {
    gemm_variant_compiles("SPARSE_CONV_HOIST", "0");
}

/// `two_stages_in_flight: Some(true)` (CUDA's default): two stages of the reduction in flight.
#[test]
fn the_two_stage_pipeline_variant_compiles() {
    gemm_variant_compiles("SPARSE_CONV_DEPTH", "2");
}
