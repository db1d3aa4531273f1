//! Schedules of sparse_conv.cl: the GEMM tile (output channels x columns per work-group, depth
//! of one local-memory stage, outputs per work-item), the split of the reduction, and the
//! granularity of the columns. Which of them CI compiles is `ci_schedules`.

use super::knobs::{check_depthwise, GemmKnobs, GpuLimits};
use crate::gpu::device::DeviceInfo;
use crate::gpu::kernels::Tile;
use crate::gpu::lower::sparse_conv::SconvKind;
use dynaspa_runtime::dispatch::Schedule;
use dynaspa_runtime::sparsity::Granularity;

/// The A/B switch `$name` (`env_switch`), read once per place that asks: a process keeps the
/// setting it started with.
macro_rules! ab_switch {
    ($name:literal) => {{
        static ASKED: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
        *ASKED.get_or_init(|| $crate::gpu::sparse::schedules::env_switch($name))
    }};
}
pub(crate) use ab_switch;

/// Sparse members' granularities. 1x1 gathers single active positions (no wasted columns, the
/// most index work); 2x8 keeps rows of 8 for coalesced input reads; 4x4 and 8x8 suit masks made
/// of blobs, where whole tiles are active. Calibration keeps whichever pays per op and device.
pub(crate) const GRANULARITIES: [Granularity; 4] =
    [Granularity::new(1, 1), Granularity::new(2, 8), Granularity::new(4, 4), Granularity::new(8, 8)];

/// Splits of the reduction the lowering uses.
pub(crate) const SPLITS: [u32; 5] = [1, 2, 4, 8, 16];

/// 64 output channels x 32 columns, 4 x 2 per work-item (256 work-items, 6 KiB of local memory:
/// inside WebGPU's default limits).
pub(crate) const GEMM_LARGE: Tile = Tile { tm: 64, tn: 32, tk: 16, wm: 4, wn: 2 };
/// For fewer than 64 output channels.
pub(crate) const GEMM_SMALL: Tile = Tile { tm: 32, tn: 32, tk: 16, wm: 2, wn: 2 };

/// Least reduction (input channels x taps) each split keeps: 32 unless
/// `DYNASPA_SCONV_SPLIT_K` names another (a tuning knob for benchmarks, read once: the best
/// value depends on the device's latency and SM count). Bad values fall back to 32; splits
/// stay within `SPLITS`, so every kernel it can pick is one CI compiles.
fn split_min_k() -> usize {
    static V: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *V.get_or_init(|| {
        std::env::var("DYNASPA_SCONV_SPLIT_K").ok().and_then(|v| v.trim().parse::<usize>().ok()).filter(|&v| v >= 16).unwrap_or(32)
    })
}

/// Work-groups per compute unit a dense split may reach: 8 unless `DYNASPA_SCONV_DENSE_GROUPS`
/// names another (a benchmark tuning knob, read once; 0 turns the dense split off). On an H100,
/// batch 1: conv3x3 256->256 dense 197.6 -> 148.4 µs (8) or 137.3 µs (16); 16 made conv1x1
/// 256->256 at batch 4 slower (68 -> 80 µs), 8 slowed nothing measured.
fn dense_groups_per_cu() -> usize {
    static V: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *V.get_or_init(|| std::env::var("DYNASPA_SCONV_DENSE_GROUPS").ok().and_then(|v| v.trim().parse::<usize>().ok()).unwrap_or(8))
}

/// Whether a split reduction (KS > 1) is finished inside the GEMM by the last of each tile's KS
/// work-groups (FUSED_FINISH in sparse_conv.cl: one launch) rather than by sconv_finish_f32 (a
/// second launch): `asked` (`GpuOptions::fused_finish`, `$DYNASPA_FUSED_FINISH`) where the
/// device can run it, else the device's default. On NVIDIA the second launch costs ~13 µs back
/// to back under OpenCL and ~5.5 µs plus a launch gap under CUDA, as much as a low-density
/// frame's GEMM. Never on wgpu: WGSL does not promise that one workgroup sees another's storage
/// writes within a dispatch, whatever the barriers and atomics, so its kernel has no fused
/// variant. Other OpenCL devices than NVIDIA's and PoCL's are left unfused until measured.
pub(crate) fn fused_finish(info: &DeviceInfo, asked: Option<bool>) -> bool {
    if info.backend == "wgpu" {
        return false;
    }
    asked.unwrap_or_else(|| match info.backend.as_str() {
        // Measured on the H100 (RESULTS.md, session 8 call O): under CUDA the second launch
        // overlaps the first's tail and costs less than the fused GEMM's last work-group
        // reading all KS partials (fused 5-16% slower); under NVIDIA's OpenCL the second launch
        // is dear enough that split 1x1 members only win fused (1.45-1.8x faster).
        "cuda" => false,
        "opencl" if info.vendor.to_ascii_lowercase().contains("nvidia") => true,
        "opencl" if info.driver.to_ascii_lowercase().contains("pocl") => POCL_FUSED_FINISH,
        _ => false,
    })
}

/// Whether self-listing members finish a split reduction in their GEMM (FUSED_FINISH with
/// SELF_LIST), whatever the executable does for the others: on CUDA where `DYNASPA_SL_FUSED=1`
/// (read once, an A/B switch), never elsewhere. It would make a lone 1x1-tiled op's frame one
/// launch (with `SELF_COUNT`), but on an H200 it did not pay (benches/RESULTS.md, session 27:
/// the fused members a median 1-6% slower alone, the fastest ones too big to fuse, conv1x1 at
/// density 0.1 9.7-10.6 µs with dispatch against 9.5 unfused), so it is off by default. Not on
/// PoCL: PoCL 3.1 (CI's) stored every active output of the fused self-listing GEMM from the
/// wrong column (tests/gpu_fused_finish.rs, relative L2 ~0.8) where the same kernel on CUDA
/// computed right (session 27, gpu_fused_finish with it on). Not on NVIDIA's OpenCL, which does
/// not self-list by default (`self_list_default`).
pub(crate) fn self_list_fused(info: &DeviceInfo) -> bool {
    info.backend == "cuda" && ab_switch!("DYNASPA_SL_FUSED").unwrap_or(false)
}

