//! The device shim on whatever OpenCL device the machine has (skipped when it has none, unless
//! `DYNASPA_REQUIRE_BACKENDS` names opencl).

use super::*;
use crate::gpu::kernels::{spec, Src, Tile};

fn device(cache: Option<&Path>) -> Option<OpenClDevice> {
    let required = std::env::var("DYNASPA_REQUIRE_BACKENDS").is_ok_and(|v| v.split(',').any(|b| b.trim() == "opencl"));
    match super::super::list().and_then(|l| super::super::select(&l, None)) {
        Ok(e) => Some(OpenClDevice::open(&e, cache).unwrap()),
        Err(e) if required => panic!("opencl is required: {e}"),
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    }
}

fn tmp(tag: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("dynaspa-ocl-{tag}-{}", std::process::id()))
}

#[test]
fn every_kernel_source_builds_on_every_code_path() {
    let Some(d) = device(None) else { return };
    for src in Src::ALL {
        let entry = match src {
            Src::Elementwise => "unary_f32",
            Src::Movement => "strided_copy",
            Src::Reduce => "softmax_rows",
            Src::Matmul => "gemm_f32",
            Src::Conv => "conv_gemm_f32",
            Src::Pool => "pool_f32",
            Src::Attention => "attention_f32",
            Src::SparseConvGemm => "sparse_conv_gemm_f32",
            Src::SparseConvDw => "sparse_conv_dw_f32",
            Src::SparseConvFill => "sparse_conv_fill_residual_f32",
            Src::Bitmask => "bitmask_tiles",
            Src::Token => "token_compact",
        };
        d.kernel(&spec(src, entry, &[])).unwrap_or_else(|e| panic!("{}: {e}", src.file()));
    }
    // The sparse family once per code path (`gpu::kernels::code_path`): what OpenCL C takes
    // and CUDA does not lies in the `#if`s, not in the sizes. NVRTC compiles every schedule of
    // the same source (cuda::nvrtc_tests); PoCL spends seconds a program (~485 of them, every
    // schedule, took this test past an hour of CI's CPU).
    let mut paths = std::collections::HashSet::new();
    let once_per_path = |s: &KernelSpec| paths.insert((s.entry, crate::gpu::kernels::code_path(&s.defines)));
    // Self-listing members that leave before the scan (SL_EARLY) and the finish's speculative
    // first loads (SPARSE_CONV_FIN_SPEC) are CUDA's alone.
    let sparse = crate::gpu::kernels::all_specs()
        .into_iter()
        .filter(|s| matches!(s.file, "sparse_conv_gemm.cl" | "sparse_conv_dw.cl" | "sparse_conv_fill.cl" | "bitmask.cl" | "token.cl"))
        .filter(|s| !s.defines.iter().any(|(k, v)| matches!(k.as_str(), "SL_EARLY" | "SPARSE_CONV_FIN_SPEC") && v == "1"));
    for s in sparse.filter(once_per_path) {
        d.kernel(&s).unwrap_or_else(|e| panic!("{} {} {:?}: {e}", s.file, s.entry, s.defines));
    }
    for t in [Tile::LARGE, Tile::SMALL] {
        d.kernel(&spec(Src::Matmul, "gemm_f32", &t.defines())).unwrap();
        d.kernel(&spec(Src::Conv, "conv_gemm_f32", &t.defines())).unwrap();
    }
}

/// fp16 storage: every program builds with `DSP_HALF` and `MOVE16` (vload_half/vstore_half are
/// core OpenCL C; without cl_khr_fp16 a bare access to a half element does not build).
#[test]
fn every_kernel_source_builds_with_half_storage() {
    let Some(d) = device(None) else { return };
    let half = [("DSP_HALF", 1), ("MOVE16", 1)];
    for src in Src::ALL {
        let entry = crate::gpu::kernels::entries(src.source())[0];
        d.kernel(&spec(src, entry, &half)).unwrap_or_else(|e| panic!("{} with half storage: {e}", src.file()));
    }
}

#[test]
fn build_errors_carry_the_build_log_and_bad_defines_are_refused() {
    let Some(d) = device(None) else { return };
    let bad = KernelSpec {
        file: "broken.cl",
        source: "KERNEL broken(GLOBAL float* x) { x[0] = undefined_name; }",
        entry: "broken",
        defines: vec![],
    };
    let e = d.kernel(&bad).err().expect("a broken kernel does not build").to_string();
    assert!(e.contains("broken.cl") && e.contains("undefined_name"), "{e}");
    let inject = spec(Src::Elementwise, "unary_f32", &[]);
    let inject = KernelSpec { defines: vec![("A".into(), "1 -I/etc".into())], ..inject };
    assert!(d.kernel(&inject).err().expect("refused").to_string().contains("plain name"));
    let missing = d.kernel(&spec(Src::Elementwise, "no_such_entry", &[])).err().expect("no such entry").to_string();
    assert!(missing.contains("no_such_entry"), "{missing}");
}

