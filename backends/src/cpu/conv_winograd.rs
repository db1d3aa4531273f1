//! Winograd F(2x2, 3x3) for 3x3 stride-1 convs: 16 multiplications per 2x2 outputs instead of
//! 36, so the GEMM shrinks 2.25x; ResNet-style networks spend most of their time in such convs.
//!
//! Per image, the output is cut into bands of 2x2 tiles (whole tile rows, at most 64 tiles, or
//! 64-tile pieces of a long row), so a band's transformed input is exactly one 64-column panel
//! for the AVX-512 register tile of `conv_simd`. Three parallel stages: input transform
//! (band x channel block), 16 GEMMs per band (band x transform point x output-channel block:
//! enough tasks even when a 7x7 map makes a single band), output transform with the fused
//! epilogue (band x output-channel block). The weights are transformed once, when the executor
//! compiles the graph.

use super::conv_simd::{Finish, Tile, KC_MAX, MR, NR};
use super::gemm_util::{with_scratch, with_scratch2, SendPtr};
use super::kernel_util::{epilogue, multiversion};
use dynaspa_runtime::graph::Activation;
use rayon::prelude::*;

/// `u[(xi * m + mi) * c + ci]`: the 4x4 transform `G g Gᵀ` of filter (mi, ci), point `xi`.
pub(crate) struct WinoWeights {
    pub m: usize,
    pub c: usize,
    u: Vec<f32>,
}

impl WinoWeights {
    /// `w` is the ONNX weight `[m, c, 3, 3]`.
    pub fn new(w: &[f32], m: usize, c: usize) -> WinoWeights {
        assert_eq!(w.len(), m * c * 9, "Winograd weights: length must be m*c*9");
        let mut u = vec![0.0f32; 16 * m * c];
        for mi in 0..m {
            for ci in 0..c {
                let g = &w[(mi * c + ci) * 9..][..9];
                // G g: 4x3, column s from filter column s.
                let mut t = [[0.0f32; 3]; 4];
                for s in 0..3 {
                    let (g0, g1, g2) = (g[s], g[3 + s], g[6 + s]);
                    t[0][s] = g0;
                    t[1][s] = 0.5 * (g0 + g1 + g2);
                    t[2][s] = 0.5 * (g0 - g1 + g2);
                    t[3][s] = g2;
                }
                for (i, r) in t.iter().enumerate() {
                    let row = [r[0], 0.5 * (r[0] + r[1] + r[2]), 0.5 * (r[0] - r[1] + r[2]), r[2]];
                    for (j, v) in row.into_iter().enumerate() {
                        u[((4 * i + j) * m + mi) * c + ci] = v;
                    }
                }
            }
        }
        WinoWeights { m, c, u }
    }
}

/// One 3x3 stride-1 conv call on the Winograd path (validated by the caller).
#[derive(Clone, Copy)]
pub(crate) struct WinoJob<'a> {
    pub n: usize,
    /// Input (h, w) and output (ho, wo) sides; `pad` = (top, left).
    pub h: usize,
    pub w: usize,
    pub ho: usize,
    pub wo: usize,
    pub pad: (usize, usize),
    pub x: &'a [f32],
    pub wt: &'a WinoWeights,
    pub bias: Option<&'a [f32]>,
    pub add: Option<&'a [f32]>,
    pub act: Option<Activation>,
}

/// A rectangle of 2x2 tiles: tile rows `ty0..ty1`, tile columns `tx0..tx1`.
#[derive(Clone, Copy)]
struct Band {
    ty0: usize,
    ty1: usize,
    tx0: usize,
    tx1: usize,
}

impl Band {
    fn cols(&self) -> usize {
        (self.ty1 - self.ty0) * (self.tx1 - self.tx0)
    }
}

