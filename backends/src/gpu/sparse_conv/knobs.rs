//! The schedule knobs of the GPU sparse conv kernels (sparse_conv_gemm.cl and its WGSL twin) as
//! profiles name them, the values the tuner explores, and which combinations a device runs.
//! One definition for the three places that need it: the tuner's space (dynaspa-scheduler), the
//! executor taking members from a profile, and the timer measuring a schedule; so whatever the
//! tuner writes is something the kernels run, and a profile edited by hand is checked the same.
//!
//! Knobs of `sparse_conv_gemm_f32` are its defines: `TM` x `TN` outputs (channels x columns) per
//! work-group, `TK` reduction indices per local-memory stage, `WM` x `WN` outputs per work-item,
//! `KS` work-groups splitting the reduction, `WK` slices of a work-group splitting each stage's
//! reduction (profiles and the bench name it; the tuner's space does not explore it: the members
//! that win, on an H200 conv1x1 at density 0.1 and batches 1 and 2, run their whole reduction as
//! one stage of TK 256 (SPARSE_CONV_ONE_STAGE, RESULTS.md "one stage wins at batches 1 and 2"), past the
//! space's TK, and the
//! roofline does not model that path), and `ET`, the early trigger of one-stage members (see
//! `GemmKnobs::et`), which neither does.
//! The granularity is the schedule's own field (the
//! kernel's `GH`, `GW`, `TILED`). `sparse_conv_dw_f32` (depthwise) has no knob but the granularity.

use crate::gpu::device::{DeviceInfo, KernelDialect};
use dynaspa_runtime::dispatch::Schedule;
use dynaspa_runtime::sparsity::Granularity;
use std::collections::BTreeMap;

/// Knob names and the values the tuner explores, in the order the annealer steps through them.
pub const GEMM_DOMAINS: [(&str, &[i64]); 6] = [
    ("TM", &[16, 32, 64, 128]),
    ("TN", &[16, 32, 64, 128]),
    ("TK", &[4, 8, 16, 32]),
    ("WM", &[1, 2, 4, 8]),
    ("WN", &[1, 2, 4, 8]),
    // Not only powers of two: on an H200 the fastest 1x1 members at density 0.1 split 6 and 12
    // ways, the 3x3 convs 24 (benches/RESULTS.md, "which tiles fill 132 SMs"): what fills the SMs with whole
    // waves of resident groups.
    ("KS", &[1, 2, 3, 4, 6, 8, 12, 16, 24, 32]),
];

/// Partial sums per output tile (`TM` x `TN` x `KS`) up to which a split GEMM finishes in its
/// last work-group where the executable fuses the finish; bigger tiles finish in a second
/// launch whatever it asks. The last work-group reads all of its tile's partial sums alone, where
/// the second launch spreads them over the GPU but costs a launch (9-15 µs on NVIDIA's OpenCL,
/// depending on the host). On an H200 (benches/RESULTS.md, "the fused finish, not the compiler")
/// fused against split of
/// the same member was 0.84-1.05 up to 8,192 partial sums, 1.03-1.22 at 16,384-32,768 where
/// the launch was cheap, and 1.26-2.3 past 65,536; where the launch was dear, the calibrated 64 x
/// 32 members of 16,384 and 32,768 lost 8-13 µs split. Hence the limit between the two.
pub const FUSED_FINISH_MAX_PARTIALS: u32 = 32768;
/// Largest split of the reduction a schedule may ask for (each split is a work-group chain and
/// `KS` x outputs of partial sums). Splits past 32 (36, 48, 72: 3x3 convs of 256 channels in 4,
/// 3 and 2 stages of 16) never won at batch 1 on an H200 (RESULTS.md, "splits past 32"): each split's
/// partial sums are written and read back.
pub const MAX_KS: u32 = 32;
/// Prefetch registers per work-item (a stage of A and B, `ceil(TM*TK/threads) +
/// ceil(TN*TK/threads)`) beyond which the kernel's private arrays spill: refused.
pub const MAX_PREFETCH: u32 = 64;
/// WebGPU's default limits, which the wgpu device requests: invocations per work-group (and
/// per dimension) and bytes of workgroup storage; the WGSL kernel keeps 16 accumulators.
pub const WGSL_MAX_THREADS: u32 = 256;
pub const WGSL_MAX_STORAGE: u64 = 16384;
pub const WGSL_MAX_OUTPUTS: u32 = 16;

