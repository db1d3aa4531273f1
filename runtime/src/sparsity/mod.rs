//! Spatial masks on the host: [`BitMask`] (a packed H×W binary map), DISTiles made from it
//! ([`tiles`] aligned, [`components`] per connected component, [`writes`] for overlaps), and
//! the mask datasets the tuner samples from ([`MaskDataset`], the `.dsm` files under
//! `models/masks/`, format in `models/masks/FORMAT.md`).

pub mod bitmask;
pub mod components;
pub mod dataset;
pub mod tiles;
mod words;
pub mod writes;

#[cfg(test)]
pub(crate) mod test_rng;
#[cfg(test)]
mod tile_props;
#[cfg(test)]
mod tile_timing;

pub use bitmask::BitMask;
pub use components::Component;
pub use dataset::{MapInfo, MaskDataset, SparseOp};
pub use tiles::{DisTile, Granularity, TileSet};
pub use writes::WritePlan;
