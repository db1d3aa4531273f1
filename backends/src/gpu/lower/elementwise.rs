//! Unary, binary (broadcasting), comparison, Where, Clip, Cast and BatchNormalization nodes.

use super::ctx::{int, unsupported, Ctx, LArg};
use super::shapes::broadcast_meta;
use crate::gpu::device::GpuDevice;
use crate::gpu::dtype::{int_range, narrow, Word};
use crate::gpu::kernels::Src;
use dynaspa_runtime::graph::{Activation, BinaryKind, UnaryKind};
use dynaspa_runtime::{DType, Result, Tensor};

/// Kernel code and parameters of an activation (see `activate` in kernels/common.h).
pub(crate) fn unary_code(k: UnaryKind) -> (i32, f32, f32) {
    match k {
        UnaryKind::Relu => (0, 0.0, 0.0),
        UnaryKind::LeakyRelu(a) => (1, a, 0.0),
        UnaryKind::Sigmoid => (2, 0.0, 0.0),
        UnaryKind::HardSigmoid(a, b) => (3, a, b),
        UnaryKind::HardSwish => (4, 0.0, 0.0),
        UnaryKind::Tanh => (5, 0.0, 0.0),
        UnaryKind::Erf => (6, 0.0, 0.0),
        UnaryKind::Gelu(false) => (7, 0.0, 0.0),
        UnaryKind::Gelu(true) => (8, 0.0, 0.0),
        UnaryKind::Exp => (9, 0.0, 0.0),
        UnaryKind::Sqrt => (10, 0.0, 0.0),
        UnaryKind::Neg => (11, 0.0, 0.0),
        UnaryKind::Abs => (12, 0.0, 0.0),
        UnaryKind::Sign => (14, 0.0, 0.0),
        UnaryKind::Round => (15, 0.0, 0.0),
        UnaryKind::Floor => (16, 0.0, 0.0),
        UnaryKind::Ceil => (17, 0.0, 0.0),
        UnaryKind::Reciprocal => (18, 0.0, 0.0),
        UnaryKind::Log => (19, 0.0, 0.0),
        UnaryKind::Not => (20, 0.0, 0.0),
        UnaryKind::Softplus => (21, 0.0, 0.0),
        UnaryKind::Sin => (22, 0.0, 0.0),
        UnaryKind::Cos => (23, 0.0, 0.0),
    }
}

/// Code and parameters of a fused epilogue activation; -1 for none.
pub(crate) fn activation_code(a: Option<Activation>) -> (i32, f32, f32) {
    match a {
        None => (-1, 0.0, 0.0),
        Some(Activation::Relu) => (0, 0.0, 0.0),
        Some(Activation::LeakyRelu(s)) => (1, s, 0.0),
        Some(Activation::Clip(lo, hi)) => (13, lo, hi),
        Some(Activation::Sigmoid) => (2, 0.0, 0.0),
        Some(Activation::HardSigmoid(a, b)) => (3, a, b),
        Some(Activation::HardSwish) => (4, 0.0, 0.0),
        Some(Activation::Tanh) => (5, 0.0, 0.0),
    }
}

pub(crate) fn unary<D: GpuDevice>(cx: &mut Ctx<D>, k: UnaryKind) -> Result<()> {
    let n = cx.out_len(0);
    let (x, y) = (cx.x(0)?, cx.y(0)?);
    let dt = cx.in_dtype(0)?;
    let (code, p0, p1) = unary_code(k);
    match (cx.word(0)?, k) {
        (_, UnaryKind::Not) if dt != DType::Bool => unsupported(format!("Not on {dt}")),
        (Word::F32, _) => {
            let kern = cx.kernel(Src::Elementwise, "unary_f32", &[])?;
            cx.launch_linear(
                kern,
                n,
                vec![LArg::Buf(x), LArg::Buf(y), LArg::I32(int(n, "elements")?), LArg::I32(code), LArg::F32(p0), LArg::F32(p1)],
            )
        }
        (Word::I32, UnaryKind::Relu | UnaryKind::Neg | UnaryKind::Abs | UnaryKind::Sign | UnaryKind::Not)
            if dt != DType::Bool || code == 20 =>
        {
            let kern = cx.kernel(Src::Elementwise, "unary_i32", &[])?;
            let nw = narrow(dt);
            cx.launch_linear(kern, n, vec![LArg::Buf(x), LArg::Buf(y), LArg::I32(int(n, "elements")?), LArg::I32(code), LArg::I32(nw)])
        }
        _ => unsupported(format!("{} on {dt}", cx.node.op.name())),
    }
}

