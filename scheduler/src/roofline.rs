//! The analytical upper-bound model (DynaSpa section 3.2): a schedule's time on a mask is at
//! least the largest of its global-memory time, its local-memory time and its compute time.
//! It ranks schedules before anything is measured, so the search prunes the space to the best
//! fraction, and it is a feature of the learned cost model afterwards.
//!
//! - Global memory: the count of memory transactions the access pattern makes (a warp's loads
//!   of consecutive addresses coalesce into `transaction_bytes` pieces; scattered ones do not),
//!   times the transaction size, over the bandwidth.
//! - Local memory: accesses per work-group times a bank-conflict factor, over the banks' rate,
//!   slowed when occupancy is too low to hide latency.
//! - Compute: `C * (alpha * ops * warps + gamma)`, C waves of work-groups over the compute
//!   units, `ops` instructions per thread, `warps` resident per compute unit, alpha and gamma
//!   per device (fitted by the micro-benchmark where we can run, from specs otherwise). On
//!   GPUs a GEMM work-group is a chain of reduction stages, each at least one global-memory
//!   round trip (`latency_s`) when too few warps are resident to hide it: what makes few
//!   columns (sparse frames) latency-bound and the split of the reduction (`KS`) pay.
//!
//! The GPU model follows the GPU sparse conv kernels as they are (sparse_conv_*.cl): the
//! implicit GEMM's `TM x TN` tiles with `WM x WN` outputs per work-item, `TK`-deep stages with a
//! register prefetch, `KS` splits with their finish kernel, grids sized for every tile of the
//! map; depthwise as one work-item per output.

use crate::devices::DeviceDesc;
use crate::space::{OpGeometry, OpKind, Point, Space, Target};
use dynaspa_backends::gpu::sparse_conv_knobs::{default_gemm, GemmKnobs};
use dynaspa_runtime::sparsity::{BitMask, Granularity};

/// What a mask means for one granularity.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TileStats {
    pub tiles: usize,
    /// Positions inside the tensor that the tiles cover (active and not).
    pub computed: usize,
    pub active: usize,
    /// Row runs the gather walks: horizontally adjacent tiles merge.
    pub runs: usize,
    pub h: usize,
    pub w: usize,
}

impl TileStats {
    pub fn of(m: &BitMask, g: Granularity) -> TileStats {
        let ts = m.aligned_tiles(g);
        let g = ts.granularity;
        let mut runs = 0;
        let mut i = 0;
        // Tiles are row-major: one band of tile rows at a time, contiguous x merge.
        while i < ts.tiles.len() {
            let y = ts.tiles[i].y;
            let rows = (g.h as usize).min(m.height() - y as usize);
            let mut segments = 0;
            let mut last_end = u32::MAX;
            while i < ts.tiles.len() && ts.tiles[i].y == y {
                if ts.tiles[i].x != last_end {
                    segments += 1;
                }
                last_end = ts.tiles[i].x + g.w as u32;
                i += 1;
            }
            runs += segments * rows;
        }
        TileStats { tiles: ts.len(), computed: ts.computed_positions(), active: m.count_ones(), runs, h: m.height(), w: m.width() }
    }

    /// The dense member: every position, one run per row.
    pub fn dense(h: usize, w: usize) -> TileStats {
        TileStats { tiles: 1, computed: h * w, active: h * w, runs: h, h, w }
    }
}

/// Seconds per component; `total` is their maximum.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    pub global: f64,
    pub local: f64,
    pub compute: f64,
    pub total: f64,
}

impl Estimate {
    fn of(global: f64, local: f64, compute: f64) -> Estimate {
        Estimate { global, local, compute, total: global.max(local).max(compute) }
    }
    const IMPOSSIBLE: Estimate = Estimate { global: f64::INFINITY, local: f64::INFINITY, compute: f64::INFINITY, total: f64::INFINITY };
}

/// Positions per panel of the CPU kernels (their register tile's width).
const CPU_PANEL: usize = 64;

