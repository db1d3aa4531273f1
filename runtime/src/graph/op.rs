//! Operators of the IR with their attributes, parsed and validated at import.
//!
//! Inputs that ONNX passes as tensors but that decide shapes (Reshape's shape, Slice's starts,
//! Resize's sizes...) stay graph inputs; shape inference requires them to be constant.

use serde::Serialize;

/// How ONNX `auto_pad` asks for padding to be derived.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum AutoPad {
    NotSet,
    SameUpper,
    SameLower,
    Valid,
}

/// An elementwise activation fused into the epilogue of a Conv/Gemm/MatMul.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum Activation {
    Relu,
    LeakyRelu(f32),
    Clip(f32, f32),
    Sigmoid,
    HardSigmoid(f32, f32),
    HardSwish,
    Tanh,
}

impl Activation {
    #[inline]
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Activation::Relu => x.max(0.0),
            Activation::LeakyRelu(a) => {
                if x < 0.0 {
                    a * x
                } else {
                    x
                }
            }
            Activation::Clip(lo, hi) => x.max(lo).min(hi),
            Activation::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            Activation::HardSigmoid(a, b) => (a * x + b).clamp(0.0, 1.0),
            Activation::HardSwish => x * (x / 6.0 + 0.5).clamp(0.0, 1.0),
            Activation::Tanh => x.tanh(),
        }
    }
}