fn bands(th: usize, tw: usize) -> Vec<Band> {
    let mut v = Vec::new();
    if tw <= NR {
        let per = NR / tw;
        for ty0 in (0..th).step_by(per) {
            v.push(Band { ty0, ty1: (ty0 + per).min(th), tx0: 0, tx1: tw });
        }
    } else {
        for ty in 0..th {
            for tx0 in (0..tw).step_by(NR) {
                v.push(Band { ty0: ty, ty1: ty + 1, tx0, tx1: (tx0 + NR).min(tw) });
            }
        }
    }
    v
}

/// Channels per input-transform task and output channels per GEMM / output task.
const C_BLOCK: usize = 16;
const M_BLOCK: usize = 8 * MR;

/// Writes all of `y` (`n * m * ho * wo`).
///
/// # Safety
/// AVX-512 must be available; `y` valid for that many writes and not accessed meanwhile.
pub(crate) unsafe fn conv(j: &WinoJob, y: SendPtr) {
    let (th, tw) = (j.ho.div_ceil(2), j.wo.div_ceil(2));
    let bs = bands(th, tw);
    for img in 0..j.n {
        let (c, m) = (j.wt.c, j.wt.m);
        let img_job = WinoJob {
            n: 1,
            x: &j.x[img * c * j.h * j.w..][..c * j.h * j.w],
            add: j.add.map(|a| &a[img * m * j.ho * j.wo..][..m * j.ho * j.wo]),
            ..*j
        };
        let out = SendPtr::raw(y.get().add(img * m * j.ho * j.wo));
        if bs.len() >= 4 * super::gemm_util::threads() {
            by_band(&img_job, &bs, out);
        } else {
            staged(&img_job, &bs, out);
        }
    }
}

/// Many bands (large maps): one task per band runs all three stages while the band's
/// transformed input and products stay in that core's L2; staging them through memory made
/// the 56x56 layers memory-bound.
unsafe fn by_band(j: &WinoJob, bs: &[Band], out: SendPtr) {
    let (c, m) = (j.wt.c, j.wt.m);
    bs.par_iter().with_max_len(1).for_each(|&b| {
        with_scratch(16 * (c + m) * NR, |buf| {
            let (v, yb) = buf.split_at_mut(16 * c * NR);
            input_transform(j, j.x, b, 0, c, v);
            for xi in 0..16 {
                gemm(j.wt, xi, 0, m, b.cols(), &v[xi * c * NR..][..c * NR], yb.as_mut_ptr().add(xi * m * NR));
            }
            for mi in 0..m {
                output_transform(j, b, yb, mi, j.add, out);
            }
        })
    });
}

/// Few bands (small maps): each stage parallel on its own, the GEMMs split by transform point
/// and output-channel block so a 14x14 map's single band still keeps every core busy.
unsafe fn staged(j: &WinoJob, bs: &[Band], out: SendPtr) {
    let (c, m) = (j.wt.c, j.wt.m);
    let (v_band, y_band) = (16 * c * NR, 16 * m * NR);
    with_scratch(bs.len() * v_band, |vbuf| {
        with_scratch2(bs.len() * y_band, |ybuf| {
            let vp = SendPtr::new(vbuf);
            let cblocks = c.div_ceil(C_BLOCK);
            (0..bs.len() * cblocks).into_par_iter().for_each(|t| {
                let (b, cb) = (t / cblocks, t % cblocks);
                let (c0, c1) = (cb * C_BLOCK, ((cb + 1) * C_BLOCK).min(c));
                // SAFETY: task (b, cb) writes only channels c0..c1 of band b's panel.
                let v = std::slice::from_raw_parts_mut(vp.get().add(b * v_band), v_band);
                input_transform(j, j.x, bs[b], c0, c1, v);
            });
            let vbuf: &[f32] = vbuf;
            let yp = SendPtr::new(ybuf);
            let mblocks = m.div_ceil(M_BLOCK);
            (0..bs.len() * 16 * mblocks).into_par_iter().with_max_len(1).for_each(|t| {
                let (b, xi, mb) = (t / (16 * mblocks), t / mblocks % 16, t % mblocks);
                let v = &vbuf[b * v_band + xi * c * NR..][..c * NR];
                // SAFETY: task (b, xi, mb) writes only its rows of band b's point xi.
                let yt = yp.get().add(b * y_band + xi * m * NR);
                gemm(j.wt, xi, mb * M_BLOCK, ((mb + 1) * M_BLOCK).min(m), bs[b].cols(), v, yt);
            });
            let ybuf: &[f32] = ybuf;
            (0..bs.len() * mblocks).into_par_iter().for_each(|t| {
                let (b, mb) = (t / mblocks, t % mblocks);
                let yb = &ybuf[b * y_band..][..y_band];
                for mi in mb * M_BLOCK..((mb + 1) * M_BLOCK).min(m) {
                    // SAFETY: bands cover disjoint output tiles and tasks disjoint channels.
                    output_transform(j, bs[b], yb, mi, j.add, out);
                }
            });
        })
    })
}