/// Estimated time of point `p` of `space` on a mask with tile statistics `st` (taken at the
/// point's granularity), on `dev`.
pub fn estimate(space: &Space, p: &Point, st: &TileStats, dev: &DeviceDesc) -> Estimate {
    match space.target {
        Target::Cpu => cpu(&space.op, st, dev, images(&space.op)),
        Target::Gpu => gpu(space, p, st, dev),
    }
}

fn images(op: &OpGeometry) -> f64 {
    op.images.max(1) as f64
}

/// The dense member's estimate on `dev`: every position. On a GPU the dense member is the same
/// sparse kernel over every position (no tile list), with the executor's default knobs.
pub fn estimate_dense(op: &OpGeometry, dev: &DeviceDesc) -> Estimate {
    let st = TileStats::dense(op.h, op.w);
    if dev.cpu_kernels() {
        return cpu(op, &st, dev, images(op));
    }
    match op.kind {
        OpKind::Depthwise => depthwise(op, None, &st, dev),
        // The token GEMM's dense member: its default tile over every row, no split.
        OpKind::TokenLinear => gemm(op, None, &dynaspa_backends::gpu::token_knobs::default_knobs(op.h * op.w, op.c_out), &st, dev),
        _ => {
            let k = default_gemm(op.c_out, op.k_dim(), true, op.h * op.w, op.images.max(1), dev.compute_units);
            gemm(op, None, &k, &st, dev)
        }
    }
}

fn cpu(op: &OpGeometry, st: &TileStats, dev: &DeviceDesc, images: f64) -> Estimate {
    let k = op.k_dim() as f64;
    let cin = (op.c_in / op.groups.max(1)).max(1) as f64;
    // Panels spread over the cores. C is kept fractional: the kernels also split a panel's
    // output channels between threads, so small ops do not run in whole-panel waves (whole
    // waves made every schedule of a 9x12 map cost the same one wave).
    let panels = st.computed as f64 / CPU_PANEL as f64 * images;
    let rounds = panels / dev.compute_units.max(1) as f64;
    let ops = CPU_PANEL as f64 * op.macs_per_position() / dev.simd_width as f64;
    let compute = rounds * (dev.alpha_s * ops + dev.gamma_s);
    // Input rows gathered per run (a run reads its window's rows for every input channel), the
    // active outputs written, and the weights once.
    let rows_read = st.runs as f64 * cin * op.kh as f64;
    let line = dev.transaction_bytes as f64;
    let gather = rows_read * line + st.computed as f64 * cin * 4.0;
    let bytes = images * (gather + st.active as f64 * op.c_out as f64 * 4.0) + op.c_out as f64 * k * 4.0;
    let global = bytes / (dev.mem_bandwidth_gbs * 1e9);
    Estimate::of(global, 0.0, compute)
}

fn gpu(space: &Space, p: &Point, st: &TileStats, dev: &DeviceDesc) -> Estimate {
    let g = space.granularity(p);
    match space.gemm(p) {
        Some(k) => gemm(&space.op, Some(g), &k, st, dev),
        None if space.op.kind == OpKind::Depthwise => depthwise(&space.op, Some(g), st, dev),
        None => Estimate::IMPOSSIBLE,
    }
}

/// What a GPU launch over the columns of a mask looks like: columns computed per image (tiles x
/// their area, phantoms included), columns the grid is sized for (every tile the map can have),
/// and the mean run of columns that are consecutive in memory (coalescing).
struct Columns {
    cols: f64,
    cap: f64,
    run: f64,
}

fn columns(op: &OpGeometry, g: Option<Granularity>, st: &TileStats) -> Columns {
    let hw = (op.h * op.w) as f64;
    match g {
        None => Columns { cols: hw, cap: hw, run: op.w as f64 },
        Some(g) => {
            let (gh, gw) = (g.h.max(1) as usize, g.w.max(1) as usize);
            let area = (gh * gw) as f64;
            let cap = (op.h.div_ceil(gh) * op.w.div_ceil(gw)) as f64 * area;
            let cols = st.tiles as f64 * area;
            // Columns run tile by tile, row by row within a tile: one-row tiles of a band merge
            // into the band's runs (the list is row-major), taller tiles break every GW.
            let run = if gh == 1 { cols / st.runs.max(1) as f64 } else { gw as f64 };
            Columns { cols, cap, run: run.max(1.0) }
        }
    }
}

