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
    Greater,
    Less,
    Equal,
    And,
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

/// One IR operator. Input order is ONNX's for the op; optional inputs may be absent.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// X, W, [B]
    Conv(Conv),
    /// X, W, [B]
    ConvTranspose(ConvTranspose),
    /// X, scale, B, mean, var (inference form only)
    BatchNormalization { epsilon: f32 },
    Unary(UnaryKind),
    /// X, [min], [max]
    Clip,
    /// A, B with numpy broadcasting.
    Binary(BinaryKind),
    /// A, B with numpy matmul semantics.
    MatMul,
    /// A, B, [C]
    Gemm { alpha: f32, beta: f32, trans_a: bool, trans_b: bool },
    /// `legacy`: opset < 13, input coerced to 2-D at `axis`.
    Softmax { axis: i64, legacy: bool },
    /// X, scale, [B]
    LayerNormalization { axis: i64, epsilon: f32 },
    /// X, scale, B
    InstanceNormalization { epsilon: f32 },
    /// X, scale, bias; `per_channel_affine`: opset 21 (scale/bias per channel) vs 18 (per group).
    GroupNormalization { num_groups: usize, epsilon: f32, per_channel_affine: bool },
    MaxPool(Pool),
    AveragePool(Pool),
    GlobalAveragePool,
    /// X, [axes]
    Reduce(Reduce),
    /// data, shape
    Reshape { allowzero: bool },
    Flatten { axis: i64 },
    /// Empty `perm` means reverse.
    Transpose { perm: Vec<usize> },
    Concat { axis: i64 },
    /// data, starts, ends, [axes], [steps]
    Slice,
    /// X, [split]; `split` from the attribute in older opsets; `num_outputs` from opset 18.
    Split { axis: i64, split: Option<Vec<i64>>, num_outputs: Option<usize> },
    /// data, indices
    Gather { axis: i64 },
    /// data, [axes]; `axes` from the attribute in older opsets.
    Squeeze { axes: Option<Vec<i64>> },
    Unsqueeze { axes: Option<Vec<i64>> },
    /// input, shape
    Expand,
    Shape { start: i64, end: Option<i64> },
    /// The value, already decoded from whichever attribute carried it.
    Constant { value: std::sync::Arc<crate::tensor::Tensor> },
    /// shape input; value is a one-element tensor (float 0 when absent).
    ConstantOfShape { value: std::sync::Arc<crate::tensor::Tensor> },
    Identity,
    Cast { to: crate::tensor::DType },
    /// X, [roi], [scales], [sizes]
    Resize(Resize),
    /// data, pads, [constant_value], [axes]
    Pad { mode: PadMode },
    /// condition, X, Y
    Where,
    /// x, axis
    CumSum { exclusive: bool, reverse: bool },
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
            },
            Op::Clip => "Clip",
            Op::Binary(b) => match b {
                BinaryKind::Add => "Add",
                BinaryKind::Sub => "Sub",
                BinaryKind::Mul => "Mul",
                BinaryKind::Div => "Div",
                BinaryKind::Pow => "Pow",
                BinaryKind::Greater => "Greater",
                BinaryKind::Less => "Less",
                BinaryKind::Equal => "Equal",
                BinaryKind::And => "And",
            },
            Op::MatMul => "MatMul",
            Op::Gemm { .. } => "Gemm",
            Op::Softmax { .. } => "Softmax",
            Op::LayerNormalization { .. } => "LayerNormalization",
            Op::InstanceNormalization { .. } => "InstanceNormalization",
            Op::GroupNormalization { .. } => "GroupNormalization",
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
        }
    }
}
