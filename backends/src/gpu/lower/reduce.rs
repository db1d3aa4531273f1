//! Reduce*, GlobalAveragePool, Softmax, LayerNormalization, Group/InstanceNormalization, CumSum.

use super::ctx::{int, unsupported, Ctx, LArg};
use super::shapes::{broadcast_meta, simplify};
use crate::gpu::device::GpuDevice;
use crate::gpu::dtype::{narrow, Word};
use crate::gpu::kernels::{Src, REDUCE_WG};
use dynaspa_runtime::graph::{Reduce, ReduceKind};
use dynaspa_runtime::tensor::strides_of;
use dynaspa_runtime::{DType, Result};

const WG: [(&str, i64); 1] = [("WG", REDUCE_WG as i64)];

fn axis(a: i64, rank: usize, what: &str) -> Result<usize> {
    let r = rank as i64;
    if a < -r || a >= r {
        return unsupported(format!("{what} axis {a} for rank {rank}"));
    }
    Ok(if a < 0 { (a + r) as usize } else { a as usize })
}

/// Reduces `red` dims of input 0 (shape `xs`) into output 0 (`kind`: 0 sum, 1 mean, 2 max).
fn launch_reduce<D: GpuDevice>(cx: &mut Ctx<D>, xs: &[usize], red: &[bool], kind: i32) -> Result<()> {
    let st: Vec<i64> = strides_of(xs).into_iter().map(|s| s as i64).collect();
    let pick = |want: bool| -> (Vec<usize>, Vec<i64>) {
        let dims: Vec<usize> = (0..xs.len()).filter(|&d| red[d] == want).map(|d| xs[d]).collect();
        let s: Vec<i64> = (0..xs.len()).filter(|&d| red[d] == want).map(|d| st[d]).collect();
        let (d, s) = simplify(&dims, &[s]);
        (d, s.into_iter().next().unwrap_or_default())
    };
    let (kd, ks) = pick(false);
    let (rd, rs) = pick(true);
    let nout: usize = kd.iter().product();
    let nred: usize = rd.iter().product();
    if nout == 0 {
        return Ok(());
    }
    let mut meta: Vec<i32> = Vec::new();
    for v in kd.iter().map(|&d| d as i64).chain(ks.iter().copied()).chain(rd.iter().map(|&d| d as i64)).chain(rs.iter().copied()) {
        meta.push(super::ctx::sint(v, "reduction index")?);
    }
    meta.push(0); // never empty
    let meta = cx.meta(&meta)?;
    let (x, y) = (cx.x(0)?, cx.y(0)?);
    let (no, nr) = (LArg::I32(int(nout, "outputs")?), LArg::I32(int(nred, "reduced elements")?));
    let ranks = [LArg::I32(kd.len() as i32), LArg::I32(rd.len() as i32), LArg::Buf(meta)];
    let dt = cx.in_dtype(0)?;
    if cx.word(0)? == Word::I32 {
        if dt == DType::Bool && kind != 2 {
            return unsupported(format!("{} on BOOL", cx.node.op.name()));
        }
        let kern = cx.kernel(Src::Reduce, "reduce_i32_item", &WG)?;
        let mut args = vec![LArg::Buf(x), LArg::Buf(y), no, nr, LArg::I32(kind), LArg::I32(narrow(dt))];
        args.extend(ranks);
        return cx.launch_linear(kern, nout, args);
    }
    let mut args = vec![LArg::Buf(x), LArg::Buf(y), no, nr, LArg::I32(kind)];
    args.extend(ranks);
    // A work-group per output once a reduction is long enough to keep one busy, or where one
    // work-item per output would leave most of the device idle, each walking its reduction
    // alone (a global average pool of 1024 channels at 14x14: 1024 work-items, 196 dependent
    // loads each, 55 µs on an H100 against 3 µs with a group per channel).
    let fills_device = nout >= cx.dev.info().compute_units.max(1) as usize * REDUCE_WG as usize;
    if nred >= 4 * REDUCE_WG as usize || (nred >= REDUCE_WG as usize && nout < 1024) || (nred >= 32 && !fills_device) {
        let kern = cx.kernel(Src::Reduce, "reduce_f32_group", &WG)?;
        cx.launch(kern, [nout, 1, 1], [REDUCE_WG, 1, 1], args)
    } else {
        let kern = cx.kernel(Src::Reduce, "reduce_f32_item", &WG)?;
        cx.launch_linear(kern, nout, args)
    }
}

