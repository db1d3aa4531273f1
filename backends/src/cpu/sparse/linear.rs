//! `SparseLinear`: `out[t, :] = act(x[t, :] * W + bias)` for the active tokens `t` only (token
//! sparsity, as in A-ViT); the rows of inactive tokens are left untouched.
//!
//! The active rows are packed once per call into register-tile order, then every task takes one
//! 64-column panel of the weights (packed at preparation) and a block of row tiles, so results
//! are finished and stored as contiguous row pieces.

use super::scratch::{self, Slot};
use super::{Clock, PhaseTimes};
use crate::cpu::gemm_util::{sgemm, threads, Layout, SendPtr};
use crate::cpu::kernel_util::epilogue;
use dynaspa_runtime::graph::Activation;
use dynaspa_runtime::{Error, Result, Tensor};
use rayon::prelude::*;

const OP: &str = "SparseLinear";
const NR: usize = 64;
const MR: usize = 6;

fn bad<T>(msg: String) -> Result<T> {
    Err(Error::Other(format!("{OP}: {msg}")))
}

/// A token-sparse linear layer, prepared once (weights packed).
pub struct SparseLinear {
    k: usize,
    n: usize,
    /// AVX-512 path: `W` in 64-column panels (`micro::pack_panels`); otherwise `W` as given.
    simd: bool,
    w: Vec<f32>,
    bias: Option<Vec<f32>>,
    act: Option<Activation>,
}

impl std::fmt::Debug for SparseLinear {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SparseLinear {{ {} -> {}, bias {}, {:?}, avx512 {} }}", self.k, self.n, self.bias.is_some(), self.act, self.simd)
    }
}

impl SparseLinear {
    /// `weight` is `[K, N]` (ONNX MatMul's B), `bias` `[N]`; `act` is applied last.
    pub fn new(weight: &Tensor, bias: Option<&Tensor>, act: Option<Activation>) -> Result<SparseLinear> {
        SparseLinear::build(weight, bias, act, simd_available())
    }

    pub(crate) fn build(weight: &Tensor, bias: Option<&Tensor>, act: Option<Activation>, simd: bool) -> Result<SparseLinear> {
        let &[k, n] = weight.shape() else {
            return bad(format!("weight shape {:?} must be [K, N]", weight.shape()));
        };
        let wd = weight.as_f32().map_err(|_| Error::Other(format!("{OP}: weight must be FLOAT, got {}", weight.dtype())))?;
        let bias = match bias {
            Some(b) => {
                if b.shape() != [n] {
                    return bad(format!("bias shape {:?} must be [{n}]", b.shape()));
                }
                let bd = b.as_f32().map_err(|_| Error::Other(format!("{OP}: bias must be FLOAT, got {}", b.dtype())))?;
                Some(bd.to_vec())
            }
            None => None,
        };
        let simd = simd && simd_available();
        let w = if simd { pack(wd, k, n) } else { wd.to_vec() };
        Ok(SparseLinear { k, n, simd, w, bias, act })
    }

    /// `(K, N)`.
    pub fn dims(&self) -> (usize, usize) {
        (self.k, self.n)
    }

    /// `x` is `[tokens, K]` and `out` `[tokens, N]`, row-major; `rows` lists the active tokens,
    /// strictly increasing. Only those rows of `out` are written.
    pub fn run(&self, x: &[f32], tokens: usize, out: &mut [f32], rows: &[u32]) -> Result<()> {
        self.run_timed(x, tokens, out, rows, None)
    }

    /// `run`, adding the time of each phase to `times`.
    pub fn run_timed(&self, x: &[f32], tokens: usize, out: &mut [f32], rows: &[u32], times: Option<&PhaseTimes>) -> Result<()> {
        let (k, n) = (self.k, self.n);
        if tokens.checked_mul(k) != Some(x.len()) {
            return bad(format!("input has {} values, expected tokens*K = {tokens}*{k}", x.len()));
        }
        if tokens.checked_mul(n) != Some(out.len()) {
            return bad(format!("output has {} values, expected tokens*N = {tokens}*{n}", out.len()));
        }
        if let Some(w) = rows.windows(2).find(|w| w[0] >= w[1]) {
            return bad(format!("active rows must be strictly increasing, found {} then {}", w[0], w[1]));
        }
        if let Some(&r) = rows.last().filter(|&&r| r as usize >= tokens) {
            return bad(format!("active row {r} is out of range for {tokens} tokens"));
        }
        if rows.is_empty() || n == 0 {
            return Ok(());
        }
        let p = rows.len();
        let len = if self.simd { p.div_ceil(MR) * MR * k } else { p * k };
        scratch::with(Slot::Shared, len, |a| {
            {
                let _t = Clock::start(times, |t| &t.gather);
                self.gather(x, rows, a);
            }
            self.multiply(a, rows, out, times);
        });
        Ok(())
    }