/// PoCL's default (see `fused_finish`): off, as fusing did not pay there. A launch costs PoCL
/// little next to a sparse frame's GEMM (ms), and fused, the finish runs in the GEMM's last
/// work-groups, at the tail: at density 0.3-0.5 conv3x3 s2 was 2% slower fused, conv3x3 even,
/// conv1x1 at 0.1 7% faster (benches/RESULTS.md, "Fused split-K finish on PoCL").
const POCL_FUSED_FINISH: bool = false;

/// An A/B switch from the environment: `1` on, `0` off, anything else (or unset) the default.
pub(crate) fn env_switch(name: &str) -> Option<bool> {
    match std::env::var(name).ok().as_deref().map(str::trim) {
        Some("1") => Some(true),
        Some("0") => Some(false),
        _ => None,
    }
}

/// Whether an executable's 1x1 GEMM members list their own columns: `asked`
/// (`GpuOptions::self_list`, which the CLI and library take from `$DYNASPA_SELF_LIST`) where
/// the device can, else the device's default (`self_list_default`). Never on wgpu.
pub(crate) fn self_list(info: &DeviceInfo, asked: Option<bool>) -> bool {
    info.backend != "wgpu" && asked.unwrap_or_else(|| self_list_default(info))
}

/// Whether 1x1 GEMM members find their columns in the mask themselves (SELF_LIST in
/// sparse_conv.cl) on `info`'s device, so that dispatch launches the bitmask beside them
/// instead of in front: `DYNASPA_SELF_LIST=1|0` where set (read once; an A/B knob), else the
/// device's default. Never on wgpu (the WGSL twin has no SELF_LIST).
pub(crate) fn self_list_on(info: &DeviceInfo) -> bool {
    self_list(info, ab_switch!("DYNASPA_SELF_LIST"))
}

/// Whether self-listing members of a mask planned with 1x1 tiles alone store its counts
/// themselves (SELF_COUNT in sparse_conv.cl), so a frame whose readers of the mask all do
/// makes no bitmask launch for it (step.rs): on unless `DYNASPA_SELF_COUNT=0` (read once, the
/// A/B switch).
pub(crate) fn self_count_on() -> bool {
    ab_switch!("DYNASPA_SELF_COUNT").unwrap_or(true)
}

/// Where self-listing members are the default: CUDA, where they paid (H200, session 13 call AF,
/// batch 1, the member with lagged dispatch on against off: conv3x3 at density 0.1 33.1 vs 40.4
/// µs, 0.3 55.0 vs 57.5, conv1x1 at 0.1 14.9 vs 18.5; within 3% elsewhere: the mask launch in
/// front goes, the member's own listing costs 2-5 µs at 0.3-0.5), and where the GPU test
/// binaries passed with them (gpu_sparse, gpu_fused_finish, gpu_models on the H200). Not on
/// NVIDIA's OpenCL, where the same call had them no better (the counts copy and host, not the
/// mask launch, set its dispatch cost). Not on PoCL: PoCL 3.1 (Debian 12, CI's) computes the
/// self-listing conv1x1 at batch 2 wrong (tests/gpu_sparse.rs, relative L2 ~1; the same test
/// passes on CUDA), as it miscompiled other kernels that hand local arrays between helpers
/// (sparse_conv.cl, `sconv_load_stage`); its tests turn them on where PoCL computes them right.
fn self_list_default(info: &DeviceInfo) -> bool {
    info.backend == "cuda"
}

/// Whether GEMM members take their reduction offsets from the tap table in local memory
/// (sparse_conv.cl, `SC_TAPS`) rather than from the op's table in device memory: on unless
/// `DYNASPA_TAP_TABLE=0` (read once), the A/B switch for measuring it. The WGSL twin has no
/// tap table.
pub(crate) fn tap_table_on() -> bool {
    ab_switch!("DYNASPA_TAP_TABLE").unwrap_or(true)
}

/// Whether GEMM members read their operands from local memory as float2 / float4 runs
/// (sparse_conv.cl, `SC_VEC`): on unless `DYNASPA_SC_VEC=0` (read once), the A/B switch for
/// measuring it. The WGSL twin reads one float at a time.
pub(crate) fn vector_reads_on() -> bool {
    ab_switch!("DYNASPA_SC_VEC").unwrap_or(true)
}

/// Whether self-listing members' work-groups on `info` count the mask first and leave when they
/// have no column, before the scan (sparse_conv.cl, `SL_EARLY`): on CUDA unless
/// `DYNASPA_SL_EARLY=0` (read once, the A/B switch); never elsewhere (PoCL 3.1 crashed running
/// it).
pub(crate) fn self_list_early(info: &DeviceInfo) -> bool {
    info.backend == "cuda" && ab_switch!("DYNASPA_SL_EARLY").unwrap_or(true)
}

/// Whether the split finish on `info` loads its first column's partial sums beside the column
/// count instead of after it (SC_FIN_SPEC in sparse_conv.cl): on CUDA unless
/// `DYNASPA_SC_FIN_SPEC=0` (read once, the A/B switch). On an H200 (benches/RESULTS.md,
/// session 32, six rounds on two hosts) conv1x1's members at density 0.1 went a median up to 3%
/// faster and never more than 1% slower, the 3x3 convs' even; the other backends are not
/// measured (the WGSL twin has no such constant).
pub(crate) fn finish_speculates(info: &DeviceInfo) -> bool {
    info.backend == "cuda" && ab_switch!("DYNASPA_SC_FIN_SPEC").unwrap_or(true)
}

/// Whether self-listing GEMMs on `info` read their mask and list their columns before their
/// PDL wait, where the launch ahead does not write the mask (SL_PREWAIT in sparse_conv.cl,
/// `MaskColumns::prewait`): on CUDA unless `DYNASPA_SL_PREWAIT=0` (read once, the A/B switch).
/// Elsewhere there is no wait to overlap.
pub(crate) fn self_list_prewait(info: &DeviceInfo) -> bool {
    info.backend == "cuda" && ab_switch!("DYNASPA_SL_PREWAIT").unwrap_or(true)
}

/// Whether the split finish on `info` lets the next grid launch as soon as its work-groups
/// have started (FIN_TRIGGER in sparse_conv.cl): on CUDA unless `DYNASPA_FIN_TRIGGER=0` (read
/// once, the A/B switch).
pub(crate) fn finish_triggers(info: &DeviceInfo) -> bool {
    info.backend == "cuda" && ab_switch!("DYNASPA_FIN_TRIGGER").unwrap_or(true)
}