/// `Y[xi][m0..m1][..cols] = U[xi][m0..m1] · V[xi]`, K blocked so a block of the panel stays in L1.
unsafe fn gemm(wt: &WinoWeights, xi: usize, m0: usize, m1: usize, cols: usize, v: &[f32], y: *mut f32) {
    const ZEROS: [f32; MR] = [0.0; MR];
    let (c, m) = (wt.c, wt.m);
    let u = &wt.u[xi * m * c..][..m * c];
    let kc = c.div_ceil(c.div_ceil(KC_MAX).max(1)).max(1);
    for k0 in (0..c).step_by(kc) {
        let k1 = (k0 + kc).min(c);
        for mt in (m0..m1).step_by(MR) {
            let rows = MR.min(m1 - mt);
            let next = if mt + MR < m1 { (mt + MR) * c + k0 } else { m0 * c + k1 % c };
            Tile {
                rows,
                cols,
                k: k1 - k0,
                w: &u[mt * c + k0..],
                ldw: c,
                b: &v[k0 * NR..],
                ldb: NR,
                bias: (k0 == 0).then_some(&ZEROS[..rows]),
                add: None,
                fin: Finish::None,
                y: y.add(mt * NR),
                ldy: NR,
                prefetch: u.as_ptr().wrapping_add(next),
            }
            .run();
        }
    }
}

multiversion! {
/// `V[xi][c][..]` for channels `c0..c1` of `band`: `Bᵀ d B` of every tile's 4x4 input patch
/// (zero outside the image), rows first, then columns, both as runs over the tiles of a row.
fn input_transform(j: &WinoJob, x: &[f32], band: Band, c0: usize, c1: usize, v: &mut [f32]) {
    let c = j.wt.c;
    let bw = band.tx1 - band.tx0;
    let rows = 2 * (band.ty1 - band.ty0) + 2;
    let span = 2 * bw + 2;
    let mut line = vec![0.0f32; span];
    let mut hb = vec![0.0f32; rows * 4 * bw];
    let (pt, pl) = (j.pad.0 as isize, j.pad.1 as isize);
    let col0 = 2 * band.tx0 as isize - pl;
    for ci in c0..c1 {
        let plane = &x[ci * j.h * j.w..][..j.h * j.w];
        for r in 0..rows {
            let yin = 2 * band.ty0 as isize + r as isize - pt;
            line.fill(0.0);
            if yin >= 0 && (yin as usize) < j.h {
                let src = &plane[yin as usize * j.w..][..j.w];
                let lo = (-col0).max(0) as usize;
                let hi = ((j.w as isize - col0).max(0) as usize).min(span);
                if lo < hi {
                    line[lo..hi].copy_from_slice(&src[(col0 + lo as isize) as usize..][..hi - lo]);
                }
            }
            let h = &mut hb[r * 4 * bw..][..4 * bw];
            let (h0, rest) = h.split_at_mut(bw);
            let (h1, rest) = rest.split_at_mut(bw);
            let (h2, h3) = rest.split_at_mut(bw);
            for t in 0..bw {
                let d = &line[2 * t..2 * t + 4];
                h0[t] = d[0] - d[2];
                h1[t] = d[1] + d[2];
                h2[t] = d[2] - d[1];
                h3[t] = d[1] - d[3];
            }
        }
        for i in 0..band.ty1 - band.ty0 {
            let at = i * bw;
            for jj in 0..4 {
                let row = |k: usize| &hb[((2 * i + k) * 4 + jj) * bw..][..bw];
                let (r0, r1, r2, r3) = (row(0), row(1), row(2), row(3));
                for (p, f) in [(0, 0usize), (1, 1), (2, 2), (3, 3)] {
                    let dst = &mut v[((4 * p + jj) * c + ci) * NR + at..][..bw];
                    match f {
                        0 => dst.iter_mut().zip(r0.iter().zip(r2)).for_each(|(o, (a, b))| *o = a - b),
                        1 => dst.iter_mut().zip(r1.iter().zip(r2)).for_each(|(o, (a, b))| *o = a + b),
                        2 => dst.iter_mut().zip(r2.iter().zip(r1)).for_each(|(o, (a, b))| *o = a - b),
                        _ => dst.iter_mut().zip(r1.iter().zip(r3)).for_each(|(o, (a, b))| *o = a - b),
                    }
                }
            }
        }
    }
}
}