/// The knobs of one `sparse_conv_gemm_f32` variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmKnobs {
    pub tm: u32,
    pub tn: u32,
    pub tk: u32,
    pub wm: u32,
    pub wn: u32,
    pub ks: u32,
    /// Slices of `TM/WM` x `TN/WN` work-items per work-group, each taking `TK / WK` of every
    /// stage (sparse_conv_gemm.cl's `WK`): 1 is the plain GEMM.
    pub wk: u32,
    /// The next grid may launch at this one's entry instead of before its stores (knob `ET`,
    /// sparse_conv_gemm.cl's `SPARSE_CONV_EARLY_TRIGGER`): members that run their reduction as one stage, on
    /// CUDA; elsewhere nothing launches early and it changes nothing. A member of its own, not
    /// a default, because it helps some shapes and hurts others: on an H200 conv1x1 at density
    /// 0.1 ran 0.5-0.6 µs faster with it at batches 1 and 2 and up to 0.7 slower at batch 4,
    /// whose tiles hold the SMs longer while the next grid's early groups load beside them
    /// (RESULTS.md, "The early trigger").
    pub et: bool,
}

/// Most slices a work-group may split its stages into (`WK`).
pub const MAX_WK: u32 = 16;

/// What bounds a schedule on one device.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuLimits {
    /// The WGSL kernels (wgpu): WebGPU's limits and the 16-accumulator array apply.
    pub wgsl: bool,
    pub max_group_threads: u32,
    /// Bytes of local memory one work-group may use.
    pub local_mem_bytes: u64,
    /// Bytes one may use where the launch provides a GEMM's weights' stage (CUDA's dynamic
    /// shared memory; 0: none, `local_mem_bytes` bounds it all). See `fits_local`.
    pub launch_local_bytes: u64,
    /// 32-bit registers one work-group may hold in all (0: not known, not checked).
    pub registers_per_group: u32,
    /// Registers one work-item may hold (0: not known, not checked).
    pub registers_per_thread: u32,
    /// 1x1 GEMM members list their own columns (`SparseConvSchedule::with_self_list`; `of` gives the
    /// device's default, `SparseConvFeatures::self_list`).
    pub self_list: bool,
}

impl GpuLimits {
    /// Limits of a device as its backend reports it. Register files are not in `DeviceInfo`:
    /// NVIDIA's (CUDA and NVIDIA's OpenCL) are 64K registers per block and 255 per thread for
    /// every compute capability since 5.0 (CUDA C++ Programming Guide, technical specifications);
    /// others are not checked (a launch that fails is a failed measurement, not a crash).
    pub fn of(info: &DeviceInfo) -> GpuLimits {
        let wgsl = info.dialect() == KernelDialect::Wgsl;
        let nvidia = info.dialect() == KernelDialect::Cuda || info.vendor.to_ascii_lowercase().contains("nvidia");
        let mut max = if info.max_work_group_size > 0 { info.max_work_group_size } else { 1024 };
        let mut local = if info.local_mem_bytes > 0 { info.local_mem_bytes } else { 16384 };
        if wgsl {
            max = max.min(WGSL_MAX_THREADS);
            local = local.min(WGSL_MAX_STORAGE);
        }
        GpuLimits {
            wgsl,
            max_group_threads: max,
            local_mem_bytes: local,
            launch_local_bytes: if wgsl { 0 } else { info.local_mem_launch_bytes },
            registers_per_group: if nvidia { 65536 } else { 0 },
            registers_per_thread: if nvidia { 255 } else { 0 },
            self_list: super::features::SparseConvFeatures::defaults(info).self_list,
        }
    }
}

impl GpuLimits {
    /// Whether a work-group of `total` bytes of local memory fits, `movable` of them the
    /// weights' stage a launch may provide (sparse_conv_gemm.cl, `DSP_DYN_SMEM`): all of it within
    /// `local_mem_bytes`, or the rest within it and the whole within `launch_local_bytes`.
    pub fn fits_local(&self, total: u64, movable: u64) -> bool {
        total <= self.local_mem_bytes
            || (total <= self.launch_local_bytes && total.saturating_sub(movable.min(total)) <= self.local_mem_bytes)
    }
}

