//! Depthwise conv (one input channel per group), computed directly: as a GEMM its K would be
//! just the window size.
//!
//! AVX-512, stride 1 along W: the positions to write are grouped into 16-wide aligned blocks of
//! output rows, and each block is one vector per tap read with a masked load straight from the
//! input row (lanes outside the row masked off), written back with one masked store. Real
//! masks have short runs (2.5 positions on average at density 0.1), so a block computing 16
//! lanes for a few useful ones still beats gathering the useful ones tap by tap.
//! AVX-512, other strides: per 64-position panel one gather plan (the conv's) serves every
//! channel, whose vectors accumulate their taps from masked loads or gathers.
//! Portable: per channel and run of positions, each tap adds a scaled, shifted row segment.

use super::columns::Columns;
use super::gather::{with_plan, Geo2, PanelPlan};
use super::scratch::{self, Slot};
use crate::cpu::gemm_util::{threads, SendPtr};
use crate::cpu::kernel_util::{epilogue, multiversion};
use dynaspa_runtime::graph::Activation;
use rayon::prelude::*;

pub(crate) struct Job<'a> {
    pub g: &'a Geo2,
    /// Output channels per input channel.
    pub mult: usize,
    /// `[M, kh * kw]`.
    pub w: &'a [f32],
    pub bias: Option<&'a [f32]>,
    pub act: Option<Activation>,
    pub residual: Option<&'a [f32]>,
}

impl Job<'_> {
    pub fn run(&self, x: &[f32], out: &mut [f32], cols: &Columns, simd: bool) {
        #[cfg(target_arch = "x86_64")]
        if simd && self.g.sw == 1 && self.g.kw <= MAX_KW {
            return self.run_blocks(x, out, cols);
        }
        #[cfg(target_arch = "x86_64")]
        if simd {
            return self.run_simd(x, out, cols);
        }
        let _ = simd;
        self.run_portable(x, out, cols)
    }

    /// Row blocks (see the module docs); parallel over blocks of output channels.
    #[cfg(target_arch = "x86_64")]
    fn run_blocks(&self, x: &[f32], out: &mut [f32], cols: &Columns) {
        let (plane, op, taps) = (self.g.plane(), self.g.out_plane(), self.g.taps());
        let m_n = out.len() / op.max(1);
        with_blocks(|b| {
            row_blocks(self.g, cols, b);
            let blocks: &[Block] = &b.list;
            let per = m_n.div_ceil(4 * threads()).max(1);
            let y = SendPtr::new(out);
            (0..m_n.div_ceil(per)).into_par_iter().with_max_len(1).for_each(|ci| {
                scratch::with(Slot::Acc, blocks.len() * 16, |buf| {
                    scratch::with(Slot::Panel, if self.residual.is_some() { blocks.len() * 16 } else { 0 }, |rbuf| {
                        for m in ci * per..((ci + 1) * per).min(m_n) {
                            let xc = &x[(m / self.mult) * plane..][..plane];
                            let wm = &self.w[m * taps..(m + 1) * taps];
                            let res = self.residual.map(|r| &r[m * op..(m + 1) * op]);
                            // SAFETY: AVX-512 was detected at preparation; blocks lie inside the
                            // planes; this task alone writes channel m.
                            unsafe {
                                blocks_simd(self.g, blocks, xc, wm, buf);
                                if let Some(r) = res {
                                    blocks_read(blocks, self.g.wo, r, rbuf);
                                }
                                epilogue(buf, self.bias.map_or(0.0, |b| b[m]), res.map(|_| &*rbuf), self.act);
                                blocks_write(blocks, self.g.wo, buf, y.get().add(m * op));
                            }
                        }
                    })
                })
            });
        })
    }

    /// Tasks are (64-position panel, block of channels), each building the panel's plan once.
    #[cfg(target_arch = "x86_64")]
    fn run_simd(&self, x: &[f32], out: &mut [f32], cols: &Columns) {
        const NR: usize = 64;
        let (plane, op, taps) = (self.g.plane(), self.g.out_plane(), self.g.taps());
        let m_n = out.len() / op.max(1);
        let panels = cols.len().div_ceil(NR);
        let chunks = (4 * threads()).div_ceil(panels).min(m_n).max(1);
        let per = m_n.div_ceil(chunks);
        let chunks = m_n.div_ceil(per);
        let y = SendPtr::new(out);
        (0..panels * chunks).into_par_iter().with_max_len(1).for_each(|task| {
            let (pi, ci) = (task / chunks, task % chunks);
            with_plan(|plan| {
                let (j0, j1) = super::columns::panel(pi, cols.len());
                plan.build(self.g, cols, j0, j1 - j0);
                for m in ci * per..((ci + 1) * per).min(m_n) {
                    let xc = &x[(m / self.mult) * plane..][..plane];
                    let res = self.residual.map(|r| &r[m * op..(m + 1) * op]);
                    let b = self.bias.map_or(0.0, |b| b[m]);
                    // SAFETY: AVX-512 was detected at preparation; the plan is for these planes;
                    // this task alone writes channel m at the panel's positions.
                    unsafe { channel_simd(plan, xc, &self.w[m * taps..(m + 1) * taps], b, res, self.act, y.get().add(m * op)) };
                }
            })
        });
    }

    /// Parallel over blocks of output channels: each owns whole planes of `out`.
    fn run_portable(&self, x: &[f32], out: &mut [f32], cols: &Columns) {
        let (plane, op) = (self.g.plane(), self.g.out_plane());
        let m_n = out.len() / op.max(1);
        let per = m_n.div_ceil(4 * threads()).max(1);
        let longest = cols.runs.iter().map(|r| r.len as usize).max().unwrap_or(0);
        out.par_chunks_mut(per * op).enumerate().with_max_len(1).for_each(|(bi, planes)| {
            scratch::with(Slot::Acc, longest, |acc| {
                for (i, yp) in planes.chunks_exact_mut(op).enumerate() {
                    let m = bi * per + i;
                    let xc = &x[(m / self.mult) * plane..][..plane];
                    let wm = &self.w[m * self.g.taps()..][..self.g.taps()];
                    for r in &cols.runs {
                        let (y, x0, len) = (r.y as usize, r.x0 as usize, r.len as usize);
                        let a = &mut acc[..len];
                        run_taps(self.g, xc, wm, y, x0, a);
                        let at = y * self.g.wo + x0;
                        let res = self.residual.map(|rs| &rs[m * op + at..][..len]);
                        epilogue(a, self.bias.map_or(0.0, |b| b[m]), res, self.act);
                        let flags = &cols.active[r.col as usize..][..len];
                        let dst = &mut yp[at..at + len];
                        if flags.iter().all(|&f| f) {
                            dst.copy_from_slice(a);
                        } else {
                            for ((d, &v), &f) in dst.iter_mut().zip(a.iter()).zip(flags) {
                                if f {
                                    *d = v;
                                }
                            }
                        }
                    }
                }
            });
        });
    }
}