/// Work-groups resident per compute unit for groups of `threads` using `local` bytes and
/// `regs` registers per thread (0 when nothing fits).
fn resident(dev: &DeviceDesc, threads: f64, local: f64, regs: f64) -> f64 {
    let simd = dev.simd_width.max(1) as f64;
    let warps = (threads / simd).ceil().max(1.0);
    let by_threads = (dev.max_threads_per_cu as f64 / (warps * simd)).floor();
    let by_local = if local > 0.0 && dev.local_mem_per_cu > 0 { (dev.local_mem_per_cu as f64 / local).floor() } else { f64::INFINITY };
    let by_regs = (dev.registers_per_cu as f64 / (regs * warps * simd)).floor();
    (dev.max_groups_per_cu as f64).min(by_threads).min(by_local).min(by_regs).max(0.0)
}

/// sparse_conv_gemm_f32 (and sparse_conv_finish_f32 when the reduction is split) on a mask with tile
/// statistics `st` at granularity `g` (`None`: the dense member, every position).
pub fn gemm(op: &OpGeometry, g: Option<Granularity>, k: &GemmKnobs, st: &TileStats, dev: &DeviceDesc) -> Estimate {
    let images = images(op);
    let c = columns(op, g, st);
    let (tm, tn, tk, wm, wn) = (k.tm as f64, k.tn as f64, k.tk as f64, k.wm as f64, k.wn as f64);
    // Slices (WK): each work-item takes TK / WK of a stage's indices; the slices' sums meet in
    // local memory once, after the last stage.
    let wk = k.wk.max(1) as f64;
    let tks = tk / wk;
    let kd = op.k_dim().max(1) as f64;
    let chunk = ((kd / k.ks as f64).ceil() / tk).ceil() * tk;
    // Only the splits that get a stage run (the executor drops the rest: `working_splits`).
    let ks = (kd / chunk).ceil().max(1.0);
    let threads = k.threads() as f64;
    let wgsl = dev.wgsl();
    let res = resident(dev, threads, k.local_bytes(wgsl) as f64, k.registers() as f64);
    if res < 1.0 {
        return Estimate::IMPOSSIBLE;
    }
    let cus = dev.compute_units.max(1) as f64;
    let simd = dev.simd_width.max(1) as f64;
    let ctiles = (op.c_out as f64 / tm).ceil();
    let groups = (c.cols / tn).ceil() * ctiles * ks * images;
    // Groups past the frame's tiles start and return at once.
    let empty = ((c.cap / tn).ceil() - (c.cols / tn).ceil()).max(0.0) * ctiles * ks * images;
    let per_split = kd.min(chunk);
    let stages = (per_split / tk).ceil().max(1.0);
    let warps = (threads / simd).ceil();
    let per_cu = (groups / cus).max(1.0).min(res);
    let warps_res = per_cu * warps;
    let waves = (groups / (res * cus)).ceil().max(1.0);

    // Compute, per work-item and stage: the FMAs, the operand reads from local memory, the
    // prefetch (a global load with its index arithmetic each, a local store), two barriers.
    // A stage of a work-group's chain takes at least one global round trip, and at least its
    // work-item's own operations one after another: with few warps resident nothing overlaps
    // them. Without that floor the model ranked a 64->64 1x1 conv's schedules inversely (tau
    // -0.46 on the H100: one-warp groups of 32 accumulators each, modelled fastest, measured
    // 33 µs against 9 µs for 256 work-items of 2).
    let prefetch = k.prefetch() as f64;
    let ops_stage = tks * wm * wn + tks * (wm + wn) + prefetch * 6.0 + 4.0;
    let stage = (dev.alpha_s * ops_stage * warps_res).max(dev.latency_s).max(dev.serial_op_s * ops_stage);
    let mut compute = waves * (stages * stage + dev.gamma_s) + dev.alpha_s * 24.0 * empty * warps / cus;
    let reduce_ops = if wk > 1.0 { 2.0 * wm * wn + 4.0 } else { 0.0 };
    compute += waves * (dev.alpha_s * reduce_ops * warps_res).max(dev.serial_op_s * reduce_ops);
    // Global memory: the weight panel of each group (coalesced along channels), the gathered
    // inputs (runs of consecutive columns coalesce), the stores of active outputs, and the
    // partial sums written and read back when the reduction is split.
    let tb = dev.transaction_bytes.max(4) as f64;
    let run = c.run.min(tn);
    let row_tx = |floats: f64| (floats * 4.0 / tb).ceil() + 0.5;
    let weight_tx = groups * tm * per_split * 4.0 / tb;
    let input_tx = groups * per_split * (tn / run) * row_tx(run * op.sw as f64);
    let out_tx = st.active as f64 * images * op.c_out as f64 / c.run * row_tx(c.run);
    let mut tx = weight_tx + input_tx + out_tx;
    if ks > 1.0 {
        tx += 2.0 * c.cols * images * op.c_out as f64 * ks * 4.0 / tb;
        // sparse_conv_finish_f32: one work-item per (column, channel) adding KS partials. Its fixed
        // cost is a launch, about half a GEMM wave's (fitted on the H100's pairs with the rest).
        let items = c.cols * images * op.c_out as f64;
        compute += 0.5 * dev.gamma_s + dev.alpha_s * (4.0 * ks + 16.0) * (items / simd).ceil() / cus;
    }
    let max_warps = dev.max_threads_per_cu as f64 / simd;
    let hiding = (warps_res / (0.5 * max_warps)).clamp(0.25, 1.0);
    let global = tx * tb / (dev.mem_bandwidth_gbs * 1e9) / hiding;
    // Local memory: every work-item reads WM + WN operands per reduction index and stores its
    // prefetch once per stage; reads of A are broadcasts and B runs along the banks.
    let accesses = groups * threads * (stages * (tks * (wm + wn) + prefetch) + reduce_ops);
    let rate = dev.local_banks.max(1) as f64 * dev.clock_ghz * 1e9 * cus;
    let local = accesses / rate / hiding;
    Estimate::of(global, local, compute)
}

