//! Sparse execution on the GPU backends: spatially masked convs run on DISTiles of the frame's
//! mask, chosen per frame from a PolyKernel. `split` decides which annotated nodes run sparsely,
//! `build` lowers them at compile time (members, fills, calibration), `step` runs them per frame,
//! `meta` is the layout of the bitmask kernel's results, `schedules` the kernel variants and
//! `features` the paths whose choice depends on the device.
//! Token ops (A-ViT): `token` decides which run over active tokens and folds their epilogues,
//! `lower/token.rs` lowers them; projections become PolyKernel ops too (`token_poly`), with the
//! mask's compaction in the bitmask kernel's place, and attention stays ordinary launches.

pub(crate) mod build;
#[cfg(test)]
pub(crate) mod ci_schedules;
pub mod features;
pub mod knobs;
pub(crate) mod meta;
pub(crate) mod schedules;
pub(crate) mod split;
pub(crate) mod step;
pub(crate) mod token;
pub(crate) mod token_poly;
pub(crate) mod token_timer;
pub(crate) mod timer;

/// Work-items of bitmask.cl's one work-group per image (fewer where the device allows fewer).
pub(crate) const BITMASK_BLOCK: u32 = 256;

#[cfg(test)]
mod bitmask_tests;
#[cfg(test)]
mod token_tests;