impl GemmKnobs {
    /// Work-items of one work-group: `TN/WN` x `TM/WM` per slice, `WK` slices.
    pub fn threads(&self) -> u32 {
        (self.tn / self.wn.max(1)) * (self.tm / self.wm.max(1)) * self.wk.max(1)
    }

    /// Bytes of local memory one work-group uses: the two operand stages, three ints per
    /// column (its position and input origin) and, with slices, each slice's tile of sums
    /// where they do not fit in the weights' stage (the kernel puts them there after the last
    /// stage); WGSL adds the column count.
    pub fn local_bytes(&self, wgsl: bool) -> u64 {
        let (tm, tn, tk, wk) = (self.tm as u64, self.tn as u64, self.tk as u64, self.wk as u64);
        let slices = if wk > 1 && wk * tm * tn > tk * tm { wk * tm * tn } else { 0 };
        4 * (tk * (tm + tn) + 3 * tn + slices) + if wgsl { 4 } else { 0 }
    }

    /// Whether these knobs run a reduction that fits in TK as one stage (sparse_conv_gemm.cl,
    /// `SPARSE_CONV_ONE_STAGE`; `SparseConvSchedule::one_stage`): sliced, unsplit, whole runs of 4 channels,
    /// and work-items that each keep one column (threads a multiple of TN).
    pub fn one_stage_capable(&self) -> bool {
        self.wk > 1 && self.ks == 1 && self.tm % 4 == 0 && self.threads() % self.tn.max(1) == 0
    }

    /// Bytes of the weights' stage (the kernel's As), the part a launch may provide.
    pub fn weights_stage_bytes(&self) -> u64 {
        4 * self.tk as u64 * self.tm as u64
    }

    /// Registers of one stage's prefetch per work-item (the kernel's `SPARSE_CONV_AL + SPARSE_CONV_BL`).
    pub fn prefetch(&self) -> u32 {
        let nt = self.threads().max(1);
        (self.tm * self.tk).div_ceil(nt) + (self.tn * self.tk).div_ceil(nt)
    }

    /// 32-bit registers per work-item, estimated: accumulators, prefetch, the operands of one
    /// reduction step, and an allowance for indices and pointers.
    pub fn registers(&self) -> u32 {
        self.wm * self.wn + self.prefetch() + self.wm + self.wn + 32
    }

    /// Why the kernel cannot run these knobs on a device with `limits`, or `Ok`.
    pub fn check(&self, limits: &GpuLimits) -> Result<(), String> {
        let GemmKnobs { tm, tn, tk, wm, wn, ks, wk, et } = *self;
        if [tm, tn, tk, wm, wn, ks, wk].contains(&0) {
            return Err(format!("{self}: every knob must be at least 1"));
        }
        if wk > 1 {
            if limits.wgsl {
                return Err(format!("{self}: the WGSL kernel does not split its stages between slices (WK)"));
            }
            if ks > 1 || wk > MAX_WK || tk % wk != 0 {
                return Err(format!("{self}: WK > 1 needs KS = 1, WK <= {MAX_WK} and WK dividing TK"));
            }
        }
        if et && !self.one_stage_capable() {
            return Err(format!(
                "{self}: the early trigger (ET) is for members that can run one stage (WK > 1, KS = 1, TM a multiple of 4)"
            ));
        }
        if tm % wm != 0 || tn % wn != 0 {
            return Err(format!("{self}: WM must divide TM and WN divide TN (each work-item owns WM x WN of the tile)"));
        }
        if tm > 1024 || tn > 1024 || tk > 256 || ks > MAX_KS {
            return Err(format!("{self}: beyond TM, TN <= 1024, TK <= 256, KS <= {MAX_KS}"));
        }
        let threads = self.threads();
        if threads > limits.max_group_threads {
            return Err(format!("{self}: {threads} work-items per group; the device allows {}", limits.max_group_threads));
        }
        let local = self.local_bytes(limits.wgsl);
        if !limits.fits_local(local, self.weights_stage_bytes()) {
            let launch = if limits.launch_local_bytes > 0 {
                format!(" ({} with the weights' stage from the launch)", limits.launch_local_bytes)
            } else {
                String::new()
            };
            return Err(format!("{self}: {local} B of local memory per group; the device allows {}{launch}", limits.local_mem_bytes));
        }
        // One-stage members hold no prefetch registers on the ops whose reduction fits in TK
        // (conv1x1 of 256 channels in a 64 x 8 tile of TK 256: a stage of 72 per work-item);
        // on longer ones they spill, and calibration finds them slow.
        if self.prefetch() > MAX_PREFETCH && !self.one_stage_capable() {
            return Err(format!("{self}: {} prefetch registers per work-item (at most {MAX_PREFETCH}; more spill)", self.prefetch()));
        }
        if limits.wgsl && wm * wn > WGSL_MAX_OUTPUTS {
            return Err(format!("{self}: WM x WN = {} outputs per invocation; the WGSL kernel holds {WGSL_MAX_OUTPUTS}", wm * wn));
        }
        let regs = self.registers();
        if limits.registers_per_thread > 0 && regs > limits.registers_per_thread {
            return Err(format!("{self}: about {regs} registers per work-item; the device allows {}", limits.registers_per_thread));
        }
        if limits.registers_per_group > 0 && regs * threads > limits.registers_per_group {
            return Err(format!(
                "{self}: about {regs} registers x {threads} work-items; the device has {} per group",
                limits.registers_per_group
            ));
        }
        Ok(())
    }

