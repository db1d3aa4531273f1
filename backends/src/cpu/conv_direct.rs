//! Direct convolution for few channels: each output position's channels are one or a few
//! 16-lane vectors, accumulated over the `C * kh * kw` taps by broadcast-FMA against weight rows
//! laid out `[tap][M]`. No im2col panel, no packing, no plan: for the small convs of mobile-size
//! models (C, M <= 64, a few hundred positions) those fixed costs were most of the time. Runs a
//! given list of output positions, so the same kernel is the dense conv (all positions) and the
//! positions schedule of a sparse conv (the mask's set positions).

use super::gemm_util::SendPtr;
use super::kernel_util;
use super::sparse::gather::Geo2;
use dynaspa_runtime::graph::Activation;
use std::cell::RefCell;

/// Positions computed together: their accumulators stay in registers across the tap loop.
const P: usize = 8;
/// Multiply-adds below which `run_all` stays on the calling thread (~20-40 µs of work): below
/// that, handing half to the other core cost more than it saved (reduced DynConv, 2 cores).
const PAR_WORK: usize = 1 << 21;

/// Whether the direct kernel should run an ungrouped conv of `c` input and `m` output channels,
/// `taps` kernel taps and `positions` output positions, instead of gather/im2col + GEMM.
///
/// Measured on the reduced DynConv (a Xeon): direct for every conv there was 1.19x faster end to
/// end than none of them, 1.12x faster than direct only for M <= 64; single-output mask units
/// lost 4x (15 of 16 lanes idle). Large inputs stay on the GEMM path, whose packing keeps them
/// in cache.
pub(crate) fn pays(c: usize, m: usize, taps: usize, input_len: usize) -> bool {
    m >= 8 && c * taps <= 1152 && input_len * 4 <= 512 * 1024
}

/// Weights, bias and epilogue of one ungrouped 2-D conv, in the order the kernel reads them.
#[derive(Debug, Clone)]
pub(crate) struct DirectConv {
    pub g: Geo2,
    c: usize,
    m: usize,
    /// `m` rounded up to whole vectors; the extra lanes have zero weights and are never stored.
    mpad: usize,
    /// `[c][kh][kw][mpad]`.
    wt: Vec<f32>,
    bias: Vec<f32>,
    act: Option<Activation>,
    fused_add: bool,
    /// Per output position, the input offset of its window's first tap (in the padded input
    /// when the conv pads): a table, because a division per position cost as much as the FMAs
    /// of a 3-channel stem.
    bases: Vec<u32>,
    /// Per tap `(c, a, b)`, its input offset from a window's first tap (fixed by the strides).
    offs: Vec<usize>,
}

/// Inputs of one image.
pub(crate) struct Image<'a> {
    /// `C x H x W`.
    pub x: &'a [f32],
    /// `M x Ho x Wo`; only the listed positions are written.
    pub out: &'a mut [f32],
    /// Output-shaped addend, when the conv was built with `fused_add`.
    pub residual: Option<&'a [f32]>,
}

impl DirectConv {
    /// `w` is `[M, C, kh, kw]` (one group), `bias` `[M]`.
    pub fn new(
        g: Geo2,
        c: usize,
        m: usize,
        w: &[f32],
        bias: Option<&[f32]>,
        act: Option<Activation>,
        fused_add: bool,
    ) -> Option<DirectConv> {
        let taps = g.taps();
        let mpad = m.div_ceil(16) * 16;
        // Scatter indices are 32-bit lane offsets of `M x Ho x Wo`.
        if m == 0 || c == 0 || w.len() != m * c * taps || mpad * g.out_plane() > i32::MAX as usize {
            return None;
        }
        let mut wt = vec![0.0f32; c * taps * mpad];
        for mo in 0..m {
            for k in 0..c * taps {
                wt[k * mpad + mo] = w[mo * c * taps + k];
            }
        }
        let mut b = vec![0.0f32; mpad];
        if let Some(bias) = bias {
            b[..m].copy_from_slice(&bias[..m]);
        }
        let (hp, wp) = padded_dims(&g);
        let (rs, ps) = if needs_padding(&g) { (wp, hp * wp) } else { (g.w, g.h * g.w) };
        if c.checked_mul(ps).is_none_or(|n| n > u32::MAX as usize) {
            return None;
        }
        let bases = (0..g.ho).flat_map(|oy| (0..g.wo).map(move |ox| (oy * g.sh * rs + ox * g.sw) as u32)).collect();
        let offs = (0..c).flat_map(|ci| (0..g.kh).flat_map(move |a| (0..g.kw).map(move |b| ci * ps + a * g.dh * rs + b * g.dw))).collect();
        Some(DirectConv { g, c, m, mpad, wt, bias: b, act, fused_add, bases, offs })
    }

