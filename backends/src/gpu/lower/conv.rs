//! Conv (fused bias, residual and activation), ConvTranspose, MaxPool and AveragePool. Maps of
//! 1 to 3 spatial dims run as 3-D with leading extents of 1.

use super::ctx::{int, unsupported, Ctx, LArg};
use super::elementwise::activation_code;
use super::geom::{geom, Geom3};
use crate::gpu::device::{GpuDevice, KernelDialect};
use crate::gpu::kernels::{Src, Tile};
use dynaspa_runtime::graph::{Conv, ConvTranspose, Pool};
use dynaspa_runtime::{DType, Result};

/// The geometry arguments in the order conv.cl's CONV_GEOMETRY takes them.
fn geometry_args(cin_g: usize, cout_g: usize, groups: usize, g: &Geom3) -> Result<Vec<LArg>> {
    let mut v = vec![LArg::I32(int(cin_g, "channels")?), LArg::I32(int(cout_g, "channels")?), LArg::I32(int(groups, "groups")?)];
    for arr in [&g.input, &g.output, &g.kernel, &g.stride, &g.pad, &g.dil] {
        for &x in arr.iter() {
            v.push(LArg::I32(int(x, "conv geometry")?));
        }
    }
    Ok(v)
}

fn check_float<D: GpuDevice>(cx: &Ctx<D>) -> Result<()> {
    for i in 0..cx.node.inputs.len() {
        if cx.has_input(i) && cx.in_dtype(i)? != DType::F32 {
            return unsupported(format!("{} on {}", cx.node.op.name(), cx.in_dtype(i)?));
        }
    }
    Ok(())
}

/// Reductions (input channels x taps) from which a thin conv gets a work-group per output
/// (conv_reduce_f32) instead of a work-item: below, one work-item's loop is short enough.
const REDUCE_MIN: usize = 256;
/// Thin convs with at least this many input channels per group run `conv_thin_f32` (GPU
/// dialects), whose lanes split the channels: a mask unit's 3x3 conv from 1024 channels to one
/// at 14x14 took 29 µs on an H100 as `conv_reduce_f32` (a work-group per output, its lanes
/// reading 128 scattered addresses per step).
const THIN_MIN_CHANNELS: usize = 16;
/// Work-items of `conv_thin_f32`'s groups (conv.cl).
const THIN_WG: u32 = 256;
/// conv_reduce_f32's work-group (its RBLOCK).
const REDUCE_BLOCK: u32 = 128;

/// A Conv node: our kernels, or the device's vendor library where it is faster
/// (`vendor_conv`).
pub(crate) fn conv<D: GpuDevice>(cx: &mut Ctx<D>, p: &Conv) -> Result<()> {
    super::vendor_conv::lower_dense(cx, p, None, &mut |cx| conv_ours(cx, p)).map(|_| ())
}