/// Output channel `mi` of `band`: `Aᵀ M A` per tile into the NCHW output, then the epilogue on
/// the written rows.
///
/// # Safety
/// `out` must be valid for the image's `m * ho * wo` outputs; no other task writes these.
unsafe fn output_transform(j: &WinoJob, band: Band, yb: &[f32], mi: usize, add: Option<&[f32]>, out: SendPtr) {
    let m = j.wt.m;
    let cols = band.cols();
    let bw = band.tx1 - band.tx0;
    let mut o = [[0.0f32; NR]; 4];
    transform_out(yb, m, mi, cols, &mut o);
    let plane = std::slice::from_raw_parts_mut(out.get().add(mi * j.ho * j.wo), j.ho * j.wo);
    let bias = j.bias.map_or(0.0, |b| b[mi]);
    for i in 0..band.ty1 - band.ty0 {
        let ty = band.ty0 + i;
        for dy in 0..2 {
            let yo = 2 * ty + dy;
            if yo >= j.ho {
                break;
            }
            let (x0, x1) = (2 * band.tx0, (2 * band.tx1).min(j.wo));
            let row = &mut plane[yo * j.wo + x0..yo * j.wo + x1];
            let (a, b) = (&o[2 * dy][i * bw..], &o[2 * dy + 1][i * bw..]);
            for (k, v) in row.iter_mut().enumerate() {
                *v = if k % 2 == 0 { a[k / 2] } else { b[k / 2] };
            }
            let add_row = add.map(|ad| &ad[mi * j.ho * j.wo + yo * j.wo + x0..][..x1 - x0]);
            epilogue(row, bias, add_row, j.act);
        }
    }
}

