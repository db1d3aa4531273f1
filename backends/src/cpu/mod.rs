//! The CPU backend: dense reference kernels on host tensors, multi-threaded with rayon.

mod attention;
mod attention_active;
#[cfg(test)]
mod attention_tests;
mod binary;
mod broadcast;
mod conv;
mod conv_direct;
mod conv_dw;
#[cfg(target_arch = "x86_64")]
mod conv_dw_lanes;
mod conv_gemm;
#[cfg(target_arch = "x86_64")]
mod conv_pack;
mod conv_rows;
#[cfg(target_arch = "x86_64")]
mod conv_simd;
mod conv_transpose;
#[cfg(target_arch = "x86_64")]
mod conv_winograd;
#[cfg(test)]
mod dense_fuzz;
mod elem;
mod elementwise;
mod executor;
mod gemm_util;
mod im2col;
mod index;
mod kernel_util;
mod mathf;
mod matmul;
mod movement;
mod norm;
#[cfg(test)]
mod ops_testkit;
mod pad;
mod par;
mod pool;
mod pool2d;
mod reduce;
mod resize;
mod softmax;
pub mod sparse;
pub(crate) mod sparse_exec;
mod strided;
#[cfg(test)]
mod test_util;
mod unary_f32;
mod zero_pool;

pub use attention::{attention_dense, AttnShape, ScoreBias};
pub use attention_active::{active_tokens, attention_active, attention_node_active};
pub use executor::{CpuBackend, CpuEvaluator};
/// Index planning the GPU backends share with the CPU kernels, so both read the same positions.
pub(crate) use pad::pad_maps;
pub(crate) use resize::{resize_plans, AxisPlan};
pub use sparse_exec::{cpu_device_id, SparseOpTimer};

use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::graph::Op;
use dynaspa_runtime::{Error, Result, Tensor};

/// The required input `i` of an op, or an error naming it.
pub(crate) fn input<'a>(ins: &[Option<&'a Tensor>], i: usize, op: &str) -> Result<&'a Tensor> {
    ins.get(i).copied().flatten().ok_or_else(|| Error::Other(format!("{op}: required input {i} is missing")))
}

/// Evaluates one op. `outs` are the output specs shape inference computed.
pub fn eval_op(op: &Op, ins: &[Option<&Tensor>], outs: &[TensorSpec]) -> Result<Vec<Tensor>> {
    let one = |r: Result<Tensor>| r.map(|t| vec![t]);
    match op {
        Op::Conv(p) => one(conv::conv(p, ins, &outs[0])),
        Op::ConvTranspose(p) => one(conv_transpose::conv_transpose(p, ins, &outs[0])),
        Op::BatchNormalization { epsilon } => one(norm::batch_norm(*epsilon, ins, &outs[0])),
        Op::Unary(k) => one(elementwise::unary(*k, ins, &outs[0])),
        Op::Clip => one(elementwise::clip(ins, &outs[0])),
        Op::Binary(k) => one(elementwise::binary(*k, ins, &outs[0])),
        Op::MatMul => one(matmul::matmul(ins, &outs[0])),
        Op::Gemm { alpha, beta, trans_a, trans_b } => one(matmul::gemm(*alpha, *beta, *trans_a, *trans_b, ins, &outs[0])),
        Op::Softmax { axis, legacy } => one(softmax::softmax(*axis, *legacy, ins, &outs[0])),
        Op::LayerNormalization { axis, epsilon } => one(norm::layer_norm(*axis, *epsilon, ins, &outs[0])),
        Op::InstanceNormalization { epsilon } => one(norm::instance_norm(*epsilon, ins, &outs[0])),
        Op::GroupNormalization { num_groups, epsilon, per_channel_affine } => {
            one(norm::group_norm(*num_groups, *epsilon, *per_channel_affine, ins, &outs[0]))
        }
        Op::NormScaleShift { num_groups, epsilon, per_channel_affine } => {
            one(norm::norm_scale_shift(*num_groups, *epsilon, *per_channel_affine, ins, &outs[0]))
        }
        Op::MaxPool(p) => one(pool::max_pool(p, ins, &outs[0])),
        Op::AveragePool(p) => one(pool::average_pool(p, ins, &outs[0])),
        Op::GlobalAveragePool => one(pool::global_average_pool(ins, &outs[0])),
        Op::Reduce(r) => one(reduce::reduce(r, ins, &outs[0])),
        Op::Reshape { .. } | Op::Flatten { .. } | Op::Squeeze { .. } | Op::Unsqueeze { .. } | Op::Identity => {
            one(movement::reshape_like(ins, &outs[0]))
        }
        Op::Transpose { perm } => one(movement::transpose(perm, ins, &outs[0])),
        Op::Concat { axis } => one(movement::concat(*axis, ins, &outs[0])),
        Op::Slice => one(movement::slice(ins, &outs[0])),
        Op::Split { axis, .. } => movement::split(*axis, ins, outs),
        Op::Gather { axis } => one(movement::gather(*axis, ins, &outs[0])),
        Op::Expand => one(movement::expand(ins, &outs[0])),
        Op::Shape { start, end } => one(movement::shape(*start, *end, ins, &outs[0])),
        Op::Constant { value } => Ok(vec![(**value).clone()]),
        Op::ConstantOfShape { value } => one(movement::constant_of_shape(value, &outs[0])),
        Op::Cast { to } => one(elementwise::cast(*to, ins, &outs[0])),
        Op::Resize(p) => one(resize::resize(p, ins, &outs[0])),
        Op::Pad { mode } => one(pad::pad(*mode, ins, &outs[0])),
        Op::Where => one(elementwise::where_(ins, &outs[0])),
        Op::CumSum { exclusive, reverse } => one(reduce::cumsum(*exclusive, *reverse, ins, &outs[0])),
        Op::Attention(a) => one(attention::attention(a, ins, &outs[0])),
    }
}
