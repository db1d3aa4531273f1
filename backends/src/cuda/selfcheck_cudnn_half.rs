//! The half-precision part of the cuDNN self-check: every conv cuDNN offers for a HALF geometry
//! (backend-API engines, legacy algorithms, bare and with bias, residual and ReLU fused) run
//! one by one on half buffers, each output poisoned with half NaN first, against a host
//! reference on the same half-rounded inputs accumulated in f64. One line per candidate, so a
//! wrong one is named, not only the one the executor's race would pick.

use super::buffer::CudaBuffer;
use super::cudnn_lib;
use super::device::CudaDevice;
use super::selfcheck_kit::{rel_l2, Outcome, Rng};
use crate::gpu::{Arg, GpuDevice, Precision, VendorConvDesc, VendorFused};
use half::f16;

/// Largest relative L2 a candidate may have: inputs are rounded to half before both sides
/// see them, so what is left is the output's rounding to half (about 3e-4) and the order of
/// an f32 accumulation.
const LIMIT: f64 = 3e-3;

struct Case {
    name: &'static str,
    cin: usize,
    cout: usize,
    hw: usize,
    k: usize,
    s: usize,
    fused: Option<VendorFused>,
}

const fn fused(residual: bool, relu: bool) -> Option<VendorFused> {
    Some(VendorFused { residual, relu })
}

const CASES: [Case; 6] = [
    Case { name: "7x7 s2 3->64 224 (ResNet-18 conv1)", cin: 3, cout: 64, hw: 224, k: 7, s: 2, fused: None },
    Case { name: "7x7 s2 3->64 224 bias+relu", cin: 3, cout: 64, hw: 224, k: 7, s: 2, fused: fused(false, true) },
    Case { name: "3x3 s1 64->64 56 bias+residual+relu", cin: 64, cout: 64, hw: 56, k: 3, s: 1, fused: fused(true, true) },
    Case { name: "3x3 s1 64->64 56", cin: 64, cout: 64, hw: 56, k: 3, s: 1, fused: None },
    Case { name: "3x3 s2 128->64 26 bias", cin: 128, cout: 64, hw: 26, k: 3, s: 2, fused: fused(false, false) },
    Case { name: "1x1 256->128 14", cin: 256, cout: 128, hw: 14, k: 1, s: 1, fused: None },
];

/// Half-rounded random values in [-1, 1], as floats and as the half bits the device reads.
fn halves(rng: &mut Rng, n: usize, scale: f32) -> (Vec<f32>, Vec<u8>) {
    let h: Vec<f16> = rng.floats(n, -scale, scale).into_iter().map(f16::from_f32).collect();
    (h.iter().map(|v| v.to_f32()).collect(), h.iter().flat_map(|v| v.to_le_bytes()).collect())
}

/// conv(x, w) (+ bias + z, ReLU as the case fuses), NCHW, batch 1, accumulated in f64.
fn reference(c: &Case, o: usize, x: &[f32], w: &[f32], bias: &[f32], z: &[f32]) -> Vec<f32> {
    let pad = c.k / 2;
    let mut y = vec![0f32; c.cout * o * o];
    for co in 0..c.cout {
        for oy in 0..o {
            for ox in 0..o {
                let mut acc = 0f64;
                for ci in 0..c.cin {
                    for ky in 0..c.k {
                        let iy = (oy * c.s + ky) as isize - pad as isize;
                        if iy < 0 || iy >= c.hw as isize {
                            continue;
                        }
                        for kx in 0..c.k {
                            let ix = (ox * c.s + kx) as isize - pad as isize;
                            if ix < 0 || ix >= c.hw as isize {
                                continue;
                            }
                            let xv = x[(ci * c.hw + iy as usize) * c.hw + ix as usize] as f64;
                            acc += xv * w[((co * c.cin + ci) * c.k + ky) * c.k + kx] as f64;
                        }
                    }
                }
                let at = (co * o + oy) * o + ox;
                if let Some(f) = c.fused {
                    acc += bias[co] as f64;
                    if f.residual {
                        acc += z[at] as f64;
                    }
                    if f.relu {
                        acc = acc.max(0.0);
                    }
                }
                y[at] = acc as f32;
            }
        }
    }
    y
}

