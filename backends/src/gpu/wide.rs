//! Which float values keep f32 storage at fp16 precision: what decides a mask. Half storage
//! keeps about 3 decimal digits, so a logit near its threshold or a running sum near 1 (A-ViT's
//! halting) decides the mask differently from f32, and a remainder taken from such a sum (1 - sum)
//! loses most of its digits. Those values stay f32; the nodes computing them run on kernels
//! compiled for f32 storage, and values crossing between the two are converted.
//!
//! The rules: (1) from every sparse op's mask, backwards through its producers, every float value
//! is wide, through elementwise maths, casts, pools and resamplings, up to and including the
//! output of anything else (a conv, a projection, a gather of a channel: their inputs are
//! activations and stay half); the masks themselves, and 0/1 values (cast from integers or
//! booleans, a caller's mask given as a graph input, and what max-pools, resamples or broadcasts
//! them) are exact in half and are walked through, not kept wide. (2) Forwards, a node whose
//! float inputs are all wide or constant, one at least, makes its float outputs wide (1 - sum).
//! (3) Graph inputs, the masks, values a PolyKernel op (a node with a sparse spec) reads, and
//! values a view aliases with a half one are half; a node's float outputs share one storage.

use super::plan::is_view;
use dynaspa_runtime::graph::{Graph, Op};
use dynaspa_runtime::DType;

