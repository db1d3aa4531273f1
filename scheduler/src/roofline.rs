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
//!   per device (fitted by the micro-benchmark where we can run, from specs otherwise).

use crate::space::{OpGeometry, Point, Space, Target};
use crate::devices::DeviceDesc;
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

/// The dense member's estimate on `dev` (CPU or GPU: every position, no gather).
pub fn estimate_dense(op: &OpGeometry, dev: &DeviceDesc) -> Estimate {
    let st = TileStats::dense(op.h, op.w);
    let mut e = cpu(op, &st, dev, images(op));
    if dev.backend != "cpu" {
        // A dense GPU kernel fills the machine: the peak-rate bound.
        let macs = op.macs_per_position() * (op.h * op.w) as f64 * images(op);
        e = Estimate::of(e.global, 0.0, macs / dev.peak_macs() + dev.gamma_s);
    }
    e
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
    let op = &space.op;
    let g = space.granularity(p);
    let knob = |n: &str| space.knob(p, n).unwrap_or(1).max(1) as f64;
    let (tpg, oc, wpt, ks, unroll, v) = (knob("tiles_per_group"), knob("oc_per_group"), knob("work_per_thread"), knob("k_step"), knob("unroll"), knob("vec"));
    let staged = space.knob(p, "stage") == Some(1);
    let Some(threads) = space.threads(p) else { return Estimate::IMPOSSIBLE };
    let simd = dev.simd_width as f64;
    let warps_per_group = (threads as f64 / simd).ceil();
    // Occupancy: work-groups resident per compute unit, by each limit.
    let local = space.local_bytes(p) as f64;
    let regs = space.registers(p) as f64;
    let by_threads = (dev.max_threads_per_cu as f64 / (warps_per_group * simd)).floor();
    let by_local = if local > 0.0 { (dev.local_mem_per_cu as f64 / local).floor() } else { f64::INFINITY };
    let by_regs = (dev.registers_per_cu as f64 / (regs * warps_per_group * simd)).floor();
    let resident = (dev.max_groups_per_cu as f64).min(by_threads).min(by_local).min(by_regs);
    if resident < 1.0 || st.tiles == 0 && st.active > 0 {
        return Estimate::IMPOSSIBLE;
    }
    let images = images(op);
    let area = (g.h as usize * g.w as usize) as f64;
    let groups = (st.tiles as f64 / tpg).ceil() * (op.c_out as f64 / oc).ceil() * images;
    let waves = (groups / (resident * dev.compute_units as f64)).ceil().max(1.0);
    let warps_resident = resident.min(groups) * warps_per_group;
    let max_warps = dev.max_threads_per_cu as f64 / simd;
    // Below half the resident warps a CU can hold, latency is no longer hidden.
    let hiding = (warps_resident / (0.5 * max_warps)).min(1.0);

    // Compute: per thread, a multiply-add per reduction element per output, the loop
    // overhead per unrolled step, and the K-step barriers and loads.
    let k = op.k_dim() as f64;
    let ops = k * wpt + (k / unroll) * 2.0 + (k / ks) * if staged { 8.0 } else { 2.0 };
    let compute = waves * (dev.alpha_s * ops * warps_resident + dev.gamma_s);

    // Global memory. A warp's threads walk positions along x within a tile row: `g.w`
    // consecutive floats coalesce; unstaged, every output re-reads its window. Weights:
    // vector loads along K, shared by the group when staged.
    let tb = dev.transaction_bytes as f64;
    let cin = (op.c_in / op.groups.max(1)).max(1) as f64;
    let per_row = |floats: f64| (floats * 4.0 / tb).ceil() + 1.0;
    let positions = st.computed as f64 * images;
    let (input_tx, weight_tx) = if op.is_token() {
        (positions * (k * 4.0 / tb).ceil(), groups * oc * (k * 4.0 / (tb * v).min(k * 4.0)).ceil() / if staged { 1.0 } else { 0.5 })
    } else if staged {
        let pw = (g.w as f64 - 1.0) * op.sw as f64 + op.kw as f64;
        let ph = (g.h as f64 - 1.0) * op.sh as f64 + op.kh as f64;
        (st.tiles as f64 * images * (op.c_out / oc as usize).max(1) as f64 * cin * ph * per_row(pw), groups * oc * k * 4.0 / tb)
    } else {
        // Each (channel, ky, kx) load of a warp covers one tile row of g.w positions.
        let rows = positions / g.w as f64;
        (rows * k * per_row(g.w as f64 * op.sw as f64) * (op.c_out as f64 / oc).ceil(), groups * oc * k * (4.0 * v).max(tb) / tb / v)
    };
    let out_rows = st.active as f64 * images / g.w as f64;
    let out_tx = out_rows * op.c_out as f64 * per_row(g.w as f64);
    let global = (input_tx + weight_tx + out_tx) * tb / (dev.mem_bandwidth_gbs * 1e9) / hiding.max(0.25);

    // Local memory: staged operands are read from the banks by every thread; strided windows
    // hit the same bank `stride` times.
    let local_t = if staged {
        let outputs = groups * area * tpg * oc;
        let accesses = outputs * k / wpt + outputs * k / v;
        let conflict = (op.sw as f64).min(dev.local_banks as f64).max(1.0);
        let rate = dev.local_banks as f64 * dev.clock_ghz * 1e9 * dev.compute_units as f64;
        accesses * conflict / rate / hiding.max(0.1)
    } else {
        0.0
    };
    Estimate::of(global, local_t, compute)
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
            pts.iter().find(|p| space.granularity(p) == Granularity::new(gh, gw) && space.knob(p, "stage") == Some(0) && space.knob(p, "oc_per_group") == Some(32) && space.knob(p, "work_per_thread") == Some(4) && space.knob(p, "tiles_per_group") == Some(2) && space.knob(p, "k_step") == Some(8) && space.knob(p, "unroll") == Some(1) && space.knob(p, "vec") == Some(1)).unwrap()
        };
        let full = BitMask::ones(12, 16);
        let narrow = estimate(&space, find(8, 1), &TileStats::of(&full, Granularity::new(8, 1)), &dev);
        let wide = estimate(&space, find(1, 8), &TileStats::of(&full, Granularity::new(1, 8)), &dev);
        assert!(narrow.global > wide.global, "narrow {narrow:?} wide {wide:?}");
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