fn upload(dev: &CudaDevice, bytes: &[u8]) -> Result<CudaBuffer, String> {
    let b = dev.alloc(bytes.len().max(256)).map_err(|e| e.to_string())?;
    dev.upload(&b, 0, bytes).map_err(|e| e.to_string())?;
    Ok(b)
}

/// One case: every candidate cuDNN offers, each checked; the lines of those that ran.
fn check_case(dev: &CudaDevice, c: &Case, rng: &mut Rng) -> Result<Vec<String>, String> {
    let o = (c.hw + 2 * (c.k / 2) - c.k) / c.s + 1;
    let (x, xb) = halves(rng, c.cin * c.hw * c.hw, 1.0);
    let (w, wb) = halves(rng, c.cout * c.cin * c.k * c.k, 1.0 / ((c.cin * c.k * c.k) as f32).sqrt());
    let (bias, bb) = halves(rng, c.cout, 0.5);
    let (z, zb) = halves(rng, c.cout * o * o, 1.0);
    let want = reference(c, o, &x, &w, &bias, &z);
    let (xd, wd, bd, zd) = (upload(dev, &xb)?, upload(dev, &wb)?, upload(dev, &bb)?, upload(dev, &zb)?);
    let poison: Vec<u8> = std::iter::repeat_n(f16::NAN.to_le_bytes(), want.len()).flatten().collect();
    let yd = upload(dev, &poison)?;
    let desc = VendorConvDesc {
        n: 1,
        cin: c.cin,
        h: c.hw,
        w: c.hw,
        cout: c.cout,
        oh: o,
        ow: o,
        kernel: [c.k, c.k],
        stride: [c.s, c.s],
        pad: [c.k / 2, c.k / 2],
        dilation: [1, 1],
        groups: 1,
        fused: c.fused,
        precision: Precision::F16,
    };
    let cands = dev.vendor_convs(&desc, &xd, &wd, &yd).map_err(|e| format!("{}: planning: {e}", c.name))?;
    if cands.is_empty() {
        return Ok(vec![format!("{}: cuDNN offers no candidate", c.name)]);
    }
    let mut lines = Vec::new();
    let mut bad = Vec::new();
    for v in &cands {
        dev.upload(&yd, 0, &poison).map_err(|e| e.to_string())?;
        let ws = dev.alloc(v.workspace.max(256)).map_err(|e| e.to_string())?;
        let args = [Arg::Buf(&xd), Arg::Buf(&wd), Arg::Buf(&bd), Arg::Buf(&zd), Arg::Buf(&yd), Arg::Buf(&ws)];
        if let Err(e) = dev.launch(&v.kernel, [1, 1, 1], [1, 1, 1], &args).and_then(|_| dev.finish()) {
            bad.push(format!("{} fails: {e}", v.label));
            continue;
        }
        let mut out = vec![0u8; want.len() * 2];
        dev.download(&yd, 0, &mut out).map_err(|e| e.to_string())?;
        let got: Vec<f32> = out.chunks_exact(2).map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32()).collect();
        let nan = got.iter().filter(|v| !v.is_finite()).count();
        let zeros = got.iter().filter(|v| **v == 0.0).count();
        let e = rel_l2(&got, &want);
        let line = format!("{}: {e:.1e} ({nan} NaN, {zeros} zeros of {})", v.label, got.len());
        if nan > 0 || e.is_nan() || e > LIMIT {
            bad.push(line);
        } else {
            lines.push(line);
        }
    }
    if bad.is_empty() {
        Ok(vec![format!("{}: {}", c.name, lines.join(", "))])
    } else {
        Err(format!("{}: wrong: {}; right: {}", c.name, bad.join(", "), lines.join(", ")))
    }
}

/// Every case's candidates at half precision. Without cuDNN: a pass saying why.
pub fn check_cudnn_half(ordinal: usize, rng: &mut Rng) -> Outcome {
    if let Err(e) = cudnn_lib::load() {
        return Ok(format!("skipped: {e}"));
    }
    let dev = CudaDevice::new(ordinal).map_err(|e| e.to_string())?;
    let mut lines = Vec::new();
    let mut failed = Vec::new();
    for c in &CASES {
        match check_case(&dev, c, rng) {
            Ok(l) => lines.extend(l),
            Err(e) => failed.push(e),
        }
    }
    if failed.is_empty() {
        Ok(lines.join("; "))
    } else {
        Err(format!("{} | passing: {}", failed.join(" | "), lines.join("; ")))
    }
}
