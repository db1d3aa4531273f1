//! Static buffer planning: which values share a device buffer (views made by Reshape and the
//! like), when each buffer's last reader runs, and a pool that hands freed buffers to later
//! values.

use dynaspa_runtime::graph::{Graph, Op, ValueId};

/// Ops whose output is their first input under another shape: they share its buffer.
pub(crate) fn is_view(op: &Op) -> bool {
    matches!(op, Op::Reshape { .. } | Op::Flatten { .. } | Op::Squeeze { .. } | Op::Unsqueeze { .. } | Op::Identity)
}

pub(crate) struct Liveness {
    /// The value whose buffer each value lives in (itself unless it is a view).
    pub root: Vec<ValueId>,
    /// Per root: the last node reading it or any of its views (`None`: never read).
    pub last_use: Vec<Option<usize>>,
    /// Per root: must survive the whole run (a graph output, or a constant).
    pub pinned: Vec<bool>,
}

pub(crate) fn liveness(g: &Graph) -> Liveness {
    let mut root: Vec<ValueId> = (0..g.values.len()).collect();
    for n in &g.nodes {
        if is_view(&n.op) {
            if let (Some(Some(src)), Some(&dst)) = (n.inputs.first(), n.outputs.first()) {
                root[dst] = root[*src];
            }
        }
    }
    let mut last_use = vec![None; g.values.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        for &v in n.inputs.iter().flatten().chain(n.sparse.as_ref().map(|s| &s.mask)) {
            last_use[root[v]] = Some(i);
        }
    }
    let mut pinned = vec![false; g.values.len()];
    for &o in &g.outputs {
        pinned[root[o]] = true;
    }
    for (v, val) in g.values.iter().enumerate() {
        if val.constant.is_some() {
            pinned[root[v]] = true;
        }
    }
    Liveness { root, last_use, pinned }
}

/// Free buffers by capacity in bytes; `take` returns the smallest that fits.
#[derive(Default)]
pub(crate) struct Pool {
    free: Vec<(usize, usize)>,
}

impl Pool {
    pub(crate) fn take(&mut self, bytes: usize) -> Option<usize> {
        let best = self.free.iter().enumerate().filter(|(_, &(cap, _))| cap >= bytes).min_by_key(|(_, &(cap, _))| cap)?.0;
        Some(self.free.swap_remove(best).1)
    }

    pub(crate) fn give(&mut self, buf: usize, bytes: usize) {
        debug_assert!(!self.free.iter().any(|&(_, b)| b == buf), "buffer {buf} freed twice");
        self.free.push((bytes, buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_takes_the_smallest_fit() {
        let mut p = Pool::default();
        p.give(0, 400);
        p.give(1, 100);
        p.give(2, 200);
        assert_eq!(p.take(150), Some(2));
        assert_eq!(p.take(500), None);
        assert_eq!(p.take(50), Some(1));
        assert_eq!(p.take(50), Some(0));
        assert_eq!(p.take(1), None);
    }
}
