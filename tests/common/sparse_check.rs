//! Checks shared by the sparse-detection tests: the rewritten graph is well formed, and it
//! computes what the original does on the CPU backend.

use dynaspa::runtime::graph::Graph;
use dynaspa::{Session, Tensor};

/// Every value a node reads exists before it runs (constants, inputs, earlier outputs, and for a
/// sparse node its mask), and every graph output is produced.
pub fn assert_well_formed(g: &Graph, what: &str) {
    let mut ready: Vec<bool> = g.values.iter().map(|v| v.constant.is_some()).collect();
    for &i in &g.inputs {
        ready[i] = true;
    }
    for n in &g.nodes {
        for &v in n.inputs.iter().flatten().chain(n.sparse.as_ref().map(|s| &s.mask)) {
            assert!(ready[v], "{what}: '{}' reads '{}' before it is computed", n.name, g.values[v].name);
        }
        for &o in &n.outputs {
            ready[o] = true;
        }
    }
    for &o in &g.outputs {
        assert!(ready[o], "{what}: output '{}' is not produced", g.values[o].name);
    }
}

pub fn run_cpu(g: Graph, feeds: Vec<(String, Tensor)>) -> Vec<(String, Tensor)> {
    let b = dynaspa::backends::create("cpu", None).unwrap();
    Session::new(g, b.as_ref()).unwrap().run(feeds).unwrap()
}

pub fn assert_same_outputs(got: &[(String, Tensor)], want: &[(String, Tensor)], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for ((n, a), (m, b)) in got.iter().zip(want) {
        assert_eq!(n, m, "{what}");
        assert_eq!(a.shape(), b.shape(), "{what}: {n}");
        let err = crate::common::rel_l2(a.as_f32().unwrap(), b.as_f32().unwrap());
        assert!(err <= 1e-6, "{what}: output {n} differs, relative L2 {err}");
    }
}