/// A one-element constant equal to 2 (`Pow(x, 2)` is computed as `x * x`, exactly, like the CPU).
fn is_two(t: Option<&Tensor>) -> bool {
    t.is_some_and(|t| t.len() == 1 && t.to_f64_vec()[0] == 2.0)
}

pub(crate) fn binary<D: GpuDevice>(cx: &mut Ctx<D>, k: BinaryKind) -> Result<()> {
    if k.is_variadic() {
        // One input is enough, so this goes before the pair is read.
        return extremum(cx, k);
    }
    let out = cx.out_shape(0);
    let n = cx.out_len(0);
    let (sa, sb) = (cx.in_shape(0)?, cx.in_shape(1)?);
    let (da, db) = (cx.in_dtype(0)?, cx.in_dtype(1)?);
    let (wa, wb) = (cx.word(0)?, cx.word(1)?);
    let (a, b, y) = (cx.x(0)?, cx.x(1)?, cx.y(0)?);
    let (rank, meta) = broadcast_meta(out, &[sa, sb]);
    let meta = if rank == 0 { cx.dummy()? } else { cx.meta(&meta)? };
    let nn = LArg::I32(int(n, "elements")?);
    let tail = [LArg::I32(rank as i32), LArg::Buf(meta)];
    let mut args = vec![LArg::Buf(a), LArg::Buf(b), LArg::Buf(y), nn];
    let name = cx.node.op.name();
    let entry = match k {
        BinaryKind::Add | BinaryKind::Sub | BinaryKind::Mul | BinaryKind::Div => {
            let op = match k {
                BinaryKind::Add => 0,
                BinaryKind::Sub => 1,
                BinaryKind::Mul => 2,
                _ => 3,
            };
            if da != db {
                return unsupported(format!("{name} of {da} and {db}"));
            }
            args.push(LArg::I32(op));
            match (wa, da) {
                (_, DType::Bool) => return unsupported(format!("{name} on BOOL")),
                (Word::F32, _) => "binary_f32",
                (Word::I32, _) => {
                    args.push(LArg::I32(narrow(da)));
                    "binary_i32"
                }
            }
        }
        BinaryKind::Min | BinaryKind::Max => return extremum(cx, k),
        BinaryKind::Pow => match (wa, wb) {
            _ if da == DType::Bool || db == DType::Bool => return unsupported(format!("Pow of {da} and {db}")),
            (Word::F32, Word::F32) => {
                args.push(LArg::I32(if is_two(cx.constant(1)) { 5 } else { 4 }));
                "binary_f32"
            }
            (Word::F32, Word::I32) if is_two(cx.constant(1)) => {
                // x * x: the exponent's value is loaded but unused, so its word type does not matter.
                args.push(LArg::I32(5));
                "binary_f32"
            }
            (Word::F32, Word::I32) => "pow_f32_i32",
            (Word::I32, Word::I32) => {
                args.push(LArg::I32(4));
                args.push(LArg::I32(narrow(da)));
                "binary_i32"
            }
            (Word::I32, Word::F32) => {
                let (lo, hi) = int_range(da);
                args.extend([LArg::F32(lo), LArg::F32(hi), LArg::I32(narrow(da))]);
                "pow_i32_f32"
            }
        },
        BinaryKind::Mod { fmod } => {
            if da != db {
                return unsupported(format!("{name} of {da} and {db}"));
            }
            match (wa, da) {
                (_, DType::Bool) => return unsupported(format!("{name} on BOOL")),
                (Word::F32, _) if !fmod => return unsupported(format!("{name} of {da} with fmod=0")),
                (Word::F32, _) => {
                    args.push(LArg::I32(6));
                    "binary_f32"
                }
                (Word::I32, _) => {
                    args.push(LArg::I32(if fmod { 6 } else { 5 }));
                    args.push(LArg::I32(narrow(da)));
                    "binary_i32"
                }
            }
        }
        BinaryKind::Greater
        | BinaryKind::Less
        | BinaryKind::Equal
        | BinaryKind::And
        | BinaryKind::GreaterOrEqual
        | BinaryKind::LessOrEqual
        | BinaryKind::Or
        | BinaryKind::Xor => {
            if da != db {
                return unsupported(format!("{name} of {da} and {db}"));
            }
            if k.is_logic() && da != DType::Bool {
                return unsupported(format!("{name} on {da}"));
            }
            args.push(LArg::I32(match k {
                BinaryKind::Greater => 0,
                BinaryKind::Less => 1,
                BinaryKind::Equal => 2,
                BinaryKind::And => 3,
                BinaryKind::GreaterOrEqual => 4,
                BinaryKind::LessOrEqual => 5,
                BinaryKind::Or => 6,
                _ => 7,
            }));
            if wa == Word::F32 {
                "compare_f32"
            } else {
                "compare_i32"
            }
        }
    };
    args.extend(tail);
    let kern = cx.kernel(Src::Elementwise, entry, &[])?;
    cx.launch_linear(kern, n, args)
}

