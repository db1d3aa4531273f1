//! Transpose, Slice, Expand, Concat, Split, Gather and Pad, all on words (32-bit, or 16-bit for
//! half tensors) so one kernel serves every element type.

use super::ctx::{int, sint, unsupported, BufId, Ctx, LArg};
use super::shapes::{broadcast_strides, simplify};
use crate::gpu::device::GpuDevice;
use crate::gpu::dtype::Word;
use crate::gpu::kernels::Src;
use dynaspa_runtime::graph::shape_move::slice_axes;
use dynaspa_runtime::graph::PadMode;
use dynaspa_runtime::tensor::strides_of;
use dynaspa_runtime::{Result, Tensor, TensorData};

fn contiguous(shape: &[usize]) -> Vec<i64> {
    strides_of(shape).into_iter().map(|s| s as i64).collect()
}

/// Copies the `dims` index space from `src` (strides `ss`, offset `soff`) to `dst` (`ds`, `doff`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn strided_copy<D: GpuDevice>(
    cx: &mut Ctx<D>,
    src: BufId,
    soff: i64,
    ss: &[i64],
    dst: BufId,
    doff: i64,
    ds: &[i64],
    dims: &[usize],
) -> Result<()> {
    let n: usize = dims.iter().product();
    if n == 0 {
        return Ok(());
    }
    let (dims, st) = simplify(dims, &[ss.to_vec(), ds.to_vec()]);
    let mut meta: Vec<i32> = dims.iter().map(|&d| d as i32).collect();
    for v in st.iter().flatten() {
        meta.push(sint(*v, "stride")?);
    }
    meta.push(0);
    let meta = cx.meta(&meta)?;
    // The node's elements: every movement op's output has its input's type.
    let dt = cx.graph.values[cx.node.outputs[0]].dtype;
    let kern = cx.word_kernel(Src::Movement, "strided_copy", dt)?;
    let args = vec![
        LArg::Buf(src),
        LArg::I32(sint(soff, "offset")?),
        LArg::Buf(dst),
        LArg::I32(sint(doff, "offset")?),
        LArg::I32(int(n, "elements")?),
        LArg::I32(dims.len() as i32),
        LArg::Buf(meta),
    ];
    cx.launch_linear(kern, n, args)
}

fn check_words<D: GpuDevice>(cx: &Ctx<D>) -> Result<()> {
    cx.word(0).map(drop)
}

pub(crate) fn transpose<D: GpuDevice>(cx: &mut Ctx<D>, perm: &[usize]) -> Result<()> {
    check_words(cx)?;
    let xs = cx.in_shape(0)?;
    let r = xs.len();
    let perm: Vec<usize> = if perm.is_empty() { (0..r).rev().collect() } else { perm.to_vec() };
    if perm.len() != r || perm.iter().any(|&p| p >= r) {
        return unsupported(format!("Transpose with perm {perm:?} of a rank-{r} input"));
    }
    let st = contiguous(xs);
    let dims: Vec<usize> = perm.iter().map(|&p| xs[p]).collect();
    let ss: Vec<i64> = perm.iter().map(|&p| st[p]).collect();
    let (x, y) = (cx.x(0)?, cx.y(0)?);
    strided_copy(cx, x, 0, &ss, y, 0, &contiguous(&dims), &dims)
}

fn const_ints<D: GpuDevice>(cx: &Ctx<D>, i: usize, what: &str) -> Result<Option<Vec<i64>>> {
    if !cx.has_input(i) {
        return Ok(None);
    }
    match cx.constant(i) {
        Some(t) => Ok(Some(t.to_i64_vec()?)),
        None => unsupported(format!("{} with {what} computed at run time", cx.node.op.name())),
    }
}