    /// The knobs of `knobs` (a profile schedule's map) over `defaults`; an unknown name or a
    /// value outside 1..=1024 is an error naming it.
    pub fn from_map(knobs: &BTreeMap<String, i64>, defaults: GemmKnobs) -> Result<GemmKnobs, String> {
        let mut k = defaults;
        for (name, &v) in knobs {
            if name == "ET" {
                k.et = match v {
                    0 | 1 => v == 1,
                    _ => return Err(format!("knob ET = {v} is not 0 or 1")),
                };
                continue;
            }
            let slot = match name.as_str() {
                "TM" => &mut k.tm,
                "TN" => &mut k.tn,
                "TK" => &mut k.tk,
                "WM" => &mut k.wm,
                "WN" => &mut k.wn,
                "KS" => &mut k.ks,
                "WK" => &mut k.wk,
                other => {
                    return Err(format!(
                        "unknown knob '{other}' for the GPU sparse conv (its knobs are {}, WK, ET)",
                        GEMM_DOMAINS.map(|d| d.0).join(", ")
                    ))
                }
            };
            *slot =
                u32::try_from(v).ok().filter(|v| (1..=1024).contains(v)).ok_or_else(|| format!("knob {name} = {v} is outside 1..=1024"))?;
        }
        Ok(k)
    }

    /// `s` with these knobs set (`WK` only where it is not 1 and `ET` only where set, so
    /// profiles written before them read and write the same).
    pub fn apply(&self, mut s: Schedule) -> Schedule {
        for (n, v) in [("TM", self.tm), ("TN", self.tn), ("TK", self.tk), ("WM", self.wm), ("WN", self.wn), ("KS", self.ks)] {
            s.knobs.insert(n.into(), v as i64);
        }
        if self.wk > 1 {
            s.knobs.insert("WK".into(), self.wk as i64);
        } else {
            s.knobs.remove("WK");
        }
        if self.et {
            s.knobs.insert("ET".into(), 1);
        } else {
            s.knobs.remove("ET");
        }
        s
    }
}

impl std::fmt::Display for GemmKnobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TM={} TN={} TK={} WM={} WN={} KS={}", self.tm, self.tn, self.tk, self.wm, self.wn, self.ks)?;
        if self.wk > 1 {
            write!(f, " WK={}", self.wk)?;
        }
        if self.et {
            write!(f, " ET=1")?;
        }
        Ok(())
    }
}

/// Checks that a depthwise conv's schedule names no knob (its kernel has none).
pub fn check_depthwise(s: &Schedule) -> Result<(), String> {
    match s.knobs.keys().next() {
        Some(k) => Err(format!("member '{}': knob '{k}', but the depthwise sparse conv has no knobs besides the granularity", s.name)),
        None => Ok(()),
    }
}