#[test]
fn buffers_round_trip_launch_and_zero_fill_in_order() {
    let Some(d) = device(None) else { return };
    let n = 1000usize;
    let data: Vec<u8> = (0..n as u32).flat_map(|i| (i as f32 * 0.5 - 7.0).to_le_bytes()).collect();
    let (x, y) = (d.alloc(n * 4).unwrap(), d.alloc(n * 4).unwrap());
    d.upload(&x, 0, &data).unwrap();
    let k = d.kernel(&spec(Src::Elementwise, "unary_f32", &[])).unwrap();
    // Neg (11) of the whole buffer.
    let args = [Arg::Buf(&x), Arg::Buf(&y), Arg::I32(n as i32), Arg::I32(11), Arg::F32(0.0), Arg::F32(0.0)];
    d.launch(&k, [(n as u32).div_ceil(256), 1, 1], [256, 1, 1], &args).unwrap();
    let mut out = vec![0u8; n * 4];
    d.download(&y, 0, &mut out).unwrap();
    for (i, c) in out.chunks_exact(4).enumerate() {
        assert_eq!(f32::from_le_bytes(c.try_into().unwrap()), -(i as f32 * 0.5 - 7.0));
    }
    // The zero fill waits for the kernel (event), then the main queue waits for the fill.
    let after = d.marker().unwrap();
    let z = d.fill_zero_async(&y, 400, 800, &[after]).unwrap();
    d.wait_for(&[z]).unwrap();
    d.download(&y, 0, &mut out).unwrap();
    d.finish().unwrap();
    let words: Vec<f32> = out.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    assert!(words[100..300].iter().all(|&v| v == 0.0));
    assert_eq!(words[99], -(99.0 * 0.5 - 7.0));
    assert_eq!(words[300], -(300.0 * 0.5 - 7.0));
    // Out-of-range transfers are errors, not memory corruption.
    assert!(d.upload(&x, n * 4 - 2, &[0u8; 4]).is_err());
    assert!(d.download(&x, 0, &mut vec![0u8; n * 4 + 4]).is_err());
    assert!(d.fill_zero_async(&x, n * 4, 4, &[]).is_err());
}

/// The argument memo sets only what changed since a kernel's last launch: new buffers (one
/// allocated where a released one was), a new length and the same arguments again must each
/// reach the kernel.
#[test]
fn one_kernel_object_follows_every_argument_change() {
    let Some(d) = device(None) else { return };
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(7, |t| t.as_nanos() as u64) | 1;
    eprintln!("seed {seed}");
    let mut rng = crate::gpu::test_rng::Rng(seed);
    let n = 777usize;
    let bytes = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|f| f.to_le_bytes()).collect() };
    let read = |b: &ClBuffer| -> Vec<f32> {
        let mut out = vec![0u8; n * 4];
        d.download(b, 0, &mut out).unwrap();
        out.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
    };
    let poisoned = || {
        let b = d.alloc(n * 4).unwrap();
        d.upload(&b, 0, &bytes(&vec![f32::NAN; n])).unwrap();
        b
    };
    let k = d.kernel(&spec(Src::Elementwise, "unary_f32", &[])).unwrap();
    // Neg (11) over the first `len` values of `x` into `y`.
    let neg = |x: &ClBuffer, y: &ClBuffer, len: usize| {
        let args = [Arg::Buf(x), Arg::Buf(y), Arg::I32(len as i32), Arg::I32(11), Arg::F32(0.0), Arg::F32(0.0)];
        d.launch(&k, [(len as u32).div_ceil(64), 1, 1], [64, 1, 1], &args).unwrap();
    };
    let (a, b) = (rng.vec(n, 4.0), rng.vec(n, 4.0));
    let (xa, xb, y) = (d.alloc(n * 4).unwrap(), d.alloc(n * 4).unwrap(), poisoned());
    d.upload(&xa, 0, &bytes(&a)).unwrap();
    d.upload(&xb, 0, &bytes(&b)).unwrap();
    neg(&xa, &y, n);
    assert!(read(&y).iter().zip(&a).all(|(o, i)| *o == -i));
    // Another input and a shorter length, same output: the tail keeps the first launch's values.
    neg(&xb, &y, n / 2);
    let got = read(&y);
    assert!(got[..n / 2].iter().zip(&b).all(|(o, i)| *o == -i));
    assert!(got[n / 2..].iter().zip(&a[n / 2..]).all(|(o, i)| *o == -i));
    // Release the first input, allocate one of its size (drivers often hand the handle back),
    // write other values there and into a new output.
    drop(xa);
    let c = rng.vec(n, 4.0);
    let (xc, y2) = (d.alloc(n * 4).unwrap(), poisoned());
    d.upload(&xc, 0, &bytes(&c)).unwrap();
    neg(&xc, &y2, n);
    assert!(read(&y2).iter().zip(&c).all(|(o, i)| *o == -i));
    // The same arguments again, after the input changed in place.
    let e = rng.vec(n, 4.0);
    d.upload(&xc, 0, &bytes(&e)).unwrap();
    neg(&xc, &y2, n);
    assert!(read(&y2).iter().zip(&e).all(|(o, i)| *o == -i));
}

