//! Dense 2-D convolution vectorised along output positions, for the small NCHW convs of
//! mobile-size models (the reduced DynConv: 3-256 channels on 5x6 to 36x48 maps).
//!
//! The input is rearranged once per call into its stride phases with the zero padding made
//! explicit: phase (ry, rx) of channel c holds padded rows ry, ry + sh, ... and columns rx,
//! rx + sw, ..., each phase row `wq = Wo + ((kw - 1) * dw) / sw` wide. In that layout every
//! tap (c, a, b) of every output position reads one fixed offset from the position's index
//! `q = oy * wq + ox`, so 16 consecutive outputs of one channel are one vector load per tap,
//! whatever the stride. A register block of `MR` output channels x `NV` vectors accumulates
//! over all taps with one broadcast weight per channel and one load per vector. Lanes with
//! `ox >= Wo` are computed and compressed away on the store, which leaves each channel's
//! outputs contiguous: unlike `conv_direct` (one position's channels per vector, scattered to
//! NCHW) nothing is scattered. 1x1 convs at stride 1 read the input in place.

use super::gemm_util::SendPtr;
use super::kernel_util::{self, epilogue};
use super::sparse::gather::Geo2;
use dynaspa_runtime::graph::Activation;
use std::sync::Mutex;

/// Multiply-adds below which a conv stays on the calling thread (~15-30 µs of work at this
/// kernel's speed): below that, waking the second worker cost about what it saved.
const PAR_WORK: usize = 1 << 21;

/// Register blocks `(MR channels, NV vectors)` the kernel is compiled for: `MR * NV`
/// accumulators plus `NV` input vectors fit the 32 vector registers.
const BLOCKS: [(usize, usize); 5] = [(1, 8), (4, 6), (8, 3), (12, 2), (16, 1)];
/// Floats of a block's sums in the portable path: the largest `MR * NV` vectors.
const TMP: usize = 16 * 24;

/// Whether the row kernel should be the dense kernel of an ungrouped conv with `c` input and
/// `m` output channels, a `kh x kw` window and `input_len` input floats per image.
///
/// Measured on the reduced DynConv's dense shapes (`bench_rows_vs_direct`, 1 thread): against the direct kernel 1.1-1.6x faster on 1x1 convs (in place
/// and strided), 1.3-1.5x on the 3-channel stem, 6-11x on single-output mask units (the direct
/// kernel wastes 15 of 16 lanes; they used to take the im2col + GEMM path, ~18 µs each in the
/// model); 0.88-0.94x on 3x3 stride-2 convs with 32-64 channels (lanes past Wo are wasted),
/// which stay on the direct kernel. Large inputs stay on the GEMM paths, as for `conv_direct`.
pub(crate) fn pays(c: usize, m: usize, kh: usize, kw: usize, input_len: usize) -> bool {
    let small = input_len * 4 <= 512 * 1024 && c * kh * kw <= 1152;
    // A few outputs (a mask unit's single logit) on a large map: the GEMM path writes an im2col
    // panel `taps` times the input's size to multiply it by one row.
    let few_outputs = m < 8 && input_len * 4 <= 8 << 20;
    // An image stem (3 channels, a 3x3 to 7x7 window): the GEMM path's panel is up to 49x the
    // input. A larger window is a patch embedding (a ViT's 16x16 stride 16, 1.5 ms here against
    // 0.2 on the GEMM path, whose panel is then the input itself).
    let stem = c <= 4 && (9..=49).contains(&(kh * kw)) && input_len * 4 <= 8 << 20;
    few_outputs || stem || small && (kh * kw == 1 || m < 8 || c * kh * kw <= 32)
}

