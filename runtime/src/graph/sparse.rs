//! How a node runs sparsely: the annotation `detect_sparse_regions` leaves on a node whose output
//! is multiplied by a binary map (see shared/DESIGN.md, "How masks are found in a model").

use super::ValueId;
use serde::Serialize;

/// What the map ranges over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum MaskKind {
    /// `[N, 1, H, W]` over the output positions of a Conv/ConvTranspose.
    Spatial,
    /// One bit per token, `[N, T]` or `[N, T, 1]`, over the rows of a MatMul/Gemm output `[N, T, C]`.
    Token,
}

/// Where the map comes from, for `inspect` and for deciding the fill policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum MaskSource {
    /// Thresholded output of a mask unit inside the graph (DynConv); `node` makes the binary map.
    InGraph { node: String },
    /// Cumulative halting scores compared with a threshold (A-ViT).
    Halting { node: String },
    /// A model input (SIGE: the edit mask given by the caller).
    ModelInput { name: String },
}

/// What the inactive outputs hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum FillPolicy {
    /// Zeros, as the graph's multiplication by the mask defines.
    Zero,
    /// The activations of the last computed frame (SIGE, video).
    Cached,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SparseSpec {
    /// The binary map the node's results are multiplied by (values exactly 0 or 1).
    pub mask: ValueId,
    pub kind: MaskKind,
    pub source: MaskSource,
    /// Halo between the source mask and `mask`, in output positions along (y, x): a 3x3 max-pool
    /// of the source gives (1, 1).
    pub dilation: [usize; 2],
    pub fill: FillPolicy,
    /// The multiplication by `mask` was folded into this node: its output is the product and the
    /// kernel writes only active positions. When false the Mul stays in the graph (an epilogue
    /// the kernel cannot fuse sits between them) and the node's inactive outputs are don't-care.
    pub fused_mul: bool,
}
