//! Execution order after rewrites that add nodes or dependencies (a sparse node reads its mask,
//! which may be computed by nodes that come later in the file or were appended).

use super::Graph;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Reorders `g.nodes` so each node runs after the producers of its inputs and of its mask. The
/// given order is kept where it can be; a node needed by an earlier node moves up to just before
/// it (a mask unit computed ahead of the conv it masks). Fails, leaving `g` unchanged, on a
/// cycle or a value that nothing produces.
pub(crate) fn restore_order(g: &mut Graph) -> Result<(), String> {
    let n = g.nodes.len();
    let mut prod = vec![None; g.values.len()];
    for (i, node) in g.nodes.iter().enumerate() {
        for &o in &node.outputs {
            if o >= prod.len() || prod[o].replace(i).is_some() {
                return Err(format!("value {o} is produced twice or does not exist"));
            }
        }
    }
    let mut deps: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, node) in g.nodes.iter().enumerate() {
        for &v in node.inputs.iter().flatten().chain(node.sparse.as_ref().map(|s| &s.mask)) {
            let val = g.values.get(v).ok_or("a node reads a value that does not exist")?;
            match prod[v] {
                Some(p) if !deps[i].contains(&p) => {
                    deps[i].push(p);
                    users[p].push(i);
                }
                Some(_) => {}
                None if val.constant.is_some() || g.inputs.contains(&v) => {}
                None => return Err(format!("nothing produces '{}'", val.name)),
            }
        }
    }
    // Any topological order first, to give each node the earliest position of a node that
    // depends on it.
    let mut pending: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut ready: Vec<usize> = (0..n).filter(|&i| pending[i] == 0).collect();
    let mut topo = Vec::with_capacity(n);
    while let Some(i) = ready.pop() {
        topo.push(i);
        for &u in &users[i] {
            pending[u] -= 1;
            if pending[u] == 0 {
                ready.push(u);
            }
        }
    }
    if topo.len() != n {
        return Err("the nodes form a cycle".into());
    }
    let mut key: Vec<usize> = (0..n).collect();
    for &i in topo.iter().rev() {
        for &u in &users[i] {
            key[i] = key[i].min(key[u]);
        }
    }
    let mut pending: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut heap: BinaryHeap<Reverse<(usize, usize)>> = (0..n).filter(|&i| pending[i] == 0).map(|i| Reverse((key[i], i))).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse((_, i))) = heap.pop() {
        order.push(i);
        for &u in &users[i] {
            pending[u] -= 1;
            if pending[u] == 0 {
                heap.push(Reverse((key[u], u)));
            }
        }
    }
    let mut nodes: Vec<Option<super::Node>> = std::mem::take(&mut g.nodes).into_iter().map(Some).collect();
    g.nodes = order.into_iter().filter_map(|i| nodes[i].take()).collect();
    Ok(())
}
