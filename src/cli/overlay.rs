//! `run --overlay`: which mask each frame's PNG shows, and writing it.
//!
//! By default the mask is the runtime's own: the mask value a sparse op runs on (its
//! `SparseSpec.mask`), which the session fetches every frame (`SessionBuilder::fetch`), so any
//! model with sparse ops can be drawn, mask outputs or not. A model's `mask_*` graph outputs
//! (`[N, 1, h, w]` maps, or `[N, T]` token masks whose token 0 is the class token) can be drawn
//! instead by naming one. The DISTiles drawn are those of the granularity the frame's report
//! gives for the op, built from the mask as the executor builds them.

use super::overlay_draw::compose;
use dynaspa::io::{image::encode_png, write_atomic};
use dynaspa::runtime::graph::{Graph, MaskKind};
use dynaspa::runtime::report::{FrameReport, SparseOpRecord};
use dynaspa::runtime::sparsity::{BitMask, Granularity};
use dynaspa::{DType, Error, Result, Tensor};
use image::RgbImage;
use std::path::{Path, PathBuf};

/// How a mask's values map onto the frame.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Layout {
    /// `[N, 1, h, w]`.
    Map { h: usize, w: usize },
    /// `skip` leading tokens (the class token), then an h x w grid.
    Tokens { skip: usize, h: usize, w: usize },
}

/// Where the mask comes from.
#[derive(Clone, Debug, PartialEq)]
enum Source {
    /// A value the session fetches (a sparse op's mask).
    Fetched { value: String },
    /// The graph output at this position.
    Output { pos: usize, name: String },
}

pub struct Overlay {
    source: Source,
    layout: Layout,
    /// The sparse op whose mask is drawn: its report record gives granularity and density.
    node: Option<String>,
    dir: PathBuf,
    noted_no_grid: bool,
}

/// What one frame's overlay says beside the picture: the drawn op's density as the report gives
/// it, and its DISTiles (count, granularity) where a sparse member ran.
pub struct Drawn {
    pub op_density: Option<f64>,
    pub tiles: Option<(usize, Granularity)>,
}

/// A mask output: named `mask*`, float, shaped like a spatial map or a token mask.
fn output_layout(g: &Graph, id: usize, input_hw: (usize, usize)) -> Option<Layout> {
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

/// The layout of a sparse op's mask value from its kind: `[N, 1, h, w]` over a conv's output,
/// or one bit per token, `[N, T, 1]` / `[T, 1]`.
fn spec_layout(g: &Graph, id: usize, kind: MaskKind, input_hw: (usize, usize)) -> Option<Layout> {
    let shape = g.values[id].shape.as_slice();
    match (kind, shape) {
        (MaskKind::Spatial, [_, 1, h, w]) => Some(Layout::Map { h: *h, w: *w }),
        (MaskKind::Token, [_, t, 1] | [t, 1] | [_, t]) => token_grid(g, *t, input_hw),
        _ => None,
    }
}

/// The patch grid of a `T`-token mask: the model's `dynaspa.token_grid` metadata (`HxW`)
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

/// Up to eight names, then how many more.
fn some_names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let all: Vec<&str> = names.collect();
    match all.len() {
        0 => "none".into(),
        n if n <= 8 => all.join(", "),
        n => format!("{}, ... ({n} in all; `dynaspa inspect` lists them)", all[..8].join(", ")),
    }
}

impl Overlay {
    /// Chooses the mask to draw: `op` names a sparse op or a mask output; by default the first
    /// sparse op's mask, else (a model without sparse ops) its first mask output.
    pub fn new(g: &Graph, op: Option<&str>, input_hw: (usize, usize), dir: PathBuf) -> Result<Overlay> {
        let sparse = || g.nodes.iter().filter_map(|n| n.sparse.as_ref().map(|s| (n.name.as_str(), s)));
        let outputs = || g.outputs.iter().enumerate().filter_map(|(pos, &id)| output_layout(g, id, input_hw).map(|l| (pos, id, l)));
        let from_op = |name: &str, spec: &dynaspa::runtime::graph::SparseSpec| -> Result<(Source, Layout, Option<String>)> {
            let value = &g.values[spec.mask];
            let layout = spec_layout(g, spec.mask, spec.kind, input_hw).ok_or_else(|| {
                Error::Other(format!(
                    "--overlay: sparse op '{name}' runs on mask '{}' of shape {:?}, which is not a map or token mask to draw",
                    value.name, value.shape
                ))
            })?;
            Ok((Source::Fetched { value: value.name.clone() }, layout, Some(name.to_string())))
        };
        let (source, layout, node) = match op {
            Some(name) => {
                if let Some((n, spec)) = sparse().find(|(n, _)| *n == name) {
                    from_op(n, spec)?
                } else if let Some((pos, id, layout)) = outputs().find(|&(_, id, _)| g.values[id].name == name) {
                    let user = sparse().find(|(_, s)| s.mask == id).map(|(n, _)| n.to_string());
                    (Source::Output { pos, name: name.to_string() }, layout, user)
                } else {
                    return Err(Error::Other(format!(
                        "--overlay-op '{name}' is neither a sparse op nor a mask output of the model (sparse ops: {}; mask outputs: {})",
                        some_names(sparse().map(|(n, _)| n)),
                        some_names(outputs().map(|(_, id, _)| g.values[id].name.as_str()))
                    )));
                }
            }
            None => match (sparse().next(), outputs().next()) {
                (Some((n, spec)), _) => from_op(n, spec)?,
                (None, Some((pos, id, layout))) => (Source::Output { pos, name: g.values[id].name.clone() }, layout, None),
                (None, None) => {
                    return Err(Error::Other(
                        "--overlay: the model has no sparse ops (`dynaspa inspect` says why) and no mask output (mask*, [N, 1, h, w] or [N, T]) to draw".into(),
                    ))
                }
            },
        };
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        Ok(Overlay { source, layout, node, dir, noted_no_grid: false })
    }