#[test]
fn a_second_device_loads_programs_from_the_disk_cache() {
    let dir = tmp("progcache");
    let _ = std::fs::remove_dir_all(&dir);
    let Some(first) = device(Some(&dir)) else { return };
    let s = spec(Src::Reduce, "softmax_rows", &[("WG", 64)]);
    first.kernel(&s).unwrap();
    first.kernel(&spec(Src::Reduce, "layer_norm", &[("WG", 64)])).unwrap();
    assert_eq!(first.program_stats().from_source.load(Ordering::Relaxed), 1, "one build per (file, defines)");
    assert_eq!(first.program_stats().from_disk.load(Ordering::Relaxed), 0);
    assert!(std::fs::read_dir(dir.join("opencl")).unwrap().count() >= 1, "a binary was written");
    let second = device(Some(&dir)).unwrap();
    let k = second.kernel(&s).unwrap();
    assert_eq!(second.program_stats().from_source.load(Ordering::Relaxed), 0, "the second start compiled");
    assert_eq!(second.program_stats().from_disk.load(Ordering::Relaxed), 1);
    // The cached binary runs: softmax of a row of equal values is uniform.
    let (x, y) = (second.alloc(64 * 4).unwrap(), second.alloc(64 * 4).unwrap());
    second.upload(&x, 0, &[1.0f32; 64].iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>()).unwrap();
    second.launch(&k, [1, 1, 1], [64, 1, 1], &[Arg::Buf(&x), Arg::Buf(&y), Arg::I32(64)]).unwrap();
    let mut out = vec![0u8; 64 * 4];
    second.download(&y, 0, &mut out).unwrap();
    assert!(out.chunks_exact(4).all(|c| (f32::from_le_bytes(c.try_into().unwrap()) - 1.0 / 64.0).abs() < 1e-7));
    // A corrupt cache file is a miss that rebuilds, not an error.
    for f in std::fs::read_dir(dir.join("opencl")).unwrap() {
        let p = f.unwrap().path();
        let mut b = std::fs::read(&p).unwrap();
        let len = b.len();
        b.truncate(len - len / 3);
        std::fs::write(&p, b).unwrap();
    }
    let third = device(Some(&dir)).unwrap();
    third.kernel(&s).unwrap();
    assert_eq!(third.program_stats().from_source.load(Ordering::Relaxed), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn back_to_back_async_downloads_into_one_staging_land_in_order() {
    let Some(d) = device(None) else { return };
    let n = 4096;
    let b = d.alloc(n).unwrap();
    let st = d.staging(n).unwrap();
    let mut seed = 0x9e37_79b9u32 ^ std::process::id();
    let mut last = Vec::new();
    // Each copy is queued while the earlier ones may still be in flight (start no longer
    // waits for them); the read must see the last upload's bytes, never an earlier one's.
    for _ in 0..8 {
        last = (0..n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 17;
                seed ^= seed << 5;
                seed as u8
            })
            .collect();
        d.upload(&b, 0, &last).unwrap();
        d.download_async(&b, 0, &st, None).unwrap();
    }
    let mut out = vec![0u8; n];
    d.read_staging(&st, &mut out).unwrap();
    assert_eq!(out, last, "the staging holds an earlier copy's bytes");
}

#[test]
fn nvidia_gets_the_device_wide_fence_and_others_do_not() {
    use super::vendor_options;
    assert!(vendor_options("NVIDIA Corporation").contains("NV_GPU_FENCE=1"));
    for v in ["The pocl project", "QUALCOMM", "ARM", "Intel(R) Corporation", "Advanced Micro Devices, Inc."] {
        assert_eq!(vendor_options(v), "", "{v}");
    }
}
