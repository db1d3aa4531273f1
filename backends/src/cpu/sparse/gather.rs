//! Moving data between NCHW planes and 64-column GEMM panels for an arbitrary list of output
//! positions: the im2col rows of the positions (gather) and the results back to the output
//! planes (scatter), both through one per-panel plan.
//!
//! Each 16-lane vector of a panel row is filled from its lanes' offsets: lanes that read
//! consecutive input addresses form a segment, and a vector made of at most `MAX_SEGS` segments
//! is a few masked loads (at stride 1, runs of output positions read runs of input); anything
//! else (strided windows, scattered positions) is one hardware gather. Lanes
//! reading padding, and columns past the panel's end, are masked off and read as 0. Writing back
//! uses the same construction over the active positions only, so inactive and phantom
//! positions are never stored to.

use super::columns::Columns;
use std::cell::RefCell;

/// 2-D conv geometry of one group (NCHW planes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geo2 {
    /// Input plane.
    pub h: usize,
    pub w: usize,
    /// Output plane.
    pub ho: usize,
    pub wo: usize,
    pub kh: usize,
    pub kw: usize,
    pub sh: usize,
    pub sw: usize,
    pub dh: usize,
    pub dw: usize,
    pub ph: usize,
    pub pw: usize,
}

impl Geo2 {
    pub fn taps(&self) -> usize {
        self.kh * self.kw
    }
    pub fn plane(&self) -> usize {
        self.h * self.w
    }
    pub fn out_plane(&self) -> usize {
        self.ho * self.wo
    }
}

/// Vectors with more segments than this are gathered instead. Measured on the 2-core AVX-512
/// box (1 thread, real masks, 3x3 s1/s2 and 1x1 at densities 0.1-0.5): 0 (always the hardware
/// gather), 1, 3 and 8 are all within the noise of each other, so this box gathers 16 lanes
/// about as fast as it issues three masked loads; 3 keeps long runs on plain loads.
const MAX_SEGS: usize = 3;

/// Lanes in `mask` of a vector live at `base + off + lane`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Seg {
    pub mask: u16,
    pub off: isize,
}

/// How one 16-lane vector is read or written.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) enum VecOp {
    /// No lane is touched (reads give zeros).
    #[default]
    Zero,
    /// `segs[s0..s1]`.
    Segs { s0: u32, s1: u32 },
    /// One gather/scatter: lanes in `mask` at `base + idx[i][lane]`.
    Indexed { mask: u16, i: u32 },
}

#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
pub(crate) struct Idx16(pub [i32; 16]);

/// The plan of one panel: for every tap row the vectors to read, and the vectors to write back.
#[derive(Default, Debug)]
pub(crate) struct PanelPlan {
    pub cols: usize,
    pub vecs: usize,
    pub taps: usize,
    /// Per (tap, vector), `tap * 4 + v`.
    pub reads: Vec<VecOp>,
    pub writes: [VecOp; 4],
    pub segs: Vec<Seg>,
    pub idx: Vec<Idx16>,
    /// Offsets that between them touch every cache line the reads (of one channel plane) and
    /// the writes touch, whatever the plane's alignment: the first and last offset of each
    /// 16-float bucket.
    pub read_lines: Vec<isize>,
    pub write_lines: Vec<isize>,
    offs: Vec<Option<isize>>,
}

impl PanelPlan {
    /// Plans columns `j0..j0 + cols` (`cols` <= 64) of `c` for geometry `g`. Offsets are within
    /// a plane: the callers step the plane base per channel.
    pub fn build(&mut self, g: &Geo2, c: &Columns, j0: usize, cols: usize) {
        debug_assert!(cols <= 64 && j0 + cols <= c.len());
        self.cols = cols;
        self.vecs = cols.div_ceil(16);
        self.taps = g.taps();
        self.reads.clear();
        self.segs.clear();
        self.idx.clear();
        self.read_lines.clear();
        for a in 0..g.kh {
            for b in 0..g.kw {
                for v in 0..4 {
                    self.offs.clear();
                    for l in 0..16 {
                        let j = 16 * v + l;
                        let off = (j < cols).then(|| {
                            let iy = (c.ys[j0 + j] as usize * g.sh + a * g.dh) as isize - g.ph as isize;
                            let ix = (c.xs[j0 + j] as usize * g.sw + b * g.dw) as isize - g.pw as isize;
                            let inside = iy >= 0 && iy < g.h as isize && ix >= 0 && ix < g.w as isize;
                            inside.then_some(iy * g.w as isize + ix)
                        });
                        self.offs.push(off.flatten());
                    }
                    self.read_lines.extend(self.offs.iter().flatten());
                    let op = self.vec_op();
                    self.reads.push(op);
                }
            }
        }
        self.write_lines.clear();
        for v in 0..4 {
            self.offs.clear();
            for l in 0..16 {
                let j = 16 * v + l;
                let at = j < cols && c.active[j0 + j];
                self.offs.push(at.then(|| (c.ys[j0 + j] as usize * g.wo + c.xs[j0 + j] as usize) as isize));
            }
            for o in self.offs.iter().flatten() {
                self.write_lines.push(*o);
            }
            self.writes[v] = self.vec_op();
        }
        bucket_ends(&mut self.read_lines);
        bucket_ends(&mut self.write_lines);
    }

