//! Turns a needed region (graph/needed.rs) into a mask value an executor can read: a float map
//! `[N or 1, 1, H, W]` (or token rows `[N or 1, T, 1]` / `[T, 1]`) holding 0 and 1, computed by
//! ordinary nodes appended to the graph (the caller restores the order):
//! - a spread through a conv's or pool's window is a ConvTranspose of the map with a kernel of
//!   ones and the window's stride, padding and dilation (a count of the output positions that
//!   read each input position) clipped to 1;
//! - a spread back through a ConvTranspose is a MaxPool with its window;
//! - intersections multiply maps, unions add them and clip to 1; bool maps are cast to float;
//! - a token map `[N, T]` is reshaped to `[N, T, 1]`.
//!
//! Regions already built are reused, so ops sharing a region share one mask.

use super::needed::{Reach, Region};
use super::op::{AutoPad, BinaryKind, ConvTranspose, Op, Pool, Window};
use super::{Graph, Node, Value, ValueId};
use crate::tensor::{DType, Tensor};
use std::collections::HashMap;
use std::sync::Arc;

/// Names of the nodes and values a `MaskBuilder` adds start with this.
const PREFIX: &str = "needed_region/";

/// Whether a node was added to compute a needed region's mask.
pub(crate) fn is_built(name: &str) -> bool {
    name.starts_with(PREFIX)
}

#[derive(Default)]
pub(crate) struct MaskBuilder {
    built: HashMap<Region, ValueId>,
    count: usize,
}

/// Nodes and values appended by one `build`, so a caller that rejects the mask can take them back.
pub(crate) struct Mark {
    nodes: usize,
    values: usize,
}

impl MaskBuilder {
    pub fn mark(&self, g: &Graph) -> Mark {
        Mark { nodes: g.nodes.len(), values: g.values.len() }
    }

    /// Removes what was appended since `mark`.
    pub fn undo(&mut self, g: &mut Graph, mark: Mark) {
        g.nodes.truncate(mark.nodes);
        g.values.truncate(mark.values);
        self.built.retain(|_, v| *v < mark.values);
    }

    /// The float map of `r`. Errors say why no mask can be built.
    pub fn build(&mut self, g: &mut Graph, r: &Region) -> Result<ValueId, String> {
        if let Some(&v) = self.built.get(r) {
            return Ok(v);
        }
        let v = match r {
            Region::Map(m) => {
                let val = g.values.get(*m).ok_or("dangling mask value")?;
                match val.dtype {
                    DType::F32 => *m,
                    DType::Bool => {
                        let shape = val.shape.clone();
                        self.node(g, Op::Cast { to: DType::F32 }, vec![*m], shape)
                    }
                    t => return Err(format!("mask '{}' is {t}, not float or bool", val.name)),
                }
            }
            Region::Tokens(m) => {
                let val = g.values.get(*m).ok_or("dangling mask value")?;
                let (n, t) = match val.shape.as_slice() {
                    &[n, t] | &[n, t, 1] => (n, t),
                    s => return Err(format!("token map '{}' is {s:?}, not [N, T] or [N, T, 1]", val.name)),
                };
                let shape = val.shape.clone();
                let f = match val.dtype {
                    DType::F32 => *m,
                    DType::Bool => self.node(g, Op::Cast { to: DType::F32 }, vec![*m], shape.clone()),
                    d => return Err(format!("mask '{}' is {d}, not float or bool", val.name)),
                };
                if shape.len() == 3 {
                    f
                } else {
                    let dims = self.constant(g, Tensor::from_i64(vec![3], vec![n as i64, t as i64, 1]).map_err(|e| e.to_string())?);
                    self.node(g, Op::Reshape { allowzero: false }, vec![f, dims], vec![n, t, 1])
                }
            }
            Region::Both(parts) | Region::Any(parts) => {
                let union = matches!(r, Region::Any(_));
                let mut acc: Option<ValueId> = None;
                for p in parts {
                    let x = self.build(g, p)?;
                    acc = Some(match acc {
                        None => x,
                        Some(a) => {
                            let shape = broadcast(&g.values[a].shape, &g.values[x].shape)?;
                            let op = if union { BinaryKind::Add } else { BinaryKind::Mul };
                            self.node(g, Op::Binary(op), vec![a, x], shape)
                        }
                    });
                }
                let a = acc.ok_or("an empty region")?;
                if union {
                    self.clip(g, a)
                } else {
                    a
                }
            }
            Region::Spread(of, reach) => {
                let x = self.build(g, of)?;
                let s = g.values[x].shape.clone();
                if s.len() != 4 || s[2..] != reach.output {
                    return Err(format!("a map of {s:?} does not cover the window's output {:?}", reach.output));
                }
                if reach.transposed {
                    self.spread_back(g, x, reach)?
                } else {
                    self.spread(g, x, reach)?
                }
            }
        };
        self.built.insert(r.clone(), v);
        Ok(v)
    }