    /// Multiply-adds per output position.
    pub fn work_per_position(&self) -> usize {
        self.c * self.g.taps() * self.mpad
    }

    /// Computes the outputs at `positions` (flat `y * Wo + x`, each < Ho * Wo) of one image,
    /// split over the pool's threads only when there is enough work to pay for waking them.
    /// Panics if the slices do not have the sizes the conv was built for (callers check).
    pub fn run(&self, img: Image, positions: &[u32]) {
        let g = &self.g;
        assert!(img.x.len() == self.c * g.plane() && img.out.len() == self.m * g.out_plane());
        assert!(img.residual.is_none_or(|r| r.len() == img.out.len()) && img.residual.is_some() == self.fused_add);
        assert!(positions.iter().all(|&p| (p as usize) < g.out_plane()));
        let n = positions.len();
        let threads = rayon::current_num_threads();
        let per = if n * self.work_per_position() < PAR_WORK || threads < 2 { n } else { n.div_ceil(threads).div_ceil(P) * P };
        let out = SendPtr::new(img.out);
        let (x, residual, simd) = (img.x, img.residual, kernel_util::has_avx512());
        // SAFETY: sizes checked above; chunks write disjoint positions of `out`.
        let chunk = |ps: &[u32]| unsafe { self.run_raw(x, out.get(), residual, ps, simd) };
        if per >= n {
            chunk(positions);
        } else {
            use rayon::prelude::*;
            positions.par_chunks(per).with_max_len(1).for_each(chunk);
        }
    }

    /// `run` on every output position.
    pub fn run_all(&self, img: Image) {
        let positions: Vec<u32> = (0..self.g.out_plane() as u32).collect();
        self.run(img, &positions);
    }

    /// # Safety
    /// `x` is `C x H x W`, `out` valid for `M x Ho x Wo` writes, `residual` (if any) that size
    /// too, every position `< Ho * Wo`, and no one else writes those positions meanwhile.
    unsafe fn run_raw(&self, x: &[f32], out: *mut f32, residual: Option<&[f32]>, positions: &[u32], simd: bool) {
        if positions.is_empty() {
            return;
        }
        let offs = &self.offs;
        with_padded(self, x, |xs| {
            let base = |p: u32| self.bases[p as usize] as usize;
            #[cfg(target_arch = "x86_64")]
            if simd {
                // SAFETY: AVX-512F checked by the caller; every base + offset is inside the
                // padded input (its size covers the last position's window).
                unsafe { avx512::run(self, xs, offs, positions, &base, out, residual) };
                return;
            }
            let _ = simd;
            portable(self, xs, offs, positions, &base, out, residual);
        });
    }

    /// Bias, residual and activation of output channel `mo` at flat output index `at`.
    #[inline]
    fn finish(&self, v: f32, mo: usize, at: usize, residual: Option<&[f32]>) -> f32 {
        let v = v + self.bias[mo] + residual.map_or(0.0, |r| r[at]);
        self.act.map_or(v, |a| a.apply(v))
    }
}