/// Min and Max (op 7 and 8 of `binary_f32` / `binary_i32`): one launch per input after the
/// first, combining the running result with it over the output's elements. With more than two
/// inputs the running result alternates between a scratch buffer and the output so that the
/// last launch writes the output; one input is copied.
fn extremum<D: GpuDevice>(cx: &mut Ctx<D>, k: BinaryKind) -> Result<()> {
    let name = cx.node.op.name();
    let inputs = cx.node.inputs.len();
    let (out, n) = (cx.out_shape(0), cx.out_len(0));
    let (dt, w) = (cx.in_dtype(0)?, cx.word(0)?);
    for i in 1..inputs {
        if cx.in_dtype(i)? != dt {
            return unsupported(format!("{name} of {dt} and {}", cx.in_dtype(i)?));
        }
    }
    if dt == DType::Bool {
        return unsupported(format!("{name} on BOOL"));
    }
    let y = cx.y(0)?;
    let nn = LArg::I32(int(n, "elements")?);
    if inputs == 1 {
        return cx.copy(dt, n);
    }
    let op = LArg::I32(if k == BinaryKind::Min { 7 } else { 8 });
    let (entry, extra) = match w {
        Word::F32 => ("binary_f32", vec![op]),
        Word::I32 => ("binary_i32", vec![op, LArg::I32(narrow(dt))]),
    };
    let kern = cx.kernel(Src::Elementwise, entry, &[])?;
    let other = if inputs > 2 { cx.scratch(n)? } else { y };
    let (mut acc, mut acc_shape) = (cx.x(0)?, cx.in_shape(0)?);
    for i in 1..inputs {
        let dst = if (inputs - 1 - i) % 2 == 0 { y } else { other };
        let b = cx.x(i)?;
        let (rank, meta) = broadcast_meta(out, &[acc_shape, cx.in_shape(i)?]);
        let meta = if rank == 0 { cx.dummy()? } else { cx.meta(&meta)? };
        let mut args = vec![LArg::Buf(acc), LArg::Buf(b), LArg::Buf(dst), nn];
        args.extend(extra.iter().copied());
        args.extend([LArg::I32(rank as i32), LArg::Buf(meta)]);
        cx.launch_linear(kern.clone(), n, args)?;
        (acc, acc_shape) = (dst, out);
    }
    Ok(())
}

pub(crate) fn where_<D: GpuDevice>(cx: &mut Ctx<D>) -> Result<()> {
    if cx.in_dtype(0)? != DType::Bool {
        return unsupported(format!("Where with a {} condition", cx.in_dtype(0)?));
    }
    cx.word(1)?;
    cx.word(2)?;
    let out = cx.out_shape(0);
    let n = cx.out_len(0);
    let (rank, meta) = broadcast_meta(out, &[cx.in_shape(0)?, cx.in_shape(1)?, cx.in_shape(2)?]);
    let meta = if rank == 0 { cx.dummy()? } else { cx.meta(&meta)? };
    let (c, x, y, o) = (cx.x(0)?, cx.x(1)?, cx.x(2)?, cx.y(0)?);
    let kern = cx.word_kernel(Src::Elementwise, "where_words", cx.in_dtype(1)?)?;
    let args = vec![
        LArg::Buf(c),
        LArg::Buf(x),
        LArg::Buf(y),
        LArg::Buf(o),
        LArg::I32(int(n, "elements")?),
        LArg::I32(rank as i32),
        LArg::Buf(meta),
    ];
    cx.launch_linear(kern, n, args)
}

