//! Schedules of sparse_conv_gemm.cl: the GEMM tile (output channels x columns per work-group, depth
//! of one local-memory stage, outputs per work-item), the split of the reduction, and the
//! granularity of the columns. Which of them CI compiles is `ci_schedules`.

use super::knobs::{check_depthwise, GemmKnobs, GpuLimits};
use super::select::SparseConvKind;
use crate::gpu::device::DeviceInfo;
use crate::gpu::kernels::Tile;
use dynaspa_runtime::dispatch::Schedule;
use dynaspa_runtime::sparsity::Granularity;

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

/// Least reduction (input channels x taps) each split keeps. On an H100 a sparse frame's
/// work-groups are latency-bound chains of K stages, so short chains (32 per split) beat the
/// extra partial-sum traffic (see `SparseConvSchedule::for_op`).
const SPLIT_MIN_K: usize = 32;

/// Work-groups per compute unit a dense split may reach. On an H100, batch 1: conv3x3 256->256
/// dense 197.6 -> 148.4 µs (8) or 137.3 µs (16); 16 made conv1x1 256->256 at batch 4 slower
/// (68 -> 80 µs), 8 slowed nothing measured.
const DENSE_GROUPS_PER_CU: usize = 8;

/// Work-groups of `threads` work-items one SM should hold at once, for CUDA's register bound
/// (`LAUNCH_BOUNDS(NT, SPARSE_CONV_MIN_BLOCKS)` in sparse_conv_gemm.cl, where `SparseConvFeatures::
/// register_bound` says): two of 256 (one of 512), whose 8 x 4 float4 variant wanted 129
/// registers where 128 keep two groups resident; `None` for other sizes.
pub(crate) fn register_bound(threads: u32) -> Option<u32> {
    (256..=512).contains(&threads).then(|| 512 / threads)
}

/// Local memory sparse_conv_gemm.cl's GEMM holds beside what `GemmKnobs::local_bytes` and a
/// self-listing member's scan count: the tap table (3 ints for each of SPARSE_CONV_TAPS = 64 taps) and a
/// few ints (the mask's total and first bad value, the fused finish's flag).
const GEMM_FIXED_LOCAL_BYTES: u64 = 3 * 4 * 64 + 16;

/// Bytes of the weights' stage a GEMM member's launches provide on `info` (sparse_conv_gemm.cl,
/// `DSP_DYN_SMEM`), where its local memory would pass the device's static limit and launches
/// may provide more (CUDA; `GpuLimits::fits_local` admitted it); `None` where it fits
/// statically.
pub(crate) fn launch_local_bytes(s: &SparseConvSchedule, self_list: bool, info: &DeviceInfo) -> Option<u64> {
    let k = s.knobs();
    let scan = if self_list { 8 * k.threads() as u64 + 8 } else { 0 };
    let need = k.local_bytes(false) + scan + GEMM_FIXED_LOCAL_BYTES;
    (info.local_mem_launch_bytes > 0 && need > info.local_mem_bytes).then(|| k.weights_stage_bytes())
}

/// One variant of the sparse conv GEMM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SparseConvSchedule {
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

impl SparseConvSchedule {
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
    pub(crate) fn for_op(cout: usize, k: usize, gran: Option<Granularity>) -> SparseConvSchedule {
        let tile = if cout >= 64 { GEMM_LARGE } else { GEMM_SMALL };
        let ks = if gran.is_none() { 1 } else { SPLITS.iter().copied().filter(|&s| k >= SPLIT_MIN_K * s as usize).max().unwrap_or(1) };
        SparseConvSchedule { tile, ks, gran, self_list: false, wk: 1, et: false }
    }

