//! Model loading: ONNX bytes in, an optimised graph out.

use crate::backend::OpEvaluator;
use crate::error::{Error, Result};
use crate::graph::{fold, fuse, Graph};
use crate::onnx::{self, LoadOptions};
use std::path::Path;

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
