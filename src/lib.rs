//! dynaspa: load an ONNX vision model and run it on a chosen backend.
//!
//! ```no_run
//! use dynaspa::{Backend, Session, Tensor};
//! let mut session = Session::builder().backend(Backend::Cpu).open("models/dynconv_small_d30.onnx")?;
//! let frame = Tensor::from_f32(vec![1, 3, 64, 64], vec![0.5; 3 * 64 * 64])?;
//! let outputs = session.run(vec![("image".into(), frame)])?;
//! let report = session.last_report(); // latency, density, members chosen
//! # Ok::<(), dynaspa::Error>(())
//! ```

mod builder;
mod delta;
pub mod io;
mod options;
pub mod profiles;
mod session;

pub use builder::SessionBuilder;
pub use delta::DeltaOptions;
pub use dynaspa_runtime::graph::delta::Spread;
pub use dynaspa_backends as backends;
pub use dynaspa_backends::Precision;
pub use dynaspa_runtime as runtime;
pub use dynaspa_runtime::onnx::LoadOptions;
pub use dynaspa_runtime::{DType, Error, Result, Tensor, TensorData};
pub use options::{Backend, DebugOptions, ProfileChoice};
pub use session::Session;

use dynaspa_runtime::graph::Graph;
use std::path::Path;

/// Loads and optimises a model file (constant folding runs on the CPU kernels). Tensors stored as
/// external data are read from the model's folder unless `opts.model_dir` names another.
pub fn load_graph(path: impl AsRef<Path>, opts: &LoadOptions) -> Result<Graph> {
    let path = path.as_ref();
    let bytes = dynaspa_runtime::load::read_model(path)?;
    if opts.model_dir.is_some() {
        return load_graph_bytes(&bytes, opts);
    }
    let opts = LoadOptions { model_dir: Some(path.parent().unwrap_or(Path::new("")).to_path_buf()), ..opts.clone() };
    load_graph_bytes(&bytes, &opts)
}

pub fn load_graph_bytes(bytes: &[u8], opts: &LoadOptions) -> Result<Graph> {
    dynaspa_runtime::load::load_graph(bytes, opts, &backends::cpu::CpuEvaluator)
}

/// The name of the mask value sparse op `node` runs on (what to give `SessionBuilder::fetch`
/// to see it), or `None` when `node` is not a sparse op of `g`.
pub fn sparse_mask(g: &Graph, node: &str) -> Option<String> {
    let n = g.nodes.iter().find(|n| n.name == node)?;
    n.sparse.as_ref().map(|s| g.values[s.mask].name.clone())
}
