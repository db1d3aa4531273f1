//! How a node runs sparsely: the annotation `detect_sparse_regions` leaves on a node whose output
//! is multiplied by a binary map (see shared/DESIGN.md, "How masks are found in a model").

use super::ValueId;
use serde::Serialize;

/// What the map ranges over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum MaskKind {
    /// `[N, 1, H, W]` over the output positions of a Conv/ConvTranspose.
    Spatial,
    /// One bit per token, `[N or 1, T, 1]`, over the rows of a MatMul output `[N, T, C]` (or
    /// `[T, 1]` over a 2-D MatMul/Gemm output `[T, C]`).
    Token,
}

/// Where the map comes from, for `inspect` and for deciding the fill policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum MaskSource {
    /// A threshold computed inside the graph: a mask unit's logit compared with a constant
    /// (DynConv), or any other in-graph comparison / Cast to bool; `node` makes the binary map.
    InGraph { node: String },
    /// Cumulative halting scores (a sum of Sigmoid terms) kept while below a limit (A-ViT);
    /// `node` is the comparison.
    Halting { node: String },
    /// A model input (SIGE: the edit mask given by the caller). Its values cannot be proven
    /// binary at load time; the executor checks the mask on every frame.
    ModelInput { name: String },
}

/// What the inactive outputs hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum FillPolicy {
    /// Zeros, as the graph's multiplication by the mask defines.
    Zero,
    /// The activations of the last computed frame (SIGE, video).
    Cached,
    /// The conv's fused residual input (input 3) through the conv's activation: a residual
    /// join `act(Mul(conv, M) + r)` folded into the conv (graph/sparse_residual.rs).
    Residual,
    /// The whole result is computed on frames whose mask is full (every position changed) and
    /// kept as it is on the others: a norm's statistics held from the last whole frame (delta
    /// mode, `Spread::Stride`). The mask is the plane of the node's input, not of its result.
    Held,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SparseSpec {
    /// The binary map the node's results are multiplied by (values exactly 0 or 1).
    pub mask: ValueId,
    pub kind: MaskKind,
    pub source: MaskSource,
    /// Halo between the source mask and `mask`, in output positions along (y, x): a 3x3 max-pool
    /// of the source gives (1, 1). A resampling max-pool (kernel = stride) adds none and divides
    /// an earlier halo by its stride, rounded up; an asymmetric window counts its longer side, so
    /// the value is an upper bound there.
    pub dilation: [usize; 2],
    pub fill: FillPolicy,
    /// The multiplication by `mask` was folded into this node: its output is the product and the
    /// kernel writes only active positions. When false the Mul stays in the graph (an epilogue
    /// the kernel cannot fuse sits between them) and the node's inactive outputs are don't-care
    /// as long as the epilogue `f` keeps them finite: the Mul turns them into `f(x) * 0`, and
    /// `0 * inf` is NaN (zeros are the safe choice; uninitialised memory is not).
    pub fused_mul: bool,
}
