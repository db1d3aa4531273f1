//! `run --overlay`: each frame as a PNG with one sparse op's mask tinted over it and the op's
//! DISTile grid drawn as rectangles.
//!
//! The session has no way yet to hand out intermediate values, so the mask comes from the
//! graph outputs: the DynConv / A-ViT / SIGE exporters publish their masks as `mask_*` outputs
//! (`[N, 1, h, w]` maps, or `[N, T]` token masks whose token 0 is the class token). The
//! granularity comes from the frame's report, so the grid appears only where a sparse kernel ran.

use dynaspa::io::{image::encode_png, write_atomic};
use dynaspa::runtime::graph::Graph;
use dynaspa::runtime::report::FrameReport;
use dynaspa::runtime::sparsity::tiles::aligned_tiles_naive;
use dynaspa::runtime::sparsity::{BitMask, Granularity, TileSet};
use dynaspa::{DType, Error, Result, Tensor};
use image::{Rgb, RgbImage};
use std::path::{Path, PathBuf};

const TINT: [f32; 3] = [255.0, 40.0, 0.0];
const TINT_ALPHA: f32 = 0.45;
const GRID: Rgb<u8> = Rgb([0, 255, 255]);

/// How a mask output's values map onto the frame.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Layout {
    /// `[N, 1, h, w]`.
    Map { h: usize, w: usize },
    /// `[N, T]` or `[N, T, 1]`: `skip` leading tokens (the class token), then an h x w grid.
    Tokens { skip: usize, h: usize, w: usize },
}

pub struct Overlay {
    /// The graph output holding the mask, and its position among the outputs.
    pub output: String,
    out_pos: usize,
    layout: Layout,
    /// The sparse node that uses this mask, whose report record gives the granularity.
    node: Option<String>,
    dir: PathBuf,
    noted_no_grid: bool,
}

/// A mask output: named `mask*`, float, shaped like a spatial map or a token mask.
fn mask_layout(g: &Graph, id: usize, input_hw: (usize, usize)) -> Option<Layout> {
    let v = &g.values[id];
    if !v.name.starts_with("mask") || v.dtype != DType::F32 {
        return None;
    }
    match v.shape.as_slice() {
        [_, 1, h, w] => Some(Layout::Map { h: *h, w: *w }),
        [_, t] | [_, t, 1] => token_grid(g, *t, input_hw),
        _ => None,
    }
}

/// The patch grid of a `[N, T]` token mask: the model's `dynaspa.token_grid` metadata (`HxW`)
/// when it fits, else the factorisation of T - 1 (all tokens but the class token) whose aspect
/// is closest to the input's.
fn token_grid(g: &Graph, t: usize, (ih, iw): (usize, usize)) -> Option<Layout> {
    if let Some((h, w)) = g.metadata.get("dynaspa.token_grid").and_then(|s| s.split_once('x')) {
        if let (Ok(h), Ok(w)) = (h.trim().parse::<usize>(), w.trim().parse::<usize>()) {
            if h * w + 1 == t || h * w == t {
                return Some(Layout::Tokens { skip: t - h * w, h, w });
            }
        }
    }
    let n = t.checked_sub(1).filter(|&n| n > 0)?;
    let aspect = ih as f64 / iw.max(1) as f64;
    (1..=n)
        .filter(|h| n % h == 0)
        .map(|h| (h, n / h))
        .min_by(|a, b| {
            let d = |(h, w): (usize, usize)| ((h as f64 / w as f64) / aspect).ln().abs();
            d(*a).total_cmp(&d(*b))
        })
        .map(|(h, w)| Layout::Tokens { skip: 1, h, w })
}

