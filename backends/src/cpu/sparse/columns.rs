//! The output positions one sparse call computes, in GEMM column order, from a DISTile list.
//!
//! Tiles sharing a top row are walked row by row across all of them, so horizontally adjacent
//! tiles give one long run per output row instead of one short run per tile: longer runs mean
//! fewer, wider loads when gathering (stride 1) and fewer masked stores when writing back.
//! Overlapping tiles (per-component tiling) are computed once: a position already taken is
//! skipped, which also keeps parallel tasks from ever writing the same output.

use dynaspa_runtime::sparsity::{BitMask, TileSet};
use dynaspa_runtime::{Error, Result};
use std::cell::RefCell;

/// Consecutive columns on one output row: positions `(y, x0..x0 + len)`, columns `col..`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Run {
    pub y: u32,
    pub x0: u32,
    pub len: u32,
    pub col: u32,
}

#[derive(Default, Debug)]
pub(crate) struct Columns {
    pub runs: Vec<Run>,
    /// Output row and column of each GEMM column.
    pub ys: Vec<u32>,
    pub xs: Vec<u32>,
    /// Whether the mask bit of each column is set (only those are written).
    pub active: Vec<bool>,
    /// Positions already taken, one bit each (row-major over the output).
    taken: Vec<u64>,
}

/// Checks that `tiles` and `mask` describe an `ho` x `wo` output.
pub(crate) fn check(op: &str, tiles: &TileSet, mask: &BitMask, ho: usize, wo: usize) -> Result<()> {
    let bad = |m: String| Err(Error::Other(format!("{op}: {m}")));
    if (mask.height(), mask.width()) != (ho, wo) {
        return bad(format!("mask is {}x{}, the output is {ho}x{wo}", mask.height(), mask.width()));
    }
    if (tiles.height, tiles.width) != (ho, wo) {
        return bad(format!("tile set was made for a {}x{} mask, the output is {ho}x{wo}", tiles.height, tiles.width));
    }
    let g = tiles.granularity;
    if g.h == 0 || g.w == 0 {
        return bad(format!("granularity {g} has a zero side"));
    }
    if let Some(t) = tiles.tiles.iter().find(|t| t.y as usize >= ho || t.x as usize >= wo) {
        return bad(format!("tile at ({}, {}) starts outside the {ho}x{wo} output", t.y, t.x));
    }
    Ok(())
}

impl Columns {
    /// Rebuilds the columns for `tiles` (already `check`ed against `mask`).
    pub fn build(&mut self, tiles: &TileSet, mask: &BitMask) {
        let (ho, wo) = (tiles.height, tiles.width);
        self.runs.clear();
        self.ys.clear();
        self.xs.clear();
        self.active.clear();
        self.taken.clear();
        self.taken.resize((ho * wo).div_ceil(64), 0);
        let words = mask.words();
        let list = &tiles.tiles;
        let mut i = 0;
        while i < list.len() {
            // A band: consecutive tiles with the same top row.
            let y = list[i].y;
            let mut j = i + 1;
            while j < list.len() && list[j].y == y {
                j += 1;
            }
            let (y0, y1, _, _) = tiles.extent(list[i]);
            for oy in y0..y1 {
                for &t in &list[i..j] {
                    let (_, _, x0, x1) = tiles.extent(t);
                    self.push_row(oy, x0, x1, wo, words);
                }
            }
            i = j;
        }
    }

    /// Rebuilds the columns as the set positions of `mask` alone (the positions schedule:
    /// what 1x1 tiles give, without making tiles first).
    pub fn build_from_mask(&mut self, mask: &BitMask) {
        let w = mask.width();
        self.runs.clear();
        self.ys.clear();
        self.xs.clear();
        self.active.clear();
        for (wi, &word) in mask.words().iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                let p = wi * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let (y, x) = ((p / w) as u32, (p % w) as u32);
                let col = self.ys.len() as u32;
                match self.runs.last_mut() {
                    Some(r) if r.y == y && r.x0 + r.len == x => r.len += 1,
                    _ => self.runs.push(Run { y, x0: x, len: 1, col }),
                }
                self.ys.push(y);
                self.xs.push(x);
                self.active.push(true);
            }
        }
    }

    /// Appends the positions of row `y`, columns `x0..x1` that are not taken yet.
    fn push_row(&mut self, y: usize, x0: usize, x1: usize, wo: usize, words: &[u64]) {
        for x in x0..x1 {
            let p = y * wo + x;
            let (w, b) = (p / 64, 1u64 << (p % 64));
            if self.taken[w] & b != 0 {
                continue;
            }
            self.taken[w] |= b;
            let col = self.ys.len() as u32;
            match self.runs.last_mut() {
                Some(r) if r.y == y as u32 && (r.x0 + r.len) as usize == x && r.col + r.len == col => r.len += 1,
                _ => self.runs.push(Run { y: y as u32, x0: x as u32, len: 1, col }),
            }
            self.ys.push(y as u32);
            self.xs.push(x as u32);
            self.active.push(words[w] & b != 0);
        }
    }

    pub fn len(&self) -> usize {
        self.ys.len()
    }
}

