//! DISTiles: granularity-sized blocks of output positions holding at least one active bit.
//!
//! The types here are the contract between the mask side (this crate) and every backend's
//! sparse kernels. Aligned tiles start at multiples of the granularity; per-component tiles
//! ([`BitMask::component_tiles`]) start at a connected component's bounding box and may overlap a
//! neighbour's.
//!
//! What a kernel does with a tile: it computes the tile's in-bounds [`TileSet::extent`] (phantom
//! positions past the mask's height/width are read as 0 and never written) and stores only the
//! positions whose mask bit is set; inactive positions keep what the fill policy put there. For
//! aligned tiles that stores every active position exactly once, since aligned tiles do not
//! overlap. For tiles that may overlap see [`TileSet::positions_written_once`].
//!
//! Aligned tiles are made a row of tiles at a time with word operations: the `h` rows of a tile
//! row are ORed together as bit rows, a window OR of width `w` (log2(w) shift-ORs) puts "any bit
//! in columns x..x+w" at bit x, and the bits at multiples of `w` are the tiles. Counting is a
//! popcount of the same words, so dispatch can count every frame without building tile lists.

use super::words::{self, with_scratch};
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

    /// The granularity tiles are actually made at: a zero side is taken as 1 (a tile always
    /// holds at least one position), so bad sizes from a profile cannot divide by zero.
    pub const fn effective(self) -> Granularity {
        Granularity { h: if self.h == 0 { 1 } else { self.h }, w: if self.w == 0 { 1 } else { self.w } }
    }

    /// Positions in one tile.
    pub const fn area(self) -> usize {
        self.h as usize * self.w as usize
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

    /// The in-bounds positions `(y, x)` of `t`, row-major: what a kernel may write for it.
    pub fn positions(&self, t: DisTile) -> impl Iterator<Item = (usize, usize)> {
        let (y0, y1, x0, x1) = self.extent(t);
        (y0..y1).flat_map(move |y| (x0..x1).map(move |x| (y, x)))
    }

    /// Each tile with its extent `(y0, y1, x0, x1)`, in tile order.
    pub fn extents(&self) -> impl Iterator<Item = (DisTile, (usize, usize, usize, usize))> + '_ {
        self.tiles.iter().map(move |&t| (t, self.extent(t)))
    }

    /// Positions of `t` past the mask's edge (computed as 0 by nobody, written by nobody).
    pub fn phantom(&self, t: DisTile) -> usize {
        let (y0, y1, x0, x1) = self.extent(t);
        self.granularity.area() - (y1.saturating_sub(y0)) * (x1.saturating_sub(x0))
    }

    /// Positions the tiles compute in all: `len() × area` minus the phantom ones (overlapping
    /// positions counted once per tile). Against `count_ones` of the mask it is the waste.
    pub fn computed_positions(&self) -> usize {
        self.tiles.iter().map(|&t| self.granularity.area() - self.phantom(t)).sum()
    }

    /// The tile origins as `u32` pairs `[y0, x0, y1, x1, ...]`: the index list a kernel launch
    /// takes.
    pub fn origins_u32(&self) -> Vec<u32> {
        self.tiles.iter().flat_map(|t| [t.y, t.x]).collect()
    }

    /// The union of the tiles' in-bounds extents as a mask of the same size.
    pub fn coverage(&self) -> BitMask {
        let mut raw = vec![0u64; (self.height * self.width).div_ceil(64)];
        for (_, (y0, y1, x0, x1)) in self.extents() {
            for y in y0..y1 {
                // One row of a tile is a contiguous run of the row-major bits.
                words::set_range(&mut raw, y * self.width + x0, y * self.width + x1);
            }
        }
        BitMask::from_words(self.height, self.width, raw)
    }
}