/// Whether frames launch self-listing members' grids for the columns they expect rather than
/// for every column the map can have (`lower::ctx::ColumnGrid`): unless `DYNASPA_SL_GRID=0`
/// (read once, the A/B switch).
pub(crate) fn narrow_column_grids() -> bool {
    ab_switch!("DYNASPA_SL_GRID").unwrap_or(true)
}

/// Whether GEMM members on `info` work out their gather's column and tap bounds once per kernel
/// instead of per element and stage (sparse_conv.cl, `SC_HOIST`): on, but for NVIDIA's OpenCL.
/// On an H200 (RESULTS.md, session 25) CUDA's members got a median 3-8% faster with it, while
/// on NVIDIA's OpenCL the median did not move and the fastest 3x3 members at densities 0.3 and
/// 0.5 got up to 7% slower (128 x 128 tiles of 8 x 4 per work-item lost about 10%: that
/// compiler has no launch bound to hold the registers of the hoisted values). Adreno and Mali
/// are not measured. `DYNASPA_SC_HOIST=0|1` (read once) sets it for every device, the A/B
/// switch. The WGSL twin works them out per element.
pub(crate) fn hoisted_gather(info: &DeviceInfo) -> bool {
    let nvidia_opencl = info.backend == "opencl" && info.vendor.to_ascii_lowercase().contains("nvidia");
    ab_switch!("DYNASPA_SC_HOIST").unwrap_or(!nvidia_opencl)
}

/// Whether sparse members' GEMM and split-K finish grids run column tiles slowest
/// (sparse_conv.cl, `SC_CSLOW`), so a sparse frame's few working work-groups launch ahead of
/// the many past its columns instead of among them: on for CUDA and OpenCL, `DYNASPA_SC_CSLOW=0|1`
/// (read once) the A/B switch. On an H200 (RESULTS.md, session 26) the fastest member at density
/// 0.1 gained 2-4 µs on NVIDIA's OpenCL (conv3x3 21.5 against 25.9) and 0.5-0.6 µs on CUDA;
/// neutral at batches 2 and 4. Self-listing members run that way whatever it says. The WGSL
/// twin keeps column tiles fastest.
pub(crate) fn columns_slowest(info: &DeviceInfo) -> bool {
    info.backend != "wgpu" && ab_switch!("DYNASPA_SC_CSLOW").unwrap_or(true)
}

/// Stages of the GEMM members' reduction in flight (sparse_conv.cl, `SC_DEPTH`) on a device of
/// `backend`: 2 on CUDA, where the second register set made the density-0.1 members 2-6% faster
/// (RESULTS.md, sessions 20 and 24), 1 elsewhere (on NVIDIA's OpenCL it gained nothing in
/// session 21). `DYNASPA_SC_DEPTH=1|2` (read once) sets it for every backend, the A/B switch.
/// The WGSL twin keeps one.
pub(crate) fn pipeline_depth(backend: &str) -> u32 {
    static ASKED: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    let asked = *ASKED.get_or_init(|| match std::env::var("DYNASPA_SC_DEPTH").ok().as_deref().map(str::trim) {
        Some("1") => Some(1),
        Some("2") => Some(2),
        _ => None,
    });
    asked.unwrap_or(if backend == "cuda" { 2 } else { 1 })
}

/// Work-groups of `threads` work-items one SM should hold at once, for CUDA's register bound
/// (`LAUNCH_BOUNDS(NT, SC_MIN_BLOCKS)` in sparse_conv.cl): two of 256 (one of 512) under
/// `SC_VEC`, whose 8 x 4 float4 variant wanted 129 registers where 128 keep two groups
/// resident; `None` for other sizes, for scalar reads, or with `DYNASPA_REG_BOUND=0` (read once,
/// the A/B switch). Not on NVIDIA's OpenCL: there `-cl-nv-maxrregcount=128` made ptxas spend
/// more registers, not fewer (the dense 64 x 32 member 56 -> 87, 22% slower; RESULTS.md,
/// session 19), and OpenCL C has no launch bound.
pub(crate) fn register_bound(threads: u32) -> Option<u32> {
    let on = ab_switch!("DYNASPA_REG_BOUND").unwrap_or(true);
    (on && vector_reads_on() && (256..=512).contains(&threads)).then(|| 512 / threads)
}

/// Whether sliced members whose one stage holds the whole reduction run it without the stage
/// pipeline (sparse_conv.cl, `SC_ONE_STAGE`: weights as float4 before the PDL wait, one gather
/// of every column): unless `DYNASPA_SC_ONE_STAGE=0` (read once, the A/B switch). The WGSL twin
/// has no sliced members.
pub(crate) fn one_stage_on() -> bool {
    ab_switch!("DYNASPA_SC_ONE_STAGE").unwrap_or(true)
}

/// How one-stage members take their weights and gather to local memory where the device has
/// copies that hold no registers (sparse_conv_stage.h, `SC_ASYNC`: cp.async on CUDA from
/// sm_80): `DYNASPA_SC_ASYNC=0` (loads into registers), `1` (those copies) or `2` (the weights'
/// copies only once a self-listing member's count says it has columns), read once, the A/B
/// switch; `None`, the kernel's default.
pub(crate) fn async_copies() -> Option<i64> {
    static ASKED: std::sync::OnceLock<Option<i64>> = std::sync::OnceLock::new();
    *ASKED.get_or_init(|| std::env::var("DYNASPA_SC_ASYNC").ok().and_then(|v| v.trim().parse::<i64>().ok()).filter(|v| (0..=2).contains(v)))
}

/// Whether a one-stage member on `info` whose knobs ask for it or not (`asked`, knob `ET`) lets
/// the next grid launch at its entry rather than before its stores (sparse_conv.cl,
/// `SC_EARLY_TRIGGER`): CUDA only; `DYNASPA_SC_EARLY_TRIGGER=1|0` (read once) sets it for every
/// one-stage member, the A/B switch.
pub(crate) fn early_trigger(info: &DeviceInfo, asked: bool) -> bool {
    info.backend == "cuda" && ab_switch!("DYNASPA_SC_EARLY_TRIGGER").unwrap_or(asked)
}

