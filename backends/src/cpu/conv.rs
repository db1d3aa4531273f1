//! Conv: validation and dispatch. Dense convs lower to GEMM with the bias, fused add and
//! activation applied in the same pass (AVX-512 kernel in `conv_simd`, portable `gemm` crate
//! path in `conv_gemm`); depthwise convs run the direct kernel in `conv_dw`.

use super::conv_dw::depthwise;
use super::conv_gemm::gemm_conv;
use super::gemm_util::SendPtr;
use super::im2col::Geom;
use super::input;
use super::kernel_util::{epilogue, err, f32_data, per_axis, split_pads};
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::graph::*;
use dynaspa_runtime::{Result, Tensor};

const OP: &str = "Conv";

/// Validated dimensions of one Conv call.
pub(crate) struct Dims {
    pub n: usize,
    pub c: usize,
    pub m: usize,
    pub groups: usize,
    pub geom: Geom,
}

fn check(p: &Conv, xs: &[usize], ws: &[usize], out: &[usize]) -> Result<Dims> {
    let r = xs.len();
    if !(3..=5).contains(&r) {
        return err(format!("{OP}: input X must be (N, C, spatial...) with 1 to 3 spatial axes, got shape {xs:?}"));
    }
    if ws.len() != r {
        return err(format!("{OP}: weight shape {ws:?} must have rank {r} like X {xs:?}"));
    }
    let sp = r - 2;
    let (n, c, m, cg, groups) = (xs[0], xs[1], ws[0], ws[1], p.group);
    if groups == 0 || cg * groups != c || m % groups != 0 {
        return err(format!(
            "{OP}: group {groups} does not fit X channels {c}, weight {ws:?} (need C = W[1]*group and W[0] divisible by group)"
        ));
    }
    let kernel = &ws[2..];
    let kshape = &p.window.kernel_shape;
    if !kshape.is_empty() && kshape.as_slice() != kernel {
        return err(format!("{OP}: kernel_shape {kshape:?} disagrees with weight shape {ws:?}"));
    }
    let stride = per_axis(OP, "strides", &p.window.strides, sp)?;
    let dil = per_axis(OP, "dilations", &p.window.dilations, sp)?;
    let (pb, pe) = split_pads(OP, &p.window.pads, sp)?;
    let mut osp = Vec::with_capacity(sp);
    for a in 0..sp {
        let span = xs[2 + a].checked_add(pb[a]).and_then(|v| v.checked_add(pe[a]));
        let eff = kernel[a].checked_sub(1).and_then(|k| k.checked_mul(dil[a])).map(|v| v + 1);
        match (span, eff) {
            (Some(s), Some(e)) if kernel[a] > 0 && s >= e => osp.push((s - e) / stride[a] + 1),
            _ => {
                return err(format!("{OP}: kernel {kernel:?} (dilations {dil:?}) does not fit input {xs:?} with pads {:?}", p.window.pads))
            }
        }
    }
    let want: Vec<usize> = [n, m].into_iter().chain(osp.iter().copied()).collect();
    if out != want.as_slice() {
        return err(format!("{OP}: output shape {out:?} does not match the computed {want:?}"));
    }
    let geom = Geom::new(&xs[2..], &osp, kernel, &stride, &dil, &pb);
    Ok(Dims { n, c, m, groups, geom })
}

pub(crate) fn conv(p: &Conv, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    conv_with(p, ins, out, Path::Auto, None)
}

/// Weights transformed for Winograd when `p` with weight shape `ws` takes that path: a 2-D 3x3
/// stride-1 undilated ungrouped conv, wide enough that the GEMM dominates the transforms.
#[cfg(target_arch = "x86_64")]
pub(crate) fn prepare_winograd(p: &Conv, w: &Tensor) -> Option<super::conv_winograd::WinoWeights> {
    let ws = w.shape();
    let win = &p.window;
    let fits = ws.len() == 4
        && ws[2..] == [3, 3]
        && p.group == 1
        && win.strides.iter().all(|&s| s == 1)
        && win.dilations.iter().all(|&d| d == 1)
        && ws[0] >= 16
        && ws[1] >= 16
        && simd_available();
    let wd = w.as_f32().ok()?;
    fits.then(|| super::conv_winograd::WinoWeights::new(wd, ws[0], ws[1]))
}