pub(crate) fn slice<D: GpuDevice>(cx: &mut Ctx<D>) -> Result<()> {
    check_words(cx)?;
    let xs = cx.in_shape(0)?;
    let starts = const_ints(cx, 1, "starts")?.unwrap_or_default();
    let ends = const_ints(cx, 2, "ends")?.unwrap_or_default();
    let axes = const_ints(cx, 3, "axes")?.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = const_ints(cx, 4, "steps")?.unwrap_or_else(|| vec![1; starts.len()]);
    let plan = slice_axes(xs, &starts, &ends, &axes, &steps)?;
    let st = contiguous(xs);
    let base: i64 = plan.iter().zip(&st).map(|(p, s)| p.start.max(0) * s).sum();
    let ss: Vec<i64> = plan.iter().zip(&st).map(|(p, s)| p.step * s).collect();
    let dims: Vec<usize> = plan.iter().map(|p| p.len).collect();
    if dims != cx.out_shape(0) {
        return Err(dynaspa_runtime::Error::Other(format!("Slice planned {dims:?}, shape inference said {:?}", cx.out_shape(0))));
    }
    let (x, y) = (cx.x(0)?, cx.y(0)?);
    strided_copy(cx, x, base, &ss, y, 0, &contiguous(&dims), &dims)
}

pub(crate) fn expand<D: GpuDevice>(cx: &mut Ctx<D>) -> Result<()> {
    check_words(cx)?;
    let (xs, os) = (cx.in_shape(0)?, cx.out_shape(0));
    if xs.len() > os.len() {
        return unsupported(format!("Expand of {xs:?} to {os:?}"));
    }
    let ss = broadcast_strides(xs, os.len());
    let (x, y) = (cx.x(0)?, cx.y(0)?);
    strided_copy(cx, x, 0, &ss, y, 0, &contiguous(os), os)
}

fn norm_axis(a: i64, r: usize, op: &str) -> Result<usize> {
    let ri = r as i64;
    if a < -ri || a >= ri {
        return unsupported(format!("{op} axis {a} of a rank-{r} tensor"));
    }
    Ok(if a < 0 { (a + ri) as usize } else { a as usize })
}

pub(crate) fn concat<D: GpuDevice>(cx: &mut Ctx<D>, axis: i64) -> Result<()> {
    let os = cx.out_shape(0);
    let ax = norm_axis(axis, os.len(), "Concat")?;
    let ost = contiguous(os);
    let y = cx.y(0)?;
    let mut at = 0usize;
    for i in 0..cx.node.inputs.len() {
        cx.word(i)?;
        let xs = cx.in_shape(i)?;
        let x = cx.x(i)?;
        strided_copy(cx, x, 0, &contiguous(xs), y, at as i64 * ost[ax], &ost, xs)?;
        at += xs[ax];
    }
    Ok(())
}

pub(crate) fn split<D: GpuDevice>(cx: &mut Ctx<D>, axis: i64) -> Result<()> {
    check_words(cx)?;
    let xs = cx.in_shape(0)?;
    let ax = norm_axis(axis, xs.len(), "Split")?;
    let st = contiguous(xs);
    let x = cx.x(0)?;
    let mut at = 0usize;
    for j in 0..cx.node.outputs.len() {
        let os = cx.out_shape(j);
        let y = cx.y(j)?;
        strided_copy(cx, x, at as i64 * st[ax], &st, y, 0, &contiguous(os), os)?;
        at += os[ax];
    }
    Ok(())
}

pub(crate) fn gather<D: GpuDevice>(cx: &mut Ctx<D>, axis: i64) -> Result<()> {
    check_words(cx)?;
    if cx.word(1)? != Word::I32 {
        return unsupported(format!("Gather with {} indices", cx.in_dtype(1)?));
    }
    let xs = cx.in_shape(0)?;
    let ax = norm_axis(axis, xs.len(), "Gather")?;
    let len = xs[ax];
    if let Some(t) = cx.constant(1) {
        // Known indices are checked here; the kernel clamps the ones computed at run time.
        for i in t.to_i64_vec()? {
            if i < -(len as i64) || i >= len as i64 {
                return Err(dynaspa_runtime::Error::Other(format!("Gather: index {i} is out of range for axis {ax} of size {len}")));
            }
        }
    }
    let n = cx.out_len(0);
    if n == 0 {
        return Ok(());
    }
    let nidx: usize = cx.in_shape(1)?.iter().product();
    let inner: usize = xs[ax + 1..].iter().product();
    let (x, idx, y) = (cx.x(0)?, cx.x(1)?, cx.y(0)?);
    let kern = cx.word_kernel(Src::Movement, "gather_words", cx.in_dtype(0)?)?;
    let args = vec![
        LArg::Buf(x),
        LArg::Buf(idx),
        LArg::Buf(y),
        LArg::I32(int(n, "elements")?),
        LArg::I32(int(len, "axis length")?),
        LArg::I32(int(nidx, "indices")?),
        LArg::I32(int(inner.max(1), "inner")?),
    ];
    cx.launch_linear(kern, n, args)
}

