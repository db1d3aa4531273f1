//! ONNX node -> IR `Op`, per op type and opset, validating attributes.

use super::attrs::Attrs;
use super::proto::onnx::NodeProto;
use crate::error::Result;
use crate::graph::op::*;
use crate::tensor::{DType, Tensor};
use std::sync::Arc;

/// Parses one node; `Ok(None)` when the op type is not supported at all.
pub fn parse(node: &NodeProto, name: &str, opset: i64) -> Result<Option<Op>> {
    let a = Attrs::new(node, name);
    let op = match node.op_type() {
        "Conv" => {
            a.check_known(&["auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"])?;
            Op::Conv(Conv { window: window(&a)?, group: group(&a)?, fused_add: false, activation: None })
        }
        "ConvTranspose" => {
            a.check_known(&["auto_pad", "dilations", "group", "kernel_shape", "pads", "strides", "output_padding", "output_shape"])?;
            Op::ConvTranspose(ConvTranspose {
                window: window(&a)?,
                group: group(&a)?,
                output_padding: a.usizes("output_padding")?.unwrap_or_default(),
                output_shape: a.usizes("output_shape")?,
            })
        }
        "BatchNormalization" => {
            a.check_known(&["epsilon", "momentum", "training_mode", "spatial"])?;
            if a.int_or("training_mode", 0)? != 0 {
                return Err(a.err("training_mode=1 is not supported (inference only)"));
            }
            if a.int_or("spatial", 1)? != 1 {
                return Err(a.err("spatial=0 is not supported"));
            }
            Op::BatchNormalization { epsilon: a.float_or("epsilon", 1e-5)? }
        }
        "Relu" => unary(&a, UnaryKind::Relu)?,
        "LeakyRelu" => {
            a.check_known(&["alpha"])?;
            Op::Unary(UnaryKind::LeakyRelu(a.float_or("alpha", 0.01)?))
        }
        "Sigmoid" => unary(&a, UnaryKind::Sigmoid)?,
        "HardSigmoid" => {
            a.check_known(&["alpha", "beta"])?;
            Op::Unary(UnaryKind::HardSigmoid(a.float_or("alpha", 0.2)?, a.float_or("beta", 0.5)?))
        }
        "HardSwish" => unary(&a, UnaryKind::HardSwish)?,
        "Tanh" => unary(&a, UnaryKind::Tanh)?,
        "Erf" => unary(&a, UnaryKind::Erf)?,
        "Gelu" => {
            a.check_known(&["approximate"])?;
            match a.string_or("approximate", "none")?.as_str() {
                "none" => Op::Unary(UnaryKind::Gelu(false)),
                "tanh" => Op::Unary(UnaryKind::Gelu(true)),
                s => return Err(a.err(format!("approximate='{s}' is not one of none, tanh"))),
            }
        }
        "Exp" => unary(&a, UnaryKind::Exp)?,
        "Sqrt" => unary(&a, UnaryKind::Sqrt)?,
        "Neg" => unary(&a, UnaryKind::Neg)?,
        "Abs" => unary(&a, UnaryKind::Abs)?,
        "Not" => unary(&a, UnaryKind::Not)?,
        "Sign" => unary(&a, UnaryKind::Sign)?,
        "Round" => unary(&a, UnaryKind::Round)?,
        "Floor" => unary(&a, UnaryKind::Floor)?,
        "Ceil" => unary(&a, UnaryKind::Ceil)?,
        "Reciprocal" => unary(&a, UnaryKind::Reciprocal)?,
        "Log" => unary(&a, UnaryKind::Log)?,
        "Softplus" => unary(&a, UnaryKind::Softplus)?,
        "Sin" => unary(&a, UnaryKind::Sin)?,
        "Cos" => unary(&a, UnaryKind::Cos)?,
        "Clip" => {
            a.check_known(&[])?;
            Op::Clip
        }
        "Add" => binary(&a, BinaryKind::Add)?,
        "Sub" => binary(&a, BinaryKind::Sub)?,
        "Mul" => binary(&a, BinaryKind::Mul)?,
        "Div" => binary(&a, BinaryKind::Div)?,
        "Pow" => binary(&a, BinaryKind::Pow)?,
        "Mod" => {
            a.check_known(&["fmod"])?;
            Op::Binary(BinaryKind::Mod { fmod: a.bool_or("fmod", false)? })
        }
        "Greater" => binary(&a, BinaryKind::Greater)?,
        "Less" => binary(&a, BinaryKind::Less)?,
        "Equal" => binary(&a, BinaryKind::Equal)?,
        "And" => binary(&a, BinaryKind::And)?,
        "GreaterOrEqual" => binary(&a, BinaryKind::GreaterOrEqual)?,
        "LessOrEqual" => binary(&a, BinaryKind::LessOrEqual)?,
        "Or" => binary(&a, BinaryKind::Or)?,
        "Xor" => binary(&a, BinaryKind::Xor)?,
        "Min" => binary(&a, BinaryKind::Min)?,
        "Max" => binary(&a, BinaryKind::Max)?,
        "MatMul" => {
            a.check_known(&[])?;
            Op::MatMul
        }
        "Gemm" => {
            a.check_known(&["alpha", "beta", "transA", "transB"])?;
            Op::Gemm {
                alpha: a.float_or("alpha", 1.0)?,
                beta: a.float_or("beta", 1.0)?,
                trans_a: a.bool_or("transA", false)?,
                trans_b: a.bool_or("transB", false)?,
            }
        }
        "Softmax" => {
            a.check_known(&["axis"])?;
            let legacy = opset < 13;
            Op::Softmax { axis: a.int_or("axis", if legacy { 1 } else { -1 })?, legacy }
        }
        "LayerNormalization" => {
            a.check_known(&["axis", "epsilon", "stash_type"])?;
            if node.output.iter().skip(1).any(|o| !o.is_empty()) {
                return Err(a.err("the Mean and InvStdDev outputs are not supported"));
            }
            Op::LayerNormalization { axis: a.int_or("axis", -1)?, epsilon: a.float_or("epsilon", 1e-5)? }
        }
        "InstanceNormalization" => {
            a.check_known(&["epsilon"])?;
            Op::InstanceNormalization { epsilon: a.float_or("epsilon", 1e-5)? }
        }
        "GroupNormalization" => {
            a.check_known(&["epsilon", "num_groups", "stash_type"])?;
            let g = a.int("num_groups")?.ok_or_else(|| a.err("attribute 'num_groups' is required"))?;
            if g <= 0 {
                return Err(a.err(format!("num_groups must be positive, is {g}")));
            }
            Op::GroupNormalization { num_groups: g as usize, epsilon: a.float_or("epsilon", 1e-5)?, per_channel_affine: opset >= 21 }
        }
        "MaxPool" => {
            a.check_known(&["auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"])?;
            if node.output.iter().skip(1).any(|o| !o.is_empty()) {
                return Err(a.err("the Indices output is not supported"));
            }
            Op::MaxPool(pool(&a, false)?)
        }
        "AveragePool" => {
            a.check_known(&["auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"])?;
            Op::AveragePool(pool(&a, true)?)
        }
        "GlobalAveragePool" => {
            a.check_known(&[])?;
            Op::GlobalAveragePool
        }
        "ReduceMean" => reduce(&a, ReduceKind::Mean, opset < 18)?,
        "ReduceSum" => reduce(&a, ReduceKind::Sum, opset < 13)?,
        "ReduceMax" => reduce(&a, ReduceKind::Max, opset < 18)?,
        "Reshape" => {
            a.check_known(&["allowzero"])?;
            Op::Reshape { allowzero: a.bool_or("allowzero", false)? }
        }
        "Flatten" => {
            a.check_known(&["axis"])?;
            Op::Flatten { axis: a.int_or("axis", 1)? }
        }
        "Transpose" => {
            a.check_known(&["perm"])?;
            Op::Transpose { perm: a.usizes("perm")?.unwrap_or_default() }
        }
        "Concat" => {
            a.check_known(&["axis"])?;
            Op::Concat { axis: a.int("axis")?.ok_or_else(|| a.err("attribute 'axis' is required"))? }
        }
        "Slice" => {
            a.check_known(&[])?;
            Op::Slice
        }
        "Split" => {
            a.check_known(&["axis", "split", "num_outputs"])?;
            let num_outputs = match a.int("num_outputs")? {
                Some(n) if n <= 0 => return Err(a.err(format!("num_outputs must be positive, is {n}"))),
                n => n.map(|n| n as usize),
            };
            Op::Split { axis: a.int_or("axis", 0)?, split: a.ints("split")?, num_outputs }
        }
        "Gather" => {
            a.check_known(&["axis"])?;
            Op::Gather { axis: a.int_or("axis", 0)? }
        }
        "Squeeze" => {
            a.check_known(&["axes"])?;
            Op::Squeeze { axes: a.ints("axes")? }
        }
        "Unsqueeze" => {
            a.check_known(&["axes"])?;
            Op::Unsqueeze { axes: a.ints("axes")? }
        }
        "Expand" => {
            a.check_known(&[])?;
            Op::Expand
        }
        "Shape" => {
            a.check_known(&["start", "end"])?;
            Op::Shape { start: a.int_or("start", 0)?, end: a.int("end")? }
        }
        "Constant" => Op::Constant { value: Arc::new(constant_value(&a)?) },
        "ConstantOfShape" => {
            a.check_known(&["value"])?;
            let value = a.tensor("value")?.unwrap_or_else(|| Tensor::scalar_f32(0.0));
            if value.len() != 1 {
                return Err(a.err(format!("attribute 'value' must hold one element, holds {}", value.len())));
            }
            Op::ConstantOfShape { value: Arc::new(value) }
        }
        "Identity" => {
            a.check_known(&[])?;
            Op::Identity
        }
        "Cast" => {
            a.check_known(&["to", "saturate", "round_mode"])?;
            let to = a.int("to")?.ok_or_else(|| a.err("attribute 'to' is required"))? as i32;
            // A cast to FLOAT16/BFLOAT16 computes in fp32 like every half value here.
            let to = super::tensor_proto::widened(to).ok_or_else(|| a.err(format!("cast to {} is not supported", DType::onnx_name(to))))?;
            Op::Cast { to }
        }
        "Resize" => Op::Resize(resize(&a)?),
        "Pad" => {
            a.check_known(&["mode"])?;
            let mode = match a.string_or("mode", "constant")?.as_str() {
                "constant" => PadMode::Constant,
                "reflect" => PadMode::Reflect,
                "edge" => PadMode::Edge,
                "wrap" => PadMode::Wrap,
                m => return Err(a.err(format!("mode '{m}' is not one of constant, reflect, edge, wrap"))),
            };
            Op::Pad { mode }
        }
        "Where" => {
            a.check_known(&[])?;
            Op::Where
        }
        "CumSum" => {
            a.check_known(&["exclusive", "reverse"])?;
            Op::CumSum { exclusive: a.bool_or("exclusive", false)?, reverse: a.bool_or("reverse", false)? }
        }
        _ => return Ok(None),
    };
    Ok(Some(op))
}