/// Conv with weights prepared at compile time (`prepare_winograd`).
#[cfg(target_arch = "x86_64")]
pub(crate) fn conv_winograd(p: &Conv, ins: &[Option<&Tensor>], out: &TensorSpec, wt: &super::conv_winograd::WinoWeights) -> Result<Tensor> {
    conv_with(p, ins, out, Path::Auto, Some(wt))
}

/// Conv through the direct kernel prepared at compile time (`conv_direct::pays` chose it). The
/// bias is the one `d` was built with (a constant of the graph).
pub(crate) fn conv_direct(p: &Conv, d: &super::conv_direct::DirectConv, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    per_image(p, &d.g, ins, out, |x, o, r| d.run_all(super::conv_direct::Image { x, out: o, residual: r }))
}

/// Conv through the row kernel prepared at compile time (`conv_rows::pays` chose it).
pub(crate) fn conv_rows(p: &Conv, r: &super::conv_rows::RowsConv, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    per_image(p, r.geometry(), ins, out, |x, o, res| r.run(x, o, res))
}

/// Checks a prepared kernel's call (input and output as prepared, the fused addend's shape)
/// and runs `f(x, out, residual)` per image.
fn per_image(
    p: &Conv,
    g: &super::sparse::gather::Geo2,
    ins: &[Option<&Tensor>],
    out: &TensorSpec,
    f: impl Fn(&[f32], &mut [f32], Option<&[f32]>),
) -> Result<Tensor> {
    let x = input(ins, 0, OP)?;
    let w = input(ins, 1, OP)?;
    let xd = f32_data(x, OP, "X")?;
    let dims = check(p, x.shape(), w.shape(), &out.shape)?;
    if x.shape()[1..] != [dims.c, g.h, g.w] || out.shape[2..] != [g.ho, g.wo] {
        return err(format!("{OP}: input {:?} / output {:?} differ from the shapes the kernel was prepared for", x.shape(), out.shape));
    }
    let add = if p.fused_add {
        let a = input(ins, 3, OP)?;
        if a.shape() != out.shape.as_slice() {
            return err(format!("{OP}: fused addend shape {:?} must equal the output shape {:?}", a.shape(), out.shape));
        }
        Some(f32_data(a, OP, "fused addend")?)
    } else {
        None
    };
    let (xi, oi) = (xd.len() / dims.n.max(1), dims.m * g.out_plane());
    let mut y = vec![0.0f32; dims.n * oi];
    for (i, o) in y.chunks_exact_mut(oi.max(1)).enumerate() {
        f(&xd[i * xi..][..xi], o, add.map(|a| &a[i * oi..][..oi]));
    }
    Tensor::from_f32(out.shape.clone(), y)
}

/// Measured on ResNet-18's layers (2-core Xeon): Winograd wins from 14x14 maps up (1.3-1.5x);
/// a 7x7 map has 16 tiles, too few columns for the register tile, and loses.
#[cfg(target_arch = "x86_64")]
fn winograd_pays(d: &Dims) -> bool {
    let g = &d.geom;
    g.kernel == [1, 3, 3] && g.out[1].div_ceil(2) * g.out[2].div_ceil(2) >= 32
}

#[cfg(target_arch = "x86_64")]
type Prepared<'a> = Option<&'a super::conv_winograd::WinoWeights>;
#[cfg(not(target_arch = "x86_64"))]
type Prepared<'a> = Option<&'a ()>;

/// Which GEMM lowering a dense conv takes. Tests force each one.
#[derive(Clone, Copy, PartialEq, Debug)]
#[cfg_attr(not(test), allow(dead_code))]
enum Path {
    Auto,
    Portable,
    Simd,
}

/// Measured per ResNet-18 shape on the 2-core Xeon: the AVX-512 path wins where there are many
/// 64-column panels to spread over the cores (56x56, 28x28 maps, by 5-15%); with few panels
/// (14x14, 7x7) or a shallow K with few outputs (the RGB stem) the `gemm` crate path, which
/// packs the weights once and splits rows, is 15-25% faster.
fn prefer_simd(d: &Dims) -> bool {
    let panels = d.n * d.groups * d.geom.out_len().div_ceil(64);
    let kdim = d.c / d.groups * d.geom.kernel_len();
    panels >= 4 * super::gemm_util::threads() && !(kdim < 256 && d.m / d.groups <= 64)
}

#[cfg(target_arch = "x86_64")]
fn simd_available() -> bool {
    super::conv_simd::available()
}
#[cfg(not(target_arch = "x86_64"))]
fn simd_available() -> bool {
    false
}