/// One ungrouped 2-D conv prepared for the row kernel.
#[derive(Debug)]
pub(crate) struct RowsConv {
    g: Geo2,
    c: usize,
    m: usize,
    /// Index into `BLOCKS`.
    block: usize,
    /// `m` rounded up to whole `MR` blocks (extra weights are zero and never stored).
    mpad: usize,
    /// `[c][kh][kw][mpad]`.
    wt: Vec<f32>,
    bias: Vec<f32>,
    act: Option<Activation>,
    fused_add: bool,
    /// Phase row width and rows per phase.
    wq: usize,
    hq: usize,
    /// The phases some tap reads, `(ry, rx)`; empty when the input is read in place.
    phases: Vec<(usize, usize)>,
    /// Per tap `(c, a, b)`: its offset from output `q` in the phase buffer (or the input).
    offs: Vec<usize>,
    /// Per vector of 16 positions `q`: the lanes that are outputs (`q < Ho * wq`, `ox < Wo`)
    /// and the output index of the first of them.
    lanes: Vec<(u16, u32)>,
    /// Floats of the phase buffer, reads past the last output vector included.
    buf_len: usize,
    /// The phase buffer, zeroed once: each call rewrites the same (non-padding) cells, so the
    /// padding stays zero. Taken by the running call; a concurrent call makes its own.
    buf: Mutex<Vec<f32>>,
}

impl Clone for RowsConv {
    fn clone(&self) -> RowsConv {
        RowsConv {
            wt: self.wt.clone(),
            bias: self.bias.clone(),
            phases: self.phases.clone(),
            offs: self.offs.clone(),
            lanes: self.lanes.clone(),
            buf: Mutex::new(Vec::new()),
            ..*self
        }
    }
}

impl RowsConv {
    /// `w` is `[M, C, kh, kw]`, `bias` `[M]`. `None` for shapes whose offsets do not fit.
    pub fn new(g: Geo2, c: usize, m: usize, w: &[f32], bias: Option<&[f32]>, act: Option<Activation>, fused_add: bool) -> Option<RowsConv> {
        let taps = g.taps();
        if m == 0 || c == 0 || taps == 0 || g.ho == 0 || g.wo == 0 || w.len() != m * c * taps || g.sh == 0 || g.sw == 0 {
            return None;
        }
        let (hq, wq) = (g.ho + (g.kh - 1) * g.dh / g.sh, g.wo + (g.kw - 1) * g.dw / g.sw);
        let lq = g.ho.checked_mul(wq)?;
        let nq = lq.div_ceil(16);
        let block = choose_block(m, nq);
        let (mr, nv) = BLOCKS[block];
        let mpad = m.div_ceil(mr) * mr;
        let mut wt = vec![0.0f32; c * taps * mpad];
        for mo in 0..m {
            for k in 0..c * taps {
                wt[k * mpad + mo] = w[mo * c * taps + k];
            }
        }
        let mut b = vec![0.0f32; m];
        if let Some(bias) = bias {
            b.copy_from_slice(&bias[..m]);
        }
        // In place: stride 1, no padding, one column per window (so reads stop at the plane's
        // end and `wq` is the input's width).
        let in_place = g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0 && g.kw == 1 && wq == g.w && hq <= g.h;
        let mut phases = Vec::new();
        if !in_place {
            for a in 0..g.kh {
                for bb in 0..g.kw {
                    let p = ((a * g.dh) % g.sh, (bb * g.dw) % g.sw);
                    if !phases.contains(&p) {
                        phases.push(p);
                    }
                }
            }
            phases.sort_unstable();
        }
        let (plane, per_c) = if in_place { (g.plane(), g.plane()) } else { (hq * wq, hq * wq * phases.len()) };
        let mut offs = Vec::with_capacity(c * taps);
        for ci in 0..c {
            for a in 0..g.kh {
                for bb in 0..g.kw {
                    let within = (a * g.dh / g.sh) * wq + bb * g.dw / g.sw;
                    let ph = if in_place { 0 } else { phases.iter().position(|&p| p == ((a * g.dh) % g.sh, (bb * g.dw) % g.sw))? };
                    offs.push(ci * per_c + ph * plane + within);
                }
            }
        }
        let q_end = nq.div_ceil(nv) * nv * 16;
        let buf_len = if in_place { 0 } else { (offs.iter().max()? + q_end).max(c * per_c) };
        // Offsets and indices are plain usize arithmetic, output indices u32.
        if buf_len.checked_mul(4).is_none() || c.checked_mul(g.plane())?.checked_mul(4).is_none() || m * g.out_plane() > u32::MAX as usize {
            return None;
        }
        let mut lanes = Vec::with_capacity(nq.div_ceil(nv) * nv);
        let mut before = 0u32;
        for v in 0..nq.div_ceil(nv) * nv {
            let mut k = 0u16;
            for l in 0..16 {
                let q = 16 * v + l;
                if q < lq && q % wq < g.wo {
                    k |= 1 << l;
                }
            }
            lanes.push((k, before));
            before += k.count_ones();
        }
        Some(RowsConv {
            g,
            c,
            m,
            block,
            mpad,
            wt,
            bias: b,
            act,
            fused_add,
            wq,
            hq,
            phases,
            offs,
            lanes,
            buf_len,
            buf: Mutex::new(Vec::new()),
        })
    }

