//! The IR: values (typed, statically shaped tensors, some constant) and nodes in execution order.

pub mod delta;
pub mod fold;
pub mod fuse;
pub mod fuse_attention;
mod fuse_gelu;
mod mask_trace;
mod needed;
mod needed_floor;
mod needed_mask;
pub mod op;
mod order;
pub mod shape;
pub mod shape_attention;
pub mod shape_move;
pub mod sparse;
pub mod sparse_attention;
pub mod sparse_detect;
pub mod sparse_lower;
pub mod sparse_residual;
pub mod window;
mod zero_support;

pub use op::*;
pub use sparse::{FillPolicy, MaskKind, MaskSource, SparseSpec};

use crate::tensor::{DType, Tensor};
use std::collections::HashMap;
use std::sync::Arc;

pub type ValueId = usize;

#[derive(Clone, Debug)]
pub struct Value {
    pub name: String,
    pub dtype: DType,
    /// Known for every value once the model is loaded.
    pub shape: Vec<usize>,
    /// Initializers and folded results.
    pub constant: Option<Arc<Tensor>>,
}

#[derive(Clone, Debug)]
pub struct Node {
    pub name: String,
    pub op: Op,
    /// `None` for an omitted optional input.
    pub inputs: Vec<Option<ValueId>>,
    pub outputs: Vec<ValueId>,
    /// Set by `detect_sparse_regions` when the node computes only where a mask is 1.
    pub sparse: Option<SparseSpec>,
}

#[derive(Clone, Debug, Default)]
pub struct Graph {
    pub name: String,
    pub values: Vec<Value>,
    /// Topologically sorted.
    pub nodes: Vec<Node>,
    /// Runtime inputs (initializers are not listed here).
    pub inputs: Vec<ValueId>,
    pub outputs: Vec<ValueId>,
    /// Opset of the default domain the model was written for.
    pub opset: i64,
    pub metadata: HashMap<String, String>,
    /// Elements of the float initializers as the ONNX file stores them (before any folding).
    pub onnx_parameters: usize,
    /// The file stores half-precision floats (FLOAT16 or BFLOAT16 initializers, inputs,
    /// outputs or casts); they were widened at load and are computed in fp32.
    pub stored_half: bool,
}

impl Graph {
    pub fn value(&self, id: ValueId) -> &Value {
        &self.values[id]
    }
    pub fn find_value(&self, name: &str) -> Option<ValueId> {
        self.values.iter().position(|v| v.name == name)
    }
    pub fn input_names(&self) -> Vec<&str> {
        self.inputs.iter().map(|&i| self.values[i].name.as_str()).collect()
    }
    /// For each value, the indices of the nodes that read it (as an op input or as a sparse mask).
    pub fn consumers(&self) -> Vec<Vec<usize>> {
        let mut c = vec![Vec::new(); self.values.len()];
        for (n, node) in self.nodes.iter().enumerate() {
            // A sparse node also reads its mask, which is not one of its op inputs.
            for v in node.inputs.iter().flatten().chain(node.sparse.as_ref().map(|s| &s.mask)) {
                if !c[*v].contains(&n) {
                    c[*v].push(n);
                }
            }
        }
        c
    }
    /// For each value, the index of the node that writes it (`None`: inputs and constants).
    pub fn producers(&self) -> Vec<Option<usize>> {
        let mut p = vec![None; self.values.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            for &o in &n.outputs {
                p[o] = Some(i);
            }
        }
        p
    }
    /// The value of a one-element f32 constant.
    pub fn scalar_f32(&self, v: ValueId) -> Option<f32> {
        match self.values[v].constant.as_ref()?.as_f32() {
            Ok([x]) => Some(*x),
            _ => None,
        }
    }
    pub fn is_graph_output(&self, v: ValueId) -> bool {
        self.outputs.contains(&v)
    }
    /// Number of parameters: elements of constants that nodes read.
    pub fn parameter_count(&self) -> usize {
        let mut used = vec![false; self.values.len()];
        for node in &self.nodes {
            for v in node.inputs.iter().flatten() {
                used[*v] = true;
            }
        }
        self.values
            .iter()
            .enumerate()
            .filter(|(i, v)| used[*i] && v.constant.as_ref().is_some_and(|t| t.dtype().is_float()))
            .map(|(_, v)| v.constant.as_ref().map_or(0, |t| t.len()))
            .sum()
    }
    /// Drops values no node or output refers to and renumbers the rest.
    pub fn compact(&mut self) {
        let mut live = vec![false; self.values.len()];
        for node in &self.nodes {
            for v in node.inputs.iter().flatten().chain(node.outputs.iter()) {
                live[*v] = true;
            }
            if let Some(sp) = &node.sparse {
                live[sp.mask] = true;
            }
        }
        for &v in self.inputs.iter().chain(self.outputs.iter()) {
            live[v] = true;
        }
        let mut remap = vec![usize::MAX; self.values.len()];
        let mut values = Vec::new();
        for (i, v) in std::mem::take(&mut self.values).into_iter().enumerate() {
            if live[i] {
                remap[i] = values.len();
                values.push(v);
            }
        }
        self.values = values;
        for node in &mut self.nodes {
            for v in node.inputs.iter_mut().flatten() {
                *v = remap[*v];
            }
            for v in node.outputs.iter_mut() {
                *v = remap[*v];
            }
            if let Some(sp) = &mut node.sparse {
                sp.mask = remap[sp.mask];
            }
        }
        for v in self.inputs.iter_mut().chain(self.outputs.iter_mut()) {
            *v = remap[*v];
        }
    }
    /// Counts of nodes per op name, sorted by name.
    pub fn op_histogram(&self) -> Vec<(String, usize)> {
        let mut m: std::collections::BTreeMap<String, usize> = Default::default();
        for n in &self.nodes {
            *m.entry(n.op.name().to_string()).or_default() += 1;
        }
        m.into_iter().collect()
    }
}
