//! Which variants of the sparse conv programs (sparse_conv_*.cl) (and token.cl's GEMM) CI compiles: every schedule a launch
//! can ask for as it stands (calibration's grid, the dense lowering, every member of the GPU
//! profiles shipped under `profiles/`, a spread of the tuner's space), and each switch the
//! executor adds to them (fused finish, self-listing and its count, leaving early, reading the
//! mask before the PDL wait, CUDA's two stages in flight and register bound, the finish's
//! speculation and trigger) on a few of those schedules that between them carry every knob value
//! the switch meets. Every switch on every schedule was ~1,700 programs per architecture, past
//! CI's 90 minutes at ~1.5 s each; a switch's code does not depend on which tile values it is
//! combined with beyond the values themselves, which the cover keeps.

use super::knobs::{GemmKnobs, GpuLimits, GEMM_DOMAINS};
use super::schedule::{register_bound, SparseConvSchedule, GEMM_LARGE, GEMM_SMALL, GRANULARITIES, SPLITS};
use dynaspa_runtime::sparsity::Granularity;
use std::collections::BTreeSet;

type Defines = Vec<(&'static str, i64)>;

/// Define sets of `entry` that CI compiles (sorted, no repeats).
pub(crate) fn all(entry: &str) -> Vec<Defines> {
    let mut v = match entry {
        "sparse_conv_gemm_f32" => gemm(),
        "sparse_conv_finish_f32" => finish(),
        "sparse_conv_dw_f32" => plain().iter().filter(|s| s.ks == 1).map(|s| SparseConvSchedule::dw_defines(s.gran)).collect(),
        "sparse_conv_fill_residual_f32" | "sparse_conv_blend_cached_f32" => vec![vec![]],
        _ => vec![],
    };
    v.sort();
    v.dedup();
    v
}

/// Every schedule as launched without a switch: calibration's grid and the dense lowering's
/// (each granularity, both default tiles, every split), the shipped profiles' members and the
/// space's spread.
fn plain() -> Vec<SparseConvSchedule> {
    let grans = std::iter::once(None).chain(GRANULARITIES.iter().copied().map(Some));
    let mut v: Vec<SparseConvSchedule> = grans
        .flat_map(|gran| {
            [GEMM_LARGE, GEMM_SMALL]
                .into_iter()
                .flat_map(move |tile| SPLITS.map(|ks| SparseConvSchedule { tile, ks, gran, self_list: false, wk: 1, et: false }))
        })
        .collect();
    v.extend(shipped_gpu_schedules());
    v.extend(space_sample());
    let mut seen = std::collections::HashSet::new();
    v.retain(|s| seen.insert(*s));
    v
}

fn with(d: Defines, extra: &[(&'static str, i64)]) -> Defines {
    d.into_iter().chain(extra.iter().copied()).collect()
}

fn gemm() -> Vec<Defines> {
    let plain = plain();
    let mut v: Vec<Defines> = plain.iter().map(|s| s.gemm_defines(false)).collect();
    let one = Some(Granularity::new(1, 1));
    // Each switch set as a function of a plain schedule: its defines, where it applies.
    type Switch<'a> = Box<dyn Fn(&SparseConvSchedule) -> Option<Defines> + 'a>;
    let mut switches: Vec<Switch> =
        vec![Box::new(|s: &SparseConvSchedule| Some(s.gemm_defines(true)).filter(|d| d.contains(&("FUSED_FINISH", 1))))];
    // CUDA's own form of a member (`sparse_conv::lower`): two stages in flight and, for groups
    // of 256 to 512, the register bound. The plain list is what OpenCL launches.
    let cuda = |d: Defines, s: &SparseConvSchedule| -> Defines {
        let [tx, ty, tz] = s.local();
        let bound = register_bound(tx * ty * tz).map(|g| ("SPARSE_CONV_MIN_BLOCKS", g as i64));
        with(d, &[("SPARSE_CONV_DEPTH", 2)]).into_iter().chain(bound).collect()
    };
    switches.push(Box::new(move |s: &SparseConvSchedule| Some(cuda(s.gemm_defines(false), s))));
    // Self-listing members (1x1 tiles, never fused): with and without their count; as CUDA runs
    // them (leaving before the scan without a column, reading the mask before the PDL wait where
    // the launch ahead does not write it).
    for count in [false, true] {
        let listed = move |s: &SparseConvSchedule| -> Option<Defines> {
            let d = SparseConvSchedule { self_list: true, ..*s }.gemm_defines(false);
            (s.gran == one).then(|| with(d, &[("SELF_COUNT", 1)][..count as usize]))
        };
        for mode in [&[][..], &[("SL_EARLY", 1)], &[("SL_EARLY", 1), ("SL_PREWAIT", 1)]] {
            switches.push(Box::new(move |s: &SparseConvSchedule| listed(s).map(|d| with(d, mode))));
        }
        switches.push(Box::new(move |s: &SparseConvSchedule| listed(s).map(|d| cuda(with(d, &[("SL_EARLY", 1), ("SL_PREWAIT", 1)]), s))));
    }
    for f in &switches {
        v.extend(cover(plain.iter().filter_map(f).collect()));
    }
    // Work-groups in slices (WK): each unsplit plain schedule of 1x1 tiles or every position
    // in slices of 2 to 16 where it can, and the sliced tiles measured fastest on an H200; as
    // OpenCL and CUDA launch them, self-listing or not.
    let limits = GpuLimits {
        wgsl: false,
        max_group_threads: 1024,
        local_mem_bytes: 48 * 1024,
        launch_local_bytes: 0,
        registers_per_group: 65536,
        registers_per_thread: 255,
        self_list: true,
    };
    let sliced: Vec<SparseConvSchedule> =
        plain
            .iter()
            .filter(|s| s.ks == 1 && (s.gran.is_none() || s.gran == one))
            .flat_map(|s| [2, 4, 8, 16].map(|wk| SparseConvSchedule { wk, ..*s }))
            .chain(SLICED_MEASURED.iter().map(|&(tm, tn, tk, wm, wn, wk)| {
                SparseConvSchedule::from_knobs(GemmKnobs { tm, tn, tk, wm, wn, ks: 1, wk, et: false }, one)
            }))
            .filter(|s| s.knobs().check(&limits).is_ok())
            .collect();
    let listed = |s: &SparseConvSchedule| SparseConvSchedule { self_list: true, ..*s }.gemm_defines(false);
    let ones = || sliced.iter().filter(|s| s.gran == one);
    v.extend(cover(sliced.iter().map(|s| s.gemm_defines(false)).collect()));
    v.extend(cover(sliced.iter().map(|s| cuda(s.gemm_defines(false), s)).collect()));
    v.extend(cover(ones().map(|s| cuda(listed(s), s)).collect()));
    v.extend(cover(ones().map(|s| cuda(with(listed(s), &[("SELF_COUNT", 1), ("SL_EARLY", 1), ("SL_PREWAIT", 1)]), s)).collect()));
    // Sliced members whose stage holds a whole reduction of TK run it as one (SPARSE_CONV_ONE_STAGE).
    let whole = |s: &&SparseConvSchedule| s.one_stage(s.tile.tk as usize);
    let one_stage = [("SPARSE_CONV_ONE_STAGE", 1)];
    v.extend(cover(sliced.iter().filter(whole).map(|s| with(s.gemm_defines(false), &one_stage)).collect()));
    v.extend(cover(sliced.iter().filter(whole).map(|s| cuda(with(s.gemm_defines(false), &one_stage), s)).collect()));
    v.extend(cover(
        ones()
            .filter(whole)
            .map(|s| cuda(with(listed(s), &[("SELF_COUNT", 1), ("SL_EARLY", 1), ("SL_PREWAIT", 1), ("SPARSE_CONV_ONE_STAGE", 1)]), s))
            .collect(),
    ));
    // Past CUDA's static limit the launch provides the weights' stage (DSP_DYN_SMEM): one-stage
    // tiles that need it, self-listing as CUDA launches them.
    for &(tm, tn, tk, wm, wn, wk) in &LAUNCH_LOCAL_TILES {
        let s = SparseConvSchedule::from_knobs(GemmKnobs { tm, tn, tk, wm, wn, ks: 1, wk, et: false }, one);
        let dynamic = ("DSP_DYN_SMEM", s.knobs().weights_stage_bytes() as i64);
        let launched =
            cuda(with(listed(&s), &[("SELF_COUNT", 1), ("SL_EARLY", 1), ("SL_PREWAIT", 1), ("SPARSE_CONV_ONE_STAGE", 1), dynamic]), &s);
        // And with the early trigger of members whose knobs ask for it (`ET`).
        v.push(with(launched.clone(), &[("SPARSE_CONV_EARLY_TRIGGER", 1)]));
        v.push(launched);
    }
    v
}

/// One-stage tiles (TM, TN, TK, WM, WN, WK) past 48 KiB of local memory: the fastest of a
/// hand-written conv1x1 at batch 2 (64 x 8) and batch 4 (32 x 16) on an H200
/// (benches/cuda/conv1x1_floor.cu) as the GEMM's knobs, and a deeper 128 x 8 tile of TK 128.
const LAUNCH_LOCAL_TILES: [(u32, u32, u32, u32, u32, u32); 3] = [(64, 8, 256, 4, 4, 8), (32, 16, 256, 2, 2, 2), (128, 8, 128, 8, 4, 8)];

/// Sliced tiles (TM, TN, TK, WM, WN, WK) that ran conv1x1 at density 0.1 fastest on an H200 in
/// a hand-written kernel (benches/cuda/conv1x1_floor.cu), as the GEMM's knobs, and two in deep
/// stages whose sums take the weights' stage after the last one, and two whose stage holds the
/// reduction of a 256-channel 1x1 conv (SPARSE_CONV_ONE_STAGE).
const SLICED_MEASURED: [(u32, u32, u32, u32, u32, u32); 9] = [
    (32, 8, 256, 2, 4, 8),
    (16, 16, 256, 2, 4, 8),
    (64, 8, 32, 4, 4, 8),
    (32, 16, 32, 4, 4, 16),
    (32, 8, 32, 2, 4, 8),
    (32, 16, 32, 4, 4, 8),
    (32, 32, 32, 8, 4, 8),
    (32, 8, 128, 2, 4, 8),
    (32, 16, 128, 4, 4, 8),
];

fn finish() -> Vec<Defines> {
    let split: Vec<SparseConvSchedule> = plain().into_iter().filter(|s| s.ks > 1).collect();
    let mut v: Vec<Defines> = split.iter().map(|s| s.finish_defines(false)).collect();
    v.push(SparseConvSchedule::epilogue_defines());
    v.extend(cover(split.iter().map(|s| s.finish_defines(true)).collect()));
    v.extend(cover(split.iter().map(|s| with(s.finish_defines(true), &[("FIN_TRIGGER", 1)])).collect()));
    v
}

/// What a define set carries for the cover: each define and value, the granularity as its kind
/// (every position, 1x1, tiles) and the split as whether there is one.
fn traits(d: &Defines) -> BTreeSet<(&'static str, i64)> {
    let get = |n: &str| d.iter().find(|x| x.0 == n).map_or(0, |x| x.1);
    let gran = if get("TILED") == 0 {
        0
    } else if get("GH") == 1 && get("GW") == 1 {
        1
    } else {
        2
    };
    d.iter()
        .filter(|x| !matches!(x.0, "GH" | "GW" | "TILED" | "KS"))
        .copied()
        .chain([("granularity", gran), ("split", (get("KS") > 1) as i64)])
        .collect()
}

/// Of `candidates`, few (greedily the one adding most, first of equals) that between them carry
/// every trait any of them does.
fn cover(mut candidates: Vec<Defines>) -> Vec<Defines> {
    candidates.sort();
    candidates.dedup();
    let carried: Vec<BTreeSet<(&'static str, i64)>> = candidates.iter().map(traits).collect();
    let mut left: BTreeSet<(&'static str, i64)> = carried.iter().flatten().copied().collect();
    let mut out = Vec::new();
    while !left.is_empty() {
        let gain = |i: usize| carried[i].intersection(&left).count();
        let Some(best) = (0..candidates.len()).max_by(|&a, &b| gain(a).cmp(&gain(b)).then_with(|| b.cmp(&a))) else { break };
        left.retain(|t| !carried[best].contains(t));
        out.push(candidates[best].clone());
    }
    out
}

/// Every member of every GPU profile under `profiles/`: (file, op kind, schedule).
fn shipped_gpu_members() -> Vec<(std::path::PathBuf, String, dynaspa_runtime::dispatch::Schedule)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiles");
    let mut out = Vec::new();
    let Ok(dirs) = std::fs::read_dir(&root) else { return out };
    let mut files: Vec<std::path::PathBuf> =
        dirs.flatten().flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten().map(|f| f.path())).collect();
    files.sort();
    for f in files.iter().filter(|f| f.extension().is_some_and(|e| e == "json")) {
        let p = dynaspa_runtime::profile::Profile::load(f).unwrap_or_else(|e| panic!("{e}"));
        if p.device.backend == "cpu" {
            continue;
        }
        for op in &p.ops {
            out.extend(op.poly.members().iter().map(|m| (f.clone(), op.signature.kind.clone(), m.schedule.clone())));
        }
    }
    out
}

/// Sparse conv members of the shipped GPU profiles, as kernel variants (the GEMM knobs over the
/// defaults of a 64-channel op; depthwise members come out as the default tile).
fn shipped_gpu_schedules() -> Vec<SparseConvSchedule> {
    let mut out = Vec::new();
    for (f, kind, s) in shipped_gpu_members() {
        if kind != "Conv" || s.granularity.is_none() {
            continue;
        }
        let k = GemmKnobs::from_map(&s.knobs, SparseConvSchedule::for_op(64, 576, s.granularity).knobs())
            .unwrap_or_else(|e| panic!("{}: {}: {e}", f.display(), s.name));
        out.push(SparseConvSchedule::from_knobs(k, s.granularity));
    }
    out
}

/// token_gemm_f32's tiles that CI compiles beyond the defaults: every member of the shipped
/// profiles' token projections (dense or not, as they run) and the tuner's space spread (KS 1,
/// over the active tokens).
pub(crate) fn token_gemm_defines() -> Vec<[(&'static str, i64); 6]> {
    use crate::gpu::token::knobs as token;
    let mut out = Vec::new();
    for (f, kind, s) in shipped_gpu_members() {
        if kind == "MatMul" {
            let k =
                GemmKnobs::from_map(&s.knobs, token::default_knobs(64, 64)).unwrap_or_else(|e| panic!("{}: {}: {e}", f.display(), s.name));
            out.push(token::defines(&k, s.is_dense()));
        }
    }
    for s in space_sample() {
        out.push(token::defines(&GemmKnobs { ks: 1, ..s.knobs() }, false));
    }
    out
}

/// Valid points of the tuner's GEMM space spread so that every value of every knob appears.
fn space_sample() -> Vec<SparseConvSchedule> {
    let limits = GpuLimits {
        wgsl: false,
        max_group_threads: 1024,
        local_mem_bytes: 48 * 1024,
        launch_local_bytes: 0,
        registers_per_group: 65536,
        registers_per_thread: 255,
        self_list: false,
    };
    let d = |i: usize| GEMM_DOMAINS[i].1;
    let mut valid = Vec::new();
    for &tm in d(0) {
        for &tn in d(1) {
            for &tk in d(2) {
                for &wm in d(3) {
                    for &wn in d(4) {
                        for &ks in d(5) {
                            let k = GemmKnobs {
                                tm: tm as u32,
                                tn: tn as u32,
                                tk: tk as u32,
                                wm: wm as u32,
                                wn: wn as u32,
                                ks: ks as u32,
                                wk: 1,
                                et: false,
                            };
                            if k.check(&limits).is_ok() && k.threads() >= 16 {
                                valid.push(k);
                            }
                        }
                    }
                }
            }
        }
    }
    let mut picked: Vec<GemmKnobs> = Vec::new();
    for (i, (_, values)) in GEMM_DOMAINS.iter().enumerate() {
        for &val in values.iter() {
            let get = |k: &GemmKnobs| [k.tm, k.tn, k.tk, k.wm, k.wn, k.ks][i] as i64;
            if !picked.iter().any(|k| get(k) == val) {
                // The middle of the valid points with this value: neither extreme of the others.
                let with: Vec<&GemmKnobs> = valid.iter().filter(|k| get(k) == val).collect();
                if let Some(k) = with.get(with.len() / 2) {
                    picked.push(**k);
                }
            }
        }
    }
    let grans = [Some(Granularity::new(1, 1)), Some(Granularity::new(3, 6)), None];
    picked.iter().enumerate().map(|(i, &k)| SparseConvSchedule::from_knobs(k, grans[i % grans.len()])).collect()
}

#[cfg(test)]
mod tests {
    use super::{all, plain, traits};
    use std::collections::BTreeSet;

    /// Every schedule is compiled as it stands, and every switch is compiled with every knob
    /// value and granularity kind it meets anywhere: what cutting the list down keeps.
    #[test]
    fn every_plain_schedule_and_every_switch_with_every_value_it_meets_are_compiled() {
        let gemm = all("sparse_conv_gemm_f32");
        for s in plain() {
            assert!(gemm.contains(&s.gemm_defines(false)), "{s:?}");
        }
        let switches = [
            "FUSED_FINISH",
            "SELF_LIST",
            "SELF_COUNT",
            "SL_EARLY",
            "SL_PREWAIT",
            "SPARSE_CONV_DEPTH",
            "WK",
            "SPARSE_CONV_ONE_STAGE",
            "DSP_DYN_SMEM",
            "SPARSE_CONV_EARLY_TRIGGER",
        ];
        let on = |d: &Vec<(&str, i64)>| switches.iter().filter(|n| d.iter().any(|x| x.0 == **n)).copied().collect::<Vec<_>>();
        let sets: BTreeSet<Vec<&str>> = gemm.iter().map(on).collect();
        let cuda_listed = vec!["SELF_LIST", "SELF_COUNT", "SL_EARLY", "SL_PREWAIT", "SPARSE_CONV_DEPTH"];
        let sliced = vec!["SELF_LIST", "SELF_COUNT", "SL_EARLY", "SL_PREWAIT", "SPARSE_CONV_DEPTH", "WK"];
        let whole = vec!["SELF_LIST", "SELF_COUNT", "SL_EARLY", "SL_PREWAIT", "SPARSE_CONV_DEPTH", "WK", "SPARSE_CONV_ONE_STAGE"];
        let dynamic =
            vec!["SELF_LIST", "SELF_COUNT", "SL_EARLY", "SL_PREWAIT", "SPARSE_CONV_DEPTH", "WK", "SPARSE_CONV_ONE_STAGE", "DSP_DYN_SMEM"];
        let early = vec![
            "SELF_LIST",
            "SELF_COUNT",
            "SL_EARLY",
            "SL_PREWAIT",
            "SPARSE_CONV_DEPTH",
            "WK",
            "SPARSE_CONV_ONE_STAGE",
            "DSP_DYN_SMEM",
            "SPARSE_CONV_EARLY_TRIGGER",
        ];
        let needs = [
            vec!["WK"],
            vec!["SPARSE_CONV_DEPTH", "WK"],
            vec!["SELF_LIST", "SPARSE_CONV_DEPTH", "WK"],
            sliced,
            vec!["WK", "SPARSE_CONV_ONE_STAGE"],
            vec!["SPARSE_CONV_DEPTH", "WK", "SPARSE_CONV_ONE_STAGE"],
            whole,
            dynamic,
            early,
        ];
        for needed in
            [vec!["FUSED_FINISH"], vec!["SELF_LIST", "SELF_COUNT", "SL_EARLY", "SL_PREWAIT"], vec!["SPARSE_CONV_DEPTH"], cuda_listed]
                .into_iter()
                .chain(needs)
        {
            assert!(sets.contains(&needed), "{needed:?} not compiled");
        }
        assert!(!sets.iter().any(|s| s.contains(&"FUSED_FINISH") && s.contains(&"SELF_LIST")), "self-listing members never fuse");
        for set in &sets {
            let of: Vec<_> = gemm.iter().filter(|d| on(d) == *set).collect();
            let carried: BTreeSet<_> = of.iter().flat_map(|d| traits(d)).collect();
            for name in ["TM", "TN", "TK", "WM", "WN"] {
                let values: BTreeSet<i64> = carried.iter().filter(|t| t.0 == name).map(|t| t.1).collect();
                assert!(values.len() >= 2 || set.is_empty(), "{set:?}: {name} only {values:?}");
            }
        }
        assert!(gemm.len() < 700, "{} GEMM programs: CI compiles each (~1.5 s)", gemm.len());
    }
}