/// `Path::Simd` must only be asked for where `simd_available()`.
fn conv_with(p: &Conv, ins: &[Option<&Tensor>], out: &TensorSpec, path: Path, wino: Prepared) -> Result<Tensor> {
    let x = input(ins, 0, OP)?;
    let w = input(ins, 1, OP)?;
    let xd = f32_data(x, OP, "X")?;
    let wd = f32_data(w, OP, "W")?;
    let d = check(p, x.shape(), w.shape(), &out.shape)?;
    let bias = match ins.get(2).copied().flatten() {
        Some(b) => {
            let bd = f32_data(b, OP, "B")?;
            if bd.len() != d.m || b.rank() != 1 {
                return err(format!("{OP}: bias shape {:?} must be [{}]", b.shape(), d.m));
            }
            Some(bd)
        }
        None => None,
    };
    let add = if p.fused_add {
        let a = input(ins, 3, OP)?;
        if a.shape() != out.shape.as_slice() {
            return err(format!("{OP}: fused addend shape {:?} must equal the output shape {:?}", a.shape(), out.shape));
        }
        Some(f32_data(a, OP, "fused addend")?)
    } else {
        None
    };
    let len = d.n * d.m * d.geom.out_len();
    let ep = Epilogue { bias, add, act: p.activation };
    let simd = match path {
        Path::Auto => simd_available() && prefer_simd(&d),
        Path::Portable => false,
        Path::Simd => true,
    };
    let y = if len == 0 {
        vec![]
    } else if d.c / d.groups == 1 {
        let mut y = vec![0.0f32; len];
        #[cfg(target_arch = "x86_64")]
        if super::conv_dw_lanes::fits(&d) {
            super::conv_dw_lanes::depthwise_lanes(&d, xd, wd, &ep, &mut y);
            return Tensor::from_f32(out.shape.clone(), y);
        }
        depthwise(&d, xd, wd, &ep, &mut y);
        y
    } else {
        // The GEMM writes every element, so skip zeroing a buffer that is overwritten anyway.
        let mut y = Vec::<f32>::with_capacity(len);
        let yp = SendPtr::raw(y.as_mut_ptr());
        #[cfg(target_arch = "x86_64")]
        if let Some(wt) = wino.filter(|wt| (wt.m, wt.c) == (d.m, d.c) && winograd_pays(&d) && simd_available()) {
            let g = &d.geom;
            let j = super::conv_winograd::WinoJob {
                n: d.n,
                h: g.image[1],
                w: g.image[2],
                ho: g.out[1],
                wo: g.out[2],
                pad: (g.pad[1], g.pad[2]),
                x: xd,
                wt,
                bias,
                add,
                act: p.activation,
            };
            // SAFETY: AVX-512 checked; y has room for len = n*m*ho*wo elements.
            unsafe { super::conv_winograd::conv(&j, yp) };
        } else if simd {
            let j = super::conv_simd::Job {
                n: d.n,
                c: d.c,
                m: d.m,
                groups: d.groups,
                geom: &d.geom,
                x: xd,
                w: wd,
                bias,
                add,
                act: p.activation,
                split: None,
            };
            // SAFETY: `simd` is only set when the CPU has AVX-512; y has room for len elements.
            unsafe { super::conv_simd::conv(&j, yp) };
        } else {
            gemm_conv(&d, xd, wd, &ep, yp);
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (simd, wino);
            gemm_conv(&d, xd, wd, &ep, yp);
        }
        // SAFETY: the tasks of gemm_conv together wrote all `len` elements.
        unsafe { y.set_len(len) };
        y
    };
    Tensor::from_f32(out.shape.clone(), y)
}

/// The bias, fused addend and activation of one call.
pub(crate) struct Epilogue<'a> {
    bias: Option<&'a [f32]>,
    add: Option<&'a [f32]>,
    act: Option<Activation>,
}

