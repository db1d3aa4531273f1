//! Sparse conv GEMM schedules for gpu_sparse_bench's `--knobs N`: what a tuned profile could
//! hold for one bench op, handed to the executor as profiles of up to MAX_MEMBERS - 1 sparse
//! members (plus the dense one) so every schedule is timed by the runtime's own launches.

use dynaspa_backends::gpu::sparse_conv_knobs::{schedule_name, GemmKnobs, GpuLimits, GEMM_DOMAINS};
use dynaspa_backends::gpu::DeviceInfo;
use dynaspa_runtime::dispatch::{DispatchTable, Member, PolyKernel, Schedule, MAX_MEMBERS};
use dynaspa_runtime::graph::Graph;
use dynaspa_runtime::profile::{DeviceId, MaskSetInfo, OpProfile, OpSignature, Profile};
use dynaspa_runtime::sparsity::Granularity;
use dynaspa_runtime::{Error, Result};

/// Register tiles larger than the default 4 x 2 per work-item (whose inner loop issues 6
/// local-memory loads per 8 FMAs), among them 128 x 128 tiles for batches whose columns fill
/// them (119 and 96 registers for sm_90, no spills), each with splits from 2 to 32: a density-0.1
/// frame's 160 columns want 32, and between powers of two a split can fill the last wave of
/// work-groups (at batch 4 and density 0.5, 50 tiles of 512 work-items on 132 SMs: 5 splits
/// make 250 groups, two waves of a fifth of the reduction each; 4 make two waves of a quarter).
/// 128 x 32 tiles of 256 work-items (4 x 4 or 8 x 2 each) won conv1x1 at density 0.1 and
/// batches 2 and 4 on an H200 (at KS 6, 240 work-groups of at most three stages for
/// 4 x 160 columns, two per SM on 132 SMs, where the 64 x 64 tiles' best, KS 4, ran 192 of
/// four and left 72 SMs with one).
/// Then `n` seeded random valid points. Invalid ones (for this device's limits) and duplicates
/// are dropped.
pub fn sample(info: &DeviceInfo, n: usize, seed: u64) -> Vec<GemmKnobs> {
    let limits = GpuLimits::of(info);
    let mut out: Vec<GemmKnobs> = Vec::new();
    let keep = |k: GemmKnobs, out: &mut Vec<GemmKnobs>| {
        if k.check(&limits).is_ok() && !out.contains(&k) {
            out.push(k);
        }
    };
    let tiles: [(u32, u32, u32, u32, u32); 8] = [
        (128, 128, 8, 8, 8),
        (128, 128, 8, 8, 4),
        (128, 64, 8, 8, 8),
        (128, 64, 16, 8, 4),
        (128, 32, 16, 8, 4),
        (128, 32, 16, 4, 4),
        (128, 32, 16, 8, 2),
        (64, 64, 16, 4, 4),
    ];
    for (tm, tn, tk, wm, wn) in tiles {
        for ks in [2, 3, 4, 5, 6, 8, 12, 16, 24, 32] {
            keep(GemmKnobs { tm, tn, tk, wm, wn, ks, wk: 1, et: false }, &mut out);
        }
    }
    // Splits between those, on the tiles that win. Some keep a density-0.1 frame within one
    // work-group per SM on 132 SMs (stride 2 at KS 18: 108 groups of 4 stages, where KS 24 runs
    // 144 of 3); on an H200 those did not beat KS 24-32 at batch 1 and 0.1, but KS 10 won at 0.5
    // and at batch 4, KS 18 at batch 2 (RESULTS.md, "splits between the powers of two").
    for (tm, tn, tk, wm, wn) in [(128, 64, 16, 8, 4), (64, 64, 16, 4, 4), (128, 128, 8, 8, 4), (128, 32, 16, 4, 4)] {
        for ks in [10, 14, 18, 20, 21, 22, 28] {
            keep(GemmKnobs { tm, tn, tk, wm, wn, ks, wk: 1, et: false }, &mut out);
        }
    }
    // Deeper stages on the tiles that win (TK 32: half the stages, so half the barriers and
    // load round trips, of TK 16 for a split's reduction; 24-26 KiB of local memory).
    for (tm, tn, tk, wm, wn) in [(128, 64, 32, 8, 4), (64, 64, 32, 4, 4)] {
        for ks in [8, 12, 16, 24, 32] {
            keep(GemmKnobs { tm, tn, tk, wm, wn, ks, wk: 1, et: false }, &mut out);
        }
    }
    // Unsplit work-groups in slices along the reduction (WK) whose stage holds a reduction of
    // 256 (conv1x1 256 -> 256 runs it as one, SPARSE_CONV_ONE_STAGE): among the fastest at density 0.1
    // and batches 1 and 2 on an H200, each of a different shape (RESULTS.md), and two tiles past
    // 48 KiB (their weights' stage from the launch, CUDA only): 64 x 8, which ran the op fastest
    // at batch 2 by hand, and 64 x 16; 64 x 16 of 8 x 4 per work-item in 8 slices, the fastest
    // one-stage tile at batch 4. The first two of batches 1 and 2 also with the early trigger
    // (ET), which ran them 0.5-0.6 µs faster there and the batch-4 tiles slower: members of
    // their own, so the frame's counts choose.
    for (tm, tn, tk, wm, wn, wk) in [
        (32, 8, 256, 2, 4, 8),
        (32, 8, 256, 1, 4, 4),
        (16, 16, 256, 2, 4, 8),
        (16, 8, 256, 2, 4, 16),
        (64, 8, 256, 4, 4, 8),
        (64, 16, 256, 4, 4, 4),
        (64, 16, 256, 8, 4, 8),
    ] {
        keep(GemmKnobs { tm, tn, tk, wm, wn, ks: 1, wk, et: false }, &mut out);
    }
    for (tm, tn, tk, wm, wn, wk) in [(32, 8, 256, 2, 4, 8), (64, 8, 256, 4, 4, 8)] {
        keep(GemmKnobs { tm, tn, tk, wm, wn, ks: 1, wk, et: true }, &mut out);
    }
    let mut state = seed | 1;
    let mut pick = |d: &[i64]| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        d[(state >> 33) as usize % d.len()] as u32
    };
    let want = out.len() + n;
    for _ in 0..n * 200 {
        if out.len() >= want {
            break;
        }
        let v: Vec<u32> = GEMM_DOMAINS.iter().map(|(_, d)| pick(d)).collect();
        keep(GemmKnobs { tm: v[0], tn: v[1], tk: v[2], wm: v[3], wn: v[4], ks: v[5], wk: 1, et: false }, &mut out);
    }
    out
}