/// The name of a schedule in profiles, logs and reports: `tiles<g>` (depthwise, calibration's
/// members), with the GEMM knobs `tiles1x1_m64n32k16_w4x2_s4` (`_wk8` after it for slices,
/// then `_et` for the early trigger);
/// `dense` for the dense member.
pub fn schedule_name(g: Option<Granularity>, knobs: Option<&GemmKnobs>) -> String {
    let mut s = g.map_or_else(|| "dense".to_string(), |g| format!("tiles{g}"));
    if let Some(k) = knobs {
        s += &format!("_m{}n{}k{}_w{}x{}_s{}", k.tm, k.tn, k.tk, k.wm, k.wn, k.ks);
        if k.wk > 1 {
            s += &format!("_wk{}", k.wk);
        }
        if k.et {
            s += "_et";
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lim(wgsl: bool) -> GpuLimits {
        GpuLimits {
            wgsl,
            max_group_threads: 1024,
            local_mem_bytes: 48 * 1024,
            launch_local_bytes: 0,
            registers_per_group: 65536,
            registers_per_thread: 255,
            self_list: false,
        }
    }

    #[test]
    fn checks_name_the_limit_they_hit() {
        let k = GemmKnobs { tm: 64, tn: 32, tk: 16, wm: 4, wn: 2, ks: 1, wk: 1, et: false };
        k.check(&lim(false)).unwrap();
        assert_eq!(k.threads(), 256);
        assert_eq!(k.local_bytes(false), 4 * (16 * 96 + 96));
        let e = GemmKnobs { tm: 128, tn: 128, wm: 2, wn: 2, ..k }.check(&lim(false)).unwrap_err();
        assert!(e.contains("4096 work-items"), "{e}");
        let e = GemmKnobs { tm: 128, tn: 128, tk: 64, wm: 8, wn: 8, ..k }.check(&lim(false)).unwrap_err();
        assert!(e.contains("local memory"), "{e}");
        let e = GemmKnobs { wm: 3, ..k }.check(&lim(false)).unwrap_err();
        assert!(e.contains("divide"), "{e}");
        // WGSL: 16 accumulators and 256 invocations.
        let e = GemmKnobs { tm: 128, tn: 64, wm: 8, wn: 4, ..k }.check(&lim(true)).unwrap_err();
        assert!(e.contains("WGSL"), "{e}");
        let l =
            GpuLimits::of(&DeviceInfo { backend: "wgpu".into(), max_work_group_size: 1024, local_mem_bytes: 65536, ..Default::default() });
        assert_eq!((l.max_group_threads, l.local_mem_bytes), (256, 16384));
        let e = GemmKnobs { tm: 64, tn: 64, wm: 2, wn: 2, ..k }.check(&l).unwrap_err();
        assert!(e.contains("1024 work-items"), "{e}");
        // Slices (WK): unsplit, dividing TK, not on WGSL; they count in threads and local memory.
        let sliced = GemmKnobs { tm: 64, tn: 8, tk: 32, wm: 4, wn: 4, ks: 1, wk: 8, et: false };
        sliced.check(&lim(false)).unwrap();
        assert_eq!((sliced.threads(), sliced.local_bytes(false)), (256, 4 * (32 * 72 + 24 + 8 * 64 * 8)));
        // 8 x 32 x 8 sums fit in a stage of 128 x 32 weights.
        assert_eq!(GemmKnobs { tm: 32, tk: 128, wm: 2, ..sliced }.local_bytes(false), 4 * (128 * 40 + 24));
        for (bad, why) in
            [(GemmKnobs { ks: 2, ..sliced }, "KS"), (GemmKnobs { tk: 12, ..sliced }, "TK"), (GemmKnobs { wk: 32, ..sliced }, "WK <=")]
        {
            let e = bad.check(&lim(false)).unwrap_err();
            assert!(e.contains(why), "{why}: {e}");
        }
        let e = sliced.check(&lim(true)).unwrap_err();
        assert!(e.contains("WGSL") && e.contains("WK"), "{e}");
        // Registers: 1024 work-items of about 42 registers do not fit a 32K register file.
        let big = GemmKnobs { tm: 64, tn: 64, tk: 16, wm: 2, wn: 2, ks: 1, wk: 1, et: false };
        big.check(&lim(false)).unwrap();
        let e = big.check(&GpuLimits { registers_per_group: 32768, ..lim(false) }).unwrap_err();
        assert!(e.contains("registers"), "{e}");
    }

    #[test]
    fn profile_knobs_parse_over_defaults_and_unknown_names_are_refused() {
        let d = GemmKnobs { tm: 64, tn: 32, tk: 16, wm: 4, wn: 2, ks: 1, wk: 1, et: false };
        let mut m = BTreeMap::new();
        m.insert("TN".to_string(), 64);
        m.insert("KS".to_string(), 4);
        let k = GemmKnobs::from_map(&m, d).unwrap();
        assert_eq!((k.tn, k.ks, k.tm), (64, 4, 64));
        let s = k.apply(Schedule::sparse("x", Granularity::new(2, 8)));
        assert_eq!(GemmKnobs::from_map(&s.knobs, GemmKnobs { tm: 1, tn: 1, tk: 1, wm: 1, wn: 1, ks: 1, wk: 1, et: false }).unwrap(), k);
        m.insert("tiles_per_group".to_string(), 4);
        let e = GemmKnobs::from_map(&m, d).unwrap_err();
        assert!(e.contains("tiles_per_group") && e.contains("TM"), "{e}");
        let mut bad = BTreeMap::new();
        bad.insert("TK".to_string(), 0);
        assert!(GemmKnobs::from_map(&bad, d).unwrap_err().contains("TK = 0"));
        assert_eq!(schedule_name(Some(Granularity::new(1, 1)), Some(&k)), "tiles1x1_m64n64k16_w4x2_s4");
        // WK is written only where it is not 1, and read back.
        assert!(!s.knobs.contains_key("WK"));
        let sliced = GemmKnobs { ks: 1, wk: 8, ..k };
        let ss = sliced.apply(s.clone());
        assert_eq!(ss.knobs.get("WK"), Some(&8));
        assert_eq!(GemmKnobs::from_map(&ss.knobs, d).unwrap(), sliced);
        assert!(!k.apply(ss).knobs.contains_key("WK"));
        assert_eq!(schedule_name(Some(Granularity::new(1, 1)), Some(&sliced)), "tiles1x1_m64n64k16_w4x2_s1_wk8");
        assert_eq!(schedule_name(None, None), "dense");
        assert!(check_depthwise(&s).unwrap_err().contains("depthwise"));
    }

    #[test]
    fn the_early_trigger_is_a_knob_of_members_that_can_run_one_stage() {
        let one = GemmKnobs { tm: 64, tn: 8, tk: 256, wm: 4, wn: 4, ks: 1, wk: 8, et: true };
        let cuda = GpuLimits { launch_local_bytes: 232_448, ..lim(false) };
        one.check(&cuda).unwrap();
        // Named, written and read back; a member without it writes no ET.
        assert_eq!(schedule_name(Some(Granularity::new(1, 1)), Some(&one)), "tiles1x1_m64n8k256_w4x4_s1_wk8_et");
        assert!(one.to_string().ends_with("WK=8 ET=1"), "{one}");
        let s = one.apply(Schedule::sparse("x", Granularity::new(1, 1)));
        assert_eq!(s.knobs.get("ET"), Some(&1));
        assert_eq!(GemmKnobs::from_map(&s.knobs, GemmKnobs { et: false, ..one }).unwrap(), one);
        let off = GemmKnobs { et: false, ..one };
        assert!(!off.apply(s).knobs.contains_key("ET"));
        let mut m = BTreeMap::new();
        m.insert("ET".to_string(), 2);
        assert!(GemmKnobs::from_map(&m, off).unwrap_err().contains("ET = 2"));
        // Not where the member cannot run one stage: unsliced, or split.
        for bad in [GemmKnobs { wk: 1, tk: 16, ..one }, GemmKnobs { ks: 2, wk: 1, tk: 16, ..one }] {
            let e = bad.check(&cuda).unwrap_err();
            assert!(e.contains("ET"), "{e}");
        }
    }
}
