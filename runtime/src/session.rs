//! Session: a loaded, optimised graph compiled for one backend; runs frames.

use crate::backend::{Backend, Executable, OpEvaluator};
use crate::error::{Error, Result};
use crate::graph::{fold, fuse, Graph};
use crate::onnx::{self, LoadOptions};
use crate::tensor::Tensor;
use std::path::Path;
use std::sync::Arc;

/// Decodes, imports, infers shapes, folds constants and applies the fusions.
pub fn load_graph(bytes: &[u8], opts: &LoadOptions, eval: &dyn OpEvaluator) -> Result<Graph> {
    let model = onnx::parse_model(bytes)?;
    let mut g = {
        let _s = tracing::debug_span!("import").entered();
        onnx::import(&model, opts)?
    };
    drop(model);
    {
        let _s = tracing::debug_span!("fold").entered();
        fold::infer_and_fold(&mut g, eval)?;
    }
    fuse::optimise(&mut g);
    tracing::debug!(nodes = g.nodes.len(), values = g.values.len(), "graph ready");
    Ok(g)
}

pub fn read_model(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::io(path, e))
}

pub struct Session {
    graph: Arc<Graph>,
    exec: Box<dyn Executable>,
    backend: String,
    /// Reject NaN/Inf in float inputs (a corrupt frame), on by default.
    pub check_finite: bool,
}

impl Session {
    pub fn new(graph: Graph, backend: &dyn Backend) -> Result<Session> {
        let graph = Arc::new(graph);
        let exec = backend.compile(graph.clone())?;
        Ok(Session { graph, exec, backend: backend.name().to_string(), check_finite: true })
    }
    pub fn graph(&self) -> &Graph {
        &self.graph
    }
    pub fn backend_name(&self) -> &str {
        &self.backend
    }
    /// Per sparse op: density, chosen kernel and phase times of the last `run`.
    pub fn last_report(&self) -> Option<&crate::report::FrameReport> {
        self.exec.last_report()
    }
    /// Runs one frame. `inputs` are (name, tensor) pairs covering every graph input.
    pub fn run(&mut self, inputs: Vec<(String, Tensor)>) -> Result<Vec<(String, Tensor)>> {
        let g = &self.graph;
        let mut ordered: Vec<Option<Tensor>> = vec![None; g.inputs.len()];
        for (name, t) in inputs {
            let pos = g.inputs.iter().position(|&i| g.values[i].name == name).ok_or_else(|| Error::Input {
                name: name.clone(),
                msg: format!("the model has no such input; its inputs are: {}", g.input_names().join(", ")),
            })?;
            let v = &g.values[g.inputs[pos]];
            if t.dtype() != v.dtype || t.shape() != v.shape.as_slice() {
                return Err(Error::Input {
                    name,
                    msg: format!("expected {} {:?}, got {} {:?}", v.dtype, v.shape, t.dtype(), t.shape()),
                });
            }
            if self.check_finite && t.has_non_finite() {
                return Err(Error::Input { name, msg: "contains NaN or infinite values".into() });
            }
            if ordered[pos].replace(t).is_some() {
                return Err(Error::Input { name: v.name.clone(), msg: "given more than once".into() });
            }
        }
        let missing: Vec<&str> =
            g.inputs.iter().zip(&ordered).filter(|(_, t)| t.is_none()).map(|(&i, _)| g.values[i].name.as_str()).collect();
        if !missing.is_empty() {
            return Err(Error::Input { name: missing.join(", "), msg: "required input not given".into() });
        }
        let ordered: Vec<Tensor> = ordered.into_iter().flatten().collect();
        let outs = self.exec.run(&ordered)?;
        Ok(g.outputs.iter().map(|&o| g.values[o].name.clone()).zip(outs).collect())
    }
}
