//! Depthwise conv (one input channel per group), computed directly: as a GEMM its K would be
//! just the window size.
//!
//! AVX-512: per 64-position panel one gather plan (the conv's) serves every channel, and each
//! channel's 16-lane vectors accumulate their taps from masked loads or gathers of its plane,
//! so the cost per position is the taps' loads and FMAs whatever the run lengths. Portable: per
//! channel and run of positions, each tap adds a scaled, shifted input row segment (per-run
//! overhead dominates when runs are short, which is why the AVX-512 path does not use it).

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
        if simd {
            return self.run_simd(x, out, cols);
        }
        let _ = simd;
        self.run_portable(x, out, cols)
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
                    unsafe {
                        channel_simd(plan, xc, &self.w[m * taps..(m + 1) * taps], b, res, self.act, y.get().add(m * op))
                    };
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
unsafe fn channel_simd(
    plan: &PanelPlan,
    xc: &[f32],
    wm: &[f32],
    bias: f32,
    res: Option<&[f32]>,
    act: Option<Activation>,
    y: *mut f32,
) {
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
