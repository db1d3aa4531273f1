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

use super::words;
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
            let any = (ty..(ty + gh).min(mask.height())).any(|y| (tx..(tx + gw).min(mask.width())).any(|x| mask.get(y, x)));
            if any {
                tiles.push(DisTile { y: ty as u32, x: tx as u32 });
            }
        }
    }
    TileSet { granularity: g, height: mask.height(), width: mask.width(), tiles }
}

/// A row's words: a fixed-size array for rows up to 256 columns (so every loop over a row
/// unrolls), a `Vec` beyond.
trait RowBuf: AsRef<[u64]> + AsMut<[u64]> {}
impl<T: AsRef<[u64]> + AsMut<[u64]>> RowBuf for T {}

/// Runs `$f(args..., make)` where `make()` returns zeroed row words for `$nw` words per row.
macro_rules! by_row_words {
    ($nw:expr, $f:ident($($arg:expr),*)) => {
        match $nw {
            1 => $f($($arg,)* || [0u64; 1]),
            2 => $f($($arg,)* || [0u64; 2]),
            3 => $f($($arg,)* || [0u64; 3]),
            4 => $f($($arg,)* || [0u64; 4]),
            n => $f($($arg,)* || vec![0u64; n]),
        }
    };
}

/// Calls `f(y0, acc)` for every row of tiles `gh` rows high (rows `y0..y0 + gh`) that holds a
/// set bit, `acc` being the OR of its rows as row words.
#[inline(always)]
fn tile_rows<B: RowBuf>(m: &BitMask, gh: usize, bufs: (&mut B, &mut B), mut f: impl FnMut(usize, &B)) {
    let (h, w) = (m.height(), m.width());
    let raw = m.words();
    let (acc, mask) = bufs;
    words::row_mask(w, mask.as_mut());
    let mut y0 = 0;
    while y0 < h {
        let a = acc.as_mut();
        a.fill(0);
        let y1 = (y0 + gh).min(h);
        let mut offset = y0 * w;
        while offset < y1 * w {
            words::or_row(raw, offset, mask.as_ref(), a);
            offset += w;
        }
        if a.iter().any(|&x| x != 0) {
            f(y0, acc);
        }
        y0 = y1;
    }
}

/// `hits` gets bit `x` set iff the tile at column `x` exists: the window OR of `acc` over `gw`
/// columns, kept at the group starts `starts`.
#[inline(always)]
fn tile_hits<B: RowBuf>(acc: &B, gw: usize, starts: &B, hits: &mut B) {
    let h = hits.as_mut();
    h.copy_from_slice(acc.as_ref());
    words::widen_down(h, 1, gw);
    for (x, s) in h.iter_mut().zip(starts.as_ref()) {
        *x &= s;
    }
}

fn popcount(ws: &[u64]) -> usize {
    ws.iter().map(|w| w.count_ones() as usize).sum()
}

fn aligned_impl<B: RowBuf>(m: &BitMask, g: Granularity, make: impl Fn() -> B) -> Vec<DisTile> {
    let (mut acc, mut starts, mut hits) = (make(), make(), make());
    words::group_starts(m.width(), g.w as usize, starts.as_mut());
    let mut tiles = Vec::new();
    tile_rows(m, g.h as usize, (&mut acc, &mut make()), |y0, acc| {
        tile_hits(acc, g.w as usize, &starts, &mut hits);
        for (i, &word) in hits.as_ref().iter().enumerate() {
            let mut b = word;
            while b != 0 {
                let x = 64 * i + b.trailing_zeros() as usize;
                tiles.push(DisTile { y: y0 as u32, x: x as u32 });
                b &= b - 1;
            }
        }
    });
    tiles
}

fn count_impl<B: RowBuf>(m: &BitMask, g: Granularity, make: impl Fn() -> B) -> usize {
    let (mut acc, mut starts, mut hits) = (make(), make(), make());
    words::group_starts(m.width(), g.w as usize, starts.as_mut());
    let mut n = 0;
    tile_rows(m, g.h as usize, (&mut acc, &mut make()), |_, acc| {
        tile_hits(acc, g.w as usize, &starts, &mut hits);
        n += popcount(hits.as_ref());
    });
    n
}