fn conv_ours<D: GpuDevice>(cx: &mut Ctx<D>, p: &Conv) -> Result<()> {
    check_float(cx)?;
    let (xs, ws, os) = (cx.in_shape(0)?, cx.in_shape(1)?, cx.out_shape(0));
    let g = geom("Conv", &p.window, xs, os, ws.get(2..).unwrap_or(&[]))?;
    let groups = p.group;
    if groups == 0 || xs[1] % groups != 0 || ws[0] % groups != 0 || ws[1] * groups != xs[1] || os[1] != ws[0] {
        return unsupported(format!("Conv of {xs:?} with weights {ws:?} in {groups} groups"));
    }
    let (cin_g, cout_g) = (xs[1] / groups, ws[0] / groups);
    let has_bias = cx.has_input(2);
    if has_bias && cx.in_shape(2)?.iter().product::<usize>() != ws[0] {
        return unsupported(format!("Conv bias of shape {:?}", cx.in_shape(2)?));
    }
    if p.fused_add && cx.in_shape(3)? != os {
        return unsupported(format!("Conv residual of shape {:?}", cx.in_shape(3)?));
    }
    let total = cx.out_len(0);
    if total == 0 {
        return Ok(());
    }
    let taps: usize = g.kernel.iter().product();
    // 2-D convs with a GEMM to tile run on the sparse family's kernel over every position (the
    // same kernel as a sparse op's dense member); the rest on the kernels below.
    if groups == 1 && cout_g >= 8 && cin_g * taps >= 8 {
        if let Some(op) = crate::gpu::sparse_conv::lower::prepare(cx, p)? {
            let sched = op.dense_schedule(cx);
            let split = op.split_bufs(cx, [&sched], None)?;
            return op.launch(cx, &sched, None, split, false);
        }
    }
    let (x, w, y) = (cx.x(0)?, cx.x(1)?, cx.y(0)?);
    let bias = cx.x_or_dummy(2)?;
    let res = if p.fused_add { cx.x(3)? } else { cx.dummy()? };
    let (act, p0, p1) = activation_code(p.activation);
    let mut args = vec![LArg::Buf(x), LArg::Buf(w), LArg::Buf(bias), LArg::Buf(res), LArg::Buf(y)];
    args.extend(geometry_args(cin_g, cout_g, groups, &g)?);
    args.extend([LArg::I32(has_bias as i32), LArg::I32(p.fused_add as i32), LArg::I32(act), LArg::F32(p0), LArg::F32(p1)]);
    let positions: usize = g.output.iter().product();
    // A GEMM tile needs rows (output channels) and depth (input taps) to fill; depthwise and
    // other thin convolutions run one work-item per output instead.
    if cout_g < 8
        && cin_g >= THIN_MIN_CHANNELS
        && cx.dev.info().dialect() != KernelDialect::Wgsl
        && cx.dev.info().max_work_group_size >= THIN_WG
    {
        // Positions per work-group: as many as still give the device two groups per compute
        // unit, at least 8 (a 32-byte sector of consecutive positions).
        let want = 2 * cx.dev.info().compute_units.max(1) as usize;
        let rows = xs[0] * groups * cout_g;
        let tp = [32usize, 16, 8].into_iter().find(|&tp| positions.div_ceil(tp) * rows >= want).unwrap_or(8);
        let kern = cx.kernel(Src::Conv, "conv_thin_f32", &[("TP", tp as i64)])?;
        let grid = [positions.div_ceil(tp), rows, 1];
        return cx.launch(kern, grid, [tp as u32, THIN_WG / tp as u32, 1], args);
    }
    if cout_g < 8 && cin_g * taps >= REDUCE_MIN && cx.dev.info().max_work_group_size >= REDUCE_BLOCK {
        let kern = cx.kernel(Src::Conv, "conv_reduce_f32", &[])?;
        args.push(LArg::I32(int(total, "elements")?));
        let grid = [total.min(65535), total.div_ceil(65535), 1];
        return cx.launch(kern, grid, [REDUCE_BLOCK, 1, 1], args);
    }
    if cout_g < 8 || cin_g * taps < 8 {
        let kern = cx.kernel(Src::Conv, "conv_direct_f32", &[])?;
        args.push(LArg::I32(int(total, "elements")?));
        return cx.launch_linear(kern, total, args);
    }
    let tile = Tile::for_output(cout_g, positions);
    let kern = cx.kernel(Src::Conv, "conv_gemm_f32", &tile.defines())?;
    let groups_grid = [positions.div_ceil(tile.tn as usize), cout_g.div_ceil(tile.tm as usize), xs[0] * groups];
    cx.launch(kern, groups_grid, tile.local(), args)
}