    pub fn geometry(&self) -> &Geo2 {
        &self.g
    }

    /// Multiply-adds of one image, the lanes computed and dropped included.
    pub fn work(&self) -> usize {
        self.mpad * self.offs.len() * self.g.ho * self.wq
    }

    /// One image: `x` is `C x H x W`, `out` `M x Ho x Wo`, `residual` (output-shaped) given
    /// exactly when the conv was built with `fused_add`. Panics on other sizes (callers check).
    pub fn run(&self, x: &[f32], out: &mut [f32], residual: Option<&[f32]>) {
        let g = &self.g;
        assert!(x.len() == self.c * g.plane() && out.len() == self.m * g.out_plane(), "RowsConv::run: slice sizes");
        assert!(residual.is_some() == self.fused_add && residual.is_none_or(|r| r.len() == out.len()), "RowsConv::run: residual");
        if self.phases.is_empty() {
            return self.compute(x, out, residual);
        }
        let mut guard = self.buf.try_lock().ok();
        let mut own = Vec::new();
        let buf = match guard.as_deref_mut() {
            Some(b) => b,
            None => &mut own,
        };
        if buf.len() != self.buf_len {
            buf.clear();
            buf.resize(self.buf_len, 0.0);
        }
        self.fill_phases(x, buf);
        self.compute(buf, out, residual);
    }

    /// Writes the input's values into their phase cells of `buf`; padding cells are not
    /// touched (they are zero from the buffer's creation).
    fn fill_phases(&self, x: &[f32], buf: &mut [f32]) {
        let g = &self.g;
        #[cfg(target_arch = "x86_64")]
        if g.sw <= 2 && kernel_util::has_avx512() {
            // SAFETY: AVX-512F detected; `buf` has `buf_len` floats, which cover every phase
            // plane of every channel.
            return unsafe { avx512::fill(self, x, buf) };
        }
        let (hq, wq) = (self.hq, self.wq);
        let plane = hq * wq;
        let per_c = plane * self.phases.len();
        // The input row split into its column phases (for sw > 1).
        let wsplit = g.w.div_ceil(g.sw);
        let mut split = vec![0.0f32; wsplit * g.sw];
        for (pi, &(ry, rx)) in self.phases.iter().enumerate() {
            let Some((i0, i1, j0, ix0, n)) = self.phase_span(ry, rx) else { continue };
            for ci in 0..self.c {
                let xc = &x[ci * g.plane()..][..g.plane()];
                let dst_plane = &mut buf[ci * per_c + pi * plane..][..plane];
                for i in i0..i1 {
                    let src = &xc[(i * g.sh + ry - g.ph) * g.w..][..g.w];
                    let dst = &mut dst_plane[i * wq + j0..][..n];
                    if g.sw == 1 {
                        dst.copy_from_slice(&src[ix0..ix0 + n]);
                    } else {
                        split_phases(src, g.sw, wsplit, &mut split);
                        let from = (ix0 % g.sw) * wsplit + ix0 / g.sw;
                        dst.copy_from_slice(&split[from..from + n]);
                    }
                }
            }
        }
    }