/// sparse_conv_dw_f32: a work-item per (column, channel), 64 per group.
pub fn depthwise(op: &OpGeometry, g: Option<Granularity>, st: &TileStats, dev: &DeviceDesc) -> Estimate {
    const WG: f64 = 64.0;
    let images = images(op);
    let c = columns(op, g, st);
    let ch = op.c_out as f64;
    let groups = (c.cols / WG).ceil() * ch * images;
    let empty = ((c.cap / WG).ceil() - (c.cols / WG).ceil()).max(0.0) * ch * images;
    let res = resident(dev, WG, 0.0, 32.0);
    if res < 1.0 {
        return Estimate::IMPOSSIBLE;
    }
    let cus = dev.compute_units.max(1) as f64;
    let simd = dev.simd_width.max(1) as f64;
    let warps = (WG / simd).ceil();
    let warps_res = (groups / cus).max(1.0).min(res) * warps;
    let waves = (groups / (res * cus)).ceil().max(1.0);
    let taps = (op.kh * op.kw) as f64;
    let ops = taps * 4.0 + 30.0;
    let compute = waves * ((dev.alpha_s * ops * warps_res).max(dev.latency_s).max(dev.serial_op_s * ops) + dev.gamma_s)
        + dev.alpha_s * 8.0 * empty * warps / cus;
    let tb = dev.transaction_bytes.max(4) as f64;
    let row_tx = |floats: f64| (floats * 4.0 / tb).ceil() + 0.5;
    let items = c.cols * images * ch;
    let tx = items / c.run * (taps * row_tx(c.run * op.sw as f64) + 1.0) + st.active as f64 * images * ch / c.run * row_tx(c.run);
    let max_warps = dev.max_threads_per_cu as f64 / simd;
    let hiding = (warps_res / (0.5 * max_warps)).clamp(0.25, 1.0);
    Estimate::of(tx * tb / (dev.mem_bandwidth_gbs * 1e9) / hiding, 0.0, compute)
}