/// A one-word buffer holding `v` converted to the element type of input 0.
pub(crate) fn fill_word<D: GpuDevice>(cx: &mut Ctx<D>, v: f64) -> Result<BufId> {
    let t = match cx.word(0)? {
        Word::F32 => Tensor::from_f32(vec![1], vec![v as f32])?,
        Word::I32 => Tensor::new(vec![1], TensorData::I32(vec![v as i32]))?,
    };
    cx.res.upload(cx.dev, &t, "fill value")
}

/// out[i] = src[walk(per-axis index maps)], -1 entries reading `fill`.
pub(crate) fn axis_map_gather<D: GpuDevice>(cx: &mut Ctx<D>, maps: &[Vec<i64>], fill: BufId) -> Result<()> {
    let xs = cx.in_shape(0)?;
    let os = cx.out_shape(0);
    let n = cx.out_len(0);
    if n == 0 {
        return Ok(());
    }
    let r = os.len();
    let st = contiguous(xs);
    let mut meta: Vec<i32> = os.iter().map(|&d| d as i32).collect();
    for s in &st {
        meta.push(sint(*s, "stride")?);
    }
    let mut at = 3 * r;
    let mut offs = Vec::with_capacity(r);
    for m in maps {
        offs.push(int(at, "table offset")?);
        at += m.len();
    }
    meta.extend(offs);
    for m in maps {
        for &v in m {
            meta.push(sint(v, "index")?);
        }
    }
    meta.push(0);
    let meta = cx.meta(&meta)?;
    let (x, y) = (cx.x(0)?, cx.y(0)?);
    let kern = cx.word_kernel(Src::Movement, "axis_map_gather", cx.in_dtype(0)?)?;
    let args = vec![LArg::Buf(x), LArg::Buf(y), LArg::I32(int(n, "elements")?), LArg::I32(r as i32), LArg::Buf(meta), LArg::Buf(fill)];
    cx.launch_linear(kern, n, args)
}

pub(crate) fn pad<D: GpuDevice>(cx: &mut Ctx<D>, mode: PadMode) -> Result<()> {
    check_words(cx)?;
    let xs = cx.in_shape(0)?;
    let mut host: Vec<Option<&Tensor>> = vec![None; 4];
    for i in [1, 3] {
        if cx.has_input(i) {
            host[i] = Some(cx.constant(i).map_or_else(|| unsupported(format!("Pad with input {i} computed at run time")), Ok)?);
        }
    }
    let (shape, maps) = crate::cpu::pad_maps(mode, xs, &host)?;
    if shape != cx.out_shape(0) {
        return Err(dynaspa_runtime::Error::Other(format!("Pad planned {shape:?}, shape inference said {:?}", cx.out_shape(0))));
    }
    let has_value = cx.has_input(2) && cx.in_shape(2)?.iter().product::<usize>() > 0;
    let fill = if !has_value {
        fill_word(cx, 0.0)?
    } else if let Some(t) = cx.constant(2) {
        fill_word(cx, t.to_f64_vec()[0])?
    } else if cx.in_dtype(2)? == cx.in_dtype(0)? {
        cx.x(2)?
    } else {
        return unsupported("Pad with a constant_value of another type computed at run time");
    };
    axis_map_gather(cx, &maps, fill)
}