impl Epilogue<'_> {
    /// Finishes `row`, which holds output channel `m` of `y` starting at flat index `at`.
    pub fn run(&self, row: &mut [f32], m: usize, at: usize) {
        let b = self.bias.map_or(0.0, |b| b[m]);
        epilogue(row, b, self.add.map(|a| &a[at..at + row.len()]), self.act);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::gemm_util::{threads, Layout};
    use crate::cpu::test_util::*;

    pub(crate) struct Case {
        pub x: Vec<usize>,
        pub m: usize,
        pub group: usize,
        pub k: Vec<usize>,
        pub s: Vec<usize>,
        pub d: Vec<usize>,
        pub pads: Vec<usize>,
        pub bias: bool,
        pub add: bool,
        pub act: Option<Activation>,
    }

    fn out_shape(c: &Case) -> Vec<usize> {
        let sp = c.k.len();
        let mut o = vec![c.x[0], c.m];
        for a in 0..sp {
            o.push((c.x[2 + a] + c.pads[a] + c.pads[sp + a] - (c.k[a] - 1) * c.d[a] - 1) / c.s[a] + 1);
        }
        o
    }

    /// Direct definition, in f64, over N-D positions.
    fn reference(c: &Case, x: &[f32], w: &[f32], b: Option<&[f32]>, add: Option<&[f32]>) -> Vec<f32> {
        let sp = c.k.len();
        let os = out_shape(c);
        let (cin, cg, mg) = (c.x[1], c.x[1] / c.group, c.m / c.group);
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
        let mut y = vec![0.0; c.x[0] * c.m * osz];
        for n in 0..c.x[0] {
            for m in 0..c.m {
                let gi = m / mg;
                for o in 0..osz {
                    let oi = unravel(o, &os[2..]);
                    let mut s = b.map_or(0.0, |b| b[m] as f64);
                    for ci in 0..cg {
                        for kk in 0..ksz {
                            let ki = unravel(kk, &c.k);
                            let mut idx = 0usize;
                            let mut ok = true;
                            for a in 0..sp {
                                let p = (oi[a] * c.s[a] + ki[a] * c.d[a]) as isize - c.pads[a] as isize;
                                ok &= p >= 0 && p < c.x[2 + a] as isize;
                                idx = idx * c.x[2 + a] + p.max(0) as usize;
                            }
                            if ok {
                                let xv = x[(n * cin + gi * cg + ci) * isz + idx] as f64;
                                s += xv * w[(m * cg + ci) * ksz + kk] as f64;
                            }
                        }
                    }
                    let at = (n * c.m + m) * osz + o;
                    let mut v = s as f32;
                    if let Some(a) = add {
                        v += a[at];
                    }
                    y[at] = c.act.map_or(v, |f| f.apply(v));
                }
            }
        }
        y
    }

    pub(crate) fn run_case(c: &Case, seed: u64) {
        let mut rng = Rng::new(seed);
        let sp = c.k.len();
        let os = out_shape(c);
        let x = rng.tensor(&c.x);
        let mut wshape = vec![c.m, c.x[1] / c.group];
        wshape.extend(&c.k);
        let w = rng.tensor(&wshape);
        let b = rng.tensor(&[c.m]);
        let a = rng.tensor(&os);
        let p = Conv {
            window: Window {
                kernel_shape: c.k.clone(),
                strides: c.s.clone(),
                pads: c.pads.clone(),
                dilations: c.d.clone(),
                auto_pad: AutoPad::NotSet,
            },
            group: c.group,
            fused_add: c.add,
            activation: c.act,
        };
        assert_eq!(c.pads.len(), 2 * sp);
        let ins = [Some(&x), Some(&w), c.bias.then_some(&b), c.add.then_some(&a)];
        let got = conv_with(&p, &ins, &spec(&os), Path::Portable, None).unwrap();
        let got_simd = simd_available().then(|| conv_with(&p, &ins, &spec(&os), Path::Simd, None).unwrap());
        #[cfg(target_arch = "x86_64")]
        let got_wino = prepare_winograd(&p, &w).map(|wt| conv_winograd(&p, &ins, &spec(&os), &wt).unwrap());
        #[cfg(not(target_arch = "x86_64"))]
        let got_wino: Option<Tensor> = None;
        let want =
            reference(c, x.as_f32().unwrap(), w.as_f32().unwrap(), c.bias.then(|| b.as_f32().unwrap()), c.add.then(|| a.as_f32().unwrap()));
        assert_eq!(got.shape(), os.as_slice());
        let what = format!("conv x={:?} m={} g={} k={:?} s={:?} d={:?} p={:?}", c.x, c.m, c.group, c.k, c.s, c.d, c.pads);
        assert_close(got.as_f32().unwrap(), &want, 1e-4, &what);
        if let Some(g) = got_simd {
            assert_close(g.as_f32().unwrap(), &want, 1e-4, &format!("{what} (avx512)"));
        }
        if let Some(g) = got_wino {
            assert_close(g.as_f32().unwrap(), &want, 1e-4, &format!("{what} (winograd)"));
        }
    }

    fn case(x: &[usize], m: usize, group: usize, k: &[usize], s: &[usize], d: &[usize], pads: &[usize]) -> Case {
        Case { x: x.into(), m, group, k: k.into(), s: s.into(), d: d.into(), pads: pads.into(), bias: true, add: false, act: None }
    }

    #[test]
    fn conv2d_basic_shapes() {
        run_case(&case(&[1, 3, 8, 9], 4, 1, &[3, 3], &[1, 1], &[1, 1], &[1, 1, 1, 1]), 1);
        run_case(&case(&[2, 5, 11, 7], 6, 1, &[3, 2], &[2, 1], &[1, 1], &[0, 1, 2, 0]), 2);
        run_case(&case(&[1, 16, 9, 9], 8, 1, &[1, 1], &[1, 1], &[1, 1], &[0, 0, 0, 0]), 3);
        run_case(&case(&[2, 16, 9, 9], 8, 1, &[1, 1], &[2, 2], &[1, 1], &[0, 0, 0, 0]), 4);
        run_case(&case(&[1, 4, 10, 12], 6, 1, &[3, 3], &[1, 2], &[2, 3], &[2, 1, 3, 2]), 5);
        run_case(&case(&[1, 3, 23, 23], 8, 1, &[7, 7], &[2, 2], &[1, 1], &[3, 3, 3, 3]), 6);
        // 1x1 with padding is not the identity lowering
        run_case(&case(&[1, 4, 5, 5], 3, 1, &[1, 1], &[1, 1], &[1, 1], &[1, 0, 0, 1]), 7);
    }

    #[test]
    fn conv_groups_and_depthwise() {
        run_case(&case(&[2, 8, 7, 9], 12, 4, &[3, 3], &[1, 1], &[1, 1], &[1, 1, 1, 1]), 11);
        run_case(&case(&[1, 6, 10, 10], 6, 6, &[3, 3], &[1, 1], &[1, 1], &[1, 1, 1, 1]), 12);
        run_case(&case(&[2, 6, 11, 10], 6, 6, &[3, 3], &[2, 2], &[1, 1], &[1, 1, 1, 1]), 13);
        // channel multiplier 2, dilation, asymmetric pads
        run_case(&case(&[1, 4, 12, 9], 8, 4, &[3, 5], &[1, 2], &[2, 1], &[2, 0, 1, 3]), 14);
        run_case(&case(&[1, 1, 9, 9], 5, 1, &[3, 3], &[1, 1], &[1, 1], &[0, 0, 0, 0]), 15);
    }

    #[test]
    fn conv_1d_and_3d() {
        run_case(&case(&[2, 3, 17], 5, 1, &[4], &[3], &[2], &[2, 1]), 21);
        run_case(&case(&[1, 4, 20], 4, 4, &[5], &[1], &[1], &[2, 2]), 22);
        run_case(&case(&[1, 3, 5, 6, 7], 4, 1, &[3, 3, 3], &[1, 2, 1], &[1, 1, 2], &[1, 1, 1, 1, 0, 2]), 23);
        run_case(&case(&[2, 4, 4, 5, 6], 6, 2, &[2, 1, 3], &[2, 1, 1], &[1, 1, 1], &[0, 0, 1, 1, 0, 1]), 24);
        run_case(&case(&[1, 3, 4, 5, 6], 3, 3, &[3, 3, 3], &[1, 1, 1], &[1, 1, 1], &[1, 1, 1, 1, 1, 1]), 25);
    }

    #[test]
    fn conv_fused_add_and_activations() {
        let acts = [
            None,
            Some(Activation::Relu),
            Some(Activation::LeakyRelu(0.1)),
            Some(Activation::Clip(-0.2, 0.3)),
            Some(Activation::Sigmoid),
            Some(Activation::HardSwish),
            Some(Activation::Tanh),
            Some(Activation::HardSigmoid(0.2, 0.5)),
        ];
        for (i, act) in acts.into_iter().enumerate() {
            for (add, bias) in [(true, true), (true, false), (false, true)] {
                let mut c = case(&[1, 8, 9, 9], 8, 1, &[3, 3], &[1, 1], &[1, 1], &[1, 1, 1, 1]);
                c.add = add;
                c.bias = bias;
                c.act = act;
                run_case(&c, 100 + i as u64);
                c.group = 8;
                run_case(&c, 200 + i as u64);
                c.group = 1;
                c.k = vec![1, 1];
                c.pads = vec![0; 4];
                run_case(&c, 300 + i as u64);
                // K = 40 * 9 spans several K blocks: the add and activation apply once, at the end.
                let mut c = case(&[1, 40, 9, 11], 13, 1, &[3, 3], &[1, 1], &[1, 1], &[1, 1, 1, 1]);
                (c.add, c.bias, c.act) = (add, bias, act);
                run_case(&c, 400 + i as u64);
            }
        }
    }

    #[test]
    fn conv_tiling_paths() {
        // Big enough to be split into column tiles and row blocks across threads.
        run_case(&case(&[1, 32, 40, 40], 24, 1, &[3, 3], &[1, 1], &[1, 1], &[1, 1, 1, 1]), 31);
        run_case(&case(&[1, 64, 5, 5], 70, 1, &[3, 3], &[1, 1], &[1, 1], &[1, 1, 1, 1]), 32);
        run_case(&case(&[3, 16, 20, 20], 32, 2, &[1, 1], &[1, 1], &[1, 1], &[0, 0, 0, 0]), 33);
        run_case(&case(&[1, 600, 6, 6], 20, 1, &[3, 3], &[1, 1], &[1, 1], &[1, 1, 1, 1]), 34);
        run_case(&case(&[1, 64, 4, 4], 96, 1, &[1, 1], &[1, 1], &[1, 1], &[0, 0, 0, 0]), 35);
        run_case(&case(&[2, 64, 4, 4], 96, 2, &[3, 3], &[1, 1], &[1, 1], &[1, 1, 1, 1]), 36);
        // Other thread counts change how the work is split.
        for t in [1, 3] {
            rayon::ThreadPoolBuilder::new().num_threads(t).build().unwrap().install(|| {
                run_case(&case(&[1, 64, 5, 5], 70, 1, &[3, 3], &[1, 1], &[1, 1], &[1, 1, 1, 1]), 37);
                run_case(&case(&[1, 16, 30, 30], 24, 1, &[3, 3], &[2, 2], &[1, 1], &[1, 1, 1, 1]), 38);
                run_case(&case(&[1, 8, 30, 30], 8, 8, &[3, 3], &[1, 1], &[1, 1], &[1, 1, 1, 1]), 39);
            });
        }
    }

    #[test]
    fn depthwise_random_configs() {
        // Channel counts around the 16-lane blocks, strides, dilations, uneven pads, batches.
        let (mut rng, seed) = {
            let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(7, |d| d.as_nanos() as u64);
            (Rng::new(seed), seed)
        };
        for i in 0..60 {
            let c = [1, 5, 15, 16, 17, 33, 48][rng.below(7)];
            let k = [1 + rng.below(5), 1 + rng.below(5)];
            let s = [1 + rng.below(2), 1 + rng.below(2)];
            let d = [1 + rng.below(2), 1 + rng.below(2)];
            let pads: Vec<usize> = (0..4).map(|_| rng.below(3)).collect();
            let x = [1 + rng.below(2), c, (k[0] - 1) * d[0] + 1 + rng.below(20), (k[1] - 1) * d[1] + 1 + rng.below(30)];
            let mut cs = case(&x, c, c, &k, &s, &d, &pads);
            cs.bias = rng.below(2) == 0;
            cs.add = rng.below(3) == 0;
            cs.act = [None, Some(Activation::Relu), Some(Activation::Clip(0.0, 6.0))][rng.below(3)];
            let before = std::panic::catch_unwind(|| run_case(&cs, seed ^ i));
            assert!(before.is_ok(), "depthwise case {i} failed (seed {seed})");
        }
    }

    #[test]
    fn conv_random_configs() {
        let mut rng = Rng::new(99);
        for i in 0..150 {
            let sp = 1 + rng.below(3);
            let group = [1, 1, 2, 3][rng.below(4)];
            // Sometimes enough channels for the vectorised panel packing (>= 8 per group).
            let cin = group * (1 + rng.below(3) + [0, 0, 9][rng.below(3)]);
            let m = group * (1 + rng.below(3) + [0, 7][rng.below(2)]);
            let k: Vec<usize> = (0..sp).map(|_| 1 + rng.below(3)).collect();
            let s: Vec<usize> = (0..sp).map(|_| 1 + rng.below(3)).collect();
            let d: Vec<usize> = (0..sp).map(|_| 1 + rng.below(2)).collect();
            let pads: Vec<usize> = (0..2 * sp).map(|_| rng.below(3)).collect();
            let mut x = vec![1 + rng.below(2), cin];
            for a in 0..sp {
                x.push((k[a] - 1) * d[a] + 1 + rng.below(if a + 1 == sp { 40 } else { 6 }));
            }
            let mut c = case(&x, m, group, &k, &s, &d, &pads);
            c.bias = rng.below(2) == 0;
            c.add = rng.below(2) == 0;
            c.act = [None, Some(Activation::Relu)][rng.below(2)];
            run_case(&c, 1000 + i);
        }
    }

    #[test]
    fn conv_rejects_bad_inputs() {
        let mut rng = Rng::new(5);
        let x = rng.tensor(&[1, 4, 5, 5]);
        let w = rng.tensor(&[2, 4, 3, 3]);
        let p = Conv {
            window: Window { kernel_shape: vec![3, 3], strides: vec![], pads: vec![], dilations: vec![], auto_pad: AutoPad::NotSet },
            group: 1,
            fused_add: false,
            activation: None,
        };
        assert!(conv(&p, &[Some(&x), Some(&w)], &spec(&[1, 2, 3, 3])).is_ok());
        assert!(conv(&p, &[Some(&x), Some(&w)], &spec(&[1, 2, 4, 3])).is_err());
        let wbad = rng.tensor(&[2, 3, 3, 3]);
        assert!(conv(&p, &[Some(&x), Some(&wbad)], &spec(&[1, 2, 3, 3])).is_err());
        let xi = Tensor::from_i64(vec![1, 4, 5, 5], vec![1; 100]).unwrap();
        let e = conv(&p, &[Some(&xi), Some(&w)], &spec(&[1, 2, 3, 3])).unwrap_err().to_string();
        assert!(e.contains("INT64"), "{e}");
        let bbad = rng.tensor(&[3]);
        assert!(conv(&p, &[Some(&x), Some(&w), Some(&bbad)], &spec(&[1, 2, 3, 3])).is_err());
        assert!(conv(&p, &[Some(&x)], &spec(&[1, 2, 3, 3])).is_err());
        let big = Conv { group: 0, ..p.clone() };
        assert!(conv(&big, &[Some(&x), Some(&w)], &spec(&[1, 2, 3, 3])).is_err());
        let k9 = rng.tensor(&[2, 4, 9, 9]);
        let p9 = Conv { window: Window { kernel_shape: vec![], ..p.window.clone() }, ..p.clone() };
        assert!(conv(&p9, &[Some(&x), Some(&k9)], &spec(&[1, 2, 1, 1])).is_err());
        let fused = Conv { fused_add: true, ..p.clone() };
        assert!(conv(&fused, &[Some(&x), Some(&w), None], &spec(&[1, 2, 3, 3])).is_err());
        // empty batch
        let x0 = rng.tensor(&[0, 4, 5, 5]);
        assert_eq!(conv(&p, &[Some(&x0), Some(&w)], &spec(&[0, 2, 3, 3])).unwrap().len(), 0);
        // no input channels: the output is the bias
        let (xc0, wc0, b) = (rng.tensor(&[1, 0, 5, 5]), rng.tensor(&[2, 0, 3, 3]), rng.tensor(&[2]));
        for path in [Path::Portable, if simd_available() { Path::Simd } else { Path::Auto }] {
            let y = conv_with(&p, &[Some(&xc0), Some(&wc0), Some(&b)], &spec(&[1, 2, 3, 3]), path, None).unwrap();
            let bd = b.as_f32().unwrap();
            assert!(y.as_f32().unwrap().chunks(9).zip(bd).all(|(r, &bv)| r.iter().all(|&v| v == bv)));
        }
    }

    /// ResNet-18 (batch 1, 224x224) conv shapes: `cargo test --release -p dynaspa-backends --lib
    /// bench_resnet18_convs -- --ignored --nocapture`. Environment: BENCH_THREADS (default 2;
    /// 1 times on-CPU time, robust to other load), BENCH_PATHS (time both lowerings too),
    /// BENCH_COLD (evict caches before each call), BENCH_NO_BARE (skip the bare-GEMM column),
    /// BENCH_MEDIAN (median instead of best of 30).
    #[test]
    #[ignore]
    fn bench_resnet18_convs() {
        // (name, C, H, M, k, stride, pad, count in the network)
        let shapes = [
            ("stem 7x7 s2", 3, 224, 64, 7, 2, 3, 1),
            ("64@56 3x3", 64, 56, 64, 3, 1, 1, 4),
            ("64->128 3x3 s2", 64, 56, 128, 3, 2, 1, 1),
            ("128@28 3x3", 128, 28, 128, 3, 1, 1, 3),
            ("64->128 1x1 s2", 64, 56, 128, 1, 2, 0, 1),
            ("128->256 3x3 s2", 128, 28, 256, 3, 2, 1, 1),
            ("256@14 3x3", 256, 14, 256, 3, 1, 1, 3),
            ("128->256 1x1 s2", 128, 28, 256, 1, 2, 0, 1),
            ("256->512 3x3 s2", 256, 14, 512, 3, 2, 1, 1),
            ("512@7 3x3", 512, 7, 512, 3, 1, 1, 3),
            ("256->512 1x1 s2", 256, 14, 512, 1, 2, 0, 1),
        ];
        let nt: usize = std::env::var("BENCH_THREADS").ok().and_then(|v| v.parse().ok()).unwrap_or(2);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(nt).build().unwrap();
        pool.install(|| bench_shapes(&shapes));
    }

    #[allow(clippy::type_complexity)]
    fn bench_shapes(shapes: &[(&str, usize, usize, usize, usize, usize, usize, usize)]) {
        let mut rng = Rng::new(3);
        let mut total = 0.0;
        for &(name, c, h, m, k, s, pad, count) in shapes {
            let o = (h + 2 * pad - k) / s + 1;
            let x = rng.tensor(&[1, c, h, h]);
            let w = rng.tensor(&[m, c, k, k]);
            let b = rng.tensor(&[m]);
            let p = Conv {
                window: Window {
                    kernel_shape: vec![k, k],
                    strides: vec![s, s],
                    pads: vec![pad; 4],
                    dilations: vec![],
                    auto_pad: AutoPad::NotSet,
                },
                group: 1,
                fused_add: false,
                activation: Some(Activation::Relu),
            };
            let sp = spec(&[1, m, o, o]);
            let ins = [Some(&x), Some(&w), Some(&b)];
            // BENCH_COLD: evict caches before each call, as a whole network run leaves them.
            let cold = std::env::var("BENCH_COLD").is_ok();
            let mut junk = vec![0u8; if cold { 256 << 20 } else { 0 }];
            let dt = time_with_setup(
                30,
                || junk.iter_mut().step_by(64).for_each(|v| *v = v.wrapping_add(1)),
                || drop(std::hint::black_box(conv(&p, &ins, &sp).unwrap())),
            );
            // BENCH_PATHS: also time each path on its own (the line below is what `conv` picks).
            if std::env::var("BENCH_PATHS").is_ok() {
                for (path, label) in [(Path::Portable, "portable"), (Path::Simd, "avx512")] {
                    let dp = time_it(30, || drop(std::hint::black_box(conv_with(&p, &ins, &sp, path, None).unwrap())));
                    println!("{name:>18}: {label:>8} {:7.3} ms", dp * 1e3);
                }
                #[cfg(target_arch = "x86_64")]
                if let Some(wt) = prepare_winograd(&p, &w) {
                    let dp = time_it(30, || drop(std::hint::black_box(conv_winograd(&p, &ins, &sp, &wt).unwrap())));
                    println!("{name:>18}: winograd {:7.3} ms", dp * 1e3);
                }
            }
            // The bare GEMM of the same size (inputs already lowered), for the overhead split.
            let (kd, pn) = (c * k * k, o * o);
            let a = rng.vec(m * kd);
            let bm = rng.vec(kd * pn);
            let mut cm = vec![0.0; m * pn];
            let bare = std::env::var("BENCH_NO_BARE").is_err();
            let dg = time_it(if bare { 30 } else { 0 }, || {
                crate::cpu::gemm_util::par_sgemm(m, pn, kd, 1.0, &a, Layout::row_major(kd), &bm, Layout::row_major(pn), &mut cm, pn, false)
            });
            let flops = 2.0 * (m * c * k * k * o * o) as f64;
            total += dt * count as f64;
            println!(
                "{name:>18}: {:7.3} ms {:6.1} GFLOP/s (x{count})   bare GEMM {:7.3} ms {:6.1} GFLOP/s",
                dt * 1e3,
                flops / dt / 1e9,
                dg * 1e3,
                flops / dg / 1e9
            );
        }
        println!("sum over ResNet-18 convs: {:.2} ms on {} threads", total * 1e3, threads());
    }
}
