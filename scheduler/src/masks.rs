//! Mask sets the tuner measures on: per sparse op, one mask per frame, from a `.dsm` dataset
//! (`models/masks/`) or collected by running the model on frames. Frames are split once into
//! the tuning part and a held-out tail, and the search draws mini-batches from the tuning part.

use dynaspa_runtime::graph::{Graph, MaskKind, Node};
use dynaspa_runtime::sparsity::{BitMask, MaskDataset};
use dynaspa_runtime::{Error, Result, Tensor};
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
pub struct MaskSet {
    /// Where the masks came from (a `.dsm` path or a frame directory).
    pub source: String,
    pub frames: usize,
    /// Sparse node name -> its mask in every frame.
    pub ops: BTreeMap<String, Vec<BitMask>>,
}

/// The mask plane a sparse node's kernel sees: `(h, w)` of a spatial output, `(1, tokens)`.
pub fn plane(g: &Graph, n: &Node) -> Option<(usize, usize)> {
    let spec = n.sparse.as_ref()?;
    let out = &g.values[*n.outputs.first()?].shape;
    match spec.kind {
        MaskKind::Spatial if out.len() == 4 => Some((out[2], out[3])),
        MaskKind::Token if out.len() == 4 => Some((1, out[2])),
        MaskKind::Token if out.len() >= 2 => Some((1, out[out.len() - 2])),
        _ => None,
    }
}

impl MaskSet {
    /// Every sparse node of `g` that the dataset covers: by its own record, else by the record
    /// of another node reading the same mask value (attention reads its projections' mask).
    /// Token maps get their always-active prefix tokens (the class token) put back. Nodes the
    /// dataset does not cover are returned by name, to be reported.
    pub fn from_dataset(ds: &MaskDataset, source: &str, g: &Graph) -> Result<(MaskSet, Vec<String>)> {
        let mut ops = BTreeMap::new();
        let mut missing = vec![];
        for n in g.nodes.iter().filter(|n| n.sparse.is_some()) {
            let Some((h, w)) = plane(g, n) else {
                missing.push(n.name.clone());
                continue;
            };
            let mask_value = n.sparse.as_ref().map(|s| s.mask);
            let record = ds.op_index(&n.name).or_else(|| {
                g.nodes
                    .iter()
                    .filter(|o| o.sparse.as_ref().map(|s| s.mask) == mask_value)
                    .find_map(|o| ds.op_index(&o.name).filter(|&i| ds.op_mask(0, i).is_ok_and(|m| fits(&m, ds, i, h, w))))
            });
            let Some(i) = record else {
                missing.push(n.name.clone());
                continue;
            };
            let prefix = ds.maps()[ds.ops()[i].map].prefix_tokens;
            let mut per_frame = Vec::with_capacity(ds.n_frames());
            for f in 0..ds.n_frames() {
                let m = ds.op_mask(f, i)?;
                let m = if h == 1 && (m.height(), m.width()) != (1, w) {
                    if m.len() + prefix != w {
                        return Err(Error::Other(format!(
                            "mask dataset {source}: op '{}' has {} tokens (+{prefix} prefix); node '{}' has {w}",
                            ds.ops()[i].name,
                            m.len(),
                            n.name
                        )));
                    }
                    let mw = m.width();
                    BitMask::from_fn(1, w, |_, t| t < prefix || m.get((t - prefix) / mw, (t - prefix) % mw))
                } else {
                    m
                };
                if (m.height(), m.width()) != (h, w) {
                    return Err(Error::Other(format!(
                        "mask dataset {source}: op '{}' masks are {}x{}, node '{}' computes {h}x{w}",
                        ds.ops()[i].name,
                        m.height(),
                        m.width(),
                        n.name
                    )));
                }
                per_frame.push(m);
            }
            ops.insert(n.name.clone(), per_frame);
        }
        if ops.is_empty() {
            return Err(Error::Other(format!(
                "mask dataset {source} covers none of the model's sparse ops (does it belong to model '{}'?)",
                ds.meta().get("model").and_then(|m| m.as_str()).unwrap_or("?")
            )));
        }
        Ok((MaskSet { source: source.into(), frames: ds.n_frames(), ops }, missing))
    }

    /// From masks collected per frame: `frames[f]` maps each sparse node to its mask tensor
    /// (`[N, 1, h, w]` or `[N, tokens(, 1)]`; image 0 is taken).
    pub fn from_tensors(g: &Graph, source: &str, frames: &[BTreeMap<String, Tensor>]) -> Result<MaskSet> {
        let mut ops: BTreeMap<String, Vec<BitMask>> = BTreeMap::new();
        for (fi, f) in frames.iter().enumerate() {
            for (node, t) in f {
                let n = g.nodes.iter().find(|n| &n.name == node).ok_or_else(|| Error::Other(format!("no node '{node}'")))?;
                let (h, w) = plane(g, n).ok_or_else(|| Error::Other(format!("node '{node}' is not a sparse op")))?;
                let v = t.as_f32().map_err(|_| Error::Other(format!("frame {fi}: mask of '{node}' is not FLOAT")))?;
                if v.len() < h * w {
                    return Err(Error::Other(format!("frame {fi}: mask of '{node}' has {} values, needs {}", v.len(), h * w)));
                }
                let m = BitMask::from_f32(h, w, &v[..h * w]).map_err(|e| Error::Other(format!("frame {fi}, mask of '{node}': {e}")))?;
                ops.entry(node.clone()).or_default().push(m);
            }
        }
        if ops.is_empty() || frames.is_empty() {
            return Err(Error::Other(format!("no masks collected from {source}")));
        }
        Ok(MaskSet { source: source.into(), frames: frames.len(), ops })
    }

