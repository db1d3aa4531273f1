//! ConvTranspose as the adjoint of Conv: a GEMM (W^T x X) into columns, then col2im scatters
//! the columns into the output. Shape inference already turned output_shape / auto_pad /
//! output_padding into pads and the output spec, so the output extent comes from `out.shape`.

use super::gemm_util::{par_sgemm, with_scratch, Layout};
use super::im2col::{col2im, Geom};
use super::input;
use super::kernel_util::{err, f32_data, per_axis, split_pads};
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::graph::*;
use dynaspa_runtime::{Result, Tensor};
use rayon::prelude::*;

const OP: &str = "ConvTranspose";

/// Column tile cap: ConvTranspose upsamplers can have millions of columns per image.
const COL_TILE_BYTES: usize = 4 << 20;

pub(crate) fn conv_transpose(p: &ConvTranspose, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    let x = input(ins, 0, OP)?;
    let w = input(ins, 1, OP)?;
    let xd = f32_data(x, OP, "X")?;
    let wd = f32_data(w, OP, "W")?;
    let (xs, ws, os) = (x.shape(), w.shape(), out.shape.as_slice());
    let r = xs.len();
    if !(3..=5).contains(&r) || ws.len() != r || os.len() != r {
        return err(format!("{OP}: X {xs:?}, W {ws:?} and output {os:?} must all be (N, C, spatial...) with 1 to 3 spatial axes"));
    }
    let sp = r - 2;
    let (n, c, groups) = (xs[0], xs[1], p.group);
    if groups == 0 || c % groups != 0 || ws[0] != c {
        return err(format!("{OP}: group {groups} and weight {ws:?} do not fit X channels {c} (need W[0] = C, C divisible by group)"));
    }
    let (cg, mg) = (c / groups, ws[1]);
    let m = mg * groups;
    if os[0] != n || os[1] != m {
        return err(format!("{OP}: output shape {os:?} must start with [{n}, {m}]"));
    }
    let kernel = &ws[2..];
    let kshape = &p.window.kernel_shape;
    if !kshape.is_empty() && kshape.as_slice() != kernel {
        return err(format!("{OP}: kernel_shape {kshape:?} disagrees with weight shape {ws:?}"));
    }
    let stride = per_axis(OP, "strides", &p.window.strides, sp)?;
    let dil = per_axis(OP, "dilations", &p.window.dilations, sp)?;
    let (pb, _) = split_pads(OP, &p.window.pads, sp)?;
    // Positions are computed as i*s + k*d - pad; bound them so that cannot overflow.
    for a in 0..sp {
        let reach = (xs[2 + a] as u128 + 1) * stride[a] as u128 + (kernel[a] as u128 + 1) * dil[a] as u128;
        if reach > isize::MAX as u128 / 4 || pb[a] > isize::MAX as usize / 4 {
            return err(format!("{OP}: strides/dilations/pads too large for input {xs:?}"));
        }
    }
    let bias = match ins.get(2).copied().flatten() {
        Some(b) => {
            let bd = f32_data(b, OP, "B")?;
            if bd.len() != m || b.rank() != 1 {
                return err(format!("{OP}: bias shape {:?} must be [{m}]", b.shape()));
            }
            Some(bd)
        }
        None => None,
    };
    // Forward-conv geometry: the output is the image the window walks over, X the positions.
    let g = Geom::new(&os[2..], &xs[2..], kernel, &stride, &dil, &pb);
    let (p_in, img, klen) = (g.out_len(), g.image_len(), g.kernel_len());
    let rows = mg * klen;
    let mut y = vec![0.0f32; n * m * img];
    if !y.is_empty() && p_in > 0 && rows > 0 {
        let pt = (COL_TILE_BYTES / 4 / rows).clamp(1, p_in);
        with_scratch(rows * pt, |col| {
            for job in 0..n * groups {
                let (ni, gi) = (job / groups, job % groups);
                let xg = &xd[(ni * c + gi * cg) * p_in..][..cg * p_in];
                // W[g] is (Cg, Mg*k) row-major; the GEMM reads it transposed.
                let wg = &wd[gi * cg * rows..][..cg * rows];
                let yg = &mut y[(ni * m + gi * mg) * img..][..mg * img];
                for p0 in (0..p_in).step_by(pt) {
                    let p1 = (p0 + pt).min(p_in);
                    let colt = &mut col[..rows * (p1 - p0)];
                    par_sgemm(
                        rows,
                        p1 - p0,
                        cg,
                        1.0,
                        wg,
                        Layout::col_major(rows),
                        &xg[p0..],
                        Layout::row_major(p_in),
                        colt,
                        p1 - p0,
                        false,
                    );
                    col2im(colt, &g, p0, p1, yg);
                }
            }
        });
    }
    if let (Some(b), false) = (bias, img == 0) {
        y.par_chunks_mut(img).enumerate().for_each(|(i, plane)| {
            let bv = b[i % m];
            plane.iter_mut().for_each(|v| *v += bv);
        });
    }
    Tensor::from_f32(out.shape.clone(), y)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::test_util::*;

    struct Case {
        x: Vec<usize>,
        mg: usize,
        group: usize,
        k: Vec<usize>,
        s: Vec<usize>,
        d: Vec<usize>,
        pads: Vec<usize>,
        out_pad: Vec<usize>,
    }

    fn out_shape(c: &Case) -> Vec<usize> {
        let sp = c.k.len();
        let mut o = vec![c.x[0], c.mg * c.group];
        for a in 0..sp {
            o.push(c.s[a] * (c.x[2 + a] - 1) + c.out_pad[a] + (c.k[a] - 1) * c.d[a] + 1 - c.pads[a] - c.pads[sp + a]);
        }
        o
    }

    /// Scatter definition: every input element adds W-weighted copies into the output.
    fn reference(c: &Case, x: &[f32], w: &[f32], b: &[f32]) -> Vec<f32> {
        let sp = c.k.len();
        let os = out_shape(c);
        let (cin, cg, m) = (c.x[1], c.x[1] / c.group, c.mg * c.group);
        let isz: usize = c.x[2..].iter().product();
        let osz: usize = os[2..].iter().product();
        let ksz: usize = c.k.iter().product();
        let unravel = |mut i: usize, dims: &[usize]| {
            let mut v = vec![0; dims.len()];
            for a in (0..dims.len()).rev() {
                v[a] = i % dims[a];
                i /= dims[a];
            }
            v
        };
        let mut y = vec![0.0f64; c.x[0] * m * osz];
        for n in 0..c.x[0] {
            for ci in 0..cin {
                let gi = ci / cg;
                for i in 0..isz {
                    let ii = unravel(i, &c.x[2..]);
                    let xv = x[(n * cin + ci) * isz + i] as f64;
                    for mo in 0..c.mg {
                        for kk in 0..ksz {
                            let ki = unravel(kk, &c.k);
                            let mut idx = 0usize;
                            let mut ok = true;
                            for a in 0..sp {
                                let o = (ii[a] * c.s[a] + ki[a] * c.d[a]) as isize - c.pads[a] as isize;
                                ok &= o >= 0 && o < os[2 + a] as isize;
                                idx = idx * os[2 + a] + o.max(0) as usize;
                            }
                            if ok {
                                let wv = w[(ci * c.mg + mo) * ksz + kk] as f64;
                                y[(n * m + gi * c.mg + mo) * osz + idx] += xv * wv;
                            }
                        }
                    }
                }
            }
        }
        y.iter().enumerate().map(|(i, &v)| (v + b[(i / osz) % m] as f64) as f32).collect()
    }

    fn run(c: &Case, seed: u64) {
        let mut rng = Rng::new(seed);
        let os = out_shape(c);
        let x = rng.tensor(&c.x);
        let mut wshape = vec![c.x[1], c.mg];
        wshape.extend(&c.k);
        let w = rng.tensor(&wshape);
        let b = rng.tensor(&[c.mg * c.group]);
        let p = ConvTranspose {
            window: Window {
                kernel_shape: c.k.clone(),
                strides: c.s.clone(),
                pads: c.pads.clone(),
                dilations: c.d.clone(),
                auto_pad: AutoPad::NotSet,
            },
            group: c.group,
            output_padding: c.out_pad.clone(),
            output_shape: None,
        };
        let got = conv_transpose(&p, &[Some(&x), Some(&w), Some(&b)], &spec(&os)).unwrap();
        let want = reference(c, x.as_f32().unwrap(), w.as_f32().unwrap(), b.as_f32().unwrap());
        assert_close(got.as_f32().unwrap(), &want, 1e-4, &format!("convT x={:?} k={:?} s={:?} d={:?} p={:?}", c.x, c.k, c.s, c.d, c.pads));
    }

    #[test]
    fn conv_transpose_2d() {
        let c = |x: &[usize], mg, group, k: &[usize], s: &[usize], d: &[usize], pads: &[usize], op: &[usize]| Case {
            x: x.into(),
            mg,
            group,
            k: k.into(),
            s: s.into(),
            d: d.into(),
            pads: pads.into(),
            out_pad: op.into(),
        };
        run(&c(&[1, 3, 4, 5], 2, 1, &[3, 3], &[1, 1], &[1, 1], &[0, 0, 0, 0], &[0, 0]), 1);
        run(&c(&[2, 4, 5, 4], 3, 1, &[3, 3], &[2, 2], &[1, 1], &[1, 1, 1, 1], &[1, 1]), 2);
        run(&c(&[1, 4, 6, 6], 2, 2, &[4, 4], &[2, 2], &[1, 1], &[1, 1, 1, 1], &[0, 0]), 3);
        run(&c(&[1, 6, 5, 7], 1, 6, &[3, 2], &[2, 3], &[2, 1], &[0, 1, 2, 0], &[1, 2]), 4);
        run(&c(&[1, 8, 9, 9], 8, 1, &[2, 2], &[2, 2], &[1, 1], &[0, 0, 0, 0], &[0, 0]), 5);
        run(&c(&[1, 2, 3], 3, 1, &[3], &[2], &[1], &[0, 0], &[1]), 6);
        run(&c(&[2, 4, 7], 2, 2, &[5], &[3], &[2], &[2, 1], &[0]), 7);
        run(&c(&[1, 2, 3, 4, 3], 2, 1, &[2, 3, 2], &[2, 1, 2], &[1, 1, 1], &[0, 1, 0, 0, 1, 1], &[1, 0, 0]), 8);
    }

    #[test]
    fn conv_transpose_rejects_bad_inputs() {
        let mut rng = Rng::new(4);
        let x = rng.tensor(&[1, 4, 5, 5]);
        let w = rng.tensor(&[4, 2, 3, 3]);
        let p = ConvTranspose {
            window: Window { kernel_shape: vec![], strides: vec![], pads: vec![], dilations: vec![], auto_pad: AutoPad::NotSet },
            group: 1,
            output_padding: vec![],
            output_shape: None,
        };
        assert!(conv_transpose(&p, &[Some(&x), Some(&w)], &spec(&[1, 2, 7, 7])).is_ok());
        assert!(conv_transpose(&p, &[Some(&x), Some(&w)], &spec(&[1, 3, 7, 7])).is_err());
        let wb = rng.tensor(&[3, 2, 3, 3]);
        assert!(conv_transpose(&p, &[Some(&x), Some(&wb)], &spec(&[1, 2, 7, 7])).is_err());
        let g3 = ConvTranspose { group: 3, ..p.clone() };
        assert!(conv_transpose(&g3, &[Some(&x), Some(&w)], &spec(&[1, 6, 7, 7])).is_err());
        let bb = rng.tensor(&[5]);
        assert!(conv_transpose(&p, &[Some(&x), Some(&w), Some(&bb)], &spec(&[1, 2, 7, 7])).is_err());
    }
}