    /// The op for the 16 lane offsets in `self.offs` (`None`: lane not touched).
    fn vec_op(&mut self) -> VecOp {
        let s0 = self.segs.len();
        let mut last: Option<(usize, isize)> = None;
        for (l, off) in self.offs.iter().enumerate() {
            if let Some(o) = *off {
                match last {
                    Some((pl, po)) if pl + 1 == l && po + 1 == o => self.segs.last_mut().unwrap().mask |= 1 << l,
                    _ => self.segs.push(Seg { mask: 1 << l, off: o - l as isize }),
                }
                last = Some((l, o));
            }
        }
        let n = self.segs.len() - s0;
        if n == 0 {
            VecOp::Zero
        } else if n <= MAX_SEGS {
            VecOp::Segs { s0: s0 as u32, s1: self.segs.len() as u32 }
        } else {
            self.segs.truncate(s0);
            let mut ix = Idx16::default();
            let mut mask = 0u16;
            for (l, off) in self.offs.iter().enumerate() {
                if let Some(o) = *off {
                    ix.0[l] = o as i32;
                    mask |= 1 << l;
                }
            }
            self.idx.push(ix);
            VecOp::Indexed { mask, i: self.idx.len() as u32 - 1 }
        }
    }

    /// Portable gather: rows `(c, tap)` of 64 floats for `channels` planes of `x`. Segments
    /// are slice copies, which the compiler turns into vector loads on any target (NEON on
    /// aarch64), so only `Indexed` vectors go lane by lane.
    pub fn gather(&self, x: &[f32], plane: usize, channels: usize, out: &mut [f32]) {
        for (xc, rows) in x.chunks_exact(plane).zip(out.chunks_exact_mut(self.taps * 64)).take(channels) {
            for (t, row) in rows.chunks_exact_mut(64).enumerate() {
                for v in 0..self.vecs {
                    let dst = &mut row[16 * v..16 * v + 16];
                    dst.fill(0.0);
                    self.each_run(self.reads[t * 4 + v], |l, at, n| dst[l..l + n].copy_from_slice(&xc[at..at + n]));
                }
            }
        }
    }

    /// Calls `f(first lane, offset, lanes)` for every run of consecutive lanes `op` touches at
    /// consecutive offsets: a whole segment (its lanes are contiguous by construction), or
    /// one lane of an indexed vector.
    #[inline]
    pub fn each_run(&self, op: VecOp, mut f: impl FnMut(usize, usize, usize)) {
        match op {
            VecOp::Segs { s0, s1 } => {
                for s in &self.segs[s0 as usize..s1 as usize] {
                    let lo = s.mask.trailing_zeros() as usize;
                    let n = 16 - s.mask.leading_zeros() as usize - lo;
                    debug_assert_eq!(s.mask, (((1u32 << n) - 1) << lo) as u16, "segment lanes are contiguous");
                    f(lo, (s.off + lo as isize) as usize, n);
                }
            }
            op => self.each_lane(op, |l, at| f(l, at, 1)),
        }
    }

    /// Calls `f(lane, offset)` for every lane `op` touches.
    #[inline]
    pub fn each_lane(&self, op: VecOp, mut f: impl FnMut(usize, usize)) {
        match op {
            VecOp::Zero => {}
            VecOp::Segs { s0, s1 } => {
                for s in &self.segs[s0 as usize..s1 as usize] {
                    for l in 0..16 {
                        if s.mask >> l & 1 == 1 {
                            f(l, (s.off + l as isize) as usize);
                        }
                    }
                }
            }
            VecOp::Indexed { mask, i } => {
                for l in 0..16 {
                    if mask >> l & 1 == 1 {
                        f(l, self.idx[i as usize].0[l] as usize);
                    }
                }
            }
        }
    }
}

/// Sorts `v` and keeps the first and last offset of each 16-float bucket: a cache line holding
/// any of the offsets holds one of those two of the buckets it overlaps.
fn bucket_ends(v: &mut Vec<isize>) {
    v.sort_unstable();
    let mut keep = 0;
    for i in 0..v.len() {
        let first = i == 0 || v[i - 1].div_euclid(16) != v[i].div_euclid(16);
        let last = i + 1 == v.len() || v[i + 1].div_euclid(16) != v[i].div_euclid(16);
        if first || last {
            v[keep] = v[i];
            keep += 1;
        }
    }
    v.truncate(keep);
}

thread_local! {
    static PLAN: RefCell<PanelPlan> = RefCell::new(PanelPlan::default());
}

