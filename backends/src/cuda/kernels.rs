//! The CUDA backend's own kernel sources (`kernels/`) and every schedule each is compiled
//! with, which is what CI compiles through NVRTC. `bitmask.cu` is CUDA-only (warp votes);
//! `dialect_check.cl` is written in the shared dialect and checks the CUDA prelude.

use crate::gpu::KernelSpec;

pub mod bitmask;

pub const BITMASK_FILE: &str = "bitmask.cu";
pub const BITMASK_SOURCE: &str = include_str!("kernels/bitmask.cu");
pub const DIALECT_FILE: &str = "dialect_check.cl";
pub const DIALECT_SOURCE: &str = include_str!("kernels/dialect_check.cl");

/// Block sizes the bitmask kernel is built for: one warp per 32 positions, so small masks
/// take the small block.
pub const BITMASK_BLOCKS: [u32; 2] = [256, 1024];
/// Tile sides and activations of `dialect_check.cl`.
pub const DIALECT_TILES: [u32; 3] = [8, 16, 32];
pub const DIALECT_ACTS: [u32; 4] = [0, 1, 2, 3];

pub fn bitmask_spec(block: u32) -> KernelSpec {
    KernelSpec { file: BITMASK_FILE, source: BITMASK_SOURCE, entry: "bitmask_tiles", defines: vec![("BLOCK".into(), block.to_string())] }
}

pub fn axpb_act_spec(act: u32) -> KernelSpec {
    KernelSpec { file: DIALECT_FILE, source: DIALECT_SOURCE, entry: "axpb_act", defines: vec![("ACT".into(), act.to_string())] }
}

pub fn transpose_spec(tile: u32) -> KernelSpec {
    KernelSpec { file: DIALECT_FILE, source: DIALECT_SOURCE, entry: "transpose_scale", defines: vec![("TILE".into(), tile.to_string())] }
}

/// Every (source, entry, schedule) of the CUDA backend's own kernels.
pub fn all_specs() -> Vec<KernelSpec> {
    let mut v: Vec<KernelSpec> = BITMASK_BLOCKS.iter().map(|&b| bitmask_spec(b)).collect();
    v.extend(DIALECT_ACTS.iter().map(|&a| axpb_act_spec(a)));
    v.extend(DIALECT_TILES.iter().map(|&t| transpose_spec(t)));
    v
}

#[cfg(test)]
mod bitmask_emulated_tests;