/// Spatial window shared by Conv, ConvTranspose and the pools. `pads` holds all begins
/// then all ends, as in ONNX; once shapes are inferred `auto_pad` is folded into `pads`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Window {
    pub kernel_shape: Vec<usize>,
    pub strides: Vec<usize>,
    pub pads: Vec<usize>,
    pub dilations: Vec<usize>,
    pub auto_pad: AutoPad,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Conv {
    pub window: Window,
    pub group: usize,
    /// Set by fusion: a fourth input (same shape as the output) added after the bias.
    pub fused_add: bool,
    /// Set by fusion: applied last, after bias and the fused add.
    pub activation: Option<Activation>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConvTranspose {
    pub window: Window,
    pub group: usize,
    pub output_padding: Vec<usize>,
    /// Explicit output spatial shape; shape inference turns it into pads.
    pub output_shape: Option<Vec<usize>>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Pool {
    pub window: Window,
    pub ceil_mode: bool,
    /// AveragePool only.
    pub count_include_pad: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ReduceKind {
    Mean,
    Sum,
    Max,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Reduce {
    pub kind: ReduceKind,
    /// From the attribute (older opsets); `None` when absent or given as input 1.
    pub axes: Option<Vec<i64>>,
    pub keepdims: bool,
    pub noop_with_empty_axes: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum BinaryKind {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    /// `fmod`: the remainder takes the dividend's sign (C's fmod; required for floats);
    /// otherwise the divisor's (Python's `%`, integers only).
    Mod {
        fmod: bool,
    },
    Greater,
    Less,
    Equal,
    And,
    GreaterOrEqual,
    LessOrEqual,
    Or,
    Xor,
    /// Variadic in ONNX: one or more inputs (see `Op::Binary`).
    Min,
    Max,
}

impl BinaryKind {
    /// Comparisons and logic ops: their output is BOOL whatever their inputs are.
    pub fn is_predicate(self) -> bool {
        matches!(
            self,
            BinaryKind::Greater
                | BinaryKind::Less
                | BinaryKind::Equal
                | BinaryKind::GreaterOrEqual
                | BinaryKind::LessOrEqual
                | BinaryKind::And
                | BinaryKind::Or
                | BinaryKind::Xor
        )
    }
    /// And, Or, Xor: BOOL inputs only.
    pub fn is_logic(self) -> bool {
        matches!(self, BinaryKind::And | BinaryKind::Or | BinaryKind::Xor)
    }
    /// Min and Max take any number of inputs from one up.
    pub fn is_variadic(self) -> bool {
        matches!(self, BinaryKind::Min | BinaryKind::Max)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum UnaryKind {
    Relu,
    LeakyRelu(f32),
    Sigmoid,
    HardSigmoid(f32, f32),
    HardSwish,
    Tanh,
    Erf,
    /// `true` for the tanh approximation.
    Gelu(bool),
    Exp,
    Sqrt,
    Neg,
    Abs,
    Not,
    Sign,
    /// Round half to even.
    Round,
    Floor,
    Ceil,
    Reciprocal,
    Log,
    /// ln(1 + e^x).
    Softplus,
    Sin,
    Cos,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ResizeMode {
    Nearest,
    Linear,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum CoordTransform {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfCropAndResize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum NearestMode {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum KeepAspect {
    Stretch,
    NotLarger,
    NotSmaller,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Resize {
    pub mode: ResizeMode,
    pub coord: CoordTransform,
    pub nearest: NearestMode,
    pub exclude_outside: bool,
    pub extrapolation_value: f32,
    pub antialias: bool,
    pub axes: Option<Vec<i64>>,
    pub keep_aspect: KeepAspect,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum PadMode {
    Constant,
    Reflect,
    Edge,
    Wrap,
}

/// How the raw scores `q . k^T` are scaled before the key bias, kept in the graph's own form:
/// `x / d` and `x * (1 / d)` round differently, and fusion must not change results.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum ScoreScale {
    /// `scores * s`; `Mul(1.0)` when the graph has no scale node (already folded into q).
    Mul(f32),
    /// `scores / d`.
    Div(f32),
}

impl ScoreScale {
    #[inline(always)]
    pub fn apply(self, x: f32) -> f32 {
        match self {
            ScoreScale::Mul(s) => x * s,
            ScoreScale::Div(d) => x / d,
        }
    }
    /// |factor| the scores are multiplied by, for bounds on the scaled scores.
    pub fn magnitude(self) -> f64 {
        match self {
            ScoreScale::Mul(s) => (s as f64).abs(),
            ScoreScale::Div(d) => 1.0 / (d as f64).abs(),
        }
    }
}

/// Scaled dot-product attention, made by `fuse_attention` from
/// `MatMul(Softmax(Add?(scale?(MatMul(q, k^T)), bias), axis=-1), v)`.
///
/// Inputs: `q [B, H, Tq, dk]`, `k [B, H, Tk, dk]` (`[B, H, dk, Tk]` when `k_transposed`),
/// `v [B, H, Tk, dv]`, optional `bias` (input 3) broadcastable to `[B, H, Tq, Tk]` without
/// growing it, and, only when `key_mask` is set, the token mask `M` (input 4).
/// Output `[B, H, Tq, dv]` = `softmax(scale(q . k^T) + bias, last axis) . v`.
///
/// `key_mask`: the pass proved that `bias` is `(M - 1) * c` laid out as `[B, 1, 1, Tk]`, with
/// `M` `[B, Tk]` or `[B, Tk, 1]` (row-major order equal to the bias's) and binary because it is
/// a `Cast` of a BOOL value. The bias input stays, so the dense kernel needs nothing else; `M`
/// rides along as input 4 so an executor can list the active tokens (M = 1) and run the
/// active-token kernel instead (see `dynaspa_backends::cpu::attention_active`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Attention {
    pub heads: usize,
    pub scale: ScoreScale,
    pub k_transposed: bool,
    pub key_mask: Option<KeyMaskBias>,
}

/// `bias = (M - 1) * c`: 0 on active keys, `-c` on inactive ones.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct KeyMaskBias {
    pub c: f32,
}

/// One IR operator. Input order is ONNX's for the op; optional inputs may be absent.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// X, W, [B]
    Conv(Conv),
    /// X, W, [B]
    ConvTranspose(ConvTranspose),
    /// X, scale, B, mean, var (inference form only)
    BatchNormalization {
        epsilon: f32,
    },
    Unary(UnaryKind),
    /// X, [min], [max]
    Clip,
    /// A, B with numpy broadcasting; Min and Max take one or more inputs (ONNX's variadic
    /// form), combined left to right.
    Binary(BinaryKind),
    /// A, B with numpy matmul semantics.
    MatMul,
    /// A, B, [C]
    Gemm {
        alpha: f32,
        beta: f32,
        trans_a: bool,
        trans_b: bool,
    },
    /// `legacy`: opset < 13, input coerced to 2-D at `axis`.
    Softmax {
        axis: i64,
        legacy: bool,
    },
    /// X, scale, [B]
    LayerNormalization {
        axis: i64,
        epsilon: f32,
    },
    /// X, scale, B
    InstanceNormalization {
        epsilon: f32,
    },
    /// X, scale, bias; `per_channel_affine`: opset 21 (scale/bias per channel) vs 18 (per group).
    GroupNormalization {
        num_groups: usize,
        epsilon: f32,
        per_channel_affine: bool,
    },
    /// X, scale, bias: the per-channel factor and offset GroupNormalization with the same
    /// attributes applies to X (`y = x * factor + offset`), as `[2 N, C, 1, ...]`: rows `0..N`
    /// the factors `scale / sigma`, rows `N..2N` the offsets `bias - mean * scale / sigma`.
    /// Delta mode holds a norm's statistics with it (graph/delta.rs); not an ONNX op.
    NormScaleShift {
        num_groups: usize,
        epsilon: f32,
        per_channel_affine: bool,
    },
    MaxPool(Pool),
    AveragePool(Pool),
    GlobalAveragePool,
    /// X, [axes]
    Reduce(Reduce),
    /// data, shape
    Reshape {
        allowzero: bool,
    },
    Flatten {
        axis: i64,
    },
    /// Empty `perm` means reverse.
    Transpose {
        perm: Vec<usize>,
    },
    Concat {
        axis: i64,
    },
    /// data, starts, ends, [axes], [steps]
    Slice,
    /// X, [split]; `split` from the attribute in older opsets; `num_outputs` from opset 18.
    Split {
        axis: i64,
        split: Option<Vec<i64>>,
        num_outputs: Option<usize>,
    },
    /// data, indices
    Gather {
        axis: i64,
    },
    /// data, [axes]; `axes` from the attribute in older opsets.
    Squeeze {
        axes: Option<Vec<i64>>,
    },
    Unsqueeze {
        axes: Option<Vec<i64>>,
    },
    /// input, shape
    Expand,
    Shape {
        start: i64,
        end: Option<i64>,
    },
    /// The value, already decoded from whichever attribute carried it.
    Constant {
        value: std::sync::Arc<crate::tensor::Tensor>,
    },
    /// shape input; value is a one-element tensor (float 0 when absent).
    ConstantOfShape {
        value: std::sync::Arc<crate::tensor::Tensor>,
    },
    Identity,
    Cast {
        to: crate::tensor::DType,
    },
    /// X, [roi], [scales], [sizes]
    Resize(Resize),
    /// data, pads, [constant_value], [axes]
    Pad {
        mode: PadMode,
    },
    /// condition, X, Y
    Where,
    /// x, axis
    CumSum {
        exclusive: bool,
        reverse: bool,
    },
    /// q, k, v, [bias], [mask]: not an ONNX op, made by `fuse_attention`.
    Attention(Attention),
}

impl Op {
    /// Short name for logs, `inspect` and error messages (ONNX op type where one exists).
    pub fn name(&self) -> &'static str {
        match self {
            Op::Conv(_) => "Conv",
            Op::ConvTranspose(_) => "ConvTranspose",
            Op::BatchNormalization { .. } => "BatchNormalization",
            Op::Unary(u) => match u {
                UnaryKind::Relu => "Relu",
                UnaryKind::LeakyRelu(_) => "LeakyRelu",
                UnaryKind::Sigmoid => "Sigmoid",
                UnaryKind::HardSigmoid(..) => "HardSigmoid",
                UnaryKind::HardSwish => "HardSwish",
                UnaryKind::Tanh => "Tanh",
                UnaryKind::Erf => "Erf",
                UnaryKind::Gelu(_) => "Gelu",
                UnaryKind::Exp => "Exp",
                UnaryKind::Sqrt => "Sqrt",
                UnaryKind::Neg => "Neg",
                UnaryKind::Abs => "Abs",
                UnaryKind::Not => "Not",
                UnaryKind::Sign => "Sign",
                UnaryKind::Round => "Round",
                UnaryKind::Floor => "Floor",
                UnaryKind::Ceil => "Ceil",
                UnaryKind::Reciprocal => "Reciprocal",
                UnaryKind::Log => "Log",
                UnaryKind::Softplus => "Softplus",
                UnaryKind::Sin => "Sin",
                UnaryKind::Cos => "Cos",
            },
            Op::Clip => "Clip",
            Op::Binary(b) => match b {
                BinaryKind::Add => "Add",
                BinaryKind::Sub => "Sub",
                BinaryKind::Mul => "Mul",
                BinaryKind::Div => "Div",
                BinaryKind::Pow => "Pow",
                BinaryKind::Mod { .. } => "Mod",
                BinaryKind::Greater => "Greater",
                BinaryKind::Less => "Less",
                BinaryKind::Equal => "Equal",
                BinaryKind::And => "And",
                BinaryKind::GreaterOrEqual => "GreaterOrEqual",
                BinaryKind::LessOrEqual => "LessOrEqual",
                BinaryKind::Or => "Or",
                BinaryKind::Xor => "Xor",
                BinaryKind::Min => "Min",
                BinaryKind::Max => "Max",
            },
            Op::MatMul => "MatMul",
            Op::Gemm { .. } => "Gemm",
            Op::Softmax { .. } => "Softmax",
            Op::LayerNormalization { .. } => "LayerNormalization",
            Op::InstanceNormalization { .. } => "InstanceNormalization",
            Op::GroupNormalization { .. } => "GroupNormalization",
            Op::NormScaleShift { .. } => "NormScaleShift",
            Op::MaxPool(_) => "MaxPool",
            Op::AveragePool(_) => "AveragePool",
            Op::GlobalAveragePool => "GlobalAveragePool",
            Op::Reduce(r) => match r.kind {
                ReduceKind::Mean => "ReduceMean",
                ReduceKind::Sum => "ReduceSum",
                ReduceKind::Max => "ReduceMax",
            },
            Op::Reshape { .. } => "Reshape",
            Op::Flatten { .. } => "Flatten",
            Op::Transpose { .. } => "Transpose",
            Op::Concat { .. } => "Concat",
            Op::Slice => "Slice",
            Op::Split { .. } => "Split",
            Op::Gather { .. } => "Gather",
            Op::Squeeze { .. } => "Squeeze",
            Op::Unsqueeze { .. } => "Unsqueeze",
            Op::Expand => "Expand",
            Op::Shape { .. } => "Shape",
            Op::Constant { .. } => "Constant",
            Op::ConstantOfShape { .. } => "ConstantOfShape",
            Op::Identity => "Identity",
            Op::Cast { .. } => "Cast",
            Op::Resize(_) => "Resize",
            Op::Pad { .. } => "Pad",
            Op::Where => "Where",
            Op::CumSum { .. } => "CumSum",
            Op::Attention(_) => "Attention",
        }
    }
}