    /// Where phase (ry, rx) holds input values: phase rows `i0..i1` (input rows
    /// `i * sh + ry - ph`), columns `j0..j0 + n` (input columns `ix0, ix0 + sw, ...`); `None`
    /// when it holds none.
    fn phase_span(&self, ry: usize, rx: usize) -> Option<(usize, usize, usize, usize, usize)> {
        let g = &self.g;
        let i0 = g.ph.saturating_sub(ry).div_ceil(g.sh);
        let i1 = (g.h + g.ph).saturating_sub(ry).div_ceil(g.sh).min(self.hq);
        let j0 = g.pw.saturating_sub(rx).div_ceil(g.sw);
        if j0 >= self.wq || i0 >= i1 {
            return None;
        }
        let ix0 = j0 * g.sw + rx - g.pw;
        let n = if ix0 >= g.w { 0 } else { (g.w - ix0).div_ceil(g.sw).min(self.wq - j0) };
        (n > 0).then_some((i0, i1, j0, ix0, n))
    }

    /// Every output from the phase buffer (or the input) `xb`, over the pool's threads when
    /// there is enough work.
    fn compute(&self, xb: &[f32], out: &mut [f32], residual: Option<&[f32]>) {
        let (mr, nv) = BLOCKS[self.block];
        let (mblocks, qblocks) = (self.mpad / mr, self.lanes.len() / nv);
        let tasks = mblocks * qblocks;
        let outp = SendPtr::new(out);
        let simd = kernel_util::has_avx512();
        let task = |t: usize| {
            // Channel blocks outermost: a block's weights stay in L1 across its position blocks.
            let (mb, qb) = (t / qblocks, t % qblocks);
            // SAFETY: sizes checked in `run`; tasks write disjoint (channel, position) ranges.
            unsafe { self.block_task(xb, outp.get(), residual, mb * mr, qb * nv, simd) };
        };
        if self.work() < PAR_WORK || rayon::current_num_threads() < 2 || tasks < 2 {
            (0..tasks).for_each(task);
        } else {
            use rayon::prelude::*;
            (0..tasks).into_par_iter().for_each(task);
        }
    }

    /// Channels `m0..m0 + MR`, position vectors `v0..v0 + NV`.
    ///
    /// # Safety
    /// `out` is valid for the conv's output size and no one else writes these outputs meanwhile;
    /// `xb` is the phase buffer (or, in place, the input).
    unsafe fn block_task(&self, xb: &[f32], out: *mut f32, residual: Option<&[f32]>, m0: usize, v0: usize, simd: bool) {
        #[cfg(target_arch = "x86_64")]
        if simd {
            return match BLOCKS[self.block] {
                (1, 8) => avx512::block::<1, 8>(self, xb, out, residual, m0, v0),
                (4, 6) => avx512::block::<4, 6>(self, xb, out, residual, m0, v0),
                (8, 3) => avx512::block::<8, 3>(self, xb, out, residual, m0, v0),
                (12, 2) => avx512::block::<12, 2>(self, xb, out, residual, m0, v0),
                _ => avx512::block::<16, 1>(self, xb, out, residual, m0, v0),
            };
        }
        let _ = simd;
        self.block_portable(xb, out, residual, m0, v0)
    }