/// Whether GEMM members run their products on the tensor cores (MMA in sparse_conv.cl: three
/// TF32 products per fp32 one, fp32-accurate): only with `DYNASPA_MMA=1` (read once), and only
/// on CUDA devices of compute capability 8.0 and later, the first with TF32 mma (the variant is
/// inline PTX). Off by default: on an H200 (session 13 call AG) it was no faster where the
/// issue-5 convs are decided. Hopper's mma.sync runs TF32 at about 1.3x the rate of fp32 FMAs,
/// which three products per product and the splitting eat: the 128x64 tiles that win at batch
/// 1 ran 30-50% slower with it (conv3x3 at density 0.1 37.8 vs 25.5 µs), the default 64x32
/// tile 5-11% faster on conv3x3 at batches 2 and 4 and 5-15% slower on conv1x1. A GPU whose
/// tensor cores outrun its FMAs by more (Ampere's A100: 8x) is where it should be measured next.
pub(crate) fn mma_on(info: &DeviceInfo) -> bool {
    let asked = ab_switch!("DYNASPA_MMA");
    let major = info.arch.split('.').next().and_then(|m| m.trim().parse::<u32>().ok()).unwrap_or(0);
    info.backend == "cuda" && major >= 8 && asked.unwrap_or(false)
}

/// Local memory sparse_conv.cl's GEMM holds beside what `GemmKnobs::local_bytes` and a
/// self-listing member's scan count: the tap table (3 ints for each of SC_TAPS = 64 taps) and a
/// few ints (the mask's total and first bad value, the fused finish's flag).
const GEMM_FIXED_LOCAL_BYTES: u64 = 3 * 4 * 64 + 16;

/// Bytes of the weights' stage a GEMM member's launches provide on `info` (sparse_conv.cl,
/// `DSP_DYN_SMEM`), where its local memory would pass the device's static limit and launches
/// may provide more (CUDA; `GpuLimits::fits_local` admitted it); `None` where it fits
/// statically, as every member did before. Not for MMA members (`mma_defines` keeps them within
/// the static limit).
pub(crate) fn launch_local_bytes(s: &SconvSchedule, self_list: bool, info: &DeviceInfo) -> Option<u64> {
    let k = s.knobs();
    let scan = if self_list { 8 * k.threads() as u64 + 8 } else { 0 };
    let need = k.local_bytes(false) + scan + GEMM_FIXED_LOCAL_BYTES;
    (info.backend == "cuda" && info.local_mem_launch_bytes > 0 && need > info.local_mem_bytes).then(|| k.weights_stage_bytes())
}

/// The MMA defines for `tile` (`MMA`, and `MMA_WGM`: warps along the channels), or `None`
/// where the tensor-core path cannot run it: whole warps, m16 x n8 x k8 fragments dividing
/// the tile between them, and room for the padded stages within `local_mem_bytes` (0: not
/// checked). Of the warp layouts that fit, the one loading the fewest fragment words per
/// step (4 per m16 fragment, 2 per n8).
pub(crate) fn mma_defines(tile: Tile, local_mem_bytes: u64) -> Option<[(&'static str, i64); 2]> {
    let Tile { tm, tn, tk, .. } = tile;
    let threads = (tm / tile.wm.max(1)) * (tn / tile.wn.max(1));
    if threads % 32 != 0 || tm % 16 != 0 || tn % 8 != 0 || tk % 8 != 0 {
        return None;
    }
    let warps = threads / 32;
    let pad_bytes = 4 * tk as u64 * 2 * MMA_PAD;
    let local = GemmKnobs { tm, tn, tk, wm: tile.wm, wn: tile.wn, ks: 1, wk: 1, et: false }.local_bytes(false) + pad_bytes;
    if local_mem_bytes > 0 && local > local_mem_bytes {
        return None;
    }
    (1..=warps)
        .filter(|&wgm| warps % wgm == 0 && (tm / 16) % wgm == 0 && (tn / 8) % (warps / wgm) == 0)
        .min_by_key(|&wgm| 4 * (tm / 16 / wgm) + 2 * (tn / 8 / (warps / wgm)))
        .map(|wgm| [("MMA", 1), ("MMA_WGM", wgm as i64)])
}

/// Words sparse_conv.cl pads each staged row with under MMA (its `SC_PAD`).
const MMA_PAD: u64 = 8;

/// One variant of the sparse conv GEMM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SconvSchedule {
    pub tile: Tile,
    pub ks: u32,
    /// `None`: every position (the dense member).
    pub gran: Option<Granularity>,
    /// 1x1 columns found by each work-group in the mask tensor (SELF_LIST), not read from
    /// bitmask.cl's list.
    pub self_list: bool,
    /// Slices of the work-group splitting each stage's reduction (`WK`, 1 for none).
    pub wk: u32,
    /// The next grid launches at this one's entry where it runs one stage (`GemmKnobs::et`).
    pub et: bool,
}

impl SconvSchedule {
    /// The GEMM's work-group: `Tile::local` with the slices (`WK`) as its third dimension.
    pub(crate) fn local(&self) -> [u32; 3] {
        let [tx, ty, _] = self.tile.local();
        [tx, ty, self.wk.max(1)]
    }

    /// Default tile and split for an op: the split grows with the reduction (input channels x
    /// taps) so that the few columns of a sparse frame still give the device enough
    /// work-groups; the dense member has columns enough and does not split. On an H100 a
    /// sparse frame's work-groups are latency-bound chains of K stages, so short chains
    /// (32 per split) beat the extra partial-sum traffic: at density 0.1, conv1x1 256->256 went
    /// from 25.6 to 15.4 µs, conv3x3 s2 128->256 from 41.3 to 25.8 µs and conv3x3 256->256
    /// from 53.3 to 37.5 µs (256 -> 32 per split, splits up to 16).
    pub(crate) fn for_op(cout: usize, k: usize, gran: Option<Granularity>) -> SconvSchedule {
        let tile = if cout >= 64 { GEMM_LARGE } else { GEMM_SMALL };
        let per_split = split_min_k();
        let ks = if gran.is_none() { 1 } else { SPLITS.iter().copied().filter(|&s| k >= per_split * s as usize).max().unwrap_or(1) };
        SconvSchedule { tile, ks, gran, self_list: false, wk: 1, et: false }
    }

