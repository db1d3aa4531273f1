//! Connected components of a mask and DISTiles per component.
//!
//! Components are 4-connected (sharing an edge). With 8-connectivity two blobs touching only at
//! a corner would become one component whose bounding box spans both, and its tiles would cover
//! the empty quadrants between them; a conv's halo does not need diagonal merging either, since
//! halos are added by dilating the mask before tiling.
//!
//! Labelling works on runs (maximal horizontal stretches of set bits, found with
//! `trailing_zeros` on row words) joined by a union-find where runs of adjacent rows overlap, so
//! the cost follows the number of runs rather than of positions.

use super::tiles::{DisTile, Granularity, TileSet};
use super::words;
use super::BitMask;

/// A run of set bits: row `y`, columns `x0..x1`.
#[derive(Clone, Copy, Debug)]
struct Run {
    y: usize,
    x0: usize,
    x1: usize,
}

/// One connected component: its bounding box (`y0..y1`, `x0..x1`, ends exclusive) and size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Component {
    pub y0: usize,
    pub y1: usize,
    pub x0: usize,
    pub x1: usize,
    /// Set positions in the component.
    pub size: usize,
}

/// First set bit at or after `from` in the row words `r`.
fn next_set(r: &[u64], from: usize) -> Option<usize> {
    let mut i = from / 64;
    let mut w = *r.get(i)? & (!0u64 << (from % 64));
    loop {
        if w != 0 {
            return Some(64 * i + w.trailing_zeros() as usize);
        }
        i += 1;
        w = *r.get(i)?;
    }
}

/// First clear bit at or after `from` (`64 * r.len()` if none).
fn next_clear(r: &[u64], from: usize) -> usize {
    let mut i = from / 64;
    let Some(&first) = r.get(i) else { return 64 * r.len() };
    let mut w = !first & (!0u64 << (from % 64));
    loop {
        if w != 0 {
            return 64 * i + w.trailing_zeros() as usize;
        }
        i += 1;
        match r.get(i) {
            Some(&x) => w = !x,
            None => return 64 * r.len(),
        }
    }
}

fn find(parent: &mut [u32], mut a: u32) -> u32 {
    while parent[a as usize] != a {
        // Path halving keeps the trees flat without recursion.
        parent[a as usize] = parent[parent[a as usize] as usize];
        a = parent[a as usize];
    }
    a
}

fn union(parent: &mut [u32], a: u32, b: u32) {
    let (ra, rb) = (find(parent, a), find(parent, b));
    // The smaller root wins, so a component's id is its first run in row-major order.
    if ra < rb {
        parent[rb as usize] = ra;
    } else if rb < ra {
        parent[ra as usize] = rb;
    }
}

/// The runs of `mask` in row-major order, each with its component index (components numbered
/// in the order of their first run), and the number of components.
fn label(mask: &BitMask) -> (Vec<Run>, Vec<u32>, usize) {
    let (h, w) = (mask.height(), mask.width());
    let mut runs: Vec<Run> = Vec::new();
    if h == 0 || w == 0 {
        return (runs, Vec::new(), 0);
    }
    let nw = w.div_ceil(64);
    let raw = mask.words();
    let mut row = vec![0u64; nw];
    let mut parent: Vec<u32> = Vec::new();
    let mut prev = 0..0;
    for y in 0..h {
        row.fill(0);
        words::or_bits(raw, y * w, w, &mut row);
        let start = runs.len();
        let mut x = 0;
        while let Some(x0) = next_set(&row, x) {
            // Bits past the width are zero, so every run ends inside the row.
            let x1 = next_clear(&row, x0);
            runs.push(Run { y, x0, x1 });
            parent.push(parent.len() as u32);
            x = x1;
        }
        let cur = start..runs.len();
        // Both rows' runs are sorted by column: merge them like two sorted lists.
        let (mut i, mut j) = (prev.start, cur.start);
        while i < prev.end && j < cur.end {
            let (a, b) = (runs[i], runs[j]);
            if a.x0 < b.x1 && b.x0 < a.x1 {
                union(&mut parent, i as u32, j as u32);
            }
            if a.x1 <= b.x1 {
                i += 1;
            } else {
                j += 1;
            }
        }
        prev = cur;
    }
    let mut comp = vec![u32::MAX; runs.len()];
    let mut n = 0u32;
    for r in 0..runs.len() {
        let root = find(&mut parent, r as u32) as usize;
        // Roots are each component's first run, so they are numbered before their members.
        if comp[root] == u32::MAX {
            comp[root] = n;
            n += 1;
        }
        comp[r] = comp[root];
    }
    (runs, comp, n as usize)
}

/// Runs grouped by component (row-major within each), with each component's range of runs.
fn grouped(runs: &[Run], comp: &[u32], n: usize) -> (Vec<Run>, Vec<usize>) {
    let mut starts = vec![0usize; n + 1];
    for &c in comp {
        starts[c as usize + 1] += 1;
    }
    for c in 0..n {
        starts[c + 1] += starts[c];
    }
    let mut fill = starts.clone();
    let mut out = vec![Run { y: 0, x0: 0, x1: 0 }; runs.len()];
    for (r, &c) in runs.iter().zip(comp) {
        out[fill[c as usize]] = *r;
        fill[c as usize] += 1;
    }
    (out, starts)
}

/// Bounding box and size of each component.
fn boxes(runs: &[Run], comp: &[u32], n: usize) -> Vec<Component> {
    let mut out = vec![Component { y0: usize::MAX, y1: 0, x0: usize::MAX, x1: 0, size: 0 }; n];
    for (r, &c) in runs.iter().zip(comp) {
        let b = &mut out[c as usize];
        b.y0 = b.y0.min(r.y);
        b.y1 = b.y1.max(r.y + 1);
        b.x0 = b.x0.min(r.x0);
        b.x1 = b.x1.max(r.x1);
        b.size += r.x1 - r.x0;
    }
    out
}

