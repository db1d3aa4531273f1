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
pub mod io;
mod options;
pub mod profiles;
mod session;

pub use dynaspa_backends as backends;
pub use dynaspa_runtime as runtime;
pub use dynaspa_runtime::onnx::LoadOptions;
pub use builder::SessionBuilder;
pub use dynaspa_runtime::{DType, Error, Result, Tensor, TensorData};
pub use options::{Backend, DebugOptions, Precision, ProfileChoice};
pub use session::Session;

use dynaspa_runtime::graph::sparse_detect::{detect_sparse_regions, SparseOptions};
use dynaspa_runtime::graph::Graph;
use std::path::Path;

/// Options for opening a model.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    pub load: LoadOptions,
    /// CPU worker threads (`None`: all cores).
    pub threads: Option<usize>,
    /// Run the ops `detect_sparse_regions` finds sparsely (the default); `false` runs the same
    /// graph densely, the baseline of `dynaspa bench`.
    pub dense: bool,
    /// Keep the last frame's activations where a model-input mask is 0 (SIGE's cached mode)
    /// instead of the zeros the graph multiplies in.
    pub cached: bool,
    /// Calibration cache and forced members for sparse ops (`None`: from the environment).
    pub sparse: Option<backends::cpu::SparseConfig>,
    /// GPU backends: which device (see `dynaspa devices`; `None`: the backend's default).
    pub device: Option<String>,
    /// GPU backends: fill node outputs with NaN before their kernels run (tests).
    pub poison: bool,
    /// GPU backends: wait after every node and report its time (`FrameReport::step_times`).
    pub step_times: bool,
    /// GPU backends that record graphs (CUDA): queue repeated frames as one recorded graph
    /// (`None`: on).
    pub frame_graphs: Option<bool>,
    /// GPU backends: the sparse convs' device-dependent paths (`None` fields: the device's
    /// defaults; see docs/configuration.md).
    pub sparse_conv: backends::gpu::SparseConvOverrides,
    /// GPU backends with a vendor library (cuDNN on CUDA): how dense convs use it (`None`: timed
    /// against our kernels per conv shape).
    pub vendor_convs: Option<backends::gpu::VendorPolicy>,
    /// Graph values each run keeps besides the outputs, read with `Session::fetched` (e.g. a
    /// sparse op's mask: [`sparse_mask`]). Empty by default, which costs nothing.
    pub fetch: Vec<String>,
}

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

/// Loads a model and compiles it for `backend` ("auto", "cpu", ...).
pub fn open(path: impl AsRef<Path>, backend: &str, opts: &OpenOptions) -> Result<Session> {
    open_graph(load_model(path, opts)?, backend, opts)
}

/// The graph [`open`] compiles: loaded, optimised and, unless `opts.dense`, with its sparse ops
/// found. Lets a caller see which ops run sparse (and their masks) before opening a session.
pub fn load_model(path: impl AsRef<Path>, opts: &OpenOptions) -> Result<Graph> {
    let mut g = load_graph(path, &opts.load)?;
    if !opts.dense {
        let so = SparseOptions { cached_model_input_masks: opts.cached };
        let found = detect_sparse_regions(&mut g, &so);
        tracing::debug!(sparse_ops = found.len(), "sparse regions");
    }
    Ok(g)
}

/// The name of the mask value sparse op `node` runs on (what to put in `OpenOptions::fetch`
/// to see it), or `None` when `node` is not a sparse op of `g`.
pub fn sparse_mask(g: &Graph, node: &str) -> Option<String> {
    let n = g.nodes.iter().find(|n| n.name == node)?;
    n.sparse.as_ref().map(|s| g.values[s.mask].name.clone())
}

/// Compiles a graph from [`load_model`] for `backend`.
pub fn open_graph(g: Graph, backend: &str, opts: &OpenOptions) -> Result<Session> {
    let b = backends::create_configured(
        backend,
        &backends::BackendOptions {
            threads: opts.threads,
            sparse: Some(opts.sparse.clone().unwrap_or_else(backends::cpu::SparseConfig::from_env)),
            device: opts.device.clone(),
            poison: opts.poison,
            step_times: opts.step_times,
            frame_graphs: opts.frame_graphs,
            sparse_conv: opts.sparse_conv,
            vendor_convs: opts.vendor_convs,
            ..Default::default()
        },
    )?;
    Session::with_fetches(g, b.as_ref(), &opts.fetch)
}