    /// The dense member (and dense convs) split the reduction too when their grid is small for
    /// the device: `base_groups` work-groups (columns x output-channel tiles x images) grow by
    /// the split while they stay within `DENSE_GROUPS_PER_CU` per compute unit. A latency-bound
    /// chain of K stages per work-group was the dense member's cost as much as the sparse ones'.
    /// `compute_units` 0 (unknown, e.g. WebGPU) keeps one split.
    pub(crate) fn with_dense_split(mut self, k: usize, base_groups: usize, compute_units: u32) -> SconvSchedule {
        if self.gran.is_none() {
            let limit = dense_groups_per_cu() * compute_units as usize;
            let per_split = split_min_k();
            self.ks = SPLITS
                .iter()
                .copied()
                .filter(|&s| k >= per_split * s as usize && base_groups.saturating_mul(s as usize) <= limit)
                .max()
                .unwrap_or(1);
        }
        self
    }

    /// This schedule with only the splits of a reduction of `k` that get a stage. The kernel
    /// cuts it into chunks of ceil(k / KS) rounded up to TK, so a KS that does not divide it
    /// leaves the last splits empty: k 1152 at KS 32 and TK 16 is 24 chunks of 48 and 8 splits
    /// of zeros, which work-groups computed and the finish read back. The chunks stay the same
    /// with them dropped: ceil(k / KS') rounds up to the same multiple of TK for
    /// KS' = ceil(k / chunk).
    pub(crate) fn working_splits(mut self, k: usize) -> SconvSchedule {
        if self.ks > 1 && k > 0 {
            let tk = self.tile.tk.max(1) as usize;
            let chunk = k.div_ceil(self.ks as usize).div_ceil(tk) * tk;
            self.ks = k.div_ceil(chunk) as u32;
        }
        self
    }

    /// Whether this variant can run a reduction of `k` as one stage (`SC_ONE_STAGE`): sliced,
    /// unsplit, the whole reduction within TK, whole runs of 4 channels, and work-items that
    /// each keep one column (threads a multiple of TN).
    pub(crate) fn one_stage(&self, k: usize) -> bool {
        k <= self.tile.tk as usize && self.knobs().one_stage_capable()
    }

    /// The GEMM knobs of this variant, as profiles name them.
    pub(crate) fn knobs(&self) -> GemmKnobs {
        let t = self.tile;
        GemmKnobs { tm: t.tm, tn: t.tn, tk: t.tk, wm: t.wm, wn: t.wn, ks: self.ks, wk: self.wk, et: self.et }
    }

    pub(crate) fn from_knobs(k: GemmKnobs, gran: Option<Granularity>) -> SconvSchedule {
        SconvSchedule { tile: Tile { tm: k.tm, tn: k.tn, tk: k.tk, wm: k.wm, wn: k.wn }, ks: k.ks, gran, self_list: false, wk: k.wk.max(1), et: k.et }
    }

    /// This schedule listing its own columns where it can: a 1x1 GEMM member on a device
    /// whose kernels are OpenCL C (the WGSL twin has no SELF_LIST) with room for the scan
    /// (two ints per work-item) beside the tiles; else unchanged.
    pub(crate) fn with_self_list(mut self, kind: SconvKind, limits: &GpuLimits) -> SconvSchedule {
        let k = self.knobs();
        // The scan's two rows, the mask's total and its first bad value (sconv_self_list).
        let local = k.local_bytes(limits.wgsl) + 8 * k.threads() as u64 + 8;
        self.self_list = limits.self_list
            && !limits.wgsl
            && kind == SconvKind::Gemm
            && self.gran == Some(Granularity::new(1, 1))
            && (limits.local_mem_bytes == 0 || limits.fits_local(local, k.weights_stage_bytes()));
        self
    }

    fn gran_defines(gran: Option<Granularity>) -> [(&'static str, i64); 3] {
        let g = gran.map(Granularity::effective);
        [
            ("GH", g.map_or(1, |g| g.h as i64)),
            ("GW", g.map_or(1, |g| g.w as i64)),
            ("TILED", gran.is_some() as i64),
        ]
    }

    /// Whether this variant finishes its split reduction in the GEMM's last work-group per tile
    /// (FUSED_FINISH): where the executable fuses (`fused`), or for a self-listing member where
    /// the device fuses those (`self_list_fused`, which rules them alone); only with a split to
    /// finish, and not for tiles of more than `FUSED_FINISH_MAX_PARTIALS` partial sums (knobs.rs
    /// says why).
    pub(crate) fn fuses_finish(&self, fused: bool, self_list_fused: bool) -> bool {
        let asked = if self.self_list { self_list_fused } else { fused };
        asked && self.ks > 1 && self.tile.tm * self.tile.tn * self.ks <= super::knobs::FUSED_FINISH_MAX_PARTIALS
    }

    /// The GEMM's defines, fused where `fused` and the member can (`fuses_finish`, the caller
    /// having decided for self-listing members too); without a split there is nothing to finish
    /// and the kernel is the same.
    pub(crate) fn gemm_defines(&self, fused: bool) -> Vec<(&'static str, i64)> {
        let mut d = self.tile.defines().to_vec();
        d.extend(Self::gran_defines(self.gran));
        d.push(("KS", self.ks as i64));
        if self.wk > 1 {
            d.push(("WK", self.wk as i64));
        }
        if self.fuses_finish(fused, fused) {
            d.push(("FUSED_FINISH", 1));
        }
        if self.self_list {
            d.push(("SELF_LIST", 1));
        }
        d
    }

    /// The split finish's defines; `speculate`: its first column's loads issued beside the
    /// column count (`finish_speculates`).
    pub(crate) fn finish_defines(&self, speculate: bool) -> Vec<(&'static str, i64)> {
        let mut d = Self::gran_defines(self.gran).to_vec();
        d.push(("KS", self.ks as i64));
        if speculate {
            d.push(("SC_FIN_SPEC", 1));
        }
        d
    }

    /// sconv_finish_f32 as a pass of its own after a conv computed elsewhere (a vendor
    /// library's): one split over every position, adding bias and residual, activating, and
    /// storing only active positions when masked.
    pub(crate) fn epilogue_defines() -> Vec<(&'static str, i64)> {
        SconvSchedule { tile: GEMM_LARGE, ks: 1, gran: None, self_list: false, wk: 1, et: false }.finish_defines(false)
    }

    pub(crate) fn dw_defines(gran: Option<Granularity>) -> Vec<(&'static str, i64)> {
        Self::gran_defines(gran).to_vec()
    }
}

/// The kernel variant a PolyKernel member `s` (from a profile, the tuner or calibration) stands
/// for on a conv of `kind` with `cout` output channels and reduction `k`: its granularity, and
/// for the GEMM its knobs over the defaults (`dense` for the dense member, `for_op` for sparse
/// ones), checked against the device's `limits`. The error names the member and what is wrong.
pub(crate) fn member_schedule(kind: SconvKind, cout: usize, k: usize, dense: SconvSchedule, s: &Schedule, limits: &GpuLimits) -> Result<SconvSchedule, String> {
    let gran = s.granularity;
    if let Some(g) = gran {
        if g.h == 0 || g.w == 0 || g.h > 64 || g.w > 64 {
            return Err(format!("member '{}': granularity {g} is outside 1x1..64x64", s.name));
        }
    }
    if kind == SconvKind::Depthwise {
        check_depthwise(s)?;
        return Ok(SconvSchedule { gran, ..dense });
    }
    let base = if gran.is_none() { dense } else { SconvSchedule::for_op(cout, k, gran) };
    let knobs = GemmKnobs::from_map(&s.knobs, base.knobs()).map_err(|e| format!("member '{}': {e}", s.name))?;
    knobs.check(limits).map_err(|e| format!("member '{}': {e}", s.name))?;
    Ok(SconvSchedule::from_knobs(knobs, gran).with_self_list(kind, limits))
}

#[cfg(test)]
mod tests {
    use super::{columns_slowest, fused_finish, hoisted_gather, self_list_fused};
    use crate::gpu::device::DeviceInfo;

