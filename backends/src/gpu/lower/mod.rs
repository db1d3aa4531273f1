//! Lowering: each node of the graph becomes, once at compile time, a list of kernel launches
//! (kernel, grid, arguments) that `run` replays. One file per op family.

mod attention;
mod conv;
pub(crate) mod ctx;
pub(crate) mod elementwise;
pub(crate) mod geom;
mod matmul;
mod movement;
mod reduce;
mod resize;
pub(crate) mod shapes;
pub(crate) mod vendor_conv;

use crate::gpu::device::GpuDevice;
use ctx::{unsupported, Ctx};
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::graph::{Graph, Node, Op};
use dynaspa_runtime::{Result, Tensor, TensorData};

/// Appends the launches of `cx.node` to `cx.launches`.
pub(crate) fn lower<D: GpuDevice>(cx: &mut Ctx<D>) -> Result<()> {
    let op = &cx.node.op;
    match op {
        Op::Conv(p) => conv::conv(cx, p),
        Op::ConvTranspose(p) => conv::conv_transpose(cx, p),
        Op::MaxPool(p) => conv::pool(cx, p, true),
        Op::AveragePool(p) => conv::pool(cx, p, false),
        Op::BatchNormalization { epsilon } => elementwise::batch_norm(cx, *epsilon),
        Op::Unary(k) => elementwise::unary(cx, *k),
        Op::Binary(k) => elementwise::binary(cx, *k),
        Op::Clip => elementwise::clip(cx),
        Op::Where => elementwise::where_(cx),
        Op::Cast { to } => elementwise::cast(cx, *to),
        Op::MatMul => matmul::matmul(cx),
        Op::Gemm { alpha, beta, trans_a, trans_b } => matmul::gemm(cx, *alpha, *beta, *trans_a, *trans_b),
        Op::Softmax { axis, legacy } => reduce::softmax(cx, *axis, *legacy),
        Op::LayerNormalization { axis, epsilon } => reduce::layer_norm(cx, *axis, *epsilon),
        Op::InstanceNormalization { epsilon } => {
            let c = cx.in_shape(0)?.get(1).copied().unwrap_or(0);
            reduce::group_norm(cx, c, *epsilon, true, false)
        }
        Op::GroupNormalization { num_groups, epsilon, per_channel_affine } => {
            reduce::group_norm(cx, *num_groups, *epsilon, *per_channel_affine, false)
        }
        Op::NormScaleShift { num_groups, epsilon, per_channel_affine } => {
            reduce::group_norm(cx, *num_groups, *epsilon, *per_channel_affine, true)
        }
        Op::GlobalAveragePool => reduce::global_average_pool(cx),
        Op::Reduce(r) => reduce::reduce(cx, r),
        Op::CumSum { exclusive, reverse } => reduce::cumsum(cx, *exclusive, *reverse),
        Op::Transpose { perm } => movement::transpose(cx, perm),
        Op::Concat { axis } => movement::concat(cx, *axis),
        Op::Slice => movement::slice(cx),
        Op::Split { axis, .. } => movement::split(cx, *axis),
        Op::Gather { axis } => movement::gather(cx, *axis),
        Op::Expand => movement::expand(cx),
        Op::Pad { mode } => movement::pad(cx, *mode),
        Op::Resize(p) => resize::resize(cx, p),
        Op::Attention(a) => attention::attention(cx, a),
        // Views share their input's buffer and constants are uploaded: the executor handles both
        // before lowering; reaching here means a node it could not place.
        Op::Reshape { .. }
        | Op::Flatten { .. }
        | Op::Squeeze { .. }
        | Op::Unsqueeze { .. }
        | Op::Identity
        | Op::Shape { .. }
        | Op::Constant { .. }
        | Op::ConstantOfShape { .. } => unsupported(format!("{} whose value is not known at compile time", op.name())),
    }
}

/// The outputs of a node that depend only on shapes and constants (Shape, Constant,
/// ConstantOfShape with a constant shape), computed once at compile time; `None` otherwise.
pub(crate) fn compile_time_outputs(g: &Graph, n: &Node) -> Option<Result<Vec<Tensor>>> {
    match &n.op {
        Op::Shape { start, end } => {
            let dims = &g.values[(*n.inputs.first()?)?].shape;
            let r = dims.len() as i64;
            let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
            let (s, e) = (clamp(*start), clamp(end.unwrap_or(r)));
            let v: Vec<i64> = dims[s..e.max(s)].iter().map(|&d| d as i64).collect();
            Some(Tensor::new(vec![v.len()], TensorData::I64(v)).map(|t| vec![t]))
        }
        Op::Constant { value } => Some(Ok(vec![(**value).clone()])),
        Op::ConstantOfShape { .. } => {
            let ins: Option<Vec<Option<&Tensor>>> =
                n.inputs.iter().map(|i| i.map(|v| g.values[v].constant.as_deref()).map_or(Some(None), |c| c.map(Some))).collect();
            let ins = ins?;
            let specs: Vec<TensorSpec> =
                n.outputs.iter().map(|&o| TensorSpec { dtype: g.values[o].dtype, shape: g.values[o].shape.clone() }).collect();
            Some(crate::cpu::eval_op(&n.op, &ins, &specs))
        }
        _ => None,
    }
}
