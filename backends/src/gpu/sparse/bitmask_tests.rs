//! bitmask.cl on the OpenCL and wgpu devices against the host's BitMask: packed words, tile
//! counts and row-major tile lists for every granularity, per image of a batch, on ragged
//! sizes; and the first non-binary position.

use super::meta::MetaLayout;
use crate::gpu::device::{Arg, GpuDevice, KernelDialect};
use crate::gpu::kernels::{spec, Src};
use crate::gpu::sparse_conv::schedule::GRANULARITIES;
use dynaspa_runtime::sparsity::{BitMask, Granularity};

use crate::gpu::test_rng::Rng;

fn ints(b: &[u8]) -> Vec<i32> {
    b.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn bytes<T: Copy>(v: &[T], f: impl Fn(T) -> [u8; 4]) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

/// Runs the kernel on `masks` (one per image, all h x w) with `gy` work-groups per image
/// sharing the granularities, and returns the whole meta buffer. `local`: the executor's
/// defines (the words copied to local memory where they fit), else the words read from global
/// memory.
fn run<D: GpuDevice>(dev: &D, masks: &[Vec<f32>], h: usize, w: usize, gs: &[Granularity], gy: u32, local: bool) -> (MetaLayout, Vec<i32>) {
    let l = MetaLayout::new(masks.len(), h, w, gs).unwrap();
    let mut defines = super::bitmask::bitmask_defines(dev.info(), h, w);
    let wgsl = dev.info().dialect() == KernelDialect::Wgsl;
    assert_eq!(defines.iter().any(|d| d.0 == "LWORDS"), !wgsl, "a {h}x{w} mask's words fit in local memory, but not in WGSL's kernel");
    if !local {
        defines.retain(|d| d.0 != "LWORDS");
    }
    let block = defines[0].1 as u32;
    let k = dev.kernel(&spec(Src::Bitmask, "bitmask_tiles", &defines)).unwrap();
    let flat: Vec<f32> = masks.concat();
    let mb = dev.alloc(flat.len() * 4).unwrap();
    dev.upload(&mb, 0, &bytes(&flat, f32::to_le_bytes)).unwrap();
    let meta = dev.alloc(l.total() * 4).unwrap();
    dev.upload(&meta, 0, &vec![0xA5u8; l.total() * 4]).unwrap();
    let gt = l.grans_table();
    let gb = dev.alloc(gt.len() * 4).unwrap();
    dev.upload(&gb, 0, &bytes(&gt, i32::to_le_bytes)).unwrap();
    let args = [
        Arg::Buf(&mb),
        Arg::Buf(&meta),
        Arg::Buf(&gb),
        Arg::I32(h as i32),
        Arg::I32(w as i32),
        Arg::I32((h * w) as i32),
        Arg::I32(gs.len() as i32),
        Arg::I32(l.data0 as i32),
        Arg::I32(l.img_stride as i32),
    ];
    dev.launch(&k, [masks.len() as u32, gy, 1], [block, 1, 1], &args).unwrap();
    let mut out = vec![0u8; l.total() * 4];
    dev.download(&meta, 0, &mut out).unwrap();
    (l, ints(&out))
}

fn check<D: GpuDevice>(dev: &D, what: &str) {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let mut gs = GRANULARITIES.to_vec();
    gs.push(Granularity::new(3, 5));
    // Both paths of the kernel, where it has both (WGSL's twin has no local copy).
    let locals: &[bool] = if dev.info().dialect() == KernelDialect::Wgsl { &[false] } else { &[true, false] };
    for &(h, w) in &[(40usize, 40usize), (19, 23), (1, 77), (33, 1), (7, 300)] {
        for &d in &[0.0, 0.02, 0.3, 1.0] {
            let masks: Vec<Vec<f32>> = (0..2).map(|_| (0..h * w).map(|_| (rng.next() < d) as u8 as f32).collect()).collect();
            // One group per granularity (the executor's launch), all in one, and a split between.
            let gy = [gs.len() as u32, 1, 2][(h + (d * 100.0) as usize) % 3];
            for &local in locals {
                let (l, meta) = run(dev, &masks, h, w, &gs, gy, local);
                let what = format!("{what} (local words: {local})");
                for (img, mv) in masks.iter().enumerate() {
                    let bm = BitMask::from_f32(h, w, mv).unwrap();
                    let base = l.data0 + img * l.img_stride;
                    let words: Vec<u32> = meta[base..base + l.words].iter().map(|&v| v as u32).collect();
                    let want_words = bm.to_u32_words();
                    assert_eq!(words, want_words[..l.words], "{what} {h}x{w} d {d} image {img}: words");
                    let counts = &meta[img * l.cstride..][..l.cstride];
                    assert_eq!(counts[gs.len()], -1, "{what}: binary mask reported bad");
                    for (gi, &g) in gs.iter().enumerate() {
                        let tiles = bm.aligned_tiles(g);
                        assert_eq!(counts[gi] as usize, tiles.len(), "{what} {h}x{w} d {d} image {img} {g}: count");
                        let list = &meta[base + l.tiles_at[gi]..][..tiles.len()];
                        let want: Vec<i32> = tiles.tiles.iter().map(|t| (t.y as usize * w + t.x as usize) as i32).collect();
                        assert_eq!(list, &want[..], "{what} {h}x{w} d {d} image {img} {g}: list");
                    }
                }
            }
        }
    }
    // The first value that is not 0 or 1 (NaN counts), per image.
    let mut a = vec![1.0f32; 19 * 23];
    a[200] = f32::NAN;
    a[100] = 0.5;
    let b: Vec<f32> = (0..19 * 23).map(|i| if i == 300 { -1.0 } else { -0.0 }).collect();
    for &local in locals {
        let (l, meta) = run(dev, &[a.clone(), b.clone()], 19, 23, &gs, gs.len() as u32, local);
        assert_eq!(meta[gs.len()], 100, "{what} (local words: {local}): image 0's first bad position");
        assert_eq!(meta[l.cstride + gs.len()], 300, "{what} (local words: {local}): image 1's first bad position");
    }
}

#[test]
fn mask_words_go_to_local_memory_where_they_fit() {
    use crate::gpu::device::DeviceInfo;
    let dev = |backend: &str, local_mem_bytes: u64| DeviceInfo {
        backend: backend.into(),
        max_work_group_size: 1024,
        local_mem_bytes,
        ..Default::default()
    };
    let lwords =
        |info: &DeviceInfo, h: usize, w: usize| super::bitmask::bitmask_defines(info, h, w).iter().find(|d| d.0 == "LWORDS").map(|d| d.1);
    let cuda = dev("cuda", 49152);
    assert_eq!(lwords(&cuda, 40, 40), Some(50));
    assert_eq!(lwords(&cuda, 19, 23), Some(14));
    assert_eq!(lwords(&cuda, 256, 256), Some(2048));
    assert_eq!(lwords(&cuda, 257, 256), None, "past 8 KiB of words");
    assert_eq!(lwords(&dev("opencl", 8192 + 400), 40, 40), Some(50));
    assert_eq!(lwords(&dev("opencl", 8192 + 398), 40, 40), None, "half the local memory less the scan and flag arrays");
    assert_eq!(lwords(&dev("wgpu", 49152), 40, 40), None);
}

/// Skips a missing backend, unless `DYNASPA_REQUIRE_BACKENDS` names it.
#[allow(dead_code)]
pub(crate) fn skip(name: &str, e: impl std::fmt::Display) {
    let required = std::env::var("DYNASPA_REQUIRE_BACKENDS").is_ok_and(|v| v.split(',').any(|b| b.trim() == name));
    assert!(!required, "{name} is required: {e}");
    eprintln!("skipped: {e}");
}

#[cfg(feature = "opencl")]
#[test]
fn bitmask_kernel_matches_the_host_on_opencl() {
    match crate::opencl::shared_device(None, None) {
        Ok(d) => check(&*d, "opencl"),
        Err(e) => skip("opencl", e),
    }
}

#[cfg(feature = "wgpu")]
#[test]
fn bitmask_kernel_matches_the_host_on_wgpu() {
    match crate::wgpu::shared_device(None) {
        Ok(d) => check(&*d, "wgpu"),
        Err(e) => skip("wgpu", e),
    }
}