impl BitMask {
    /// The 4-connected components of the set positions, in row-major order of their first
    /// (top-most, then left-most) position.
    pub fn components(&self) -> Vec<Component> {
        let (runs, comp, n) = label(self);
        boxes(&runs, &comp, n)
    }

    /// DISTiles per 4-connected component: each component is tiled by a grid of `g`-sized
    /// tiles anchored at the top-left of its bounding box (so not aligned to multiples of `g`),
    /// keeping the tiles that hold a position of that component. Tiles of the last row/column
    /// may reach past the mask's edge (phantom; [`TileSet::extent`] cuts them off). The result
    /// is in row-major order of origins, without duplicates.
    ///
    /// Contract for kernels: a tile computes its in-bounds extent and stores only active
    /// positions; no inactive position ever needs storing (it keeps the fill-policy value).
    /// Tiles of different components may overlap (a tile reaches into a neighbour's bounding
    /// box), so an active position can lie in several tiles: a kernel must store it once, as
    /// [`TileSet::positions_written_once`] assigns it (deduplication, not idempotent double
    /// writes, because fused epilogues may accumulate).
    pub fn component_tiles(&self, g: Granularity) -> TileSet {
        let g = g.effective();
        let (gh, gw) = (g.h as usize, g.w as usize);
        let (runs, comp, n) = label(self);
        let boxes = boxes(&runs, &comp, n);
        let (runs, range) = grouped(&runs, &comp, n);
        let nw = self.width().div_ceil(64).max(1);
        let mut acc = vec![0u64; nw];
        let mut starts = vec![0u64; nw];
        let mut tiles = Vec::new();
        for (c, b) in boxes.iter().enumerate() {
            let bw = b.x1 - b.x0;
            let cw = bw.div_ceil(64);
            let (acc, starts) = (&mut acc[..cw], &mut starts[..cw]);
            words::group_starts(bw, gw, starts);
            let own = &runs[range[c]..range[c + 1]];
            let mut next = 0;
            for ty in (b.y0..b.y1).step_by(gh) {
                acc.fill(0);
                // This component's runs in the tile row, relative to the bounding box.
                while next < own.len() && own[next].y < ty + gh {
                    words::set_range(acc, own[next].x0 - b.x0, own[next].x1 - b.x0);
                    next += 1;
                }
                words::widen_down(acc, 1, gw);
                for (i, (&a, &s)) in acc.iter().zip(starts.iter()).enumerate() {
                    let mut m = a & s;
                    while m != 0 {
                        let x = b.x0 + 64 * i + m.trailing_zeros() as usize;
                        tiles.push(DisTile { y: ty as u32, x: x as u32 });
                        m &= m - 1;
                    }
                }
            }
        }
        tiles.sort_unstable();
        tiles.dedup();
        TileSet { granularity: g, height: self.height(), width: self.width(), tiles }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mask(rows: &[&str]) -> BitMask {
        BitMask::from_fn(rows.len(), rows[0].len(), |y, x| rows[y].as_bytes()[x] == b'#')
    }

    #[test]
    fn diagonal_neighbours_are_separate_components() {
        let m = mask(&["#...", ".#..", "..##", "...#"]);
        let c = m.components();
        assert_eq!(c.len(), 3, "{c:?}");
        assert_eq!(c[0], Component { y0: 0, y1: 1, x0: 0, x1: 1, size: 1 });
        assert_eq!(c[2], Component { y0: 2, y1: 4, x0: 2, x1: 4, size: 3 });
    }

    #[test]
    fn u_shape_is_one_component_and_tiles_anchor_at_its_box() {
        // Two arms joined only at the bottom: the union-find must merge runs found apart.
        let m = mask(&[".....", ".#.#.", ".#.#.", ".###.", "....."]);
        assert_eq!(m.components().len(), 1);
        let t = m.component_tiles(Granularity::new(2, 2));
        let origins: Vec<(u32, u32)> = t.tiles.iter().map(|t| (t.y, t.x)).collect();
        // Box at (1, 1): tiles at (1,1), (1,3), (3,1), (3,3); aligned 2x2 tiles would be at even origins.
        assert_eq!(origins, vec![(1, 1), (1, 3), (3, 1), (3, 3)]);
        assert_eq!(m.aligned_tiles(Granularity::new(2, 2)).len(), 4);
        assert_eq!(t.phantom(t.tiles[3]), 0);
        let m = mask(&["....", "....", "...#"]);
        let t = m.component_tiles(Granularity::new(3, 3));
        assert_eq!(t.tiles, vec![DisTile { y: 2, x: 3 }]);
        assert_eq!(t.extent(t.tiles[0]), (2, 3, 3, 4));
        assert_eq!(t.phantom(t.tiles[0]), 8);
    }

    #[test]
    fn runs_across_word_boundaries() {
        let m = BitMask::from_fn(3, 150, |y, x| (60..140).contains(&x) && y != 1 || x == 100);
        let c = m.components();
        assert_eq!(c, vec![Component { y0: 0, y1: 3, x0: 60, x1: 140, size: 161 }]);
        let t = m.component_tiles(Granularity::new(1, 70));
        let origins: Vec<(u32, u32)> = t.tiles.iter().map(|t| (t.y, t.x)).collect();
        assert_eq!(origins, vec![(0, 60), (0, 130), (1, 60), (2, 60), (2, 130)]);
    }
}