/// The indices of the best `fraction` of `scores` (lowest first), at least `min_keep` of them.
pub fn prune(scores: &[f64], fraction: f64, min_keep: usize) -> Vec<usize> {
    let keep = ((scores.len() as f64 * fraction).ceil() as usize).max(min_keep).min(scores.len());
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]).then(a.cmp(&b)));
    idx.truncate(keep);
    idx
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices;
    use crate::space::{OpKind, Space};

    fn conv(c: usize, m: usize, h: usize, w: usize) -> OpGeometry {
        OpGeometry { kind: OpKind::Conv, images: 1, c_in: c, c_out: m, groups: 1, kh: 3, kw: 3, sh: 1, sw: 1, h, w, heads: 0, head_dim: 0 }
    }

    fn blob(h: usize, w: usize) -> BitMask {
        BitMask::from_fn(h, w, |y, x| (y as i64 - 6).pow(2) + (x as i64 - 9).pow(2) < 20 || (y > 14 && x < 5))
    }

    #[test]
    fn tile_stats_count_runs_and_phantom() {
        let m = BitMask::from_fn(6, 10, |y, x| y < 2 && x < 7);
        let s = TileStats::of(&m, Granularity::new(2, 4));
        // Two tiles side by side in one band: one run per row.
        assert_eq!((s.tiles, s.computed, s.active, s.runs), (2, 16, 14, 2));
        // 4x4 on a 6x10 map: the tile at x=8 reaches past the edge (phantom not computed).
        let m = BitMask::from_fn(6, 10, |_, x| x == 9);
        let s = TileStats::of(&m, Granularity::new(4, 4));
        assert_eq!((s.tiles, s.computed), (2, 4 * 2 + 2 * 2));
    }

    #[test]
    fn cpu_estimates_grow_with_the_work_and_stay_below_dense_when_sparse() {
        let op = conv(32, 32, 18, 24);
        let dev = devices::cpu(2);
        let space = Space::cpu(op.clone());
        let m = blob(18, 24);
        let p = space.points();
        let t = |g: Granularity| {
            let i = p.iter().position(|q| space.granularity(q) == g).unwrap();
            estimate(&space, &p[i], &TileStats::of(&m, g), &dev).total
        };
        // Bigger tiles compute more positions around the same blobs.
        assert!(t(Granularity::new(1, 1)) <= t(Granularity::new(4, 4)));
        assert!(t(Granularity::new(4, 4)) <= t(Granularity::new(8, 16)));
        assert!(t(Granularity::new(1, 1)) < estimate_dense(&op, &dev).total);
    }

    #[test]
    fn gpu_estimates_are_finite_for_valid_points_and_respond_to_coalescing() {
        let op = conv(64, 64, 12, 16);
        let dev = devices::builtin("orin").unwrap();
        let space = Space::gpu(op, &dev);
        let m = blob(12, 16);
        let pts = space.points();
        let mut finite = 0;
        for p in &pts {
            let e = estimate(&space, p, &TileStats::of(&m, space.granularity(p)), &dev);
            assert!(e.total > 0.0 && !e.total.is_nan());
            finite += e.total.is_finite() as usize;
            assert_eq!(e.total, e.global.max(e.local).max(e.compute));
        }
        assert!(finite > pts.len() / 2, "{finite} of {}", pts.len());
        // Same knobs, tiles one position wide against eight wide: the narrow rows coalesce worse.
        let find = |gh: u16, gw: u16| {
            let want = GemmKnobs { tm: 32, tn: 32, tk: 8, wm: 2, wn: 2, ks: 1, wk: 1, et: false };
            pts.iter().find(|p| space.granularity(p) == Granularity::new(gh, gw) && space.gemm(p) == Some(want)).unwrap()
        };
        let full = BitMask::ones(12, 16);
        let narrow = estimate(&space, find(8, 1), &TileStats::of(&full, Granularity::new(8, 1)), &dev);
        let wide = estimate(&space, find(1, 8), &TileStats::of(&full, Granularity::new(1, 8)), &dev);
        assert!(narrow.global > wide.global, "narrow {narrow:?} wide {wide:?}");
    }

    #[test]
    fn gpu_model_sees_latency_bound_chains_and_the_split_that_shortens_them() {
        // conv3x3 256 -> 256 on 40 x 40 at 1% density on an H100: a few columns, 144 stages of
        // K per work-group at KS = 1. Splitting the reduction 8 ways cuts the chain (measured on
        // the H100: 256 -> 32 indices per split took this conv from 53 to 38 µs at 10%).
        let op = conv(256, 256, 40, 40);
        let dev = devices::from_device_info(&devices::h100_info());
        let space = Space::gpu(op.clone(), &dev);
        let m = BitMask::from_fn(40, 40, |y, x| y % 10 == 3 && x % 10 == 4);
        let g = Granularity::new(1, 1);
        let st = TileStats::of(&m, g);
        let at = |ks: u32| {
            let want = GemmKnobs { tm: 64, tn: 32, tk: 16, wm: 4, wn: 2, ks, wk: 1, et: false };
            let p = space.points().into_iter().find(|p| space.granularity(p) == g && space.gemm(p) == Some(want)).unwrap();
            estimate(&space, &p, &st, &dev)
        };
        let (one, eight) = (at(1), at(8));
        assert!(eight.compute < one.compute / 3.0 && eight.total < one.total * 0.6, "KS 1 {one:?}, KS 8 {eight:?}");
        // The dense member costs more than this sparse frame, less than 10x a full frame's sparse run.
        let dense = estimate_dense(&op, &dev);
        assert!(dense.total > eight.total, "dense {dense:?}");
        // 2,304 indices at KS 32: chunks of 80, so 29 splits run, as at KS 29, and the three
        // empty ones cost nothing; KS 16 (chunks of 144) is a different schedule.
        let direct =
            |ks: u32| gemm(&op, Some(g), &GemmKnobs { tm: 64, tn: 32, tk: 16, wm: 4, wn: 2, ks, wk: 1, et: false }, &st, &dev).total;
        assert_eq!(direct(32), direct(29));
        assert_ne!(direct(32), direct(16));
    }

    #[test]
    fn gpu_model_charges_a_lone_work_items_serial_stage() {
        // 1x1 conv 64 -> 64 on 56 x 56 at ~40% density on an H100 (RESULTS.md, "the roofline's
        // serial stage"): one-warp groups with 32 accumulators per work-item measured 33 µs,
        // 256 work-items of 2 outputs 9 µs. Both are latency-bound on paper; only the serial stage tells them apart.
        let op = OpGeometry { kh: 1, kw: 1, ..conv(64, 64, 56, 56) };
        let dev = devices::from_device_info(&devices::h100_info());
        let m = BitMask::from_fn(56, 56, |y, x| (y / 7 + x / 5) % 5 < 2);
        let g = Granularity::new(1, 1);
        let st = TileStats::of(&m, g);
        let wide = GemmKnobs { tm: 32, tn: 32, tk: 32, wm: 4, wn: 8, ks: 1, wk: 1, et: false };
        let narrow = GemmKnobs { tm: 32, tn: 16, tk: 16, wm: 1, wn: 2, ks: 1, wk: 1, et: false };
        let (w, n) = (gemm(&op, Some(g), &wide, &st, &dev), gemm(&op, Some(g), &narrow, &st, &dev));
        assert!(n.total < 0.6 * w.total, "narrow {n:?} wide {w:?}");
    }

    #[test]
    fn prune_keeps_the_lowest_fraction_with_a_floor() {
        let s: Vec<f64> = (0..1000).map(|i| ((i * 7919) % 1000) as f64).collect();
        let k = prune(&s, 0.001, 1);
        assert_eq!(k.len(), 1);
        assert_eq!(s[k[0]], 0.0);
        let k = prune(&s, 0.01, 1);
        assert_eq!(k.len(), 10);
        assert!(k.iter().all(|&i| s[i] < 10.0));
        assert_eq!(prune(&s, 0.001, 16).len(), 16);
        assert_eq!(prune(&s[..5], 0.5, 16).len(), 5);
    }
}
