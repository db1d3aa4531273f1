//! What the GPU's sparse op families (`sparse_conv`, `token`) share: `split` decides which
//! annotated nodes run sparsely, `bitmask` turns a frame's mask into DISTile counts and lists on
//! the device, `meta` is the layout of its results, `step` runs every PolyKernel op per frame
//! (member choice from the counts, fills, lagged readback), `profile` takes PolyKernels from a
//! tuned profile, and `timer` is what the tuner times an op through.

pub(crate) mod bitmask;
pub(crate) mod meta;
pub(crate) mod profile;
pub(crate) mod split;
pub(crate) mod step;
pub mod timer;

#[cfg(test)]
pub(crate) mod bitmask_tests;