multiversion! {
/// `acc[j]` = the window sum at output `(y, x0 + j)` of one channel plane `xc`.
fn run_taps(g: &Geo2, xc: &[f32], wm: &[f32], y: usize, x0: usize, acc: &mut [f32]) {
    acc.fill(0.0);
    let len = acc.len();
    for a in 0..g.kh {
        let iy = (y * g.sh + a * g.dh) as isize - g.ph as isize;
        if iy < 0 || iy >= g.h as isize {
            continue;
        }
        let row = &xc[iy as usize * g.w..][..g.w];
        for b in 0..g.kw {
            let wv = wm[a * g.kw + b];
            // Input column of output x0 + j is x0 * sw + b * dw - pw + j * sw; keep j where it
            // lands inside the row.
            let base = (x0 * g.sw + b * g.dw) as isize - g.pw as isize;
            let lo = if base >= 0 { 0 } else { ((-base) as usize).div_ceil(g.sw) };
            let hi = if base >= g.w as isize { 0 } else { ((g.w as isize - base) as usize).div_ceil(g.sw) };
            let (lo, hi) = (lo.min(len), hi.min(len));
            if lo >= hi {
                continue;
            }
            let start = (base + (lo * g.sw) as isize) as usize;
            if g.sw == 1 {
                for (o, &v) in acc[lo..hi].iter_mut().zip(&row[start..start + hi - lo]) {
                    *o += wv * v;
                }
            } else {
                for (o, &v) in acc[lo..hi].iter_mut().zip(row[start..].iter().step_by(g.sw)) {
                    *o += wv * v;
                }
            }
        }
    }
}
}