pub(crate) fn reduce<D: GpuDevice>(cx: &mut Ctx<D>, r: &Reduce) -> Result<()> {
    let xs = cx.in_shape(0)?;
    let axes = match (&r.axes, cx.has_input(1)) {
        (Some(a), _) => a.clone(),
        (None, true) => match cx.constant(1) {
            Some(t) => t.to_i64_vec()?,
            None => return unsupported(format!("{} with axes computed at run time", cx.node.op.name())),
        },
        (None, false) => Vec::new(),
    };
    if axes.is_empty() && r.noop_with_empty_axes {
        return copy_words(cx);
    }
    let mut red = vec![axes.is_empty(); xs.len()];
    for &a in &axes {
        red[axis(a, xs.len(), cx.node.op.name())?] = true;
    }
    let kind = match r.kind {
        ReduceKind::Sum => 0,
        ReduceKind::Mean => 1,
        ReduceKind::Max => 2,
    };
    launch_reduce(cx, xs, &red, kind)
}

/// Output 0 = input 0, word for word.
pub(crate) fn copy_words<D: GpuDevice>(cx: &mut Ctx<D>) -> Result<()> {
    let (dt, n) = (cx.in_dtype(0)?, cx.out_len(0));
    cx.copy(dt, n)
}

pub(crate) fn global_average_pool<D: GpuDevice>(cx: &mut Ctx<D>) -> Result<()> {
    let xs = cx.in_shape(0)?;
    if cx.in_dtype(0)? != DType::F32 || xs.len() < 2 {
        return unsupported(format!("GlobalAveragePool of {} {xs:?}", cx.in_dtype(0)?));
    }
    let red: Vec<bool> = (0..xs.len()).map(|d| d >= 2).collect();
    launch_reduce(cx, xs, &red, 1)
}

fn float_only<D: GpuDevice>(cx: &Ctx<D>) -> Result<()> {
    for i in 0..cx.node.inputs.len() {
        if cx.has_input(i) && cx.in_dtype(i)? != DType::F32 {
            return unsupported(format!("{} on {}", cx.node.op.name(), cx.in_dtype(i)?));
        }
    }
    if cx.node.outputs.len() > 1 {
        return unsupported(format!("{}'s training outputs", cx.node.op.name()));
    }
    Ok(())
}

pub(crate) fn softmax<D: GpuDevice>(cx: &mut Ctx<D>, ax: i64, legacy: bool) -> Result<()> {
    float_only(cx)?;
    let xs = cx.in_shape(0)?;
    let n = cx.out_len(0);
    if n == 0 {
        return Ok(());
    }
    let (x, y) = (cx.x(0)?, cx.y(0)?);
    if xs.is_empty() {
        // A single element is its own distribution.
        let kern = cx.word_kernel(Src::Elementwise, "fill_words", DType::F32)?;
        let one = cx.res.precision.float_bits(1.0);
        return cx.launch_linear(kern, 1, vec![LArg::Buf(y), LArg::I32(0), LArg::I32(1), LArg::I32(one)]);
    }
    let a = axis(ax, xs.len(), "Softmax")?;
    let (len, inner) = if legacy { (xs[a..].iter().product::<usize>(), 1) } else { (xs[a], xs[a + 1..].iter().product::<usize>()) };
    let outer = n / (len * inner);
    if inner == 1 {
        let kern = cx.kernel(Src::Reduce, "softmax_rows", &WG)?;
        cx.launch(kern, [outer, 1, 1], [REDUCE_WG, 1, 1], vec![LArg::Buf(x), LArg::Buf(y), LArg::I32(int(len, "softmax length")?)])
    } else {
        let kern = cx.kernel(Src::Reduce, "softmax_cols", &WG)?;
        let args = vec![
            LArg::Buf(x),
            LArg::Buf(y),
            LArg::I32(int(outer, "rows")?),
            LArg::I32(int(len, "softmax length")?),
            LArg::I32(int(inner, "columns")?),
        ];
        cx.launch_linear(kern, outer * inner, args)
    }
}