    /// The block in plain loops (machines without AVX-512, and the tests' cross-check).
    ///
    /// # Safety
    /// As `block_task`.
    unsafe fn block_portable(&self, xb: &[f32], out: *mut f32, residual: Option<&[f32]>, m0: usize, v0: usize) {
        let (mr, nv) = BLOCKS[self.block];
        let (span, q0, lq) = (16 * nv, 16 * v0, self.g.ho * self.wq);
        let live = span.min(lq.saturating_sub(q0));
        let mut tmp = [0.0f32; TMP];
        for (t, &o) in self.offs.iter().enumerate() {
            let w = &self.wt[t * self.mpad + m0..][..mr];
            for (l, &xv) in xb[o + q0..][..live].iter().enumerate() {
                for (mi, &wv) in w.iter().enumerate() {
                    tmp[mi * span + l] += wv * xv;
                }
            }
        }
        let oplane = self.g.out_plane();
        for mi in 0..mr.min(self.m.saturating_sub(m0)) {
            let mo = m0 + mi;
            for v in 0..nv {
                let (k, first) = self.lanes[v0 + v];
                let mut at = mo * oplane + first as usize;
                for l in (0..16).filter(|l| k >> l & 1 == 1) {
                    let y = tmp[mi * span + 16 * v + l] + self.bias[mo] + residual.map_or(0.0, |r| r[at]);
                    *out.add(at) = self.act.map_or(y, |a| a.apply(y));
                    at += 1;
                }
            }
        }
    }
}

/// The block with the least estimated time: padded work (channels to `MR`, vectors to `NV`)
/// over the share of its instructions that are FMAs (`MR + NV` loads per `MR * NV` FMAs).
fn choose_block(m: usize, nq: usize) -> usize {
    let cost = |&(mr, nv): &(usize, usize)| {
        let work = (m.div_ceil(mr) * mr * nq.div_ceil(nv) * nv) as f64;
        work * (mr * nv + mr + nv) as f64 / (mr * nv) as f64
    };
    (0..BLOCKS.len()).min_by(|&a, &b| cost(&BLOCKS[a]).total_cmp(&cost(&BLOCKS[b]))).unwrap_or(0)
}

/// `src` into `s` column phases of `plen` slots each (phase r: columns r, r + s, ...).
fn split_phases(src: &[f32], s: usize, plen: usize, dst: &mut [f32]) {
    if s == 2 {
        let (even, odd) = dst.split_at_mut(plen);
        super::im2col::deinterleave2(src, even, odd);
        return;
    }
    for (i, &v) in src.iter().enumerate() {
        dst[(i % s) * plen + i / s] = v;
    }
}