thread_local! {
    static PADDED: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Rows and columns of the input with its zero padding made explicit: enough for every window.
fn padded_dims(g: &Geo2) -> (usize, usize) {
    let hp = ((g.ho - 1) * g.sh + (g.kh - 1) * g.dh + 1).max(g.h + g.ph);
    let wp = ((g.wo - 1) * g.sw + (g.kw - 1) * g.dw + 1).max(g.w + g.pw);
    (hp, wp)
}

fn needs_padding(g: &Geo2) -> bool {
    let (hp, wp) = padded_dims(g);
    !(g.ph == 0 && g.pw == 0 && hp <= g.h && wp <= g.w)
}

/// Runs `f` on `x` with its zero padding made explicit (the strides `d.offs` assumes), so the kernel
/// reads every tap without a bounds test. Unpadded convs read `x` itself.
fn with_padded<R>(d: &DirectConv, x: &[f32], f: impl FnOnce(&[f32]) -> R) -> R {
    let g = &d.g;
    if !needs_padding(g) {
        return f(x);
    }
    let (hp, wp) = padded_dims(g);
    PADDED.with(|cell| {
        let mut buf = cell.try_borrow_mut().map(|mut b| std::mem::take(&mut *b)).unwrap_or_default();
        buf.clear();
        buf.resize(d.c * hp * wp, 0.0);
        for (dst, src) in buf.chunks_exact_mut(hp * wp).zip(x.chunks_exact(g.h * g.w)) {
            for (y, row) in src.chunks_exact(g.w).enumerate() {
                let at = (y + g.ph) * wp + g.pw;
                dst[at..at + g.w].copy_from_slice(row);
            }
        }
        let r = f(&buf);
        if let Ok(mut b) = cell.try_borrow_mut() {
            *b = buf;
        }
        r
    })
}

/// # Safety
/// As `DirectConv::run_raw`.
unsafe fn portable(
    d: &DirectConv,
    xs: &[f32],
    offs: &[usize],
    positions: &[u32],
    base: &dyn Fn(u32) -> usize,
    out: *mut f32,
    residual: Option<&[f32]>,
) {
    let oplane = d.g.out_plane();
    let mut acc = vec![0.0f32; d.mpad];
    for &p in positions {
        let b = base(p);
        acc.fill(0.0);
        for (k, &o) in offs.iter().enumerate() {
            let xv = xs[b + o];
            for (a, &w) in acc.iter_mut().zip(&d.wt[k * d.mpad..][..d.mpad]) {
                *a += xv * w;
            }
        }
        for (mo, &v) in acc[..d.m].iter().enumerate() {
            let at = mo * oplane + p as usize;
            *out.add(at) = d.finish(v, mo, at, residual);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{DirectConv, P};
    use dynaspa_runtime::graph::Activation;
    use std::arch::x86_64::*;

    /// Vector blocks of output channels per pass: accumulators `P * MB` plus `MB` weight
    /// vectors stay within the 32 registers.
    const MB: usize = 3;

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn run(
        d: &DirectConv,
        xs: &[f32],
        offs: &[usize],
        positions: &[u32],
        base: &dyn Fn(u32) -> usize,
        out: *mut f32,
        residual: Option<&[f32]>,
    ) {
        let blocks = d.mpad / 16;
        let mut bases = [0usize; P];
        for chunk in positions.chunks(P) {
            // A short last chunk repeats its last position: computed twice, stored once.
            for (i, b) in bases.iter_mut().enumerate() {
                *b = base(chunk[i.min(chunk.len() - 1)]);
            }
            let mut b0 = 0;
            while b0 < blocks {
                match blocks - b0 {
                    1 => pass::<1>(d, xs, offs, &bases, chunk, b0, out, residual),
                    2 => pass::<2>(d, xs, offs, &bases, chunk, b0, out, residual),
                    _ => pass::<MB>(d, xs, offs, &bases, chunk, b0, out, residual),
                }
                b0 += MB.min(blocks - b0);
            }
        }
    }

    /// Channel blocks `b0..b0 + N` of the positions in `chunk`.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn pass<const N: usize>(
        d: &DirectConv,
        xs: &[f32],
        offs: &[usize],
        bases: &[usize; P],
        chunk: &[u32],
        b0: usize,
        out: *mut f32,
        residual: Option<&[f32]>,
    ) {
        let mut acc = [[_mm512_setzero_ps(); N]; P];
        let x = xs.as_ptr();
        let mut w = d.wt.as_ptr().add(b0 * 16);
        for &o in offs {
            let mut wv = [_mm512_setzero_ps(); N];
            for (j, v) in wv.iter_mut().enumerate() {
                *v = _mm512_loadu_ps(w.add(16 * j));
            }
            for (p, a) in acc.iter_mut().enumerate() {
                let xv = _mm512_set1_ps(*x.add(bases[p] + o));
                for j in 0..N {
                    a[j] = _mm512_fmadd_ps(xv, wv[j], a[j]);
                }
            }
            w = w.add(d.mpad);
        }
        let oplane = d.g.out_plane() as i32;
        let lanes = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(oplane));
        for (p, &pos) in chunk.iter().enumerate() {
            for (j, &v) in acc[p].iter().enumerate() {
                let m0 = (b0 + j) * 16;
                let live = (d.m - m0).min(16);
                let k: __mmask16 = if live == 16 { 0xffff } else { (1u16 << live) - 1 };
                // Channel m0 + lane of position `pos` lives at (m0 + lane) * oplane + pos.
                let at = out.add(m0 * oplane as usize + pos as usize);
                let mut y = _mm512_add_ps(v, _mm512_loadu_ps(d.bias.as_ptr().add(m0)));
                if let Some(r) = residual {
                    let rv =
                        _mm512_mask_i32gather_ps::<4>(_mm512_setzero_ps(), k, lanes, r.as_ptr().add(m0 * oplane as usize + pos as usize));
                    y = _mm512_add_ps(y, rv);
                }
                match d.act {
                    None => {}
                    Some(Activation::Relu) => y = _mm512_max_ps(y, _mm512_setzero_ps()),
                    Some(a) => {
                        let mut t = [0.0f32; 16];
                        _mm512_storeu_ps(t.as_mut_ptr(), y);
                        t.iter_mut().for_each(|e| *e = a.apply(*e));
                        y = _mm512_loadu_ps(t.as_ptr());
                    }
                }
                _mm512_mask_i32scatter_ps::<4>(at, k, lanes, y);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> f32 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        }
        fn below(&mut self, n: usize) -> usize {
            ((self.next() + 1.0) * 0.5 * n as f32) as usize % n
        }
    }

    fn reference(d: &DirectConv, w: &[f32], x: &[f32], r: Option<&[f32]>, pos: usize, mo: usize) -> f32 {
        let g = &d.g;
        let (oy, ox) = (pos / g.wo, pos % g.wo);
        let mut s = 0.0f64;
        for c in 0..d.c {
            for a in 0..g.kh {
                for b in 0..g.kw {
                    let iy = (oy * g.sh + a * g.dh) as isize - g.ph as isize;
                    let ix = (ox * g.sw + b * g.dw) as isize - g.pw as isize;
                    if iy >= 0 && ix >= 0 && (iy as usize) < g.h && (ix as usize) < g.w {
                        s += w[((mo * d.c + c) * g.kh + a) * g.kw + b] as f64 * x[(c * g.h + iy as usize) * g.w + ix as usize] as f64;
                    }
                }
            }
        }
        let at = mo * g.out_plane() + pos;
        d.finish(s as f32, mo, at, r)
    }

    /// Random geometry, channels (including counts that are not whole vectors), position lists
    /// and epilogues against a naive conv; unlisted positions must keep their poison.
    #[test]
    fn matches_naive_conv_on_listed_positions_only() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for case in 0..60 {
            let (k, s, dil) = ([(1, 1), (3, 3), (3, 1), (5, 5)][rng.below(4)], 1 + rng.below(2), 1 + rng.below(2) * (case % 3 / 2));
            let (h, w) = (3 + rng.below(20), 3 + rng.below(20));
            let (ph, pw) = (rng.below(k.0 / 2 + 1), rng.below(k.1 / 2 + 1));
            let (eh, ew) = ((k.0 - 1) * dil + 1, (k.1 - 1) * dil + 1);
            if h + 2 * ph < eh || w + 2 * pw < ew {
                continue;
            }
            let (ho, wo) = ((h + 2 * ph - eh) / s + 1, (w + 2 * pw - ew) / s + 1);
            let g = Geo2 { h, w, ho, wo, kh: k.0, kw: k.1, sh: s, sw: s, dh: dil, dw: dil, ph, pw };
            let (c, m) = (1 + rng.below(20), 1 + rng.below(70));
            let wv: Vec<f32> = (0..m * c * k.0 * k.1).map(|_| rng.next()).collect();
            let bias: Vec<f32> = (0..m).map(|_| rng.next()).collect();
            let act = [None, Some(Activation::Relu), Some(Activation::Sigmoid)][rng.below(3)];
            let fused = rng.below(2) == 1;
            let d = DirectConv::new(g, c, m, &wv, Some(&bias), act, fused).unwrap();
            let x: Vec<f32> = (0..c * h * w).map(|_| rng.next()).collect();
            let r: Vec<f32> = (0..m * ho * wo).map(|_| rng.next()).collect();
            let density = [0.05, 0.3, 1.0][rng.below(3)];
            let positions: Vec<u32> = (0..ho * wo).filter(|_| (rng.next() + 1.0) * 0.5 < density).map(|p| p as u32).collect();
            let mut out = vec![f32::NAN; m * ho * wo];
            let res = fused.then_some(r.as_slice());
            let simd = case % 2 == 0 && kernel_util::has_avx512();
            // SAFETY: sizes as built; positions inside the output.
            unsafe { d.run_raw(&x, out.as_mut_ptr(), res, &positions, simd) };
            if density == 1.0 {
                let mut all = vec![f32::NAN; m * ho * wo];
                d.run_all(Image { x: &x, out: &mut all, residual: res });
                assert!(all.iter().all(|v| v.is_finite()), "case {case}: run_all left outputs unwritten");
            }
            let listed: std::collections::HashSet<u32> = positions.iter().copied().collect();
            for mo in 0..m {
                for p in 0..ho * wo {
                    let got = out[mo * ho * wo + p];
                    if listed.contains(&(p as u32)) {
                        let want = reference(&d, &wv, &x, res, p, mo);
                        assert!(
                            (got - want).abs() <= 1e-4 * (1.0 + want.abs()),
                            "case {case} {g:?} c{c} m{m} pos {p} ch {mo}: {got} vs {want}"
                        );
                    } else {
                        assert!(got.is_nan(), "case {case}: unlisted position {p} channel {mo} was written");
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod bench {
    use super::*;

    /// `cargo test --release -p dynaspa-backends bench_direct_shapes -- --ignored --nocapture`:
    /// µs per call of the direct kernel on the reduced DynConv's dense conv shapes (1 thread).
    #[test]
    #[ignore]
    fn bench_direct_shapes() {
        // (name, c, h, w, m, k, stride)
        let shapes = [
            ("stem 3x3 s2 3->16 96x72", 3, 72, 96, 16, 3, 2),
            ("3x3 s2 32->32 24x18", 32, 18, 24, 32, 3, 2),
            ("3x3 s2 64->64 12x9", 64, 9, 12, 64, 3, 2),
            ("1x1 64->128 s2 24x18", 64, 18, 24, 128, 1, 2),
            ("3x3 s1 16->16 24x18", 16, 18, 24, 16, 3, 1),
        ];
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        for (name, c, h, w, m, k, s) in shapes {
            let p = k / 2;
            let (ho, wo) = ((h + 2 * p - k) / s + 1, (w + 2 * p - k) / s + 1);
            let g = Geo2 { h, w, ho, wo, kh: k, kw: k, sh: s, sw: s, dh: 1, dw: 1, ph: p, pw: p };
            let wv: Vec<f32> = (0..m * c * k * k).map(|i| ((i * 37 % 101) as f32 - 50.0) / 100.0).collect();
            let x: Vec<f32> = (0..c * h * w).map(|i| ((i * 13 % 97) as f32 - 48.0) / 50.0).collect();
            let d = DirectConv::new(g, c, m, &wv, None, Some(Activation::Relu), false).unwrap();
            let mut out = vec![0.0f32; m * ho * wo];
            let t = pool.install(|| {
                let mut ts = Vec::new();
                for _ in 0..200 {
                    let t0 = std::time::Instant::now();
                    d.run_all(Image { x: &x, out: &mut out, residual: None });
                    ts.push(t0.elapsed().as_secs_f64() * 1e6);
                }
                ts.sort_by(f64::total_cmp);
                ts[ts.len() / 2]
            });
            let macs = (ho * wo * c * k * k * m) as f64;
            println!("{name}: {t:.1} µs, {:.1} GMAC/s", macs / t / 1e3);
        }
    }
}