    #[test]
    fn working_splits_drop_only_the_splits_that_get_no_stage() {
        use super::{SconvSchedule, Tile};
        let with = |tk: u32, ks: u32| SconvSchedule { tile: Tile { tm: 128, tn: 64, tk, wm: 8, wn: 4 }, ks, gran: None, self_list: false, wk: 1, et: false };
        // (k, TK, KS asked, KS kept): chunks of roundup(ceil(k / KS), TK) each.
        for (k, tk, ks, kept) in [(1152, 16, 32, 24), (2304, 16, 32, 29), (2304, 16, 36, 36), (2304, 32, 72, 72), (256, 16, 32, 16), (16, 16, 2, 1), (1, 16, 8, 1)] {
            assert_eq!(with(tk, ks).working_splits(k).ks, kept, "k {k}, TK {tk}, KS {ks}");
        }
        // Every kept split has work and the chunks (hence the sums) are those asked for.
        for k in 1..3000usize {
            for ks in [2u32, 3, 5, 7, 16, 32, 36, 48, 72] {
                let chunk = |ks: u32| k.div_ceil(ks as usize).div_ceil(16) * 16;
                let kept = with(16, ks).working_splits(k).ks;
                assert!(kept <= ks && (kept as usize - 1) * chunk(kept) < k && chunk(kept) == chunk(ks), "k {k} KS {ks} -> {kept}");
            }
        }
        assert_eq!(with(16, 1).working_splits(2304).ks, 1);
    }

    #[test]
    fn only_unsplit_sliced_members_whose_stage_holds_the_reduction_run_one_stage() {
        use super::{SconvSchedule, Tile};
        let s = |tm, tn, tk, wm, wn, ks, wk| SconvSchedule { tile: Tile { tm, tn, tk, wm, wn }, ks, gran: None, self_list: false, wk, et: false };
        let m = s(32, 8, 256, 2, 4, 1, 8);
        assert!(m.one_stage(256) && m.one_stage(72) && !m.one_stage(257));
        // gpu_sliced's members on its ops (reductions of 72 and 108) run as one stage.
        assert!(s(16, 16, 256, 2, 4, 1, 8).one_stage(108) && s(32, 8, 128, 2, 4, 1, 8).one_stage(108));
        for (bad, why) in [
            (s(32, 8, 256, 2, 4, 1, 1), "unsliced"),
            (s(32, 8, 256, 2, 4, 2, 8), "split"),
            (s(8, 8, 256, 1, 1, 1, 1), "unsliced, small"),
            (s(6, 8, 256, 2, 4, 1, 8), "channels not in runs of 4"),
            // 2 x 2 work-items in 3 slices: 12 of them do not each keep one of 8 columns.
            (s(4, 8, 255, 2, 4, 1, 3), "threads not a multiple of TN"),
        ] {
            assert!(!bad.one_stage(64), "{why}");
        }
    }

    #[test]
    fn only_cuda_tiles_past_the_static_limit_take_their_weights_stage_from_the_launch() {
        use super::{launch_local_bytes, GpuLimits, SconvKind, SconvSchedule, Tile};
        use dynaspa_runtime::sparsity::Granularity;
        let one = Some(Granularity::new(1, 1));
        let s = |tm, tn, tk, wm, wn, wk| SconvSchedule { tile: Tile { tm, tn, tk, wm, wn }, ks: 1, gran: one, self_list: false, wk, et: false };
        // An H200 as CUDA reports it: 48 KiB static, 227 KiB with the launch's.
        let cuda = DeviceInfo { backend: "cuda".into(), local_mem_bytes: 48 * 1024, local_mem_launch_bytes: 232_448, ..Default::default() };
        let pocl = DeviceInfo { backend: "opencl".into(), local_mem_bytes: 48 * 1024, ..Default::default() };
        let big = s(64, 8, 256, 4, 4, 8);
        assert_eq!(launch_local_bytes(&big, true, &cuda), Some(65536));
        assert_eq!(launch_local_bytes(&big, true, &pocl), None);
        // 40 KiB of stages, the scan and the tap table: static, as before.
        assert_eq!(launch_local_bytes(&s(32, 8, 256, 2, 4, 8), true, &cuda), None);
        // The checks admit it where launches provide memory, and say so where they do not.
        let limits = GpuLimits::of(&cuda);
        assert_eq!(limits.launch_local_bytes, 232_448);
        assert!(big.knobs().check(&limits).is_ok());
        assert!(big.with_self_list(SconvKind::Gemm, &GpuLimits { self_list: true, ..limits.clone() }).self_list);
        let e = big.knobs().check(&GpuLimits::of(&pocl)).unwrap_err();
        assert!(e.contains("local memory"), "{e}");
        // The rest must still fit statically: 64 KiB of columns beside the weights do not.
        assert!(s(64, 64, 256, 8, 8, 4).knobs().check(&limits).is_err());
        assert!(!limits.fits_local(232_449, 200_000));
    }

