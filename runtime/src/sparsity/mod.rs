//! Spatial masks on the host: [`BitMask`] (a packed H×W binary map), DISTiles made from it
//! ([`tiles`]), and the mask datasets the tuner samples from ([`MaskDataset`], the `.dsm` files
//! under `models/masks/`, format in `models/masks/FORMAT.md`).

pub mod bitmask;
pub mod dataset;
pub mod tiles;

pub use bitmask::BitMask;
pub use dataset::{MapInfo, MaskDataset, SparseOp};
pub use tiles::{DisTile, Granularity, TileSet};