    /// Input positions read by the window's outputs where `x` is 1.
    fn spread(&mut self, g: &mut Graph, x: ValueId, w: &Reach) -> Result<ValueId, String> {
        let mut pad_end = [0; 2];
        let mut output_padding = [0; 2];
        for a in 0..2 {
            // ConvTranspose's length: (out - 1) * s + (k - 1) * d + 1 - pad_begin - pad_end + output_padding.
            let span = (w.output[a] - 1) * w.stride[a] + (w.kernel[a] - 1) * w.dilation[a] + 1;
            let reached = span.checked_sub(w.pad_begin[a]).ok_or("a window that starts past its own span")?;
            if reached >= w.input[a] {
                pad_end[a] = reached - w.input[a];
            } else {
                // The last input positions no window reads: fewer than a stride.
                output_padding[a] = w.input[a] - reached;
                if output_padding[a] >= w.stride[a].max(w.dilation[a]) {
                    return Err(format!("a window that leaves {} trailing positions unread", output_padding[a]));
                }
            }
        }
        let ones = vec![1.0f32; w.kernel[0] * w.kernel[1]];
        let k = self.constant(g, Tensor::from_f32(vec![1, 1, w.kernel[0], w.kernel[1]], ones).map_err(|e| e.to_string())?);
        let window = Window {
            kernel_shape: w.kernel.to_vec(),
            strides: w.stride.to_vec(),
            pads: vec![w.pad_begin[0], w.pad_begin[1], pad_end[0], pad_end[1]],
            dilations: w.dilation.to_vec(),
            auto_pad: AutoPad::NotSet,
        };
        let op = Op::ConvTranspose(ConvTranspose { window, group: 1, output_padding: output_padding.to_vec(), output_shape: None });
        let n = g.values[x].shape[0];
        let count = self.node(g, op, vec![x, k], vec![n, 1, w.input[0], w.input[1]]);
        Ok(self.clip(g, count))
    }

    /// Input positions of a ConvTranspose that feed its outputs where `x` is 1.
    fn spread_back(&mut self, g: &mut Graph, x: ValueId, w: &Reach) -> Result<ValueId, String> {
        for a in 0..2 {
            let hits = super::mask_trace::every_window_hits_input(
                w.output[a],
                w.input[a],
                w.kernel[a],
                w.stride[a],
                w.dilation[a],
                w.pad_begin[a],
            );
            if !hits {
                return Err("a ConvTranspose input position that feeds no output".into());
            }
        }
        let window = Window {
            kernel_shape: w.kernel.to_vec(),
            strides: w.stride.to_vec(),
            pads: vec![w.pad_begin[0], w.pad_begin[1], w.pad_end[0], w.pad_end[1]],
            dilations: w.dilation.to_vec(),
            auto_pad: AutoPad::NotSet,
        };
        let n = g.values[x].shape[0];
        let op = Op::MaxPool(Pool { window, ceil_mode: false, count_include_pad: false });
        Ok(self.node(g, op, vec![x], vec![n, 1, w.input[0], w.input[1]]))
    }

    fn clip(&mut self, g: &mut Graph, x: ValueId) -> ValueId {
        let lo = self.constant(g, Tensor::scalar_f32(0.0));
        let hi = self.constant(g, Tensor::scalar_f32(1.0));
        let shape = g.values[x].shape.clone();
        self.node(g, Op::Clip, vec![x, lo, hi], shape)
    }

    fn constant(&mut self, g: &mut Graph, t: Tensor) -> ValueId {
        let name = self.fresh(g, "const");
        g.values.push(Value { name, dtype: t.dtype(), shape: t.shape().to_vec(), constant: Some(Arc::new(t)) });
        g.values.len() - 1
    }

    fn node(&mut self, g: &mut Graph, op: Op, inputs: Vec<ValueId>, shape: Vec<usize>) -> ValueId {
        let name = self.fresh(g, op.name());
        g.values.push(Value { name: name.clone(), dtype: DType::F32, shape, constant: None });
        let out = g.values.len() - 1;
        g.nodes.push(Node { name, op, inputs: inputs.into_iter().map(Some).collect(), outputs: vec![out], sparse: None });
        out
    }

    fn fresh(&mut self, g: &Graph, what: &str) -> String {
        loop {
            self.count += 1;
            let name = format!("{PREFIX}{what}_{}", self.count);
            if !g.values.iter().any(|v| v.name == name) && !g.nodes.iter().any(|n| n.name == name) {
                return name;
            }
        }
    }
}

fn broadcast(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    if a.len() != b.len() {
        return Err(format!("maps of ranks {} and {}", a.len(), b.len()));
    }
    a.iter()
        .zip(b)
        .map(|(&x, &y)| match (x, y) {
            _ if x == y => Ok(x),
            (1, y) => Ok(y),
            (x, 1) => Ok(x),
            _ => Err(format!("maps of shapes {a:?} and {b:?}")),
        })
        .collect()
}