impl Overlay {
    /// Chooses the mask to draw: `op` names a sparse node or a mask output; by default the mask
    /// of the first sparse node that is a graph output, else the first mask output.
    pub fn new(g: &Graph, op: Option<&str>, input_hw: (usize, usize), dir: PathBuf) -> Result<Overlay> {
        let masks: Vec<(usize, usize, Layout)> = g
            .outputs
            .iter()
            .enumerate()
            .filter_map(|(pos, &id)| mask_layout(g, id, input_hw).map(|l| (pos, id, l)))
            .collect();
        let mask_names = || {
            let n: Vec<&str> = masks.iter().map(|&(_, id, _)| g.values[id].name.as_str()).collect();
            if n.is_empty() {
                "none".to_string()
            } else {
                n.join(", ")
            }
        };
        let sparse_nodes = || g.nodes.iter().filter_map(|n| n.sparse.as_ref().map(|s| (n.name.as_str(), s.mask)));
        let user_of = |mask_id: usize| sparse_nodes().find(|&(_, m)| m == mask_id).map(|(n, _)| n.to_string());
        let by_id = |id: usize| masks.iter().find(|m| m.1 == id).copied();

        let (pos, id, layout, node) = match op {
            Some(name) => {
                if let Some((node, mask_id)) = sparse_nodes().find(|&(n, _)| n == name) {
                    let (pos, id, layout) = by_id(mask_id).ok_or_else(|| {
                        Error::Other(format!(
                            "--overlay-op '{name}': its mask '{}' is not a graph output, so it cannot be drawn (mask outputs: {})",
                            g.values[mask_id].name,
                            mask_names()
                        ))
                    })?;
                    (pos, id, layout, Some(node.to_string()))
                } else if let Some(&(pos, id, layout)) = masks.iter().find(|m| g.values[m.1].name == name) {
                    (pos, id, layout, user_of(id))
                } else {
                    let ops: Vec<&str> = sparse_nodes().map(|(n, _)| n).collect();
                    return Err(Error::Other(format!(
                        "--overlay-op '{name}' is neither a sparse op nor a mask output of the model (mask outputs: {}; sparse ops: {})",
                        mask_names(),
                        if ops.is_empty() { "none".to_string() } else { ops.join(", ") }
                    )));
                }
            }
            None => {
                let first_sparse = sparse_nodes().find_map(|(n, m)| by_id(m).map(|x| (x, n.to_string())));
                match first_sparse {
                    Some(((pos, id, layout), node)) => (pos, id, layout, Some(node)),
                    None => {
                        let &(pos, id, layout) = masks.first().ok_or_else(|| {
                            Error::Other(
                                "--overlay: the model has no mask output to draw (an output named mask*, [N, 1, h, w] or [N, T])"
                                    .into(),
                            )
                        })?;
                        (pos, id, layout, user_of(id))
                    }
                }
            }
        };
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        Ok(Overlay { output: g.values[id].name.clone(), out_pos: pos, layout, node, dir, noted_no_grid: false })
    }

    /// One line for the start of the run: what is drawn and where.
    pub fn describe(&self) -> String {
        let how = match self.layout {
            Layout::Map { h, w } => format!("{h}x{w} map"),
            Layout::Tokens { skip, h, w } => format!("{h}x{w} token grid after {skip} class token(s)"),
        };
        let op = self.node.as_ref().map_or_else(String::new, |n| format!(" of sparse op {n}"));
        format!("overlay: mask output '{}'{op} ({how}) -> {}", self.output, self.dir.display())
    }

    /// Draws one frame and writes it as `<dir>/<base>.png`; returns the path.
    pub fn write(&mut self, frame: &RgbImage, base: &str, outputs: &[(String, Tensor)], report: Option<&FrameReport>) -> Result<PathBuf> {
        let mask = self.mask(outputs)?;
        let g = self.granularity(report);
        let tiles = match (g, self.layout) {
            (Some(g), Layout::Map { .. }) => Some(aligned_tiles_naive(&mask, g)),
            _ => None,
        };
        if tiles.is_none() && !self.noted_no_grid {
            self.noted_no_grid = true;
            let why = match (g, &self.node) {
                (Some(_), _) => "a token mask has no 2-D DISTile grid".to_string(),
                (None, Some(n)) => format!("the report names no DISTile granularity for op {n}"),
                (None, None) => "no sparse op with this mask was reported".to_string(),
            };
            eprintln!("note: overlay draws the mask without a DISTile grid: {why}");
        }
        let img = draw(frame, &mask, tiles.as_ref());
        let path = self.dir.join(format!("{base}.png"));
        write_atomic(&path, &encode_png(&img)?).map_err(|e| Error::io(&path, e))?;
        Ok(path)
    }

    fn granularity(&self, report: Option<&FrameReport>) -> Option<Granularity> {
        let node = self.node.as_ref()?;
        report?.sparse_ops.iter().find(|r| &r.node == node)?.granularity
    }

    /// The mask of batch item 0 as an h x w bit map.
    fn mask(&self, outputs: &[(String, Tensor)]) -> Result<BitMask> {
        let (name, t) = outputs
            .get(self.out_pos)
            .ok_or_else(|| Error::Other(format!("overlay: output '{}' missing from the results", self.output)))?;
        let v = t.as_f32().map_err(|_| Error::Other(format!("overlay: output '{name}' is not float")))?;
        let (skip, h, w) = match self.layout {
            Layout::Map { h, w } => (0, h, w),
            Layout::Tokens { skip, h, w } => (skip, h, w),
        };
        let cells = v
            .get(skip..skip + h * w)
            .ok_or_else(|| Error::Other(format!("overlay: output '{name}' has {} values, fewer than its grid", v.len())))?;
        let bits: Vec<bool> = cells.iter().map(|&x| x > 0.5).collect();
        BitMask::from_bools(h, w, &bits)
    }
}