/// Applies `act` to the first `n` values of `v` (the activations without a vector form here).
fn act_slice(v: &mut [f32], n: usize, act: Activation) {
    epilogue(&mut v[..n], 0.0, None, Some(act));
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::RowsConv;
    use dynaspa_runtime::graph::Activation;
    use std::arch::x86_64::*;

    #[inline(always)]
    fn first(n: usize) -> __mmask16 {
        if n >= 16 {
            0xffff
        } else {
            (1u16 << n) - 1
        }
    }

    /// `RowsConv::fill_phases` for column strides 1 and 2, without a call per row: a row's
    /// values move 16 at a time with masked loads and stores; at stride 2 a phase's 16 values
    /// are the even lanes of the 32 input columns from its first, picked by one permute.
    ///
    /// # Safety
    /// AVX-512F available; `x` is `C x H x W`; `buf` holds every phase plane of every channel.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn fill(d: &RowsConv, x: &[f32], buf: &mut [f32]) {
        let g = &d.g;
        let plane = d.hq * d.wq;
        let per_c = plane * d.phases.len();
        let ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        for (pi, &(ry, rx)) in d.phases.iter().enumerate() {
            let Some((i0, i1, j0, ix0, n)) = d.phase_span(ry, rx) else { continue };
            for ci in 0..d.c {
                let xc = x.as_ptr().add(ci * g.plane());
                let dp = buf.as_mut_ptr().add(ci * per_c + pi * plane);
                for i in i0..i1 {
                    let src = xc.add((i * g.sh + ry - g.ph) * g.w + ix0);
                    let dst = dp.add(i * d.wq + j0);
                    let mut j = 0;
                    if g.sw == 1 {
                        while j < n {
                            let k = first(n - j);
                            _mm512_mask_storeu_ps(dst.add(j), k, _mm512_maskz_loadu_ps(k, src.add(j)));
                            j += 16;
                        }
                    } else {
                        // Input columns ix0 + 2j: the even lanes of the 32 from ix0 + 2j.
                        let avail = g.w - ix0;
                        while j < n {
                            let left = avail - 2 * j;
                            let lo = _mm512_maskz_loadu_ps(first(left), src.add(2 * j));
                            let hi = _mm512_maskz_loadu_ps(first(left.saturating_sub(16)), src.add(2 * j + 16));
                            _mm512_mask_storeu_ps(dst.add(j), first(n - j), _mm512_permutex2var_ps(lo, ie, hi));
                            j += 16;
                        }
                    }
                }
            }
        }
    }

    /// Channels `m0..m0 + MR` x vectors `v0..v0 + NV`: sums over every tap, then bias,
    /// residual and activation on the output lanes only, compressed to their contiguous
    /// output positions.
    ///
    /// # Safety
    /// AVX-512F available; `xb` holds every offset plus `16 (v0 + NV)` (loads of lanes past the
    /// last position are masked off); `out` and `residual` have the conv's output size.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn block<const MR: usize, const NV: usize>(
        d: &RowsConv,
        xb: &[f32],
        out: *mut f32,
        residual: Option<&[f32]>,
        m0: usize,
        v0: usize,
    ) {
        let lq = d.g.ho * d.wq;
        let mut k = [0u16; NV];
        for (v, kv) in k.iter_mut().enumerate() {
            let left = lq.saturating_sub(16 * (v0 + v));
            *kv = if left >= 16 { 0xffff } else { (1u16 << left) - 1 };
        }
        let mut acc = [[_mm512_setzero_ps(); NV]; MR];
        let x = xb.as_ptr().add(16 * v0);
        let mut w = d.wt.as_ptr().add(m0);
        for &o in &d.offs {
            let mut xv = [_mm512_setzero_ps(); NV];
            for v in 0..NV {
                xv[v] = _mm512_maskz_loadu_ps(k[v], x.add(o + 16 * v));
            }
            for (mi, a) in acc.iter_mut().enumerate() {
                let wv = _mm512_set1_ps(*w.add(mi));
                for v in 0..NV {
                    a[v] = _mm512_fmadd_ps(wv, xv[v], a[v]);
                }
            }
            w = w.add(d.mpad);
        }
        let oplane = d.g.out_plane();
        for (mi, a) in acc.iter().enumerate().take(d.m.saturating_sub(m0)) {
            let mo = m0 + mi;
            let bias = _mm512_set1_ps(d.bias[mo]);
            for (v, &av) in a.iter().enumerate() {
                let (lanes, first) = d.lanes[v0 + v];
                if lanes == 0 {
                    continue;
                }
                let n = lanes.count_ones();
                let kn: __mmask16 = if n == 16 { 0xffff } else { (1u16 << n) - 1 };
                let at = mo * oplane + first as usize;
                let mut y = _mm512_maskz_compress_ps(lanes, _mm512_add_ps(av, bias));
                if let Some(r) = residual {
                    y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(kn, r.as_ptr().add(at)));
                }
                match d.act {
                    None => {}
                    Some(Activation::Relu) => y = _mm512_max_ps(y, _mm512_setzero_ps()),
                    Some(act) => {
                        let mut t = [0.0f32; 16];
                        _mm512_storeu_ps(t.as_mut_ptr(), y);
                        super::act_slice(&mut t, n as usize, act);
                        y = _mm512_loadu_ps(t.as_ptr());
                    }
                }
                _mm512_mask_storeu_ps(out.add(at), kn, y);
            }
        }
    }
}

#[cfg(test)]
#[path = "conv_rows_tests.rs"]
mod tests;