    /// The values the session must fetch for this overlay.
    pub fn fetches(&self) -> Vec<String> {
        match &self.source {
            Source::Fetched { value } => vec![value.clone()],
            Source::Output { .. } => vec![],
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// One line for the start of the run: what is drawn and where.
    pub fn describe(&self) -> String {
        let how = match self.layout {
            Layout::Map { h, w } => format!("{h}x{w} map"),
            Layout::Tokens { skip, h, w } => format!("{h}x{w} token grid after {skip} class token(s)"),
        };
        let what = match (&self.source, &self.node) {
            (Source::Fetched { value }, Some(n)) => format!("mask '{value}' of sparse op {n}"),
            (Source::Fetched { value }, None) => format!("mask '{value}'"),
            (Source::Output { name, .. }, Some(n)) => format!("mask output '{name}' of sparse op {n}"),
            (Source::Output { name, .. }, None) => format!("mask output '{name}'"),
        };
        format!("overlay: {what} ({how}) -> {}", self.dir.display())
    }

    /// Draws one frame and writes it as `<dir>/<base>.png`, with a strip giving the frame's
    /// latency and mask density (mean over its sparse ops) and the drawn op's.
    pub fn write(
        &mut self,
        frame: &RgbImage,
        base: &str,
        mask_value: Option<&Tensor>,
        outputs: &[(String, Tensor)],
        report: Option<&FrameReport>,
        ms: f64,
    ) -> Result<Drawn> {
        let mask = self.mask(mask_value, outputs)?;
        let record = self.record(report);
        let granularity = record.and_then(|r| r.granularity);
        let tiles = match (granularity, self.layout) {
            (Some(g), Layout::Map { .. }) => Some(mask.aligned_tiles(g)),
            _ => None,
        };
        if tiles.is_none() && !self.noted_no_grid {
            self.noted_no_grid = true;
            let why = match (granularity, &self.node) {
                (Some(_), _) => "a token mask has no 2-D DISTile grid".to_string(),
                (None, Some(n)) if record.is_some() => format!("op {n} ran its dense member"),
                (None, Some(n)) => format!("the report names no DISTile granularity for op {n}"),
                (None, None) => "no sparse op with this mask was reported".to_string(),
            };
            eprintln!("note: overlay draws the mask without DISTile outlines: {why}");
        }
        let op_density = record.map(|r| r.density);
        let frame_density = super::stats::frame_density(report);
        let mut lines = vec![format!("frame: {ms:.3} ms, density {}", super::stats::fmt_density(frame_density))];
        let op = self.node.as_deref().unwrap_or(match &self.source {
            Source::Output { name, .. } => name,
            Source::Fetched { value } => value,
        });
        let drawn_tiles = tiles.as_ref().zip(granularity).map(|(t, g)| (t.len(), g));
        // Numbers first: a long op name is what the frame's width cuts.
        let d = super::stats::fmt_density(Some(mask.density()));
        lines.push(match drawn_tiles {
            Some((n, g)) => format!("op: density {d}, {n} tiles {g}, {op}"),
            None => format!("op: density {d}, {op}"),
        });
        let img = compose(frame, &mask, tiles.as_ref(), &lines);
        let path = self.dir.join(format!("{base}.png"));
        write_atomic(&path, &encode_png(&img)?).map_err(|e| Error::io(&path, e))?;
        Ok(Drawn { op_density, tiles: drawn_tiles })
    }

    fn record<'r>(&self, report: Option<&'r FrameReport>) -> Option<&'r SparseOpRecord> {
        let node = self.node.as_ref()?;
        report?.sparse_ops.iter().find(|r| &r.node == node)
    }

    /// The mask of batch item 0 as an h x w bit map.
    fn mask(&self, fetched: Option<&Tensor>, outputs: &[(String, Tensor)]) -> Result<BitMask> {
        let (name, t) = match &self.source {
            Source::Fetched { value } => {
                (value.as_str(), fetched.ok_or_else(|| Error::Other(format!("overlay: the session did not return mask '{value}'")))?)
            }
            Source::Output { pos, name } => {
                let t = outputs
                    .get(*pos)
                    .map(|(_, t)| t)
                    .ok_or_else(|| Error::Other(format!("overlay: output '{name}' missing from the results")))?;
                (name.as_str(), t)
            }
        };
        let v = t.as_f32().map_err(|_| Error::Other(format!("overlay: mask '{name}' is not float")))?;
        let (skip, h, w) = match self.layout {
            Layout::Map { h, w } => (0, h, w),
            Layout::Tokens { skip, h, w } => (skip, h, w),
        };
        let cells = v
            .get(skip..skip + h * w)
            .ok_or_else(|| Error::Other(format!("overlay: mask '{name}' has {} values, fewer than its grid", v.len())))?;
        let bits: Vec<bool> = cells.iter().map(|&x| x > 0.5).collect();
        BitMask::from_bools(h, w, &bits)
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
    fn long_name_lists_are_cut() {
        assert_eq!(some_names(["a", "b"].into_iter()), "a, b");
        assert_eq!(some_names(std::iter::empty()), "none");
        let many: Vec<String> = (0..20).map(|i| format!("n{i}")).collect();
        let s = some_names(many.iter().map(String::as_str));
        assert!(s.starts_with("n0, n1") && s.contains("20 in all") && !s.contains("n9"), "{s}");
    }
}