pub(crate) fn layer_norm<D: GpuDevice>(cx: &mut Ctx<D>, ax: i64, eps: f32) -> Result<()> {
    float_only(cx)?;
    let xs = cx.in_shape(0)?;
    let a = axis(ax, xs.len(), "LayerNormalization")?;
    let inner = &xs[a..];
    let len: usize = inner.iter().product();
    let rows: usize = xs[..a].iter().product();
    let ss = cx.in_shape(1)?;
    let has_bias = cx.has_input(2);
    let bs = if has_bias { cx.in_shape(2)? } else { ss };
    for s in [ss, bs] {
        let fits = s.len() <= inner.len() && s.iter().rev().zip(inner.iter().rev()).all(|(&p, &q)| p == q || p == 1);
        if !fits {
            return unsupported(format!("LayerNormalization parameter of shape {s:?} for normalised shape {inner:?}"));
        }
    }
    if rows * len == 0 {
        return Ok(());
    }
    let (prank, meta) = broadcast_meta(inner, &[ss, bs]);
    let meta = if prank == 0 { cx.dummy()? } else { cx.meta(&meta)? };
    let (x, s, y) = (cx.x(0)?, cx.x(1)?, cx.y(0)?);
    let b = cx.x_or_dummy(2)?;
    let kern = cx.kernel(Src::Reduce, "layer_norm", &WG)?;
    let args = vec![
        LArg::Buf(x),
        LArg::Buf(s),
        LArg::Buf(b),
        LArg::Buf(y),
        LArg::I32(int(len, "row length")?),
        LArg::F32(eps),
        LArg::I32(has_bias as i32),
        LArg::I32(prank as i32),
        LArg::Buf(meta),
    ];
    cx.launch(kern, [rows, 1, 1], [REDUCE_WG, 1, 1], args)
}

/// GroupNormalization; InstanceNormalization is the case of one channel per group. `factors`:
/// NormScaleShift, the factor and offset per image and channel instead of the normalised X.
pub(crate) fn group_norm<D: GpuDevice>(cx: &mut Ctx<D>, groups: usize, eps: f32, per_channel: bool, factors: bool) -> Result<()> {
    float_only(cx)?;
    let xs = cx.in_shape(0)?;
    if xs.len() < 2 || groups == 0 || xs[1] % groups != 0 {
        return unsupported(format!("{} of {xs:?} in {groups} groups", cx.node.op.name()));
    }
    let c = xs[1];
    let plen = if per_channel { c } else { groups };
    for i in [1, 2] {
        if cx.in_shape(i)?.iter().product::<usize>() != plen {
            return unsupported(format!("{} parameter of shape {:?}, expected {plen} values", cx.node.op.name(), cx.in_shape(i)?));
        }
    }
    let plane: usize = xs[2..].iter().product();
    let blocks = xs[0] * groups;
    if blocks * plane == 0 {
        return Ok(());
    }
    let (x, s, b, y) = (cx.x(0)?, cx.x(1)?, cx.x(2)?, cx.y(0)?);
    let kern = cx.kernel(Src::Reduce, "group_norm", &WG)?;
    let args = vec![
        LArg::Buf(x),
        LArg::Buf(s),
        LArg::Buf(b),
        LArg::Buf(y),
        LArg::I32(int(groups, "groups")?),
        LArg::I32(int(c / groups, "channels per group")?),
        LArg::I32(int(plane, "plane")?),
        LArg::F32(eps),
        LArg::I32(per_channel as i32),
        LArg::I32(if factors { int(xs[0] * c, "images x channels")? } else { 0 }),
    ];
    cx.launch(kern, [blocks, 1, 1], [REDUCE_WG, 1, 1], args)
}

pub(crate) fn cumsum<D: GpuDevice>(cx: &mut Ctx<D>, exclusive: bool, reverse: bool) -> Result<()> {
    let xs = cx.in_shape(0)?;
    let dt = cx.in_dtype(0)?;
    let w = cx.word(0)?;
    if dt == DType::Bool {
        return unsupported("CumSum on BOOL");
    }
    let Some(ax) = cx.constant(1).map(|t| t.to_i64_vec()).transpose()?.and_then(|v| v.first().copied()) else {
        return unsupported("CumSum with an axis computed at run time");
    };
    let a = axis(ax, xs.len(), "CumSum")?;
    let (len, inner) = (xs[a], xs[a + 1..].iter().product::<usize>());
    let outer: usize = xs[..a].iter().product();
    let (x, y) = (cx.x(0)?, cx.y(0)?);
    let mut args = vec![
        LArg::Buf(x),
        LArg::Buf(y),
        LArg::I32(int(outer, "rows")?),
        LArg::I32(int(len, "length")?),
        LArg::I32(int(inner, "columns")?),
        LArg::I32(exclusive as i32),
        LArg::I32(reverse as i32),
    ];
    let entry = if w == Word::F32 {
        "cumsum_f32"
    } else {
        args.push(LArg::I32(narrow(dt)));
        "cumsum_i32"
    };
    let kern = cx.kernel(Src::Reduce, entry, &WG)?;
    cx.launch_linear(kern, outer * inner, args)
}