/// Per value: kept in f32 at fp16 precision (see the module docs).
pub(crate) fn wide_values(g: &Graph) -> Vec<bool> {
    let n = g.values.len();
    let producers = g.producers();
    let float = |v: usize| g.values[v].dtype == DType::F32 && g.values[v].constant.is_none();
    // Never wide: graph inputs, and what a PolyKernel op reads.
    let mut pinned = vec![false; n];
    for &v in &g.inputs {
        pinned[v] = true;
    }
    for node in g.nodes.iter().filter(|nd| nd.sparse.is_some()) {
        for v in node.inputs.iter().flatten() {
            pinned[*v] = true;
        }
    }
    let seeds: Vec<usize> = g.nodes.iter().filter_map(|nd| nd.sparse.as_ref()).map(|s| s.mask).collect();
    // The masks are read as half by the bitmask kernels.
    for &m in &seeds {
        pinned[m] = true;
    }
    // 0/1 values: cast from integers or booleans, a caller's mask (a graph input of one channel
    // or one value per token), and what max-pools, resamples or broadcasts them. Exact in half:
    // kept half.
    let mut exact = vec![false; n];
    for &v in &g.inputs {
        let s = &g.values[v].shape;
        exact[v] = (s.len() == 4 && s[1] == 1) || (s.len() == 3 && s[2] == 1);
    }
    for node in &g.nodes {
        let ins: Vec<usize> = node.inputs.iter().flatten().copied().filter(|&v| g.values[v].constant.is_none()).collect();
        let is = match node.op {
            Op::Cast { .. } => ins.iter().all(|&i| g.values[i].dtype != DType::F32),
            Op::MaxPool(_) | Op::Expand | Op::Resize(_) => ins.first().is_some_and(|&i| exact[i]),
            _ => is_view(&node.op) && ins.first().is_some_and(|&i| exact[i]),
        };
        for &o in &node.outputs {
            exact[o] = is;
        }
    }
    let mut wide = vec![false; n];
    // (1) Backwards from the masks.
    let mut stack = seeds.clone();
    let mut seen = vec![false; n];
    while let Some(v) = stack.pop() {
        if std::mem::replace(&mut seen[v], true) {
            continue;
        }
        let Some(p) = producers[v] else { continue };
        let node = &g.nodes[p];
        if float(v) && !exact[v] && !pinned[v] {
            wide[v] = true;
        }
        // Elementwise maths, casts and the pools and resamplings of a mask are walked through;
        // anything else (a conv, a projection, a gather of a channel, a normalisation) made the
        // value from activations, which stay half.
        let through = matches!(
            node.op,
            Op::Unary(_)
                | Op::Binary(_)
                | Op::Clip
                | Op::Where
                | Op::Cast { .. }
                | Op::Expand
                | Op::CumSum { .. }
                | Op::MaxPool(_)
                | Op::AveragePool(_)
                | Op::Resize(_)
        );
        if through && node.sparse.is_none() {
            stack.extend(node.inputs.iter().flatten().copied());
        }
    }
    // (2) Forwards: nodes in order, so a chain of them is followed in one pass.
    for node in &g.nodes {
        if node.sparse.is_some() || is_view(&node.op) {
            continue;
        }
        let ins: Vec<usize> = node.inputs.iter().flatten().copied().filter(|&v| g.values[v].dtype == DType::F32).collect();
        let all = !ins.is_empty() && ins.iter().all(|&v| wide[v] || g.values[v].constant.is_some()) && ins.iter().any(|&v| wide[v]);
        if all {
            for &o in &node.outputs {
                if float(o) && !pinned[o] {
                    wide[o] = true;
                }
            }
        }
    }
    // (3) A view and what it aliases share a buffer: both wide or both half. A node writes all its
    // float outputs in one storage: all wide or all half.
    loop {
        let mut changed = false;
        for node in g.nodes.iter().filter(|nd| !is_view(&nd.op)) {
            let outs: Vec<usize> = node.outputs.iter().copied().filter(|&v| float(v)).collect();
            if outs.iter().any(|&v| wide[v]) && !outs.iter().all(|&v| wide[v]) {
                let all = !outs.iter().any(|&v| pinned[v]);
                for &v in &outs {
                    changed |= std::mem::replace(&mut wide[v], all) != all;
                }
            }
        }
        for node in g.nodes.iter().filter(|nd| is_view(&nd.op)) {
            let vs: Vec<usize> = node.inputs.iter().take(1).flatten().chain(node.outputs.iter()).copied().collect();
            if vs.iter().any(|&v| wide[v]) && !vs.iter().all(|&v| wide[v] && !pinned[v]) {
                // Half for good: pinned only grows, so the two rules settle.
                for &v in &vs {
                    changed |= std::mem::replace(&mut wide[v], false);
                    pinned[v] = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    wide
}

/// Whether node `i` runs on f32 storage: one of its float outputs is wide, or it has no float
/// output (a comparison) and reads a wide value.
pub(crate) fn node_is_wide(g: &Graph, i: usize, wide: &[bool]) -> bool {
    let node = &g.nodes[i];
    if node.sparse.is_some() {
        return false;
    }
    let is_f = |v: usize| g.values[v].dtype == DType::F32;
    let float_outs: Vec<usize> = node.outputs.iter().copied().filter(|&v| is_f(v)).collect();
    if float_outs.is_empty() {
        node.inputs.iter().flatten().any(|&v| wide[v])
    } else {
        float_outs.iter().any(|&v| wide[v])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dynaspa_runtime::graph::{BinaryKind, FillPolicy, MaskKind, MaskSource, Node, SparseSpec, UnaryKind, Value};

    fn value(g: &mut Graph, name: &str, dtype: DType) -> usize {
        g.values.push(Value { name: name.into(), dtype, shape: vec![1, 4], constant: None });
        g.values.len() - 1
    }

    fn constant(g: &mut Graph, name: &str, v: f32) -> usize {
        let c = value(g, name, DType::F32);
        g.values[c].constant = Some(std::sync::Arc::new(dynaspa_runtime::Tensor::from_f32(vec![1], vec![v]).unwrap()));
        c
    }

    fn node(name: &str, op: Op, ins: Vec<usize>, outs: Vec<usize>) -> Node {
        Node { name: name.into(), op, inputs: ins.into_iter().map(Some).collect(), outputs: outs, sparse: None }
    }

    fn spec(mask: usize) -> SparseSpec {
        SparseSpec {
            mask,
            kind: MaskKind::Token,
            source: MaskSource::InGraph { node: "compare".into() },
            dilation: [0, 0],
            fill: FillPolicy::Zero,
            fused_mul: false,
        }
    }

    /// A halting chain: h = sigmoid(x), c = c0 + h, mask = Cast(Less(c, t)), r = 1 - c, y = r * x.
    /// c and h decide the mask (wide), the comparison runs wide, r follows c forwards, and y
    /// (half activations times r) stays half, as do the input and the mask.
    #[test]
    fn the_values_deciding_a_mask_and_what_follows_them_alone_are_wide() {
        let mut g = Graph::default();
        let x = value(&mut g, "x", DType::F32);
        let c0 = value(&mut g, "c0", DType::F32);
        let h = value(&mut g, "h", DType::F32);
        let c = value(&mut g, "c", DType::F32);
        let t = constant(&mut g, "t", 0.99);
        let less = value(&mut g, "less", DType::Bool);
        let mask = value(&mut g, "mask", DType::F32);
        let one = constant(&mut g, "one", 1.0);
        let r = value(&mut g, "r", DType::F32);
        let y = value(&mut g, "y", DType::F32);
        let z = value(&mut g, "z", DType::F32);
        g.inputs = vec![x, c0];
        g.nodes = vec![
            node("sig", Op::Unary(UnaryKind::Sigmoid), vec![x], vec![h]),
            node("acc", Op::Binary(BinaryKind::Add), vec![c0, h], vec![c]),
            node("lt", Op::Binary(BinaryKind::Less), vec![c, t], vec![less]),
            node("cast", Op::Cast { to: DType::F32 }, vec![less], vec![mask]),
            node("rem", Op::Binary(BinaryKind::Sub), vec![one, c], vec![r]),
            node("weigh", Op::Binary(BinaryKind::Mul), vec![r, x], vec![y]),
            node("use", Op::Binary(BinaryKind::Mul), vec![y, mask], vec![z]),
        ];
        // A PolyKernel op reading x under the mask.
        let mut sparse_node = node("proj", Op::MatMul, vec![x, x], vec![value(&mut g, "p", DType::F32)]);
        sparse_node.sparse = Some(spec(mask));
        g.nodes.push(sparse_node);
        g.outputs = vec![z];
        let wide = wide_values(&g);
        let names: Vec<&str> = (0..g.values.len()).filter(|&v| wide[v]).map(|v| g.values[v].name.as_str()).collect();
        assert_eq!(names, ["h", "c", "r"]);
        let nodes: Vec<&str> = (0..g.nodes.len()).filter(|&i| node_is_wide(&g, i, &wide)).map(|i| g.nodes[i].name.as_str()).collect();
        assert_eq!(nodes, ["sig", "acc", "lt", "rem"]);
    }

    /// A node writes its float outputs in one storage: a Split whose first part makes a mask
    /// logit makes its second part wide too, and both go half once a PolyKernel op reads the
    /// second.
    #[test]
    fn the_outputs_of_one_node_share_a_storage() {
        let mut g = Graph::default();
        let x = value(&mut g, "x", DType::F32);
        let (a, b) = (value(&mut g, "a", DType::F32), value(&mut g, "b", DType::F32));
        let (h, less, mask) = (value(&mut g, "h", DType::F32), value(&mut g, "less", DType::Bool), value(&mut g, "mask", DType::F32));
        let zero = constant(&mut g, "zero", 0.0);
        let y = value(&mut g, "y", DType::F32);
        g.inputs = vec![x];
        g.nodes = vec![
            node("split", Op::Split { axis: 1, split: None, num_outputs: Some(2) }, vec![x], vec![a, b]),
            node("sig", Op::Unary(UnaryKind::Sigmoid), vec![a], vec![h]),
            node("gt", Op::Binary(BinaryKind::Greater), vec![h, zero], vec![less]),
            node("cast", Op::Cast { to: DType::F32 }, vec![less], vec![mask]),
            node("use", Op::Binary(BinaryKind::Mul), vec![b, mask], vec![y]),
        ];
        g.outputs = vec![y];
        let names = |g: &Graph| {
            let wide = wide_values(g);
            (0..g.values.len()).filter(|&v| wide[v]).map(|v| g.values[v].name.clone()).collect::<Vec<_>>()
        };
        let p = value(&mut g, "p", DType::F32);
        let mut masked = node("proj", Op::MatMul, vec![x, x], vec![p]);
        masked.sparse = Some(spec(mask));
        g.nodes.push(masked);
        assert_eq!(names(&g), ["a", "b", "h"]);
        let q = value(&mut g, "q", DType::F32);
        let mut reader = node("proj_b", Op::MatMul, vec![b, b], vec![q]);
        reader.sparse = Some(spec(mask));
        g.nodes.push(reader);
        assert_eq!(names(&g), ["h"]);
    }
}
