//! Which positions each tile stores, so that a set of possibly overlapping tiles stores every
//! active position of its mask exactly once.
//!
//! Per-component tiles overlap where one component's tile reaches into a neighbour's bounding
//! box. A kernel that stored every active position of its tile would store those twice: harmless
//! for a plain overwrite of bit-identical values, wrong for anything that accumulates (a fused
//! residual add, atomics, merging into cached activations). So overlaps are deduplicated: an
//! active position belongs to the first tile, in tile order, whose extent holds it.

use super::tiles::{Granularity, TileSet};
use super::words::{self, low_bits};
use super::BitMask;
use crate::error::{Error, Result};

/// Per tile, a bit per tile position (row-major within the tile: bit `dy * g.w + dx`) saying
/// whether the kernel stores that position. Phantom and inactive positions are never set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WritePlan {
    granularity: Granularity,
    words_per_tile: usize,
    bits: Vec<u64>,
}

impl WritePlan {
    pub fn granularity(&self) -> Granularity {
        self.granularity
    }
    /// Words per tile: `ceil(g.h * g.w / 64)`.
    pub fn words_per_tile(&self) -> usize {
        self.words_per_tile
    }
    /// All tiles' words back to back (tile `i` at `i * words_per_tile()`): the device upload.
    pub fn words(&self) -> &[u64] {
        &self.bits
    }
    /// Tile `i`'s words, or `None` past the last tile.
    pub fn tile_words(&self, i: usize) -> Option<&[u64]> {
        self.bits.get(i * self.words_per_tile..(i + 1) * self.words_per_tile)
    }
    /// Whether tile `i` stores its position `(dy, dx)` (false for anything out of range).
    pub fn writes(&self, i: usize, dy: usize, dx: usize) -> bool {
        if dy >= self.granularity.h as usize || dx >= self.granularity.w as usize {
            return false;
        }
        let b = dy * self.granularity.w as usize + dx;
        self.tile_words(i).is_some_and(|w| (w[b / 64] >> (b % 64)) & 1 == 1)
    }
    /// Number of positions tile `i` stores.
    pub fn count(&self, i: usize) -> usize {
        self.tile_words(i).map_or(0, |w| w.iter().map(|x| x.count_ones() as usize).sum())
    }
}

impl TileSet {
    /// The write plan of these tiles over `mask` (the mask they were made from, or any of the
    /// same size): tile `i` stores the active positions of its in-bounds extent that no tile
    /// before it stores. Together the tiles then store every active position they cover exactly
    /// once, and nothing else. Errors if `mask` has another size or a tile's origin lies outside
    /// the mask (possible only for hand-made tile sets).
    pub fn positions_written_once(&self, mask: &BitMask) -> Result<WritePlan> {
        if (mask.height(), mask.width()) != (self.height, self.width) {
            return Err(Error::Other(format!(
                "write plan: tiles are for a {}x{} mask, got a {}x{} one",
                self.height,
                self.width,
                mask.height(),
                mask.width()
            )));
        }
        let g = self.granularity.effective();
        let wpt = g.area().div_ceil(64);
        let mut bits = vec![0u64; wpt * self.tiles.len()];
        let raw = mask.words();
        let width = self.width;
        let mut claimed = vec![0u64; raw.len()];
        for (i, &t) in self.tiles.iter().enumerate() {
            let (y0, x0) = (t.y as usize, t.x as usize);
            if y0 >= self.height || x0 >= self.width {
                return Err(Error::Other(format!(
                    "write plan: tile {i} at (y {y0}, x {x0}) lies outside the {}x{} mask",
                    self.height, self.width
                )));
            }
            let y1 = (y0 + g.h as usize).min(self.height);
            let x1 = (x0 + g.w as usize).min(width);
            let tile = &mut bits[i * wpt..(i + 1) * wpt];
            for y in y0..y1 {
                let mut c = x0;
                while c < x1 {
                    let n = (x1 - c).min(64);
                    let off = y * width + c;
                    let m = words::load64(raw, off) & !words::load64(&claimed, off) & low_bits(n);
                    if m != 0 {
                        words::or_store(&mut claimed, off, n, &[m]);
                        words::or_store(tile, (y - y0) * g.w as usize + (c - x0), n, &[m]);
                    }
                    c += n;
                }
            }
        }
        Ok(WritePlan { granularity: g, words_per_tile: wpt, bits })
    }
}
