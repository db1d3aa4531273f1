//! DISTiles: granularity-sized blocks of output positions holding at least one active bit.
//!
//! The types here are the contract between the mask side (this crate) and every backend's
//! sparse kernels. Aligned tiles start at multiples of the granularity; per-component tiles
//! start at a connected component's bounding box and may overlap a neighbour's.

use super::BitMask;
use serde::{Deserialize, Serialize};

/// DISTile size along (y, x); both at least 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Granularity {
    pub h: u16,
    pub w: u16,
}

impl Granularity {
    pub const fn new(h: u16, w: u16) -> Granularity {
        Granularity { h, w }
    }
}

impl std::fmt::Display for Granularity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}", self.h, self.w)
    }
}

/// Top-left output position of one tile. Positions of the tile past the mask's edge are
/// phantom: kernels read them as 0 and never write them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DisTile {
    pub y: u32,
    pub x: u32,
}

/// The tiles of one mask at one granularity, in row-major order of their origins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileSet {
    pub granularity: Granularity,
    /// Size of the mask the tiles were made from.
    pub height: usize,
    pub width: usize,
    pub tiles: Vec<DisTile>,
}

impl TileSet {
    pub fn len(&self) -> usize {
        self.tiles.len()
    }
    pub fn is_empty(&self) -> bool {
        self.tiles.is_empty()
    }
    /// In-bounds rows `y0..y1` and columns `x0..x1` of `t` (the phantom part cut off).
    pub fn extent(&self, t: DisTile) -> (usize, usize, usize, usize) {
        let (y0, x0) = (t.y as usize, t.x as usize);
        let y1 = (y0 + self.granularity.h as usize).min(self.height);
        let x1 = (x0 + self.granularity.w as usize).min(self.width);
        (y0, y1, x0, x1)
    }
}

/// Aligned tiles, the reference definition: a tile for every granularity cell holding a set bit.
pub fn aligned_tiles_naive(mask: &BitMask, g: Granularity) -> TileSet {
    let (gh, gw) = (g.h.max(1) as usize, g.w.max(1) as usize);
    let mut tiles = Vec::new();
    for ty in (0..mask.height()).step_by(gh) {
        for tx in (0..mask.width()).step_by(gw) {
            let any = (ty..(ty + gh).min(mask.height()))
                .any(|y| (tx..(tx + gw).min(mask.width())).any(|x| mask.get(y, x)));
            if any {
                tiles.push(DisTile { y: ty as u32, x: tx as u32 });
            }
        }
    }
    TileSet { granularity: g, height: mask.height(), width: mask.width(), tiles }
}
