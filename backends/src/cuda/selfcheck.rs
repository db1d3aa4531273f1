//! Checks of the CUDA backend on a real GPU against CPU references: what
//! `examples/cuda_selfcheck.rs` runs (on a machine without a Rust toolchain; the cuDNN checks
//! are in `selfcheck_cudnn`) and what the
//! `cuda_selfcheck` test runs where CUDA is present. Inputs are random (the seed is printed;
//! `DYNASPA_TEST_SEED` fixes it), outputs are poisoned first so a kernel that writes nothing
//! cannot pass.

use super::device::CudaDevice;
use super::kernel_cache::KernelCache;
use super::kernels::{self, bitmask::BitmaskOutput, bitmask::BitmaskPlan, bitmask::BitmaskRunner};
use crate::gpu::{Arg, GpuDevice, KernelSpec};
use dynaspa_runtime::sparsity::{BitMask, Granularity};
use std::time::Instant;

pub use super::selfcheck_kit::{seed_from_env, Outcome, Rng};

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn bytes_f32(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn e2s(e: dynaspa_runtime::Error) -> String {
    e.to_string()
}

/// Device buffer holding `v`.
fn upload_f32(dev: &CudaDevice, v: &[f32]) -> std::result::Result<super::CudaBuffer, String> {
    let b = dev.alloc(4 * v.len()).map_err(e2s)?;
    dev.upload(&b, 0, &f32_bytes(v)).map_err(e2s)?;
    Ok(b)
}

fn download_f32(dev: &CudaDevice, b: &super::CudaBuffer, n: usize) -> std::result::Result<Vec<f32>, String> {
    let mut raw = vec![0u8; 4 * n];
    dev.download(b, 0, &mut raw).map_err(e2s)?;
    Ok(bytes_f32(&raw))
}

/// The first index where `got` and `want` differ by more than `tol` (relative to max(1, |want|)),
/// NaN always counting as different.
fn first_mismatch(got: &[f32], want: &[f32], tol: f32) -> Option<(usize, f32, f32)> {
    if got.len() != want.len() {
        return Some((got.len().min(want.len()), f32::NAN, f32::NAN));
    }
    got.iter().zip(want).enumerate().find_map(|(i, (&g, &w))| {
        let ok = (g - w).abs() <= tol * w.abs().max(1.0);
        (!ok).then_some((i, g, w))
    })
}

fn act_ref(act: u32, x: f32) -> f32 {
    match act {
        1 => x.max(0.0),
        2 => 1.0 / (1.0 + (-x).exp()),
        3 => x.clamp(-1.0, 1.0),
        _ => x,
    }
}

/// `axpb_act` for every activation on random data against the host.
pub fn check_axpb(dev: &CudaDevice, rng: &mut Rng) -> Outcome {
    let n = 1_000_003;
    let x = rng.floats(n, -6.0, 6.0);
    let (a, b) = (rng.unit() as f32 * 4.0 - 2.0, rng.unit() as f32 - 0.5);
    let xb = upload_f32(dev, &x)?;
    for act in kernels::DIALECT_ACTS {
        let k = dev.kernel(&kernels::axpb_act_spec(act)).map_err(e2s)?;
        let y = upload_f32(dev, &vec![f32::NAN; n])?;
        let groups = (n as u32).div_ceil(256);
        dev.launch(&k, [groups, 1, 1], [256, 1, 1], &[Arg::Buf(&xb), Arg::Buf(&y), Arg::I32(n as i32), Arg::F32(a), Arg::F32(b)])
            .map_err(e2s)?;
        let got = download_f32(dev, &y, n)?;
        let want: Vec<f32> = x.iter().map(|&v| act_ref(act, a.mul_add(v, b))).collect();
        // One rounding apart at most (a * x + b is an FMA when NVRTC contracts it, as by
        // default); sigmoid: the GPU's expf is within 2 ulp of the host's.
        let tol = if act == 2 { 1e-6 } else { 3e-7 };
        if let Some((i, g, w)) = first_mismatch(&got, &want, tol) {
            return Err(format!("ACT={act}: y[{i}] = {g}, expected {w} (x = {}, a = {a}, b = {b})", x[i]));
        }
    }
    Ok(format!("{n} elements, ACT 0..3"))
}

/// Mapped host memory (`host_mapped`) written by a kernel on each stream and read on the host
/// right after `staging_written`, without a download: the read must wait for the kernel.
pub fn check_host_mapped(dev: &CudaDevice, rng: &mut Rng) -> Outcome {
    let n = 1 << 20;
    let x = rng.floats(n, -6.0, 6.0);
    let xb = upload_f32(dev, &x)?;
    let (yb, st) = dev.host_mapped(n * 4).map_err(e2s)?.ok_or("CUDA gave no mapped host memory")?;
    for (act, second) in [(0u32, false), (1, true)] {
        let nan: Vec<u8> = (0..n).flat_map(|_| f32::NAN.to_le_bytes()).collect();
        dev.upload(&yb, 0, &nan).map_err(e2s)?;
        let (a, b) = (rng.unit() as f32 * 4.0 - 2.0, rng.unit() as f32 - 0.5);
        let k = dev.kernel(&kernels::axpb_act_spec(act)).map_err(e2s)?;
        let args = [Arg::Buf(&xb), Arg::Buf(&yb), Arg::I32(n as i32), Arg::F32(a), Arg::F32(b)];
        let groups = (n as u32).div_ceil(256);
        if second {
            let after = dev.marker().map_err(e2s)?;
            dev.launch_async(&k, [groups, 1, 1], [256, 1, 1], &args, &[after]).map_err(e2s)?;
        } else {
            dev.launch(&k, [groups, 1, 1], [256, 1, 1], &args).map_err(e2s)?;
        }
        dev.staging_written(&st, second).map_err(e2s)?;
        let mut raw = vec![0u8; n * 4];
        dev.read_staging(&st, &mut raw).map_err(e2s)?;
        let got: Vec<f32> = raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        let want: Vec<f32> = x.iter().map(|&v| act_ref(act, a.mul_add(v, b))).collect();
        if let Some((i, g, w)) = first_mismatch(&got, &want, 1e-6) {
            let stream = if second { "second" } else { "main" };
            return Err(format!("{stream} stream, ACT={act}: mapped y[{i}] = {g}, expected {w}"));
        }
    }
    dev.finish().map_err(e2s)?;
    Ok(format!("{n} floats written by a kernel on each stream, read with no copy"))
}

/// `transpose_scale` (local memory, barrier, 2-D ids) for every tile size on a ragged shape.
pub fn check_transpose(dev: &CudaDevice, rng: &mut Rng) -> Outcome {
    let (rows, cols) = (rng.range(200, 400), rng.range(300, 600));
    let input = rng.floats(rows * cols, -100.0, 100.0);
    let scale = rng.unit() as f32 * 3.0 - 1.5;
    let ib = upload_f32(dev, &input)?;
    let mut want = vec![0f32; rows * cols];
    for r in 0..rows {
        for c in 0..cols {
            want[c * rows + r] = scale * input[r * cols + c];
        }
    }
    for tile in kernels::DIALECT_TILES {
        let k = dev.kernel(&kernels::transpose_spec(tile)).map_err(e2s)?;
        let out = upload_f32(dev, &vec![f32::NAN; rows * cols])?;
        let groups = [(cols as u32).div_ceil(tile), (rows as u32).div_ceil(tile), 1];
        dev.launch(
            &k,
            groups,
            [tile, tile, 1],
            &[Arg::Buf(&ib), Arg::Buf(&out), Arg::I32(rows as i32), Arg::I32(cols as i32), Arg::F32(scale)],
        )
        .map_err(e2s)?;
        let got = download_f32(dev, &out, rows * cols)?;
        if let Some((i, g, w)) = first_mismatch(&got, &want, 0.0) {
            return Err(format!("TILE={tile}, {rows}x{cols}: out[{i}] = {g}, expected {w}"));
        }
    }
    Ok(format!("{rows}x{cols}, TILE 8/16/32"))
}

/// The zero-fill stream: a fill ordered after main-stream work by an event, main-stream work
/// ordered after the fill by `wait_for`, a byte-granular (unaligned) fill, bounds errors.
pub fn check_zero_fill(dev: &CudaDevice, rng: &mut Rng) -> Outcome {
    // Large enough that the writing kernel is still running when the fill is queued, so a fill
    // that ignored its event would be overwritten (or would overwrite) visibly.
    let n = 16 << 20;
    let fill = dev.kernel(&kernels::axpb_act_spec(0)).map_err(e2s)?;
    let x = upload_f32(dev, &vec![0.0; n])?;
    let buf = upload_f32(dev, &vec![f32::NAN; n])?;
    let out = upload_f32(dev, &vec![f32::NAN; n])?;
    let groups = (n as u32).div_ceil(256);
    let (lo, hi) = (rng.range(0, n / 2), rng.range(n / 2, n));
    // buf = 7 everywhere (main), then zero [lo, hi) once that is done (fill stream), then
    // out = buf + 1 once the zeroing is done (main).
    dev.launch(&fill, [groups, 1, 1], [256, 1, 1], &[Arg::Buf(&x), Arg::Buf(&buf), Arg::I32(n as i32), Arg::F32(0.0), Arg::F32(7.0)])
        .map_err(e2s)?;
    let written = dev.marker().map_err(e2s)?;
    let zeroed = dev.fill_zero_async(&buf, 4 * lo, 4 * (hi - lo), std::slice::from_ref(&written)).map_err(e2s)?;
    dev.wait_for(std::slice::from_ref(&zeroed)).map_err(e2s)?;
    dev.launch(&fill, [groups, 1, 1], [256, 1, 1], &[Arg::Buf(&buf), Arg::Buf(&out), Arg::I32(n as i32), Arg::F32(1.0), Arg::F32(1.0)])
        .map_err(e2s)?;
    let got = download_f32(dev, &out, n)?;
    if let Some(i) = (0..n).find(|&i| got[i] != if (lo..hi).contains(&i) { 1.0 } else { 8.0 }) {
        return Err(format!("out[{i}] = {} after zeroing [{lo}, {hi}) between the kernels", got[i]));
    }
    // Unaligned bytes: the memset8 path, and the bytes around it untouched.
    let small = dev.alloc(64).map_err(e2s)?;
    dev.upload(&small, 0, &[0xabu8; 64]).map_err(e2s)?;
    let ev = dev.fill_zero_async(&small, 3, 29, &[]).map_err(e2s)?;
    ev.synchronize().map_err(e2s)?;
    let mut b = vec![0u8; 64];
    dev.download(&small, 0, &mut b).map_err(e2s)?;
    if let Some(i) = (0..64).find(|&i| b[i] != if (3..32).contains(&i) { 0 } else { 0xab }) {
        return Err(format!("byte {i} = {:#x} after zeroing bytes 3..32 of 64", b[i]));
    }
    if dev.fill_zero_async(&small, 60, 8, &[]).is_ok() {
        return Err("a fill past the end of a buffer was accepted".into());
    }
    dev.finish().map_err(e2s)?;
    Ok(format!("{n} floats, zeroed [{lo}, {hi}) between two kernels; unaligned 29 bytes"))
}

/// A fresh disk cache: the first request compiles, a request after the loaded modules are
/// forgotten reads the disk, a second device on the same directory too, a repeat hits memory.
pub fn check_disk_cache(ordinal: usize, seed: u64) -> Outcome {
    let dir = std::env::temp_dir().join(format!("dynaspa-selfcheck-{}-{seed:x}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let result = (|| -> Outcome {
        let dev = CudaDevice::with_cache(ordinal, KernelCache::new(Some(dir.clone()))).map_err(e2s)?;
        // A schedule no other check uses, with a define only this run has, so nothing is warm.
        let spec = KernelSpec {
            defines: vec![("ACT".into(), "1".into()), ("SELFCHECK_SEED".into(), format!("{}", seed >> 1))],
            ..kernels::axpb_act_spec(1)
        };
        let t0 = Instant::now();
        dev.kernel(&spec).map_err(e2s)?;
        let compile_ms = t0.elapsed().as_secs_f64() * 1e3;
        let s = dev.cache_stats();
        if (s.compiles, s.disk_hits) != (1, 0) {
            return Err(format!("first request: {s:?}, expected one compile"));
        }
        let files = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?.count();
        if files != 1 {
            return Err(format!("{files} files in the cache directory after one compile"));
        }
        dev.kernel(&spec).map_err(e2s)?;
        if dev.cache_stats().memory_hits != 1 {
            return Err(format!("repeat request: {:?}, expected a memory hit", dev.cache_stats()));
        }
        dev.forget_loaded_kernels();
        let t0 = Instant::now();
        dev.kernel(&spec).map_err(e2s)?;
        let disk_ms = t0.elapsed().as_secs_f64() * 1e3;
        let s = dev.cache_stats();
        if (s.compiles, s.disk_hits) != (1, 1) {
            return Err(format!("after forgetting loaded kernels: {s:?}, expected a disk hit"));
        }
        drop(dev);
        let dev2 = CudaDevice::with_cache(ordinal, KernelCache::new(Some(dir.clone()))).map_err(e2s)?;
        let k = dev2.kernel(&spec).map_err(e2s)?;
        let s = dev2.cache_stats();
        if (s.compiles, s.disk_hits) != (0, 1) {
            return Err(format!("second device on the same cache: {s:?}, expected a disk hit"));
        }
        // The cached kernel runs.
        let x = upload_f32(&dev2, &[-1.0, 2.0])?;
        let y = upload_f32(&dev2, &[f32::NAN; 2])?;
        dev2.launch(&k, [1, 1, 1], [32, 1, 1], &[Arg::Buf(&x), Arg::Buf(&y), Arg::I32(2), Arg::F32(1.0), Arg::F32(0.5)]).map_err(e2s)?;
        let got = download_f32(&dev2, &y, 2)?;
        if got != [0.0, 2.5] {
            return Err(format!("kernel from the disk cache computed {got:?}, expected [0, 2.5]"));
        }
        Ok(format!("compile {compile_ms:.1} ms, from disk {disk_ms:.2} ms"))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// A random mask of blobs (as real masks are) at about `density`.
pub fn blob_mask(rng: &mut Rng, h: usize, w: usize, density: f64) -> Vec<f32> {
    let mut m = vec![0f32; h * w];
    let target = (density * (h * w) as f64) as usize;
    let mut set = 0;
    let mut guard = 0;
    while set < target && guard < 100_000 {
        guard += 1;
        let (cy, cx) = (rng.range(0, h), rng.range(0, w));
        let r = rng.range(0, 1 + h.min(w) / 6) as isize;
        for y in (cy as isize - r).max(0)..(cy as isize + r + 1).min(h as isize) {
            for x in (cx as isize - r).max(0)..(cx as isize + r + 1).min(w as isize) {
                let v = &mut m[y as usize * w + x as usize];
                if *v == 0.0 {
                    *v = 1.0;
                    set += 1;
                }
            }
        }
    }
    // Some -0.0 among the zeros: a valid 0 that must not set a bit.
    for _ in 0..(h * w / 50) {
        let i = rng.range(0, h * w);
        if m[i] == 0.0 {
            m[i] = -0.0;
        }
    }
    m
}

/// The bitmask kernel on one mask against BitMask::from_f32 / count_tiles_many / aligned_tiles.
pub fn check_bitmask_case(dev: &CudaDevice, values: &[f32], h: usize, w: usize, gs: &[Granularity]) -> std::result::Result<(), String> {
    let runner = BitmaskRunner::new(dev, BitmaskPlan::new(h, w, gs).map_err(e2s)?).map_err(e2s)?;
    // Poison every output.
    for b in [&runner.words, &runner.counts, &runner.tiles] {
        dev.upload(b, 0, &vec![0xa5u8; b.len()]).map_err(e2s)?;
    }
    let mask = upload_f32(dev, values)?;
    runner.launch(dev, &mask).map_err(e2s)?;
    let got = runner.read(dev, Some(values)).map_err(e2s)?;
    compare_with_host(values, h, w, gs, &got)
}

/// What the bitmask kernel produced against the host's BitMask on the same values.
pub fn compare_with_host(values: &[f32], h: usize, w: usize, gs: &[Granularity], got: &BitmaskOutput) -> std::result::Result<(), String> {
    let want = BitMask::from_f32(h, w, values).map_err(e2s)?;
    let words = want.to_u32_words();
    if got.words != words {
        let i = got.words.iter().zip(&words).position(|(a, b)| a != b).unwrap_or(0);
        return Err(format!("{h}x{w}: word {i} is {:#x}, BitMask::to_u32_words has {:#x}", got.words[i], words[i]));
    }
    let counts = want.count_tiles_many(gs);
    if got.counts != counts {
        return Err(format!("{h}x{w}: counts {:?} for {gs:?}, host {counts:?}", got.counts));
    }
    for (t, g) in got.tiles.iter().zip(gs) {
        let host = want.aligned_tiles(*g);
        if *t != host {
            let i = t.tiles.iter().zip(&host.tiles).position(|(a, b)| a != b).unwrap_or(t.len().min(host.len()));
            return Err(format!(
                "{h}x{w} at {g}: tile {i} is {:?}, host {:?} ({} vs {} tiles)",
                t.tiles.get(i),
                host.tiles.get(i),
                t.len(),
                host.len()
            ));
        }
    }
    Ok(())
}

/// Shapes (ragged edges, one row, one column, taller than wide) and granularities the bitmask
/// checks draw from.
pub const BITMASK_SHAPES: [(usize, usize); 10] =
    [(1, 1), (7, 9), (1, 1000), (56, 56), (64, 64), (100, 3), (112, 112), (224, 224), (300, 301), (513, 257)];
pub const BITMASK_GRANULARITIES: [(u16, u16); 10] =
    [(1, 1), (2, 2), (4, 8), (8, 8), (3, 5), (0, 2), (16, 16), (1, 64), (33, 1), (224, 224)];

/// One to five granularities from the list above (repeats allowed, as the host allows them).
pub fn random_granularities(rng: &mut Rng) -> Vec<Granularity> {
    let k = rng.range(1, 6);
    (0..k).map(|_| BITMASK_GRANULARITIES[rng.range(0, BITMASK_GRANULARITIES.len())]).map(|(a, b)| Granularity::new(a, b)).collect()
}

/// Random shapes (ragged edges, one row, taller than wide), densities and granularity sets,
/// then a non-binary value that must be reported at its position.
pub fn check_bitmask(dev: &CudaDevice, rng: &mut Rng) -> Outcome {
    let mut cases = 0;
    for &(h, w) in &BITMASK_SHAPES {
        for density in [0.0, 0.03, 0.3, 0.9, 1.0] {
            let gs = random_granularities(rng);
            let values = if density == 1.0 { vec![1.0; h * w] } else { blob_mask(rng, h, w, density) };
            check_bitmask_case(dev, &values, h, w, &gs).map_err(|e| format!("density {density}: {e}"))?;
            cases += 1;
        }
    }
    // A value that is not 0/1 is reported where it is, like BitMask::from_f32 reports it.
    let (h, w) = (37, 45);
    let mut values = blob_mask(rng, h, w, 0.2);
    let bad = rng.range(0, h * w);
    values[bad] = 0.5;
    if let Some(later) = (bad + 1..h * w).next() {
        values[later] = f32::NAN;
    }
    let runner = BitmaskRunner::new(dev, BitmaskPlan::new(h, w, &[Granularity::new(2, 2)]).map_err(e2s)?).map_err(e2s)?;
    let mask = upload_f32(dev, &values)?;
    runner.launch(dev, &mask).map_err(e2s)?;
    match runner.counts(dev, Some(&values)) {
        Ok(c) => return Err(format!("a 0.5 at index {bad} was accepted (counts {c:?})")),
        Err(e) => {
            let want = format!("(y {}, x {}) (index {bad}) is 0.5", bad / w, bad % w);
            if !e.to_string().contains(&want) {
                return Err(format!("bad value error '{e}' does not say '{want}'"));
            }
        }
    }
    // Latency of what dispatch does per frame: launch + read the counts back.
    let (h, w) = (224, 224);
    let values = blob_mask(rng, h, w, 0.3);
    let gs = [Granularity::new(1, 1), Granularity::new(4, 8), Granularity::new(8, 8), Granularity::new(16, 16)];
    let runner = BitmaskRunner::new(dev, BitmaskPlan::new(h, w, &gs).map_err(e2s)?).map_err(e2s)?;
    let mask = upload_f32(dev, &values)?;
    let mut best = f64::INFINITY;
    for _ in 0..20 {
        let t0 = Instant::now();
        runner.launch(dev, &mask).map_err(e2s)?;
        runner.counts(dev, None).map_err(e2s)?;
        best = best.min(t0.elapsed().as_secs_f64() * 1e6);
    }
    Ok(format!("{cases} masks exact; 224x224 x 4 granularities: launch + counts read back {best:.0} us (best of 20)"))
}

/// Misuse is an error, not a crash: wrong argument list, oversized block, a kernel that does
/// not compile (with NVRTC's log), a missing entry point.
pub fn check_errors(dev: &CudaDevice) -> Outcome {
    let k = dev.kernel(&kernels::axpb_act_spec(0)).map_err(e2s)?;
    let y = dev.alloc(16).map_err(e2s)?;
    let mut notes = Vec::new();
    // Only where the driver can check the list: launching it unchecked would be the very
    // memory corruption the check exists to prevent.
    if k.param_sizes().is_some() {
        if dev.launch(&k, [1, 1, 1], [32, 1, 1], &[Arg::Buf(&y), Arg::I32(1)]).is_ok() {
            return Err("a launch with 2 of 5 arguments was accepted".into());
        }
        notes.push("argument lists checked");
    } else {
        notes.push("driver cannot check argument lists (no cuFuncGetParamInfo)");
    }
    if dev.launch(&k, [1, 1, 1], [4096, 1, 1], &[]).is_ok() {
        return Err("a block of 4096 threads was accepted".into());
    }
    let broken =
        KernelSpec { file: "broken.cl", source: "KERNEL void f(GLOBAL float *x) { x[0] = undefined_name; }", entry: "f", defines: vec![] };
    match dev.kernel(&broken) {
        Ok(_) => return Err("a kernel using an undefined name compiled".into()),
        Err(e) if !e.to_string().contains("undefined_name") => return Err(format!("compile error without NVRTC's log: {e}")),
        Err(_) => {}
    }
    let missing = KernelSpec { entry: "no_such_kernel", ..kernels::axpb_act_spec(0) };
    if dev.kernel(&missing).is_ok() {
        return Err("a missing entry point was found".into());
    }
    let mut out = [0u8; 8];
    if dev.download(&y, 12, &mut out).is_ok() {
        return Err("a download past the end of a buffer was accepted".into());
    }
    dev.finish().map_err(e2s)?;
    Ok(notes.join("; "))
}

/// A chain of dependent kernels that wait first (`cuda/pdl.rs`), launched back to back, with a
/// zero fill on the second stream in the middle: each step reads what the one before wrote, so
/// a launch that overtook its predecessor's writes would leave a value short of one step. On
/// sm_90 and later, where the driver has the launch call, the kernels must actually launch
/// programmatically.
pub fn check_programmatic_chain(dev: &CudaDevice, rng: &mut Rng) -> Outcome {
    let spec = crate::gpu::kernels::spec(crate::gpu::kernels::Src::Elementwise, "binary_f32", &[]);
    let k = dev.kernel(&spec).map_err(e2s)?;
    let wanted = super::pdl::available(dev.compute_capability());
    if k.programmatic() != wanted {
        return Err(format!("binary_f32 programmatic: {}, expected {wanted} on this device", k.programmatic()));
    }
    // Large enough that each step runs for several microseconds, so an early start would show.
    let n = 4 << 20;
    let steps = 48;
    // Small integers: every sum is exact, so the expected values are too.
    let x0: Vec<f32> = (0..n).map(|_| rng.range(0, 2001) as f32 - 1000.0).collect();
    let d: Vec<f32> = (0..n).map(|_| rng.range(1, 9) as f32).collect();
    let (lo, hi) = (rng.range(0, n / 2), rng.range(n / 2, n));
    let bufs = [upload_f32(dev, &x0)?, upload_f32(dev, &vec![f32::NAN; n])?];
    let db = upload_f32(dev, &d)?;
    let meta = dev.alloc(4).map_err(e2s)?;
    let groups = (n as u32).div_ceil(256);
    for step in 0..steps {
        let (src, dst) = (&bufs[step % 2], &bufs[(step + 1) % 2]);
        let args = [Arg::Buf(src), Arg::Buf(&db), Arg::Buf(dst), Arg::I32(n as i32), Arg::I32(0), Arg::I32(0), Arg::Buf(&meta)];
        dev.launch(&k, [groups, 1, 1], [256, 1, 1], &args).map_err(e2s)?;
        if step == steps / 2 {
            let written = dev.marker().map_err(e2s)?;
            let zeroed = dev.fill_zero_async(dst, 4 * lo, 4 * (hi - lo), std::slice::from_ref(&written)).map_err(e2s)?;
            dev.wait_for(std::slice::from_ref(&zeroed)).map_err(e2s)?;
        }
    }
    let got = download_f32(dev, &bufs[steps % 2], n)?;
    let after_fill = (steps - 1 - steps / 2) as f32;
    let want: Vec<f32> = (0..n).map(|i| if (lo..hi).contains(&i) { after_fill * d[i] } else { x0[i] + steps as f32 * d[i] }).collect();
    if let Some((i, g, w)) = first_mismatch(&got, &want, 0.0) {
        return Err(format!("after {steps} dependent launches (zeroed [{lo}, {hi}) midway): y[{i}] = {g}, expected {w}"));
    }
    Ok(format!("{steps} launches of {n} elements, programmatic: {}", k.programmatic()))
}

/// Runs every check on device `ordinal`, calling `report(name, outcome)` after each; returns
/// the number of failures (the probe failing counts as one).
pub fn run_all(ordinal: usize, seed: u64, report: &mut dyn FnMut(&str, &Outcome)) -> usize {
    let mut failures = 0;
    let mut note = |name: &str, o: Outcome| {
        if o.is_err() {
            failures += 1;
        }
        report(name, &o);
    };
    let devices = match super::probe::probe() {
        Ok(n) => n,
        Err(u) => {
            note("probe", Err(u.to_string()));
            return failures;
        }
    };
    let dev = match CudaDevice::new(ordinal) {
        Ok(d) => d,
        Err(e) => {
            note("device", Err(e.to_string()));
            return failures;
        }
    };
    let i = dev.info();
    let nvrtc = super::nvrtc::version().map(|(a, b)| format!("{a}.{b}")).unwrap_or_else(|e| e.to_string());
    note(
        "probe",
        Ok(format!(
            "{devices} device(s); #{ordinal}: {} (cc {}, {} SMs, {} MiB, {} B shared/block, {} threads/block), {}, NVRTC {nvrtc}, kernels for {}",
            i.name,
            i.arch,
            i.compute_units,
            i.global_mem_bytes >> 20,
            i.local_mem_bytes,
            i.max_work_group_size,
            i.driver,
            dev.arch()
        )),
    );
    let mut rng = Rng::new(seed);
    note("kernel axpb_act", check_axpb(&dev, &mut rng));
    note("kernel transpose_scale", check_transpose(&dev, &mut rng));
    note("zero-fill stream", check_zero_fill(&dev, &mut rng));
    note("programmatic launches", check_programmatic_chain(&dev, &mut rng));
    note("mapped host memory", check_host_mapped(&dev, &mut rng));
    note("disk cache", check_disk_cache(ordinal, seed));
    note("bitmask kernel", check_bitmask(&dev, &mut rng));
    note("errors", check_errors(&dev));
    note("cudnn conv", super::selfcheck_cudnn::check_cudnn_conv(ordinal, &mut rng));
    note("cudnn conv at f16", super::selfcheck_cudnn_half::check_cudnn_half(ordinal, &mut rng));
    failures
}
