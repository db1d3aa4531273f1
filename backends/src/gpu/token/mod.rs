//! Token ops (A-ViT): projections and attention over the active tokens of an in-graph token
//! mask. `select` decides which run over active tokens and folds a projection's epilogue,
//! `lower` lowers them (attention as ordinary launches), `launches` holds the mask's compaction
//! and the token GEMM as launches, `poly` makes projections PolyKernel ops (the compaction in
//! the bitmask kernel's place), `knobs` maps the sparse conv's GEMM knobs onto the token GEMM,
//! and `timer` times a projection for the tuner.
//! Their kernels are kernels/token.cl.

pub mod knobs;
pub(crate) mod launches;
pub(crate) mod lower;
pub(crate) mod poly;
pub(crate) mod select;
pub(crate) mod timer;

#[cfg(test)]
mod tests;
