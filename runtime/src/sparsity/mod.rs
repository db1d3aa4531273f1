//! Spatial masks on the host: [`BitMask`] (a packed H×W binary map) and the mask datasets the
//! tuner samples from ([`MaskDataset`], the `.dsm` files under `models/masks/`, format in
//! `models/masks/FORMAT.md`).

pub mod bitmask;
pub mod dataset;

pub use bitmask::BitMask;
pub use dataset::{MapInfo, MaskDataset, SparseOp};