/// Counts for `order` (effective granularities sorted by height then width, each with the
/// index in `out` its count goes to). Granularities of equal height share one pass over the
/// rows, and their window ORs widen from one width to the next. (Keeping every row copied out
/// once and ORing tile rows of a height from those of a divisor of it was tried: it ran no
/// fewer instructions than re-reading the packed rows, so it is not done.)
fn count_sorted_impl<B: RowBuf>(m: &BitMask, order: &[(Granularity, usize)], out: &mut [usize], make: impl Fn() -> B) {
    let (mut acc, mut mask, mut win) = (make(), make(), make());
    let mut starts: Vec<B> = order.iter().map(|_| make()).collect();
    for (s, (g, _)) in starts.iter_mut().zip(order) {
        words::group_starts(m.width(), g.w as usize, s.as_mut());
    }
    let mut k = 0;
    while k < order.len() {
        let gh = order[k].0.h as usize;
        let end = k + order[k..].iter().take_while(|(g, _)| g.h as usize == gh).count();
        let (same_h, same_starts) = (&order[k..end], &starts[k..end]);
        tile_rows(m, gh, (&mut acc, &mut mask), |_, acc| {
            let win = win.as_mut();
            win.copy_from_slice(acc.as_ref());
            let mut cur = 1;
            for (&(g, i), s) in same_h.iter().zip(same_starts) {
                let gw = g.w as usize;
                words::widen_down(win, cur, gw);
                cur = gw;
                out[i] += popcount_and(win, s.as_ref());
            }
        });
        k = end;
    }
}

fn popcount_and(a: &[u64], b: &[u64]) -> usize {
    a.iter().zip(b).map(|(x, y)| (x & y).count_ones() as usize).sum()
}

impl BitMask {
    /// Aligned DISTiles at any granularity (a zero side counts as 1): a tile at every origin
    /// `(y, x)` with `y % g.h == 0` and `x % g.w == 0` whose block holds a set bit, in row-major
    /// order. Sides that do not divide the mask leave a last row/column of tiles that reaches
    /// past the edge (phantom). Same result as [`aligned_tiles_naive`], by word operations.
    pub fn aligned_tiles(&self, g: Granularity) -> TileSet {
        let g = g.effective();
        let tiles = if self.is_empty() { Vec::new() } else { by_row_words!(self.width().div_ceil(64), aligned_impl(self, g)) };
        TileSet { granularity: g, height: self.height(), width: self.width(), tiles }
    }

    /// `aligned_tiles(g).len()` without building the list (and, for rows up to 256 columns,
    /// without allocating): what dispatch needs per frame.
    pub fn count_aligned_tiles(&self, g: Granularity) -> usize {
        if self.is_empty() {
            return 0;
        }
        by_row_words!(self.width().div_ceil(64), count_impl(self, g.effective()))
    }

    /// `count_aligned_tiles` for each of `gs` (same order; repeats allowed), sharing the work
    /// where it pays: granularities of equal height share the pass over the rows (the OR of
    /// each row of tiles), and their window ORs widen from the narrowest to the widest.
    pub fn count_tiles_many(&self, gs: &[Granularity]) -> Vec<usize> {
        let mut out = vec![0usize; gs.len()];
        if self.is_empty() || gs.is_empty() {
            return out;
        }
        let shared_height = gs.iter().enumerate().any(|(i, a)| gs[..i].iter().any(|b| b.effective().h == a.effective().h));
        if !shared_height {
            // Nothing to share: skip the bookkeeping (and its allocations).
            for (o, &g) in out.iter_mut().zip(gs) {
                *o = self.count_aligned_tiles(g);
            }
            return out;
        }
        let mut order: Vec<(Granularity, usize)> = gs.iter().enumerate().map(|(i, g)| (g.effective(), i)).collect();
        order.sort_unstable_by_key(|&(g, _)| (g.h, g.w));
        by_row_words!(self.width().div_ceil(64), count_sorted_impl(self, &order, &mut out));
        out
    }
}