    #[test]
    fn a_member_asks_for_the_early_trigger_and_cuda_alone_gives_it() {
        use super::{early_trigger, member_schedule, GpuLimits, SconvKind, SconvSchedule};
        use dynaspa_runtime::dispatch::Schedule;
        use dynaspa_runtime::sparsity::Granularity;
        let cuda = DeviceInfo { backend: "cuda".into(), local_mem_bytes: 48 * 1024, local_mem_launch_bytes: 232_448, ..Default::default() };
        let pocl = DeviceInfo { backend: "opencl".into(), local_mem_bytes: 48 * 1024, ..Default::default() };
        // DYNASPA_SC_EARLY_TRIGGER unset (CI): the member's knob decides, on CUDA only.
        if std::env::var_os("DYNASPA_SC_EARLY_TRIGGER").is_none() {
            assert!(early_trigger(&cuda, true) && !early_trigger(&cuda, false));
        }
        assert!(!early_trigger(&pocl, true));
        let g = Granularity::new(1, 1);
        let mut s = Schedule::sparse("m", g);
        for (k, v) in [("TM", 32), ("TN", 8), ("TK", 256), ("WM", 2), ("WN", 4), ("KS", 1), ("WK", 8), ("ET", 1)] {
            s.knobs.insert(k.into(), v);
        }
        let dense = SconvSchedule::for_op(256, 256, None);
        let m = member_schedule(SconvKind::Gemm, 256, 256, dense, &s, &GpuLimits::of(&cuda)).unwrap();
        assert!(m.et && m.knobs().et && m.one_stage(256));
        s.knobs.insert("WK".into(), 1);
        let e = member_schedule(SconvKind::Gemm, 256, 256, dense, &s, &GpuLimits::of(&cuda)).unwrap_err();
        assert!(e.contains("member 'm'") && e.contains("ET"), "{e}");
    }

    #[test]
    fn only_1x1_gemm_members_list_their_own_columns_and_only_where_the_scan_fits() {
        use super::{GpuLimits, SconvKind, SconvSchedule};
        use dynaspa_runtime::sparsity::Granularity;
        let on = GpuLimits { wgsl: false, max_group_threads: 1024, local_mem_bytes: 48 * 1024, launch_local_bytes: 0, registers_per_group: 65536, registers_per_thread: 255, self_list: true };
        let one = SconvSchedule::for_op(256, 2304, Some(Granularity::new(1, 1)));
        assert!(one.with_self_list(SconvKind::Gemm, &on).self_list);
        assert!(one.with_self_list(SconvKind::Gemm, &on).gemm_defines(false).contains(&("SELF_LIST", 1)));
        assert!(!one.gemm_defines(false).iter().any(|d| d.0 == "SELF_LIST"));
        for (s, kind, limits, why) in [
            (one, SconvKind::Depthwise, on.clone(), "depthwise"),
            (SconvSchedule::for_op(256, 2304, Some(Granularity::new(2, 8))), SconvKind::Gemm, on.clone(), "2x8 tiles"),
            (SconvSchedule::for_op(256, 2304, None), SconvKind::Gemm, on.clone(), "the dense member"),
            (one, SconvKind::Gemm, GpuLimits { self_list: false, ..on.clone() }, "turned off for the device"),
            (one, SconvKind::Gemm, GpuLimits { wgsl: true, ..on.clone() }, "WGSL"),
            // The tiles' own local memory fits, the scan's 8 bytes per work-item do not.
            (one, SconvKind::Gemm, GpuLimits { local_mem_bytes: one.knobs().local_bytes(false) + 4, ..on.clone() }, "no room for the scan"),
        ] {
            assert!(!s.with_self_list(kind, &limits).self_list, "{why}");
        }
    }

    #[test]
    fn mma_takes_tiles_of_whole_fragments_and_picks_the_squarest_warp_layout() {
        use super::{mma_defines, mma_on, GEMM_LARGE, GEMM_SMALL};
        use crate::gpu::kernels::Tile;
        // 128 x 64 over 8 warps: 4 along channels (32 x 32 each) loads 4*2 + 2*4 = 16 words a
        // step; 8 x 1 would load 4 + 16, 2 x 4 would load 16 + 4.
        let t = Tile { tm: 128, tn: 64, tk: 16, wm: 8, wn: 4 };
        assert_eq!(mma_defines(t, 48 * 1024), Some([("MMA", 1), ("MMA_WGM", 4)]));
        // The defaults: 64 x 32 over 8 warps (4 x 2), 32 x 32 over 8 warps (2 x 4).
        assert_eq!(mma_defines(GEMM_LARGE, 0), Some([("MMA", 1), ("MMA_WGM", 4)]));
        assert_eq!(mma_defines(GEMM_SMALL, 0), Some([("MMA", 1), ("MMA_WGM", 2)]));
        for (bad, why) in [
            (Tile { tk: 4, ..t }, "a stage shallower than k8"),
            (Tile { tm: 8, wm: 1, ..t }, "fewer channels than m16"),
            (Tile { tn: 4, wn: 1, ..t }, "fewer columns than n8"),
            (Tile { tm: 16, tn: 16, tk: 16, wm: 4, wn: 4 }, "16 work-items: half a warp"),
            (Tile { tm: 16, tn: 64, tk: 16, wm: 1, wn: 1 }, "32 warps cannot share one m16 x 8 n8 tile"),
        ] {
            assert_eq!(mma_defines(bad, 48 * 1024), None, "{why}");
        }
        // No room for the padded stages.
        let bytes = super::GemmKnobs { tm: 128, tn: 64, tk: 16, wm: 8, wn: 4, ks: 1, wk: 1, et: false }.local_bytes(false);
        assert_eq!(mma_defines(t, bytes), None);
        let dev = |backend: &str, arch: &str| DeviceInfo { backend: backend.into(), arch: arch.into(), ..Default::default() };
        match std::env::var("DYNASPA_MMA").as_deref() {
            Ok("1") => assert!(mma_on(&dev("cuda", "9.0")) && mma_on(&dev("cuda", "8.6"))),
            _ => assert!(!mma_on(&dev("cuda", "9.0")), "off unless asked for"),
        }
        assert!(!mma_on(&dev("cuda", "7.5")), "no TF32 mma before sm_80");
        assert!(!mma_on(&dev("opencl", "9.0")) && !mma_on(&dev("wgpu", "9.0")));
    }