/// Runs `f` on this thread's reusable plan (a fresh one if it is in use).
pub(crate) fn with_plan<R>(f: impl FnOnce(&mut PanelPlan) -> R) -> R {
    PLAN.with(|p| match p.try_borrow_mut() {
        Ok(mut p) => f(&mut p),
        Err(_) => f(&mut PanelPlan::default()),
    })
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod simd {
    use super::{PanelPlan, VecOp};
    use std::arch::x86_64::*;

    /// AVX-512 version of [`PanelPlan::gather`] (only the first `plan.vecs` vectors of each row
    /// are written).
    ///
    /// # Safety
    /// AVX-512F must be available and `plan` built for planes of `plane` floats.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn gather(plan: &PanelPlan, x: &[f32], plane: usize, channels: usize, out: &mut [f32]) {
        // Plan offsets stay inside one plane, so these bounds keep every read and write in range.
        assert!(x.len() >= channels * plane && out.len() >= channels * plan.taps * 64, "panel gather out of bounds");
        let mut row = out.as_mut_ptr();
        for c in 0..channels {
            let base = x.as_ptr().add(c * plane);
            if c + PF_CHANNELS < channels {
                prefetch(&plan.read_lines, base.wrapping_add(PF_CHANNELS * plane));
            }
            for t in 0..plan.taps {
                for v in 0..plan.vecs {
                    let val = read(plan, plan.reads[t * 4 + v], base);
                    _mm512_storeu_ps(row.add(16 * v), val);
                }
                row = row.add(64);
            }
        }
    }

    /// One vector per `op`, lanes it does not touch zero.
    ///
    /// # Safety
    /// AVX-512F; `base` is the start of a plane the plan was built for.
    #[inline(always)]
    pub unsafe fn read(plan: &PanelPlan, op: VecOp, base: *const f32) -> __m512 {
        match op {
            VecOp::Zero => _mm512_setzero_ps(),
            VecOp::Segs { s0, s1 } => {
                let mut acc = _mm512_setzero_ps();
                for s in plan.segs.get_unchecked(s0 as usize..s1 as usize) {
                    // Masked-off lanes are neither read nor faulted on, wherever they point.
                    acc = _mm512_mask_loadu_ps(acc, s.mask, base.wrapping_offset(s.off));
                }
                acc
            }
            VecOp::Indexed { mask, i } => {
                let ix = _mm512_load_si512(plan.idx.get_unchecked(i as usize).0.as_ptr() as *const _);
                _mm512_mask_i32gather_ps::<4>(_mm512_setzero_ps(), mask, ix, base)
            }
        }
    }

    /// Reads vector `v` of the write-back positions from an output-shaped plane (the residual),
    /// zeros elsewhere.
    ///
    /// # Safety
    /// AVX-512F; `plane` holds the output plane the plan was built for.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn read_out(plan: &PanelPlan, plane: &[f32], dst: &mut [f32; 64]) {
        for v in 0..plan.vecs {
            _mm512_storeu_ps(dst.as_mut_ptr().add(16 * v), read(plan, plan.writes[v], plane.as_ptr()));
        }
    }

    /// Asks for the cache lines a `write_out` to `plane` will touch (NCHW output rows are 64
    /// scattered positions per plane: without this every store waits for its line).
    #[inline(always)]
    pub fn prefetch_out(plan: &PanelPlan, plane: *const f32) {
        prefetch(&plan.write_lines, plane)
    }

    /// How many channel planes ahead the gather prefetches the lines it will read.
    const PF_CHANNELS: usize = 2;

    #[inline(always)]
    fn prefetch(lines: &[isize], plane: *const f32) {
        for &o in lines {
            // SAFETY: prefetches never fault.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(plane.wrapping_offset(o) as *const i8) };
        }
    }

    /// Stores the first `plan.vecs` vectors of `src` to the active positions of `plane`.
    ///
    /// # Safety
    /// AVX-512F; `plane` is the output plane the plan was built for.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn write_out(plan: &PanelPlan, src: &[f32], plane: *mut f32) {
        debug_assert!(src.len() >= 16 * plan.vecs);
        for v in 0..plan.vecs {
            let val = _mm512_loadu_ps(src.as_ptr().add(16 * v));
            match plan.writes[v] {
                VecOp::Zero => {}
                VecOp::Segs { s0, s1 } => {
                    for s in plan.segs.get_unchecked(s0 as usize..s1 as usize) {
                        _mm512_mask_storeu_ps(plane.wrapping_offset(s.off), s.mask, val);
                    }
                }
                VecOp::Indexed { mask, i } => {
                    let ix = _mm512_load_si512(plan.idx.get_unchecked(i as usize).0.as_ptr() as *const _);
                    _mm512_mask_i32scatter_ps::<4>(plane, mask, ix, val);
                }
            }
        }
    }
}