/// One channel at one panel's positions: taps accumulated per 16-lane vector, then bias,
/// residual and activation, then the masked write.
///
/// # Safety
/// AVX-512F; `plan` built for planes like `xc` (input) and `y` (output, whole plane).
#[cfg(target_arch = "x86_64")]
unsafe fn channel_simd(plan: &PanelPlan, xc: &[f32], wm: &[f32], bias: f32, res: Option<&[f32]>, act: Option<Activation>, y: *mut f32) {
    use super::gather::simd::{read_out, write_out};
    let mut v = [0.0f32; 64];
    match plan.vecs {
        1 => taps_simd::<1>(plan, xc, wm, &mut v),
        2 => taps_simd::<2>(plan, xc, wm, &mut v),
        3 => taps_simd::<3>(plan, xc, wm, &mut v),
        _ => taps_simd::<4>(plan, xc, wm, &mut v),
    }
    let n = 16 * plan.vecs;
    let mut tmp = [0.0f32; 64];
    if let Some(r) = res {
        read_out(plan, r, &mut tmp);
    }
    epilogue(&mut v[..n], bias, res.map(|_| &tmp[..n]), act);
    write_out(plan, &v, y);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::needless_range_loop)] // constant trip counts keep the accumulators in registers
unsafe fn taps_simd<const V: usize>(plan: &PanelPlan, xc: &[f32], wm: &[f32], out: &mut [f32; 64]) {
    use super::gather::simd::read;
    use std::arch::x86_64::*;
    assert!(wm.len() >= plan.taps, "depthwise weights out of bounds");
    let mut acc = [_mm512_setzero_ps(); V];
    for t in 0..plan.taps {
        let w = _mm512_set1_ps(wm[t]);
        for v in 0..V {
            let x = read(plan, *plan.reads.get_unchecked(t * 4 + v), xc.as_ptr());
            acc[v] = _mm512_fmadd_ps(w, x, acc[v]);
        }
    }
    for v in 0..V {
        _mm512_storeu_ps(out.as_mut_ptr().add(16 * v), acc[v]);
    }
}

/// 16 aligned output positions of one row: `(y, x0..x0 + 16)`; `write` marks the positions to
/// store, `taps[b]` (one per kernel column) the lanes whose input column is inside the row.
#[derive(Clone, Copy, Debug, Default)]
struct Block {
    y: u32,
    x0: u32,
    write: u16,
    taps: [u16; MAX_KW],
}

/// Kernels wider than this take the gather-plan path.
const MAX_KW: usize = 8;

/// The blocks of a call and the per-block bits they are made from, reused across calls.
#[derive(Default)]
struct Blocks {
    list: Vec<Block>,
    bits: Vec<u16>,
}

thread_local! {
    static BLOCKS: std::cell::RefCell<Blocks> = std::cell::RefCell::new(Blocks::default());
}

fn with_blocks<R>(f: impl FnOnce(&mut Blocks) -> R) -> R {
    BLOCKS.with(|b| match b.try_borrow_mut() {
        Ok(mut b) => f(&mut b),
        Err(_) => f(&mut Blocks::default()),
    })
}

/// The blocks holding the active columns of `cols`, in row-major order, into `b.list`.
fn row_blocks(g: &Geo2, cols: &Columns, b: &mut Blocks) {
    // Active positions as bits, then one pass over each row's 16-wide blocks.
    let wb = g.wo.div_ceil(16);
    let (bits, out) = (&mut b.bits, &mut b.list);
    bits.clear();
    bits.resize(g.ho * wb, 0);
    for r in &cols.runs {
        for j in 0..r.len as usize {
            if cols.active[r.col as usize + j] {
                let x = r.x0 as usize + j;
                bits[r.y as usize * wb + x / 16] |= 1 << (x % 16);
            }
        }
    }
    out.clear();
    for (i, &write) in bits.iter().enumerate().filter(|(_, &w)| w != 0) {
        let (y, x0) = (i / wb, (i % wb) * 16);
        let mut taps = [0u16; MAX_KW];
        for (b, t) in taps.iter_mut().enumerate().take(g.kw) {
            // Lane l reads input column x0 + l + b * dw - pw; keep 0 <= that < w.
            let c0 = (x0 + b * g.dw) as isize - g.pw as isize;
            let lo = (-c0).clamp(0, 16) as u32;
            let hi = (g.w as isize - c0).clamp(0, 16) as u32;
            let upto = |n: u32| if n >= 16 { u16::MAX } else { ((1u32 << n) - 1) as u16 };
            *t = upto(hi) & !upto(lo);
        }
        out.push(Block { y: y as u32, x0: x0 as u32, write, taps });
    }
}

