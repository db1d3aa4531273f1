//! `OpSignature`: what makes two sparse ops interchangeable for tuning. A profile's PolyKernel
//! is only valid for an op of the same kind, shapes and window: the node name alone is not
//! enough (a re-exported model may keep names and change shapes).

use crate::graph::{Graph, Node, Op, Window};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OpSignature {
    /// ONNX op type after fusion ("Conv", "MatMul", "Attention", ...).
    pub kind: String,
    /// Shape of every input (`None` for an omitted optional input).
    pub inputs: Vec<Option<Vec<usize>>>,
    pub output: Vec<usize>,
    /// Window of convolutions; empty for other ops.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel: Vec<usize>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub strides: Vec<usize>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pads: Vec<usize>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dilations: Vec<usize>,
    /// Conv groups; 0 for ops without groups.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub group: usize,
    /// Fused epilogue (activation, residual add) as text: it changes the kernel's cost.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub epilogue: String,
}

fn is_zero(v: &usize) -> bool {
    *v == 0
}

impl OpSignature {
    pub fn of(g: &Graph, n: &Node) -> OpSignature {
        let inputs = n.inputs.iter().map(|i| i.map(|v| g.values[v].shape.clone())).collect();
        let output = n.outputs.first().map_or_else(Vec::new, |&o| g.values[o].shape.clone());
        let mut s = OpSignature {
            kind: n.op.name().to_string(),
            inputs,
            output,
            kernel: vec![],
            strides: vec![],
            pads: vec![],
            dilations: vec![],
            group: 0,
            epilogue: String::new(),
        };
        let mut window = |w: &Window, group: usize| {
            s.kernel = w.kernel_shape.clone();
            s.strides = w.strides.clone();
            s.pads = w.pads.clone();
            s.dilations = w.dilations.clone();
            s.group = group;
        };
        match &n.op {
            Op::Conv(c) => {
                window(&c.window, c.group);
                s.epilogue = format!("{:?}{}", c.activation, if c.fused_add { "+add" } else { "" });
            }
            Op::ConvTranspose(c) => window(&c.window, c.group),
            _ => {}
        }
        s
    }

    /// One line for tables and messages: `Conv 16x18x24 -> 16x18x24 k3x3 s1x1 g1`.
    pub fn short(&self) -> String {
        let dims = |v: &[usize]| v.iter().skip(1).map(|d| d.to_string()).collect::<Vec<_>>().join("x");
        let x = self.inputs.first().cloned().flatten().unwrap_or_default();
        let mut s = format!("{} {} -> {}", self.kind, dims(&x), dims(&self.output));
        if !self.kernel.is_empty() {
            let j = |v: &[usize]| v.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x");
            s += &format!(" k{} s{} g{}", j(&self.kernel), j(&self.strides), self.group);
        }
        s
    }
}