/// First pixel of cell `i` of `n` cells spread over `px` pixels (cells map to pixels by
/// proportional scaling, so cell `i` holds the pixels `p` with `p * n / px == i`).
fn cell_start(i: usize, n: usize, px: usize) -> usize {
    (i * px).div_ceil(n)
}

/// The frame with active mask cells tinted and each tile outlined.
pub fn draw(frame: &RgbImage, mask: &BitMask, tiles: Option<&TileSet>) -> RgbImage {
    let (fw, fh) = (frame.width() as usize, frame.height() as usize);
    let (mh, mw) = (mask.height().max(1), mask.width().max(1));
    let mut out = frame.clone();
    for (x, y, px) in out.enumerate_pixels_mut() {
        let (cy, cx) = (y as usize * mh / fh, x as usize * mw / fw);
        if mask.get(cy, cx) {
            for c in 0..3 {
                px[c] = (px[c] as f32 * (1.0 - TINT_ALPHA) + TINT[c] * TINT_ALPHA).round() as u8;
            }
        }
    }
    if let Some(ts) = tiles {
        let thick = (fw.min(fh) / 200).max(1);
        for &t in &ts.tiles {
            let (y0, y1, x0, x1) = ts.extent(t);
            let (py0, py1) = (cell_start(y0, mh, fh), cell_start(y1, mh, fh));
            let (px0, px1) = (cell_start(x0, mw, fw), cell_start(x1, mw, fw));
            outline(&mut out, px0, py0, px1, py1, thick);
        }
    }
    out
}

/// Outlines pixels [x0, x1) x [y0, y1) from the inside, `thick` pixels wide.
fn outline(img: &mut RgbImage, x0: usize, y0: usize, x1: usize, y1: usize, thick: usize) {
    if x1 <= x0 || y1 <= y0 {
        return;
    }
    for y in y0..y1 {
        for x in x0..x1 {
            let edge = y < y0 + thick || y + thick >= y1 || x < x0 + thick || x + thick >= x1;
            if edge {
                img.put_pixel(x as u32, y as u32, GRID);
            }
        }
    }
}

/// File stem for a frame's outputs: `00003_name` for image files, `frame_00003` for video.
pub fn frame_base(index: usize, path: Option<&Path>) -> String {
    match path.and_then(|p| p.file_stem()) {
        Some(stem) => format!("{index:05}_{}", super::run::file_name_for(&stem.to_string_lossy())),
        None => format!("frame_{index:05}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_grid_follows_the_frame_aspect() {
        let g = Graph::default();
        assert_eq!(token_grid(&g, 109, (72, 96)), Some(Layout::Tokens { skip: 1, h: 9, w: 12 }));
        assert_eq!(token_grid(&g, 17, (64, 64)), Some(Layout::Tokens { skip: 1, h: 4, w: 4 }));
        assert_eq!(token_grid(&g, 1, (64, 64)), None);
        let mut g = Graph::default();
        g.metadata.insert("dynaspa.token_grid".into(), "12x9".into());
        assert_eq!(token_grid(&g, 109, (72, 96)), Some(Layout::Tokens { skip: 1, h: 12, w: 9 }));
    }

    #[test]
    fn tint_covers_active_cells_and_grid_outlines_tiles() {
        let frame = RgbImage::from_pixel(40, 20, Rgb([10, 20, 30]));
        // 2 x 4 cells of 10 x 10 pixels; only cell (1, 2) active.
        let mask = BitMask::from_fn(2, 4, |y, x| (y, x) == (1, 2));
        let tiles = aligned_tiles_naive(&mask, Granularity::new(2, 2));
        let out = draw(&frame, &mask, Some(&tiles));
        assert_ne!(out.get_pixel(25, 15), frame.get_pixel(25, 15), "active cell centre is tinted");
        assert_eq!(out.get_pixel(5, 5), frame.get_pixel(5, 5), "inactive cell untouched");
        assert_eq!(out.get_pixel(35, 5), frame.get_pixel(35, 5), "inactive cell inside the tile, off its border");
        // The one tile spans cells y 0..2, x 2..4 = pixels x 20..40, y 0..20.
        assert_eq!(*out.get_pixel(20, 10), GRID);
        assert_eq!(*out.get_pixel(39, 0), GRID);
        assert_eq!(*out.get_pixel(19, 10), *frame.get_pixel(19, 10));
    }

    #[test]
    fn cells_map_onto_uneven_frames_without_gaps() {
        for (n, px) in [(5, 72), (18, 168), (3, 3), (7, 100)] {
            assert_eq!(cell_start(0, n, px), 0);
            assert_eq!(cell_start(n, n, px), px);
            for p in 0..px {
                let c = p * n / px;
                assert!(cell_start(c, n, px) <= p && p < cell_start(c + 1, n, px), "n {n} px {px} p {p}");
            }
        }
    }
}