/// Aligned tiles, the reference definition: a tile for every granularity cell holding a set bit.
/// The tile set records the [effective](Granularity::effective) granularity.
pub fn aligned_tiles_naive(mask: &BitMask, g: Granularity) -> TileSet {
    let g = g.effective();
    let (gh, gw) = (g.h as usize, g.w as usize);
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

impl BitMask {
    /// Calls `f(y0, hits)` for every row of aligned tiles at granularity `g` (already
    /// effective): bit `x` of the row words `hits` is set iff the tile with origin `(y0, x)`
    /// holds a set bit. Rows of tiles without any are skipped.
    #[inline]
    fn for_each_tile_row(&self, g: Granularity, mut f: impl FnMut(usize, &[u64])) {
        let (h, w) = (self.height(), self.width());
        if h == 0 || w == 0 {
            return;
        }
        let (gh, gw) = (g.h as usize, g.w as usize);
        let nw = w.div_ceil(64);
        let raw = self.words();
        with_scratch(2 * nw, |s| {
            let (acc, starts) = s.split_at_mut(nw);
            words::group_starts(w, gw, starts);
            for y0 in (0..h).step_by(gh) {
                acc.fill(0);
                for y in y0..(y0 + gh).min(h) {
                    words::or_bits(raw, y * w, w, acc);
                }
                if acc.iter().all(|&a| a == 0) {
                    continue;
                }
                words::widen_down(acc, 1, gw);
                for (a, s) in acc.iter_mut().zip(starts.iter()) {
                    *a &= s;
                }
                f(y0, acc);
            }
        });
    }

    /// Aligned DISTiles at any granularity (a zero side counts as 1): a tile at every origin
    /// `(y, x)` with `y % g.h == 0` and `x % g.w == 0` whose block holds a set bit, in row-major
    /// order. Sides that do not divide the mask leave a last row/column of tiles that reaches
    /// past the edge (phantom). Same result as [`aligned_tiles_naive`], by word operations.
    pub fn aligned_tiles(&self, g: Granularity) -> TileSet {
        let g = g.effective();
        let mut tiles = Vec::new();
        self.for_each_tile_row(g, |y0, hits| {
            for (i, &word) in hits.iter().enumerate() {
                let mut m = word;
                while m != 0 {
                    let x = 64 * i + m.trailing_zeros() as usize;
                    tiles.push(DisTile { y: y0 as u32, x: x as u32 });
                    m &= m - 1;
                }
            }
        });
        TileSet { granularity: g, height: self.height(), width: self.width(), tiles }
    }

    /// `aligned_tiles(g).len()` without building the list (and, for rows up to 1536 columns,
    /// without allocating): what dispatch needs per frame.
    pub fn count_aligned_tiles(&self, g: Granularity) -> usize {
        let mut n = 0;
        self.for_each_tile_row(g.effective(), |_, hits| {
            n += hits.iter().map(|w| w.count_ones() as usize).sum::<usize>();
        });
        n
    }

    /// `count_aligned_tiles` for each of `gs` (same order; repeats allowed), sharing the work:
    /// rows are copied out of the packed mask once, granularities of equal height share the
    /// OR of each tile row, and their window ORs are widened from the narrowest to the widest.
    pub fn count_tiles_many(&self, gs: &[Granularity]) -> Vec<usize> {
        let mut out = vec![0usize; gs.len()];
        let (h, w) = (self.height(), self.width());
        if h == 0 || w == 0 || gs.is_empty() {
            return out;
        }
        if gs.len() == 1 {
            out[0] = self.count_aligned_tiles(gs[0]);
            return out;
        }
        let eff: Vec<Granularity> = gs.iter().map(|g| g.effective()).collect();
        let mut order: Vec<usize> = (0..gs.len()).collect();
        order.sort_unstable_by_key(|&i| (eff[i].h, eff[i].w));
        let nw = w.div_ceil(64);
        let raw = self.words();
        let mut rows = vec![0u64; h * nw];
        for (y, row) in rows.chunks_exact_mut(nw).enumerate() {
            words::or_bits(raw, y * w, w, row);
        }
        let mut starts = vec![0u64; order.len() * nw];
        for (s, &i) in starts.chunks_exact_mut(nw).zip(&order) {
            words::group_starts(w, eff[i].w as usize, s);
        }
        let mut acc = vec![0u64; nw];
        let mut win = vec![0u64; nw];
        let mut k = 0;
        while k < order.len() {
            let gh = eff[order[k]].h;
            let end = k + order[k..].iter().take_while(|&&i| eff[i].h == gh).count();
            for y0 in (0..h).step_by(gh as usize) {
                acc.fill(0);
                for row in rows[y0 * nw..((y0 + gh as usize).min(h)) * nw].chunks_exact(nw) {
                    for (a, r) in acc.iter_mut().zip(row) {
                        *a |= r;
                    }
                }
                if acc.iter().all(|&a| a == 0) {
                    continue;
                }
                win.copy_from_slice(&acc);
                let mut cur = 1;
                for j in k..end {
                    let i = order[j];
                    let gw = eff[i].w as usize;
                    words::widen_down(&mut win, cur, gw);
                    cur = gw;
                    let s = &starts[j * nw..(j + 1) * nw];
                    out[i] += win.iter().zip(s).map(|(a, b)| (a & b).count_ones() as usize).sum::<usize>();
                }
            }
            k = end;
        }
        out
    }
}