/// GEMM schedules named as the bench names them after the granularity (`m64n64k16_w4x4_s4`),
/// comma-separated, each checked against `info`'s limits: `--schedules`, for timing or profiling
/// a few members alone.
pub fn parse(info: &DeviceInfo, list: &str) -> Result<Vec<GemmKnobs>> {
    let limits = GpuLimits::of(info);
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let bad = || Error::Other(format!("--schedules: '{name}' is not m<TM>n<TN>k<TK>_w<WM>x<WN>_s<KS>[_wk<WK>][_et]"));
        let (plain, et) = name.strip_suffix("_et").map_or((name, false), |p| (p, true));
        let (head, wk) = plain.split_once("_wk").map_or((plain, "1"), |(h, wk)| (h, wk));
        let (tile, rest) = head.strip_prefix('m').and_then(|r| r.split_once("_w")).ok_or_else(bad)?;
        let (w, ks) = rest.split_once("_s").ok_or_else(bad)?;
        let (tm, tile) = tile.split_once('n').ok_or_else(bad)?;
        let (tn, tk) = tile.split_once('k').ok_or_else(bad)?;
        let (wm, wn) = w.split_once('x').ok_or_else(bad)?;
        let n: Vec<u32> = [tm, tn, tk, wm, wn, ks, wk].iter().map(|v| v.parse::<u32>().map_err(|_| bad())).collect::<Result<_>>()?;
        let k = GemmKnobs { tm: n[0], tn: n[1], tk: n[2], wm: n[3], wn: n[4], ks: n[5], wk: n[6], et };
        k.check(&limits).map_err(|e| Error::Other(format!("--schedules: {name}: {e}")))?;
        out.push(k);
    }
    if out.is_empty() {
        return Err(Error::Other("--schedules names no schedule".into()));
    }
    Ok(out)
}

/// One profile per group of schedules for node `node` of `g` (1x1 DISTiles), each with the
/// dense member; the dispatch tables are placeholders (the bench times every member itself).
pub fn profiles(info: &DeviceInfo, g: &Graph, node: &str, knobs: &[GemmKnobs]) -> Result<Vec<(Profile, Vec<String>)>> {
    let n = g.nodes.iter().find(|n| n.name == node).ok_or_else(|| Error::Other(format!("no node '{node}'")))?;
    let signature = OpSignature::of(g, n);
    let device = DeviceId { backend: info.backend.clone(), name: info.name.clone(), fingerprint: info.fingerprint() };
    let g1 = Granularity::new(1, 1);
    let mut out = Vec::new();
    for group in knobs.chunks(MAX_MEMBERS - 1) {
        let mut members = vec![Member { schedule: Schedule::dense("dense"), table: DispatchTable::constant(1.0)? }];
        let mut names = Vec::new();
        for k in group {
            let name = schedule_name(Some(g1), Some(k));
            let schedule = k.apply(Schedule::sparse(name.clone(), g1));
            members.push(Member { schedule, table: DispatchTable::constant(0.5)? });
            names.push(name);
        }
        let mut p = Profile::new(device.clone(), "gpu_sparse_bench", false, "knob sample", MaskSetInfo::default());
        p.ops.push(OpProfile { node: node.into(), signature: signature.clone(), poly: PolyKernel::new(members)?, stats: None });
        out.push((p, names));
    }
    Ok(out)
}