fn unary(a: &Attrs, k: UnaryKind) -> Result<Op> {
    a.check_known(&[])?;
    Ok(Op::Unary(k))
}

fn binary(a: &Attrs, k: BinaryKind) -> Result<Op> {
    // `broadcast`/`axis` belong to opsets before 7, which we reject up front.
    a.check_known(&[])?;
    Ok(Op::Binary(k))
}

fn group(a: &Attrs) -> Result<usize> {
    match a.int_or("group", 1)? {
        g if g >= 1 => Ok(g as usize),
        g => Err(a.err(format!("group must be positive, is {g}"))),
    }
}

fn window(a: &Attrs) -> Result<Window> {
    let auto_pad = match a.string_or("auto_pad", "NOTSET")?.as_str() {
        "NOTSET" | "" => AutoPad::NotSet,
        "SAME_UPPER" => AutoPad::SameUpper,
        "SAME_LOWER" => AutoPad::SameLower,
        "VALID" => AutoPad::Valid,
        s => return Err(a.err(format!("auto_pad '{s}' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID"))),
    };
    let positive = |key: &str| -> Result<Vec<usize>> {
        let v = a.usizes(key)?.unwrap_or_default();
        if v.contains(&0) {
            return Err(a.err(format!("attribute '{key}' must be positive, is {v:?}")));
        }
        Ok(v)
    };
    // Empty vectors mean "default for the spatial rank"; shape inference fills them in.
    Ok(Window {
        kernel_shape: positive("kernel_shape")?,
        strides: positive("strides")?,
        pads: a.usizes("pads")?.unwrap_or_default(),
        dilations: positive("dilations")?,
        auto_pad,
    })
}

