//! One pass in execution order: infer each node's output types and shapes, and evaluate nodes
//! whose inputs are all constant (shape arithmetic, weight preprocessing) at load time.

use super::shape::{self, In};
use super::{Graph, Op};
use crate::backend::{OpEvaluator, TensorSpec};
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use std::sync::Arc;

pub fn infer_and_fold(g: &mut Graph, eval: &dyn OpEvaluator) -> Result<()> {
    let nodes = std::mem::take(&mut g.nodes);
    let mut kept = Vec::with_capacity(nodes.len());
    for mut node in nodes {
        let name = node.name.clone();
        let (specs, folded) = {
            let ins: Vec<Option<In>> = node
                .inputs
                .iter()
                .map(|i| {
                    i.map(|i| {
                        let v = &g.values[i];
                        In { dtype: v.dtype, shape: &v.shape, value: v.constant.as_deref() }
                    })
                })
                .collect();
            let op_name = node.op.name();
            let specs = shape::infer(&mut node.op, &ins, node.outputs.len()).map_err(|e| Error::node(&name, op_name, strip(e)))?;
            if specs.len() != node.outputs.len() {
                return Err(Error::node(&name, op_name, format!("{} outputs requested, op gives {}", node.outputs.len(), specs.len())));
            }
            let all_const = ins.iter().flatten().all(|i| i.value.is_some());
            let folded = if let Op::Shape { .. } = node.op {
                Some(vec![shape_value(&specs[0], ins[0].map(|i| i.shape).unwrap_or(&[]), &node.op)])
            } else if all_const {
                let vals: Vec<Option<&Tensor>> = ins.iter().map(|i| i.and_then(|i| i.value)).collect();
                Some(eval.eval(&node.op, &vals, &specs).map_err(|e| Error::node(&name, op_name, strip(e)))?)
            } else {
                None
            };
            (specs, folded)
        };
        for (&o, s) in node.outputs.iter().zip(&specs) {
            g.values[o].dtype = s.dtype;
            g.values[o].shape = s.shape.clone();
        }
        match folded {
            Some(ts) => {
                for (&o, t) in node.outputs.iter().zip(ts) {
                    g.values[o].constant = Some(Arc::new(t));
                }
            }
            None => kept.push(node),
        }
    }
    g.nodes = kept;
    Ok(())
}

fn strip(e: Error) -> String {
    match e {
        Error::Other(m) => m,
        e => e.to_string(),
    }
}

/// Shape is known statically, so it folds whether or not its input is constant.
fn shape_value(spec: &TensorSpec, input: &[usize], op: &Op) -> Tensor {
    let r = input.len() as i64;
    let Op::Shape { start, end } = op else { unreachable!() };
    let clamp = |v: i64| if v < 0 { (v + r).max(0) } else { v.min(r) };
    let (s, e) = (clamp(*start) as usize, clamp(end.unwrap_or(r)) as usize);
    let v: Vec<i64> = input[s..e.max(s)].iter().map(|&d| d as i64).collect();
    Tensor::from_i64(vec![v.len()], v).unwrap_or_else(|_| Tensor::zeros(spec.dtype, spec.shape.clone()))
}