pub(crate) fn clip<D: GpuDevice>(cx: &mut Ctx<D>) -> Result<()> {
    let dt = cx.in_dtype(0)?;
    let w = cx.word(0)?;
    if dt == DType::Bool {
        return unsupported("Clip on BOOL");
    }
    let n = cx.out_len(0);
    let (x, y) = (cx.x(0)?, cx.y(0)?);
    let mut flags = 0;
    let mut bounds = [0usize; 2];
    for (j, i) in [1usize, 2].into_iter().enumerate() {
        if !cx.has_input(i) || cx.in_shape(i)?.iter().product::<usize>() == 0 {
            bounds[j] = cx.dummy()?;
            continue;
        }
        if cx.in_shape(i)?.iter().product::<usize>() != 1 {
            return unsupported(format!("Clip with a non-scalar bound of shape {:?}", cx.in_shape(i)?));
        }
        flags |= 1 << j;
        bounds[j] = if cx.in_dtype(i)? == dt {
            cx.x(i)?
        } else if let Some(t) = cx.constant(i) {
            // A constant bound of another type, converted as the CPU does.
            let v = t.to_f64_vec()[0];
            let conv = match w {
                Word::F32 => Tensor::from_f32(vec![1], vec![v as f32])?,
                Word::I32 => Tensor::new(vec![1], dynaspa_runtime::TensorData::I32(vec![v as i32]))?,
            };
            cx.res.upload(cx.dev, &conv, "Clip bound")?
        } else {
            return unsupported(format!("Clip of {dt} with a {} bound computed at run time", cx.in_dtype(i)?));
        };
    }
    let entry = if w == Word::F32 { "clip_f32" } else { "clip_i32" };
    let kern = cx.kernel(Src::Elementwise, entry, &[])?;
    let args =
        vec![LArg::Buf(x), LArg::Buf(y), LArg::I32(int(n, "elements")?), LArg::Buf(bounds[0]), LArg::Buf(bounds[1]), LArg::I32(flags)];
    cx.launch_linear(kern, n, args)
}

pub(crate) fn cast<D: GpuDevice>(cx: &mut Ctx<D>, to: DType) -> Result<()> {
    let from = cx.in_dtype(0)?;
    let wf = cx.word(0)?;
    let Some(wt) = crate::gpu::dtype::word(to) else {
        return unsupported(format!("Cast to {to}"));
    };
    let n = cx.out_len(0);
    let (x, y) = (cx.x(0)?, cx.y(0)?);
    let nn = LArg::I32(int(n, "elements")?);
    let (entry, mut args) = match (wf, wt) {
        (Word::F32, Word::I32) => {
            let (lo, hi) = int_range(to);
            ("cast_f32_i32", vec![LArg::F32(lo), LArg::F32(hi), LArg::I32(narrow(to))])
        }
        (Word::I32, Word::F32) => ("cast_i32_f32", vec![]),
        // Same word: a copy, narrowed when the target is smaller.
        (Word::I32, Word::I32) => ("cast_i32_i32", vec![LArg::I32(if from == to { 0 } else { narrow(to) })]),
        (Word::F32, Word::F32) => return cx.copy(from, n),
    };
    args.splice(0..0, [LArg::Buf(x), LArg::Buf(y), nn]);
    let kern = cx.kernel(Src::Elementwise, entry, &[])?;
    cx.launch_linear(kern, n, args)
}

pub(crate) fn batch_norm<D: GpuDevice>(cx: &mut Ctx<D>, eps: f32) -> Result<()> {
    let xs = cx.in_shape(0)?;
    if xs.len() < 2 || cx.word(0)? != Word::F32 {
        return unsupported(format!("BatchNormalization of {} {xs:?}", cx.in_dtype(0)?));
    }
    let c = xs[1];
    for i in 1..5 {
        if cx.in_shape(i)?.iter().product::<usize>() != c || cx.in_dtype(i)? != DType::F32 {
            return unsupported(format!("BatchNormalization parameter {i} of shape {:?}", cx.in_shape(i)?));
        }
    }
    let n = cx.out_len(0);
    let inner: usize = xs[2..].iter().product();
    let mut args = vec![LArg::Buf(cx.x(0)?)];
    for i in 1..5 {
        args.push(LArg::Buf(cx.x(i)?));
    }
    args.extend([
        LArg::Buf(cx.y(0)?),
        LArg::I32(int(n, "elements")?),
        LArg::I32(int(c, "channels")?),
        LArg::I32(int(inner.max(1), "plane")?),
        LArg::F32(eps),
    ]);
    let kern = cx.kernel(Src::Elementwise, "batch_norm", &[])?;
    cx.launch_linear(kern, n, args)
}