fn pool(a: &Attrs, average: bool) -> Result<Pool> {
    let w = window(a)?;
    if w.kernel_shape.is_empty() {
        return Err(a.err("attribute 'kernel_shape' is required"));
    }
    if a.int_or("storage_order", 0)? != 0 {
        return Err(a.err("storage_order=1 is not supported"));
    }
    Ok(Pool { window: w, ceil_mode: a.bool_or("ceil_mode", false)?, count_include_pad: average && a.bool_or("count_include_pad", false)? })
}

fn reduce(a: &Attrs, kind: ReduceKind, axes_attr: bool) -> Result<Op> {
    a.check_known(&["axes", "keepdims", "noop_with_empty_axes"])?;
    let axes = a.ints("axes")?;
    if axes.is_some() && !axes_attr {
        return Err(a.err("attribute 'axes' is not allowed at this opset; axes are input 1"));
    }
    Ok(Op::Reduce(Reduce {
        kind,
        axes,
        keepdims: a.bool_or("keepdims", true)?,
        noop_with_empty_axes: a.bool_or("noop_with_empty_axes", false)?,
    }))
}

fn constant_value(a: &Attrs) -> Result<Tensor> {
    a.check_known(&["value", "value_float", "value_floats", "value_int", "value_ints"])?;
    if let Some(t) = a.tensor("value")? {
        return Ok(t);
    }
    if let Some(f) = a.float("value_float")? {
        return Ok(Tensor::scalar_f32(f));
    }
    if let Some(v) = a.floats("value_floats")? {
        return Tensor::from_f32(vec![v.len()], v);
    }
    if let Some(i) = a.int("value_int")? {
        return Ok(Tensor::scalar_i64(i));
    }
    if let Some(v) = a.ints("value_ints")? {
        return Tensor::from_i64(vec![v.len()], v);
    }
    Err(a.err("no value attribute (value, value_float(s), value_int(s))"))
}