    /// CRC-32 over every mask's bits in op and frame order, hex.
    pub fn checksum(&self) -> String {
        let mut bytes = Vec::new();
        for (name, ms) in &self.ops {
            bytes.extend_from_slice(name.as_bytes());
            for m in ms {
                bytes.extend_from_slice(&m.to_packed_bytes());
            }
        }
        format!("{:08x}", dynaspa_runtime::sparsity::dataset::crc32(&bytes))
    }

    /// Frame indices for tuning and for evaluation: the last `held_out` fraction of frames is
    /// held out (a contiguous tail, so neighbouring video frames do not leak across).
    pub fn split(&self, held_out: f64) -> (Vec<usize>, Vec<usize>) {
        let n = self.frames;
        let held = ((n as f64 * held_out.clamp(0.0, 0.9)).round() as usize).min(n.saturating_sub(1));
        ((0..n - held).collect(), (n - held..n).collect())
    }
}

fn fits(m: &BitMask, ds: &MaskDataset, i: usize, h: usize, w: usize) -> bool {
    let prefix = ds.maps()[ds.ops()[i].map].prefix_tokens;
    (m.height(), m.width()) == (h, w) || (h == 1 && m.len() + prefix == w)
}

/// Mini-batches drawn without replacement from `frames` in a seeded shuffled order, starting
/// over (reshuffled) when every frame has been drawn.
pub struct Batches {
    frames: Vec<usize>,
    order: Vec<usize>,
    next: usize,
    rng: crate::rng::Rng,
}

impl Batches {
    pub fn new(frames: Vec<usize>, seed: u64) -> Batches {
        let mut b = Batches { order: frames.clone(), frames, next: 0, rng: crate::rng::Rng::new(seed) };
        b.rng.shuffle(&mut b.order);
        b
    }

    pub fn next_batch(&mut self, size: usize) -> Vec<usize> {
        let mut out = Vec::with_capacity(size);
        while out.len() < size.min(self.frames.len()) {
            if self.next == self.order.len() {
                self.order = self.frames.clone();
                self.rng.shuffle(&mut self.order);
                self.next = 0;
            }
            let f = self.order[self.next];
            self.next += 1;
            if !out.contains(&f) {
                out.push(f);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(rel: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
    }

    fn graph(model: &str) -> Graph {
        let bytes = std::fs::read(repo(&format!("models/{model}.onnx"))).unwrap();
        let mut g = dynaspa_runtime::load::load_graph(&bytes, &Default::default(), &dynaspa_backends::cpu::CpuEvaluator).unwrap();
        dynaspa_runtime::graph::sparse_detect::detect_sparse_regions(&mut g, &Default::default());
        g
    }

    #[test]
    fn shipped_datasets_cover_their_models() {
        for (model, ds) in
            [("dynconv_small_d30", "dynconv_small_d30"), ("avit_small_d30", "avit_small_d30"), ("sige_small", "sige_small_d30")]
        {
            let g = graph(model);
            let d = MaskDataset::open(repo(&format!("models/masks/{ds}.dsm"))).unwrap();
            let (set, missing) = MaskSet::from_dataset(&d, ds, &g).unwrap();
            // ConvTranspose has a record too; nothing the model runs sparsely is left out.
            assert!(missing.is_empty(), "{model}: {missing:?}");
            for n in g.nodes.iter().filter(|n| n.sparse.is_some()) {
                let ms = &set.ops[&n.name];
                assert_eq!(ms.len(), d.n_frames());
                let (h, w) = plane(&g, n).unwrap();
                assert_eq!((ms[0].height(), ms[0].width()), (h, w), "{}", n.name);
                let dens = ms.iter().map(|m| m.density()).sum::<f64>() / ms.len() as f64;
                assert!(dens > 0.05 && dens < 0.95, "{model} {}: mean density {dens}", n.name);
            }
            if model.starts_with("avit") {
                // The class token is always active.
                assert!(set.ops.values().all(|ms| ms.iter().all(|m| m.get(0, 0))));
            }
        }
    }

    #[test]
    fn wrong_dataset_is_refused_and_splits_are_disjoint() {
        let g = graph("sige_small");
        let d = MaskDataset::open(repo("models/masks/dynconv_small_d30.dsm")).unwrap();
        let e = MaskSet::from_dataset(&d, "x.dsm", &g).unwrap_err().to_string();
        assert!(e.contains("covers none") && e.contains("dynconv_small_d30"), "{e}");
        let d = MaskDataset::open(repo("models/masks/sige_small_d30.dsm")).unwrap();
        let (set, _) = MaskSet::from_dataset(&d, "s", &g).unwrap();
        let (tr, ho) = set.split(0.25);
        assert_eq!(tr.len() + ho.len(), set.frames);
        assert!(ho.len() * 4 >= set.frames - 1 && tr.iter().all(|t| !ho.contains(t)));
        let mut b = Batches::new(tr.clone(), 7);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..tr.len().div_ceil(8) {
            let batch = b.next_batch(8);
            assert!(batch.iter().all(|f| tr.contains(f)));
            seen.extend(batch);
        }
        assert_eq!(seen.len(), tr.len(), "one pass draws every frame once");
    }
}
