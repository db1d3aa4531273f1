//! Buffer planning from liveness. Today: the peak of live activation bytes when nodes run in
//! graph order and each intermediate is freed after its last reader (what the CPU executor does).

use crate::graph::{FillPolicy, Graph};
use crate::tensor::numel;

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct MemoryPlan {
    /// Bytes of constants (weights and folded values) nodes read.
    pub constant_bytes: usize,
    /// Largest sum of simultaneously live non-constant values, graph inputs included.
    pub peak_activation_bytes: usize,
    /// Node at which the peak occurs.
    pub peak_at_node: Option<String>,
    /// Bytes of the results `Cached`-fill ops keep from frame to frame (SIGE's cached mode,
    /// delta mode): live all the time, so part of the peak too.
    pub cached_bytes: usize,
}

impl MemoryPlan {
    pub fn total_peak_bytes(&self) -> usize {
        self.constant_bytes + self.peak_activation_bytes
    }
}

fn bytes(g: &Graph, v: usize) -> usize {
    numel(&g.values[v].shape) * g.values[v].dtype.size_of()
}

pub fn plan(g: &Graph) -> MemoryPlan {
    let cons = g.consumers();
    let last: Vec<Option<usize>> = cons.iter().map(|c| c.iter().copied().max()).collect();
    let is_const = |v: usize| g.values[v].constant.is_some();
    let mut seen = vec![false; g.values.len()];
    let mut constant_bytes = 0;
    for n in &g.nodes {
        for &v in n.inputs.iter().flatten() {
            if is_const(v) && !std::mem::replace(&mut seen[v], true) {
                constant_bytes += bytes(g, v);
            }
        }
    }
    // A cached op's result outlives the frame: live from the start, never freed.
    let mut cached = vec![false; g.values.len()];
    for n in g.nodes.iter().filter(|n| n.sparse.as_ref().is_some_and(|s| s.fill == FillPolicy::Cached)) {
        for &o in &n.outputs {
            cached[o] = true;
        }
    }
    let cached_bytes: usize = (0..g.values.len()).filter(|&v| cached[v]).map(|v| bytes(g, v)).sum();
    let mut live: usize = g.inputs.iter().map(|&v| bytes(g, v)).sum::<usize>() + cached_bytes;
    let mut plan = MemoryPlan { constant_bytes, peak_activation_bytes: live, peak_at_node: None, cached_bytes };
    for (i, n) in g.nodes.iter().enumerate() {
        live += n.outputs.iter().filter(|&&o| !cached[o]).map(|&o| bytes(g, o)).sum::<usize>();
        if live > plan.peak_activation_bytes {
            plan.peak_activation_bytes = live;
            plan.peak_at_node = Some(n.name.clone());
        }
        let mut freed = vec![];
        for &v in n.inputs.iter().flatten() {
            if !is_const(v) && !cached[v] && last[v] == Some(i) && !g.is_graph_output(v) && !freed.contains(&v) {
                freed.push(v);
                live -= bytes(g, v);
            }
        }
        // Outputs nobody reads die at once.
        for &o in &n.outputs {
            if cons[o].is_empty() && !g.is_graph_output(o) && !cached[o] {
                live -= bytes(g, o);
            }
        }
    }
    plan
}