fn resize(a: &Attrs) -> Result<Resize> {
    a.check_known(&[
        "antialias",
        "axes",
        "coordinate_transformation_mode",
        "cubic_coeff_a",
        "exclude_outside",
        "extrapolation_value",
        "keep_aspect_ratio_policy",
        "mode",
        "nearest_mode",
    ])?;
    let mode = match a.string_or("mode", "nearest")?.as_str() {
        "nearest" => ResizeMode::Nearest,
        "linear" => ResizeMode::Linear,
        m => return Err(a.err(format!("mode '{m}' is not supported (nearest, linear)"))),
    };
    let coord = match a.string_or("coordinate_transformation_mode", "half_pixel")?.as_str() {
        "half_pixel" => CoordTransform::HalfPixel,
        "half_pixel_symmetric" => CoordTransform::HalfPixelSymmetric,
        "pytorch_half_pixel" => CoordTransform::PytorchHalfPixel,
        "align_corners" => CoordTransform::AlignCorners,
        "asymmetric" => CoordTransform::Asymmetric,
        "tf_crop_and_resize" => CoordTransform::TfCropAndResize,
        m => return Err(a.err(format!("coordinate_transformation_mode '{m}' is not supported"))),
    };
    let nearest = match a.string_or("nearest_mode", "round_prefer_floor")?.as_str() {
        "round_prefer_floor" => NearestMode::RoundPreferFloor,
        "round_prefer_ceil" => NearestMode::RoundPreferCeil,
        "floor" => NearestMode::Floor,
        "ceil" => NearestMode::Ceil,
        m => return Err(a.err(format!("nearest_mode '{m}' is not supported"))),
    };
    let keep_aspect = match a.string_or("keep_aspect_ratio_policy", "stretch")?.as_str() {
        "stretch" => KeepAspect::Stretch,
        "not_larger" => KeepAspect::NotLarger,
        "not_smaller" => KeepAspect::NotSmaller,
        m => return Err(a.err(format!("keep_aspect_ratio_policy '{m}' is not supported"))),
    };
    Ok(Resize {
        mode,
        coord,
        nearest,
        exclude_outside: a.bool_or("exclude_outside", false)?,
        extrapolation_value: a.float_or("extrapolation_value", 0.0)?,
        antialias: a.bool_or("antialias", false)?,
        axes: a.ints("axes")?,
        keep_aspect,
    })
}