pub(crate) fn conv_transpose<D: GpuDevice>(cx: &mut Ctx<D>, p: &ConvTranspose) -> Result<()> {
    check_float(cx)?;
    let (xs, ws, os) = (cx.in_shape(0)?, cx.in_shape(1)?, cx.out_shape(0));
    let g = geom("ConvTranspose", &p.window, xs, os, ws.get(2..).unwrap_or(&[]))?;
    let groups = p.group;
    if groups == 0 || xs[1] % groups != 0 || ws[0] != xs[1] || os[1] != ws[1] * groups {
        return unsupported(format!("ConvTranspose of {xs:?} with weights {ws:?} in {groups} groups"));
    }
    let has_bias = cx.has_input(2);
    if has_bias && cx.in_shape(2)?.iter().product::<usize>() != os[1] {
        return unsupported(format!("ConvTranspose bias of shape {:?}", cx.in_shape(2)?));
    }
    let total = cx.out_len(0);
    if total == 0 {
        return Ok(());
    }
    let (x, w, y) = (cx.x(0)?, cx.x(1)?, cx.y(0)?);
    let bias = cx.x_or_dummy(2)?;
    let mut args = vec![LArg::Buf(x), LArg::Buf(w), LArg::Buf(bias), LArg::Buf(y)];
    let (cin_g, cout_g) = (xs[1] / groups, ws[1]);
    args.extend(geometry_args(cin_g, cout_g, groups, &g)?);
    args.push(LArg::I32(has_bias as i32));
    if phased_transpose(cx.res.convt_gemm, &g) {
        let phases: usize = g.stride.iter().product();
        let most: usize = (0..3).map(|d| g.output[d].div_ceil(g.stride[d])).product();
        int(phases * xs[0] * groups, "ConvTranspose phases x images x groups")?;
        let tile = Tile::for_output(cout_g, most);
        let kern = cx.kernel(Src::Conv, "convt_gemm_f32", &tile.defines())?;
        let grid = [most.div_ceil(tile.tn as usize), cout_g.div_ceil(tile.tm as usize), xs[0] * groups * phases];
        return cx.launch(kern, grid, tile.local(), args);
    }
    args.push(LArg::I32(int(total, "elements")?));
    let kern = cx.kernel(Src::Conv, "conv_transpose_f32", &[])?;
    cx.launch_linear(kern, total, args)
}

/// Whether a ConvTranspose runs as a GEMM per output phase (conv.cl's convt_gemm_f32) rather
/// than as a gather (conv_transpose_f32): where the executable asks (`Ctx::res.convt_gemm`: on
/// GPUs by default) and the dilations are 1, so a phase's taps are every stride-th. On an H200
/// the gather took 642-857 µs for the full-size SIGE's two upsampling layers, the GEMM 91-98,
/// cuDNN 72-90. CPU devices keep the gather: on lavapipe a work-item per output vectorises well
/// and the GEMM's barriers cost more (SIGE small 87 against 108 ms a frame), on PoCL they tie
/// (benches/RESULTS.md, "ConvTranspose as a GEMM per output phase").
fn phased_transpose(asked: bool, g: &Geom3) -> bool {
    asked && g.dil.iter().all(|&d| d == 1)
}

/// kind: 0 max, 1 average, 2 average counting pads.
pub(crate) fn pool<D: GpuDevice>(cx: &mut Ctx<D>, p: &Pool, max: bool) -> Result<()> {
    let name = cx.node.op.name();
    if cx.in_dtype(0)? != DType::F32 {
        return unsupported(format!("{name} on {}", cx.in_dtype(0)?));
    }
    if cx.node.outputs.len() > 1 {
        return unsupported(format!("{name}'s Indices output"));
    }
    let (xs, os) = (cx.in_shape(0)?, cx.out_shape(0));
    let g = geom(name, &p.window, xs, os, &p.window.kernel_shape)?;
    let total = cx.out_len(0);
    if total == 0 {
        return Ok(());
    }
    let kind = if max {
        0
    } else if p.count_include_pad {
        2
    } else {
        1
    };
    let mut args = vec![LArg::Buf(cx.x(0)?), LArg::Buf(cx.y(0)?), LArg::I32(int(total, "elements")?)];
    for arr in [&g.input, &g.output, &g.kernel, &g.stride, &g.pad, &g.dil, &g.pad_end] {
        for &v in arr.iter() {
            args.push(LArg::I32(int(v, "pool geometry")?));
        }
    }
    args.push(LArg::I32(kind));
    let kern = cx.kernel(Src::Pool, "pool_f32", &[])?;
    cx.launch_linear(kern, total, args)
}