    /// The dense member (and dense convs) split the reduction too when their grid is small for
    /// the device: `base_groups` work-groups (columns x output-channel tiles x images) grow by
    /// the split while they stay within `DENSE_GROUPS_PER_CU` per compute unit. A latency-bound
    /// chain of K stages per work-group was the dense member's cost as much as the sparse ones'.
    /// `compute_units` 0 (unknown, e.g. WebGPU) keeps one split.
    pub(crate) fn with_dense_split(mut self, k: usize, base_groups: usize, compute_units: u32) -> SparseConvSchedule {
        if self.gran.is_none() {
            let limit = DENSE_GROUPS_PER_CU * compute_units as usize;
            self.ks = SPLITS
                .iter()
                .copied()
                .filter(|&s| k >= SPLIT_MIN_K * s as usize && base_groups.saturating_mul(s as usize) <= limit)
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
    pub(crate) fn working_splits(mut self, k: usize) -> SparseConvSchedule {
        if self.ks > 1 && k > 0 {
            let tk = self.tile.tk.max(1) as usize;
            let chunk = k.div_ceil(self.ks as usize).div_ceil(tk) * tk;
            self.ks = k.div_ceil(chunk) as u32;
        }
        self
    }

    /// Whether this variant can run a reduction of `k` as one stage (`SPARSE_CONV_ONE_STAGE`): sliced,
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

    pub(crate) fn from_knobs(k: GemmKnobs, gran: Option<Granularity>) -> SparseConvSchedule {
        SparseConvSchedule {
            tile: Tile { tm: k.tm, tn: k.tn, tk: k.tk, wm: k.wm, wn: k.wn },
            ks: k.ks,
            gran,
            self_list: false,
            wk: k.wk.max(1),
            et: k.et,
        }
    }

    /// This schedule listing its own columns where it can: a 1x1 GEMM member on a device
    /// whose kernels are OpenCL C (the WGSL twin has no SELF_LIST) with room for the scan
    /// (two ints per work-item) beside the tiles; else unchanged.
    pub(crate) fn with_self_list(mut self, kind: SparseConvKind, limits: &GpuLimits) -> SparseConvSchedule {
        let k = self.knobs();
        // The scan's two rows, the mask's total and its first bad value (sparse_conv_self_list).
        let local = k.local_bytes(limits.wgsl) + 8 * k.threads() as u64 + 8;
        self.self_list = limits.self_list
            && !limits.wgsl
            && kind == SparseConvKind::Gemm
            && self.gran == Some(Granularity::new(1, 1))
            && (limits.local_mem_bytes == 0 || limits.fits_local(local, k.weights_stage_bytes()));
        self
    }

    fn gran_defines(gran: Option<Granularity>) -> [(&'static str, i64); 3] {
        let g = gran.map(Granularity::effective);
        [("GH", g.map_or(1, |g| g.h as i64)), ("GW", g.map_or(1, |g| g.w as i64)), ("TILED", gran.is_some() as i64)]
    }

    /// Whether this variant finishes its split reduction in the GEMM's last work-group per tile
    /// (FUSED_FINISH): where the executable fuses (`fused`), only with a split to finish, never
    /// for a self-listing member (sparse_conv_knobs.h says why), and not for tiles of more than
    /// `FUSED_FINISH_MAX_PARTIALS` partial sums (knobs.rs says why).
    pub(crate) fn fuses_finish(&self, fused: bool) -> bool {
        fused && !self.self_list && self.ks > 1 && self.tile.tm * self.tile.tn * self.ks <= super::knobs::FUSED_FINISH_MAX_PARTIALS
    }

    /// The GEMM's defines, fused where `fused` and the member can (`fuses_finish`); without a split there is nothing to finish
    /// and the kernel is the same.
    pub(crate) fn gemm_defines(&self, fused: bool) -> Vec<(&'static str, i64)> {
        let mut d = self.tile.defines().to_vec();
        d.extend(Self::gran_defines(self.gran));
        d.push(("KS", self.ks as i64));
        if self.wk > 1 {
            d.push(("WK", self.wk as i64));
        }
        if self.fuses_finish(fused) {
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
            d.push(("SPARSE_CONV_FIN_SPEC", 1));
        }
        d
    }

    /// sparse_conv_finish_f32 as a pass of its own after a conv computed elsewhere (a vendor
    /// library's): one split over every position, adding bias and residual, activating, and
    /// storing only active positions when masked.
    pub(crate) fn epilogue_defines() -> Vec<(&'static str, i64)> {
        let mut d = SparseConvSchedule { tile: GEMM_LARGE, ks: 1, gran: None, self_list: false, wk: 1, et: false }.finish_defines(false);
        d.push(("VENDOR_RAW", 1));
        d
    }

    pub(crate) fn dw_defines(gran: Option<Granularity>) -> Vec<(&'static str, i64)> {
        Self::gran_defines(gran).to_vec()
    }
}

/// The knobs the executor uses when a profile names none: calibration's members for a sparse
/// schedule (`dense` false), the dense member otherwise, whose reduction is split while its grid
/// of `positions` x `images` columns stays small for a device of `compute_units` (0: unknown).
pub fn default_gemm(cout: usize, k: usize, dense: bool, positions: usize, images: usize, compute_units: u32) -> GemmKnobs {
    let gran = (!dense).then_some(Granularity::new(1, 1));
    let s = SparseConvSchedule::for_op(cout, k, gran);
    let t = s.tile;
    let base = positions.div_ceil(t.tn as usize) * cout.div_ceil(t.tm as usize) * images;
    s.with_dense_split(k, base, compute_units).knobs()
}

/// The kernel variant a PolyKernel member `s` (from a profile, the tuner or calibration) stands
/// for on a conv of `kind` with `cout` output channels and reduction `k`: its granularity, and
/// for the GEMM its knobs over the defaults (`dense` for the dense member, `for_op` for sparse
/// ones), checked against the device's `limits`. The error names the member and what is wrong.
pub(crate) fn member_schedule(
    kind: SparseConvKind,
    cout: usize,
    k: usize,
    dense: SparseConvSchedule,
    s: &Schedule,
    limits: &GpuLimits,
) -> Result<SparseConvSchedule, String> {
    let gran = s.granularity;
    if let Some(g) = gran {
        if g.h == 0 || g.w == 0 || g.h > 64 || g.w > 64 {
            return Err(format!("member '{}': granularity {g} is outside 1x1..64x64", s.name));
        }
    }
    if kind == SparseConvKind::Depthwise {
        check_depthwise(s)?;
        return Ok(SparseConvSchedule { gran, ..dense });
    }
    let base = if gran.is_none() { dense } else { SparseConvSchedule::for_op(cout, k, gran) };
    let knobs = GemmKnobs::from_map(&s.knobs, base.knobs()).map_err(|e| format!("member '{}': {e}", s.name))?;
    knobs.check(limits).map_err(|e| format!("member '{}': {e}", s.name))?;
    Ok(SparseConvSchedule::from_knobs(knobs, gran).with_self_list(kind, limits))
}

#[cfg(test)]
mod tests {
    use crate::gpu::device::DeviceInfo;
    use crate::gpu::sparse_conv::features::SparseConvFeatures;

    #[test]
    fn working_splits_drop_only_the_splits_that_get_no_stage() {
        use super::{SparseConvSchedule, Tile};
        let with = |tk: u32, ks: u32| SparseConvSchedule {
            tile: Tile { tm: 128, tn: 64, tk, wm: 8, wn: 4 },
            ks,
            gran: None,
            self_list: false,
            wk: 1,
            et: false,
        };
        // (k, TK, KS asked, KS kept): chunks of roundup(ceil(k / KS), TK) each.
        for (k, tk, ks, kept) in [
            (1152, 16, 32, 24),
            (2304, 16, 32, 29),
            (2304, 16, 36, 36),
            (2304, 32, 72, 72),
            (256, 16, 32, 16),
            (16, 16, 2, 1),
            (1, 16, 8, 1),
        ] {
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
        use super::{SparseConvSchedule, Tile};
        let s = |tm, tn, tk, wm, wn, ks, wk| SparseConvSchedule {
            tile: Tile { tm, tn, tk, wm, wn },
            ks,
            gran: None,
            self_list: false,
            wk,
            et: false,
        };
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
        use super::{launch_local_bytes, GpuLimits, SparseConvKind, SparseConvSchedule, Tile};
        use dynaspa_runtime::sparsity::Granularity;
        let one = Some(Granularity::new(1, 1));
        let s = |tm, tn, tk, wm, wn, wk| SparseConvSchedule {
            tile: Tile { tm, tn, tk, wm, wn },
            ks: 1,
            gran: one,
            self_list: false,
            wk,
            et: false,
        };
        // An H200 as CUDA reports it: 48 KiB static, 227 KiB with the launch's.
        let cuda = DeviceInfo { backend: "cuda".into(), local_mem_bytes: 48 * 1024, local_mem_launch_bytes: 232_448, ..Default::default() };
        let pocl = DeviceInfo { backend: "opencl".into(), local_mem_bytes: 48 * 1024, ..Default::default() };
        let big = s(64, 8, 256, 4, 4, 8);
        assert_eq!(launch_local_bytes(&big, true, &cuda), Some(65536));
        assert_eq!(launch_local_bytes(&big, true, &pocl), None);
        // 40 KiB of stages, the scan and the tap table: static.
        assert_eq!(launch_local_bytes(&s(32, 8, 256, 2, 4, 8), true, &cuda), None);
        // The checks admit it where launches provide memory, and say so where they do not.
        let limits = GpuLimits::of(&cuda);
        assert_eq!(limits.launch_local_bytes, 232_448);
        assert!(big.knobs().check(&limits).is_ok());
        assert!(big.with_self_list(SparseConvKind::Gemm, &GpuLimits { self_list: true, ..limits.clone() }).self_list);
        let e = big.knobs().check(&GpuLimits::of(&pocl)).unwrap_err();
        assert!(e.contains("local memory"), "{e}");
        // The rest must still fit statically: 64 KiB of columns beside the weights do not.
        assert!(s(64, 64, 256, 8, 8, 4).knobs().check(&limits).is_err());
        assert!(!limits.fits_local(232_449, 200_000));
    }

    #[test]
    fn a_member_asks_for_the_early_trigger_and_cuda_alone_gives_it() {
        use super::{member_schedule, GpuLimits, SparseConvKind, SparseConvSchedule};
        use dynaspa_runtime::dispatch::Schedule;
        use dynaspa_runtime::sparsity::Granularity;
        let cuda = DeviceInfo { backend: "cuda".into(), local_mem_bytes: 48 * 1024, local_mem_launch_bytes: 232_448, ..Default::default() };
        let pocl = DeviceInfo { backend: "opencl".into(), local_mem_bytes: 48 * 1024, ..Default::default() };
        // The member's knob asks; only where launches overlap (CUDA) does it change anything.
        assert!(SparseConvFeatures::defaults(&cuda).overlaps_launches() && !SparseConvFeatures::defaults(&pocl).overlaps_launches());
        let g = Granularity::new(1, 1);
        let mut s = Schedule::sparse("m", g);
        for (k, v) in [("TM", 32), ("TN", 8), ("TK", 256), ("WM", 2), ("WN", 4), ("KS", 1), ("WK", 8), ("ET", 1)] {
            s.knobs.insert(k.into(), v);
        }
        let dense = SparseConvSchedule::for_op(256, 256, None);
        let m = member_schedule(SparseConvKind::Gemm, 256, 256, dense, &s, &GpuLimits::of(&cuda)).unwrap();
        assert!(m.et && m.knobs().et && m.one_stage(256));
        s.knobs.insert("WK".into(), 1);
        let e = member_schedule(SparseConvKind::Gemm, 256, 256, dense, &s, &GpuLimits::of(&cuda)).unwrap_err();
        assert!(e.contains("member 'm'") && e.contains("ET"), "{e}");
    }

    #[test]
    fn only_1x1_gemm_members_list_their_own_columns_and_only_where_the_scan_fits() {
        use super::{GpuLimits, SparseConvKind, SparseConvSchedule};
        use dynaspa_runtime::sparsity::Granularity;
        let on = GpuLimits {
            wgsl: false,
            max_group_threads: 1024,
            local_mem_bytes: 48 * 1024,
            launch_local_bytes: 0,
            registers_per_group: 65536,
            registers_per_thread: 255,
            self_list: true,
        };
        let one = SparseConvSchedule::for_op(256, 2304, Some(Granularity::new(1, 1)));
        assert!(one.with_self_list(SparseConvKind::Gemm, &on).self_list);
        assert!(one.with_self_list(SparseConvKind::Gemm, &on).gemm_defines(false).contains(&("SELF_LIST", 1)));
        assert!(!one.gemm_defines(false).iter().any(|d| d.0 == "SELF_LIST"));
        for (s, kind, limits, why) in [
            (one, SparseConvKind::Depthwise, on.clone(), "depthwise"),
            (SparseConvSchedule::for_op(256, 2304, Some(Granularity::new(2, 8))), SparseConvKind::Gemm, on.clone(), "2x8 tiles"),
            (SparseConvSchedule::for_op(256, 2304, None), SparseConvKind::Gemm, on.clone(), "the dense member"),
            (one, SparseConvKind::Gemm, GpuLimits { self_list: false, ..on.clone() }, "turned off for the device"),
            (one, SparseConvKind::Gemm, GpuLimits { wgsl: true, ..on.clone() }, "WGSL"),
            // The tiles' own local memory fits, the scan's 8 bytes per work-item do not.
            (
                one,
                SparseConvKind::Gemm,
                GpuLimits { local_mem_bytes: one.knobs().local_bytes(false) + 4, ..on.clone() },
                "no room for the scan",
            ),
        ] {
            assert!(!s.with_self_list(kind, &limits).self_list, "{why}");
        }
    }

    fn device(backend: &str, vendor: &str, driver: &str) -> DeviceInfo {
        DeviceInfo { backend: backend.into(), vendor: vendor.into(), driver: driver.into(), ..Default::default() }
    }

    #[test]
    fn self_listing_groups_leave_before_the_scan_on_cuda_alone_and_ci_compiles_them() {
        let early = |d: DeviceInfo| SparseConvFeatures::defaults(&d).self_list_early();
        assert!(!early(device("opencl", "The pocl project", "3.1")) && !early(device("opencl", "NVIDIA Corporation", "580")));
        assert!(early(device("cuda", "NVIDIA", "13.0")));
        let all = super::super::ci_schedules::all("sparse_conv_gemm_f32");
        let early = |d: &Vec<(&str, i64)>| d.contains(&("SL_EARLY", 1));
        assert!(
            all.iter().any(|d| early(d) && d.contains(&("SELF_COUNT", 1)))
                && all.iter().any(|d| early(d) && !d.contains(&("SELF_COUNT", 1)))
        );
        assert!(all.iter().filter(|d| early(d)).all(|d| d.contains(&("SELF_LIST", 1))), "only self-listing members scan");
    }

    #[test]
    fn only_splits_of_tiles_with_few_partial_sums_fuse_their_finish() {
        use super::{SparseConvSchedule, Tile};
        let s = |tm, tn, ks, self_list| SparseConvSchedule {
            tile: Tile { tm, tn, tk: 16, wm: 4, wn: 2 },
            ks,
            gran: None,
            self_list,
            wk: 1,
            et: false,
        };
        let max = super::super::knobs::FUSED_FINISH_MAX_PARTIALS;
        assert_eq!(max, 128 * 64 * 4, "the cases below straddle the limit as written");
        assert!(s(128, 64, 4, false).fuses_finish(true) && s(64, 32, 16, false).fuses_finish(true));
        assert!(!s(128, 64, 8, false).fuses_finish(true) && !s(128, 128, 4, false).fuses_finish(true), "past the partial sums' limit");
        assert!(!s(64, 32, 4, false).fuses_finish(false), "the executable's choice rules");
        assert!(!s(32, 32, 1, false).fuses_finish(true), "nothing to finish without a split");
        assert!(!s(32, 32, 4, true).fuses_finish(true), "self-listing members never fuse");
        assert!(s(64, 32, 16, false).gemm_defines(true).contains(&("FUSED_FINISH", 1)));
        assert!(!s(64, 64, 16, false).gemm_defines(true).contains(&("FUSED_FINISH", 1)));
    }
}
