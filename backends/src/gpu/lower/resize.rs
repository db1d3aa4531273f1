//! Resize from the CPU backend's per-axis plans (`cpu::resize_plans`): nearest as one gather
//! through per-axis index maps, linear as one separable pass per resized axis, then the
//! extrapolation value where tf_crop_and_resize leaves the crop box.

use super::ctx::{int, unsupported, Ctx, LArg};
use super::movement::{axis_map_gather, fill_word};
use super::reduce::copy_words;
use crate::cpu::AxisPlan;
use crate::gpu::device::GpuDevice;
use crate::gpu::kernels::Src;
use dynaspa_runtime::graph::{Resize, ResizeMode};
use dynaspa_runtime::{DType, Result, Tensor};

pub(crate) fn resize<D: GpuDevice>(cx: &mut Ctx<D>, p: &Resize) -> Result<()> {
    cx.word(0)?;
    let (xs, os) = (cx.in_shape(0)?, cx.out_shape(0));
    if cx.out_len(0) == 0 {
        return Ok(());
    }
    let mut host: Vec<Option<&Tensor>> = vec![None; 4];
    for (i, slot) in host.iter_mut().enumerate().skip(1) {
        if cx.has_input(i) {
            let t = cx.constant(i);
            *slot = Some(t.map_or_else(|| unsupported(format!("Resize with input {i} computed at run time")), Ok)?);
        }
    }
    let plans = crate::cpu::resize_plans(p, &host, xs, os)?;
    match p.mode {
        ResizeMode::Nearest => {
            let maps: Vec<Vec<i64>> = plans
                .iter()
                .zip(xs)
                .map(|(pl, &n)| match pl {
                    None => (0..n as i64).collect(),
                    Some(pl) => pl.taps.iter().map(|t| t.first().map_or(-1, |&(i, _)| i as i64)).collect(),
                })
                .collect();
            let fill = fill_word(cx, p.extrapolation_value as f64)?;
            axis_map_gather(cx, &maps, fill)
        }
        ResizeMode::Linear => linear(cx, &plans, p.extrapolation_value),
    }
}

fn linear<D: GpuDevice>(cx: &mut Ctx<D>, plans: &[Option<AxisPlan>], extrapolation: f32) -> Result<()> {
    if cx.in_dtype(0)? != DType::F32 {
        return unsupported(format!("linear Resize on {}", cx.in_dtype(0)?));
    }
    let xs = cx.in_shape(0)?;
    let resized: Vec<usize> = (0..plans.len()).filter(|&d| plans[d].is_some()).collect();
    if resized.is_empty() {
        return copy_words(cx);
    }
    let y = cx.y(0)?;
    let mut cur = cx.x(0)?;
    let mut shape = xs.to_vec();
    let kern = cx.kernel(Src::Movement, "resample_axis", &[])?;
    for (pass, &d) in resized.iter().enumerate() {
        let plan = plans[d].as_ref().expect("resized axes have plans");
        let width = plan.taps.iter().map(|t| t.len()).max().unwrap_or(1).max(1);
        let (mut taps, mut weights) = (Vec::new(), Vec::new());
        for t in &plan.taps {
            for k in 0..width {
                let (i, w) = t.get(k).copied().unwrap_or((0, 0.0));
                taps.push(int(i, "tap")?);
                weights.push(w as f32);
            }
        }
        let (n_in, n_out) = (shape[d], plan.taps.len());
        let inner: usize = shape[d + 1..].iter().product();
        shape[d] = n_out;
        let n: usize = shape.iter().product();
        let dst = if pass + 1 == resized.len() { y } else { cx.scratch(n)? };
        let (tm, wm) = (cx.meta(&taps)?, cx.meta_f32(&weights)?);
        let args = vec![
            LArg::Buf(cur),
            LArg::Buf(dst),
            LArg::I32(int(n, "elements")?),
            LArg::I32(int(n_in, "length")?),
            LArg::I32(int(n_out, "length")?),
            LArg::I32(int(inner, "inner")?),
            LArg::I32(int(width, "taps")?),
            LArg::Buf(tm),
            LArg::Buf(wm),
        ];
        cx.launch_linear(kern.clone(), n, args)?;
        cur = dst;
    }
    // Outside the crop box along any axis, the whole position is the extrapolation value.
    if plans.iter().flatten().any(|p| p.taps.iter().any(|t| t.is_empty())) {
        let r = shape.len();
        let mut meta: Vec<i32> = shape.iter().map(|&d| d as i32).collect();
        meta.extend(std::iter::repeat_n(0, r));
        let mut at = 3 * r;
        let mut offs = Vec::new();
        let mut tables = Vec::new();
        for p in plans {
            match p {
                Some(p) if p.taps.iter().any(|t| t.is_empty()) => {
                    offs.push(int(at, "table offset")?);
                    at += p.taps.len();
                    tables.extend(p.taps.iter().map(|t| !t.is_empty() as i32));
                }
                _ => offs.push(-1),
            }
        }
        meta.extend(offs);
        meta.extend(tables);
        let meta = cx.meta(&meta)?;
        let n = cx.out_len(0);
        let kern = cx.kernel(Src::Movement, "extrapolate", &[])?;
        let args = vec![LArg::Buf(y), LArg::I32(int(n, "elements")?), LArg::I32(r as i32), LArg::Buf(meta), LArg::F32(extrapolation)];
        cx.launch_linear(kern, n, args)?;
    }
    Ok(())
}