/// Columns `[j0, j1)` of panel `pi` when `n` columns are cut into `n.div_ceil(64)` panels of
/// whole 16-column vectors spread evenly (64, 48, 48 rather than 64, 64, 32): with a handful of
/// panels per call, equal panels are what lets two threads finish together.
pub(crate) fn panel(pi: usize, n: usize) -> (usize, usize) {
    let (panels, vecs) = (n.div_ceil(64), n.div_ceil(16));
    let at = |i: usize| (16 * (i * vecs / panels.max(1))).min(n);
    (at(pi), at(pi + 1))
}

thread_local! {
    static COLUMNS: RefCell<Columns> = RefCell::new(Columns::default());
}

/// Runs `f` on this thread's reusable `Columns`, so building them allocates nothing once warm.
pub(crate) fn with_columns<R>(f: impl FnOnce(&mut Columns) -> R) -> R {
    COLUMNS.with(|c| match c.try_borrow_mut() {
        Ok(mut c) => f(&mut c),
        Err(_) => f(&mut Columns::default()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dynaspa_runtime::sparsity::tiles::aligned_tiles_naive;
    use dynaspa_runtime::sparsity::{DisTile, Granularity};

    #[test]
    fn runs_merge_across_tiles_of_a_band_and_skip_overlaps() {
        let mask = BitMask::from_fn(5, 7, |y, x| (y + x) % 3 == 0);
        let tiles = aligned_tiles_naive(&mask, Granularity::new(2, 3));
        check("t", &tiles, &mask, 5, 7).unwrap();
        let mut c = Columns::default();
        c.build(&tiles, &mask);
        // Every tile cell is present once; bits come from the mask.
        let mut seen = std::collections::HashSet::new();
        for j in 0..c.len() {
            assert!(seen.insert((c.ys[j], c.xs[j])));
            assert_eq!(c.active[j], mask.get(c.ys[j] as usize, c.xs[j] as usize));
        }
        let cells: usize = tiles
            .tiles
            .iter()
            .map(|&t| {
                let (a, b, x0, x1) = tiles.extent(t);
                (b - a) * (x1 - x0)
            })
            .sum();
        assert_eq!(c.len(), cells);
        // The full mask's tiles cover whole rows: one run per output row.
        let full = aligned_tiles_naive(&BitMask::ones(5, 7), Granularity::new(2, 3));
        c.build(&full, &BitMask::ones(5, 7));
        assert_eq!(c.runs.len(), 5);
        assert!(c.runs.iter().all(|r| r.len == 7 && r.x0 == 0));
        // Overlapping tiles (as per-component tiling makes them) compute a position once.
        let over = TileSet {
            granularity: Granularity::new(3, 3),
            height: 5,
            width: 7,
            tiles: vec![DisTile { y: 0, x: 0 }, DisTile { y: 1, x: 1 }, DisTile { y: 1, x: 1 }],
        };
        c.build(&over, &mask);
        assert_eq!(c.len(), 9 + 5);
        for (j, r) in c.runs.iter().enumerate() {
            assert_eq!(r.col as usize, c.runs[..j].iter().map(|r| r.len as usize).sum::<usize>());
        }
    }

    #[test]
    fn positions_from_mask_equal_one_by_one_tiles() {
        for (h, w, k) in [(5, 7, 3), (9, 64, 2), (13, 17, 5), (1, 1, 1), (3, 100, 7)] {
            let mask = BitMask::from_fn(h, w, |y, x| (y * 31 + x * 7) % k < 2 || x == w - 1);
            let (mut a, mut b) = (Columns::default(), Columns::default());
            a.build(&aligned_tiles_naive(&mask, Granularity::new(1, 1)), &mask);
            b.build_from_mask(&mask);
            assert_eq!((&a.runs, &a.ys, &a.xs, &a.active), (&b.runs, &b.ys, &b.xs, &b.active), "{h}x{w}");
            assert_eq!(b.len(), mask.count_ones());
        }
    }

    #[test]
    fn panels_are_even_whole_vectors() {
        assert_eq!((0..3).map(|i| panel(i, 160)).collect::<Vec<_>>(), [(0, 48), (48, 96), (96, 160)]);
        for n in 1..400usize {
            let np = n.div_ceil(64);
            let mut at = 0;
            for i in 0..np {
                let (a, b) = panel(i, n);
                assert!(a == at && b > a && b - a <= 64 && (a % 16 == 0), "{n} {i}: {a}..{b}");
                at = b;
            }
            assert_eq!(at, n);
        }
    }

    #[test]
    fn check_names_what_is_wrong() {
        let mask = BitMask::ones(4, 4);
        let tiles = aligned_tiles_naive(&mask, Granularity::new(2, 2));
        let e = check("op", &tiles, &BitMask::ones(4, 5), 4, 4).unwrap_err().to_string();
        assert!(e.contains("mask is 4x5"), "{e}");
        let e = check("op", &tiles, &BitMask::ones(3, 3), 3, 3).unwrap_err().to_string();
        assert!(e.contains("tile set was made for a 4x4"), "{e}");
        let mut t2 = tiles.clone();
        t2.tiles.push(DisTile { y: 4, x: 0 });
        let e = check("op", &t2, &mask, 4, 4).unwrap_err().to_string();
        assert!(e.contains("(4, 0) starts outside"), "{e}");
        let mut t3 = tiles.clone();
        t3.granularity = Granularity::new(0, 2);
        assert!(check("op", &t3, &mask, 4, 4).unwrap_err().to_string().contains("zero side"));
    }
}