/// Window sums of every block of one channel into `buf` (16 per block).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn blocks_simd(g: &Geo2, blocks: &[Block], xc: &[f32], wm: &[f32], buf: &mut [f32]) {
    assert!(xc.len() >= g.plane() && wm.len() >= g.taps() && buf.len() >= 16 * blocks.len() && g.kw <= MAX_KW);
    match (g.kh, g.kw) {
        (3, 3) => blocks_fixed::<3, 3>(g, blocks, xc, wm, buf),
        (5, 5) => blocks_fixed::<5, 5>(g, blocks, xc, wm, buf),
        _ => blocks_any(g, blocks, xc, wm, buf),
    }
}

/// `blocks_simd` for a `KH` x `KW` window: the weights stay in registers and each kernel row
/// sums into its own accumulator, so the FMAs of a block are not one serial chain.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::needless_range_loop)] // constant trip counts keep weights and sums in registers
unsafe fn blocks_fixed<const KH: usize, const KW: usize>(g: &Geo2, blocks: &[Block], xc: &[f32], wm: &[f32], buf: &mut [f32]) {
    use std::arch::x86_64::*;
    let mut wv = [[_mm512_setzero_ps(); KW]; KH];
    for a in 0..KH {
        for b in 0..KW {
            wv[a][b] = _mm512_set1_ps(wm[a * KW + b]);
        }
    }
    let (h, w, sh, dh, dw, ph, pw) = (g.h as isize, g.w, g.sh, g.dh, g.dw, g.ph as isize, g.pw as isize);
    for (bi, blk) in blocks.iter().enumerate() {
        let mut acc = [_mm512_setzero_ps(); KH];
        for a in 0..KH {
            let iy = (blk.y as usize * sh + a * dh) as isize - ph;
            if iy < 0 || iy >= h {
                continue;
            }
            let row = xc.as_ptr().add(iy as usize * w);
            for b in 0..KW {
                let c0 = (blk.x0 as usize + b * dw) as isize - pw;
                // Masked-off lanes are neither read nor faulted on, wherever they point.
                let v = _mm512_maskz_loadu_ps(blk.taps[b], row.wrapping_offset(c0));
                acc[a] = _mm512_fmadd_ps(wv[a][b], v, acc[a]);
            }
        }
        let mut sum = acc[0];
        for a in 1..KH {
            sum = _mm512_add_ps(sum, acc[a]);
        }
        _mm512_storeu_ps(buf.as_mut_ptr().add(16 * bi), sum);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn blocks_any(g: &Geo2, blocks: &[Block], xc: &[f32], wm: &[f32], buf: &mut [f32]) {
    use std::arch::x86_64::*;
    for (bi, blk) in blocks.iter().enumerate() {
        let mut acc = _mm512_setzero_ps();
        for a in 0..g.kh {
            let iy = (blk.y as usize * g.sh + a * g.dh) as isize - g.ph as isize;
            if iy < 0 || iy >= g.h as isize {
                continue;
            }
            let row = xc.as_ptr().add(iy as usize * g.w);
            for b in 0..g.kw {
                let c0 = (blk.x0 as usize + b * g.dw) as isize - g.pw as isize;
                let v = _mm512_maskz_loadu_ps(blk.taps[b], row.wrapping_offset(c0));
                acc = _mm512_fmadd_ps(_mm512_set1_ps(*wm.get_unchecked(a * g.kw + b)), v, acc);
            }
        }
        _mm512_storeu_ps(buf.as_mut_ptr().add(16 * bi), acc);
    }
}

/// The residual at each block's written positions (zeros elsewhere).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn blocks_read(blocks: &[Block], wo: usize, plane: &[f32], buf: &mut [f32]) {
    use std::arch::x86_64::*;
    assert!(buf.len() >= 16 * blocks.len());
    for (bi, blk) in blocks.iter().enumerate() {
        // Written lanes are output positions, so inside the plane.
        let at = plane.as_ptr().add(blk.y as usize * wo + blk.x0 as usize);
        _mm512_storeu_ps(buf.as_mut_ptr().add(16 * bi), _mm512_maskz_loadu_ps(blk.write, at));
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn blocks_write(blocks: &[Block], wo: usize, buf: &[f32], plane: *mut f32) {
    use std::arch::x86_64::*;
    for (bi, blk) in blocks.iter().enumerate() {
        let v = _mm512_loadu_ps(buf.as_ptr().add(16 * bi));
        _mm512_mask_storeu_ps(plane.add(blk.y as usize * wo + blk.x0 as usize), blk.write, v);
    }
}