multiversion! {
/// The four outputs of every tile of the band for channel `mi`: `o[2*dy + dx][tile]`.
fn transform_out(yb: &[f32], m: usize, mi: usize, cols: usize, o: &mut [[f32; NR]; 4]) {
    let at = |xi: usize| &yb[(xi * m + mi) * NR..][..cols];
    // Aᵀ M: two rows per column j, then the same along the row.
    let mut z = [[0.0f32; NR]; 8];
    for jj in 0..4 {
        let (m0, m1, m2, m3) = (at(jj), at(4 + jj), at(8 + jj), at(12 + jj));
        for t in 0..cols {
            z[jj][t] = m0[t] + m1[t] + m2[t];
            z[4 + jj][t] = m1[t] - m2[t] - m3[t];
        }
    }
    for r in 0..2 {
        let (z0, z1, z2, z3) = (&z[4 * r], &z[4 * r + 1], &z[4 * r + 2], &z[4 * r + 3]);
        for t in 0..cols {
            o[2 * r][t] = z0[t] + z1[t] + z2[t];
            o[2 * r + 1][t] = z1[t] - z2[t] - z3[t];
        }
    }
}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::test_util::Rng;

    /// Direct 3x3 correlation with zero padding, in f64.
    #[allow(clippy::too_many_arguments)]
    fn reference(
        x: &[f32],
        w: &[f32],
        n: usize,
        c: usize,
        m: usize,
        h: usize,
        wd: usize,
        pad: (usize, usize),
        ho: usize,
        wo: usize,
    ) -> Vec<f32> {
        let mut y = vec![0.0f32; n * m * ho * wo];
        for img in 0..n {
            for mi in 0..m {
                for oy in 0..ho {
                    for ox in 0..wo {
                        let mut s = 0.0f64;
                        for ci in 0..c {
                            for ky in 0..3 {
                                for kx in 0..3 {
                                    let iy = (oy + ky) as isize - pad.0 as isize;
                                    let ix = (ox + kx) as isize - pad.1 as isize;
                                    if iy >= 0 && ix >= 0 && (iy as usize) < h && (ix as usize) < wd {
                                        s += x[((img * c + ci) * h + iy as usize) * wd + ix as usize] as f64
                                            * w[((mi * c + ci) * 3 + ky) * 3 + kx] as f64;
                                    }
                                }
                            }
                        }
                        y[((img * m + mi) * ho + oy) * wo + ox] = s as f32;
                    }
                }
            }
        }
        y
    }

    #[test]
    fn matches_direct_correlation() {
        if !crate::cpu::kernel_util::has_avx512() {
            eprintln!("skipped: no AVX-512 on this CPU");
            return;
        }
        let mut rng = Rng::new(0x5eed_3a3);
        // (n, c, m, h, w, pad): odd and even sides, maps wider than a 64-tile band, pads 0 and 1,
        // channel counts that are not multiples of the blocks.
        for &(n, c, m, h, wd, pad) in &[
            (1, 3, 5, 6, 6, (1, 1)),
            (2, 17, 13, 7, 9, (1, 1)),
            (1, 20, 50, 5, 140, (1, 1)),
            (1, 130, 7, 9, 8, (0, 0)),
            (1, 16, 16, 1, 1, (1, 1)),
            (1, 8, 64, 14, 14, (1, 1)),
        ] {
            let (ho, wo) = (h + 2 * pad.0 - 2, wd + 2 * pad.1 - 2);
            let x: Vec<f32> = (0..n * c * h * wd).map(|_| rng.f32()).collect();
            let w: Vec<f32> = (0..m * c * 9).map(|_| rng.f32()).collect();
            let bias: Vec<f32> = (0..m).map(|_| rng.f32()).collect();
            let add: Vec<f32> = (0..n * m * ho * wo).map(|_| rng.f32()).collect();
            let wt = WinoWeights::new(&w, m, c);
            let mut want = reference(&x, &w, n, c, m, h, wd, pad, ho, wo);
            for (i, v) in want.iter_mut().enumerate() {
                *v = (*v + bias[(i / (ho * wo)) % m] + add[i]).max(0.0);
            }
            let mut y = vec![f32::NAN; n * m * ho * wo];
            let job = WinoJob { n, h, w: wd, ho, wo, pad, x: &x, wt: &wt, bias: Some(&bias), add: Some(&add), act: Some(Activation::Relu) };
            // SAFETY: AVX-512 checked above; y has n*m*ho*wo elements.
            unsafe { conv(&job, SendPtr::new(&mut y)) };
            let scale = (c * 9) as f32;
            for (i, (a, b)) in y.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-5 * scale.sqrt() * (1.0 + b.abs()),
                    "case {:?}: element {i}: {a} vs {b}",
                    (n, c, m, h, wd, pad)
                );
            }
        }
    }
}