    fn device(backend: &str, vendor: &str, driver: &str) -> DeviceInfo {
        DeviceInfo { backend: backend.into(), vendor: vendor.into(), driver: driver.into(), ..Default::default() }
    }

    #[test]
    fn the_hoisted_gather_is_off_on_nvidia_opencl_only() {
        if std::env::var_os("DYNASPA_SC_HOIST").is_some() {
            return;
        }
        assert!(hoisted_gather(&device("cuda", "NVIDIA Corporation", "580")));
        assert!(!hoisted_gather(&device("opencl", "NVIDIA Corporation", "580")));
        assert!(hoisted_gather(&device("opencl", "The pocl project", "6.0")));
    }

    #[test]
    fn self_listing_groups_leave_before_the_scan_on_cuda_alone_and_ci_compiles_them() {
        assert!(!super::self_list_early(&device("opencl", "The pocl project", "3.1")));
        assert!(!super::self_list_early(&device("opencl", "NVIDIA Corporation", "580")));
        if std::env::var_os("DYNASPA_SL_EARLY").is_none() {
            assert!(super::self_list_early(&device("cuda", "NVIDIA", "13.0")));
        }
        let all = super::super::ci_schedules::all("sconv_gemm_f32");
        let early = |d: &Vec<(&str, i64)>| d.contains(&("SL_EARLY", 1));
        assert!(all.iter().any(|d| early(d) && d.contains(&("SELF_COUNT", 1))) && all.iter().any(|d| early(d) && !d.contains(&("SELF_COUNT", 1))));
        assert!(all.iter().filter(|d| early(d)).all(|d| d.contains(&("SELF_LIST", 1))), "only self-listing members scan");
    }

    #[test]
    fn column_tiles_run_slowest_on_cuda_and_opencl_never_on_wgpu() {
        // The WGSL twin indexes its grid with column tiles fastest, whatever is asked.
        assert!(!columns_slowest(&device("wgpu", "NVIDIA", "Vulkan")));
        if std::env::var_os("DYNASPA_SC_CSLOW").is_some() {
            return;
        }
        assert!(columns_slowest(&device("cuda", "NVIDIA", "13.0")));
        assert!(columns_slowest(&device("opencl", "NVIDIA Corporation", "580")));
        assert!(columns_slowest(&device("opencl", "The pocl project", "6.0")));
    }

    #[test]
    fn the_fused_finish_is_on_where_measured_never_on_wgpu_and_the_options_override_it() {
        let cuda = device("cuda", "NVIDIA", "13.0");
        let nv_cl = device("opencl", "NVIDIA Corporation", "580.95 (OpenCL 3.0 CUDA 13.0.97)");
        let pocl = device("opencl", "GenuineIntel", "6.0+debian (OpenCL 3.0 PoCL 6.0+debian  Linux, None+Asserts, RELOC, SPIR-V, LLVM 18.1.8, SLEEF, DISTRO, POCL_DEBUG)");
        let amd_cl = device("opencl", "Advanced Micro Devices, Inc.", "3625.0 (HSA1.1,LC)");
        let wgpu = device("wgpu", "NVIDIA", "Vulkan");
        assert!(!fused_finish(&cuda, None) && fused_finish(&nv_cl, None));
        assert_eq!(fused_finish(&pocl, None), super::POCL_FUSED_FINISH);
        assert!(!fused_finish(&amd_cl, None), "unmeasured OpenCL devices keep two launches");
        assert!(fused_finish(&amd_cl, Some(true)) && !fused_finish(&cuda, Some(false)) && !fused_finish(&nv_cl, Some(false)));
        // The WGSL kernel has no fused variant: asking cannot turn it on.
        assert!(!fused_finish(&wgpu, None) && !fused_finish(&wgpu, Some(true)));
        // Self-listing members: fused only on CUDA, and there only where asked.
        assert!(!self_list_fused(&nv_cl) && !self_list_fused(&pocl) && !self_list_fused(&amd_cl) && !self_list_fused(&wgpu));
        if std::env::var_os("DYNASPA_SL_FUSED").is_none() {
            assert!(!self_list_fused(&cuda));
        }
    }

    #[test]
    fn only_splits_of_tiles_with_few_partial_sums_fuse_their_finish() {
        use super::{SconvSchedule, Tile};
        let s = |tm, tn, ks, self_list| SconvSchedule { tile: Tile { tm, tn, tk: 16, wm: 4, wn: 2 }, ks, gran: None, self_list, wk: 1, et: false };
        let max = super::super::knobs::FUSED_FINISH_MAX_PARTIALS;
        assert_eq!(max, 128 * 64 * 4, "the cases below straddle the limit as written");
        assert!(s(128, 64, 4, false).fuses_finish(true, false) && s(64, 32, 16, false).fuses_finish(true, false));
        assert!(!s(128, 64, 8, false).fuses_finish(true, true) && !s(128, 128, 4, false).fuses_finish(true, true));
        assert!(!s(64, 32, 4, false).fuses_finish(false, true), "the executable's choice rules the others");
        assert!(!s(32, 32, 1, false).fuses_finish(true, true), "nothing to finish without a split");
        assert!(!s(32, 32, 4, true).fuses_finish(true, false), "self-listing members fuse only where the device does");
        assert!(s(32, 32, 4, true).fuses_finish(false, true), "whatever the executable does for the others");
        assert!(!s(128, 128, 4, true).fuses_finish(true, true), "nor past the partial sums' limit");
        assert!(s(64, 32, 16, false).gemm_defines(true).contains(&("FUSED_FINISH", 1)));
        assert!(!s(64, 64, 16, false).gemm_defines(true).contains(&("FUSED_FINISH", 1)));
    }
}