    /// The active rows of `x`, packed (AVX-512 path) or stacked row-major.
    fn gather(&self, x: &[f32], rows: &[u32], a: &mut [f32]) {
        let k = self.k;
        if !self.simd {
            for (dst, &r) in a.chunks_exact_mut(k.max(1)).zip(rows) {
                dst.copy_from_slice(&x[r as usize * k..(r as usize + 1) * k]);
            }
            return;
        }
        a.par_chunks_mut((MR * k).max(1)).enumerate().for_each(|(t, tile)| {
            for r in 0..MR {
                match rows.get(t * MR + r) {
                    Some(&row) => {
                        let src = &x[row as usize * k..(row as usize + 1) * k];
                        for (kk, &v) in src.iter().enumerate() {
                            tile[kk * MR + r] = v;
                        }
                    }
                    None => (0..k).for_each(|kk| tile[kk * MR + r] = 0.0),
                }
            }
        });
    }

    /// Tasks: (64-column panel, block of row tiles).
    fn multiply(&self, a: &[f32], rows: &[u32], out: &mut [f32], times: Option<&PhaseTimes>) {
        let (k, n, p) = (self.k, self.n, rows.len());
        let panels = n.div_ceil(NR);
        let rtiles = p.div_ceil(MR);
        let want = 2 * threads();
        let chunks = if panels >= want { 1 } else { want.div_ceil(panels).min(rtiles) };
        let per = rtiles.div_ceil(chunks);
        let chunks = rtiles.div_ceil(per);
        let y = SendPtr::new(out);
        (0..panels * chunks).into_par_iter().with_max_len(1).for_each(|task| {
            let (pi, ci) = (task / chunks, task % chunks);
            let (t0, t1) = (ci * per, ((ci + 1) * per).min(rtiles));
            let (n0, cols) = (pi * NR, NR.min(n - pi * NR));
            let (r0, r1) = (t0 * MR, (t1 * MR).min(p));
            scratch::with(Slot::Acc, (t1 - t0) * MR * NR, |acc| {
                {
                    let _t = Clock::start(times, |t| &t.gemm);
                    if self.simd {
                        simd_gemm(&self.w[pi * k * NR..(pi + 1) * k * NR], a, k, p, t0, t1, cols, acc);
                    } else if k == 0 {
                        acc.fill(0.0);
                    } else {
                        // SAFETY: `acc` holds (r1 - r0) rows of NR >= cols.
                        unsafe {
                            sgemm(
                                r1 - r0,
                                cols,
                                k,
                                1.0,
                                &a[r0 * k..],
                                Layout::row_major(k),
                                &self.w[n0..],
                                Layout::row_major(n),
                                acc.as_mut_ptr(),
                                NR,
                                false,
                            )
                        };
                    }
                }
                let _t = Clock::start(times, |t| &t.scatter);
                let b = self.bias.as_ref().map(|b| &b[n0..n0 + cols]);
                for (i, &row) in rows[r0..r1].iter().enumerate() {
                    let v = &mut acc[i * NR..i * NR + cols];
                    if b.is_some() || self.act.is_some() {
                        epilogue(v, 0.0, b, self.act);
                    }
                    // SAFETY: rows are distinct and this task alone owns columns n0..n0 + cols.
                    unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), y.get().add(row as usize * n + n0), cols) };
                }
            });
        });
    }
}

fn simd_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        super::micro::available()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
fn pack(w: &[f32], k: usize, n: usize) -> Vec<f32> {
    let mut out = vec![0.0; n.div_ceil(NR) * k * NR];
    super::micro::pack_panels(w, k, n, &mut out);
    out
}
#[cfg(not(target_arch = "x86_64"))]
fn pack(w: &[f32], _: usize, _: usize) -> Vec<f32> {
    w.to_vec()
}

#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
fn simd_gemm(panel: &[f32], a: &[f32], k: usize, p: usize, t0: usize, t1: usize, cols: usize, acc: &mut [f32]) {
    let g = super::micro::PanelGemm { a, kdim: k, rows: p.min(t1 * MR), t0, t1, b: panel, cols, bias: None };
    // SAFETY: only reached on the AVX-512 path.
    unsafe { g.run(acc) }
}
#[cfg(not(target_arch = "x86_64"))]
#[allow(clippy::too_many_arguments)]
fn simd_gemm(_: &[f32], _: &[f32], _: usize, _: usize, _: usize, _: usize, _: usize, _: &mut [f32]) {
    unreachable!("the AVX-512 path is never chosen off x86-64")
}
