//! `Session::builder()`: how a model is opened — backend, device, profile, precision — read
//! like the CLI's flags, resolved when the session opens.

use crate::backends::{self, gpu::SparseConvOverrides, gpu::VendorPolicy, BackendOptions};
use crate::delta::{DeltaOptions, DeltaState};
use crate::options::{Backend, DebugOptions, ProfileChoice};
use crate::profiles;
use crate::session::Session;
use crate::Precision;
use dynaspa_runtime::graph::sparse_detect::{detect_sparse_regions, SparseOptions};
use dynaspa_runtime::graph::Graph;
use dynaspa_runtime::onnx::LoadOptions;
use dynaspa_runtime::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Options for opening a model; every field has the default a user of the CLI gets.
///
/// ```no_run
/// use dynaspa::{Backend, Session};
/// let mut session = Session::builder().backend(Backend::Cpu).threads(2).open("models/dynconv_small_d30.onnx")?;
/// println!("profile: {}", session.profile_used().unwrap_or("none"));
/// # Ok::<(), dynaspa::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct SessionBuilder {
    backend: Backend,
    device: Option<String>,
    threads: Option<usize>,
    precision: Precision,
    profile: ProfileChoice,
    dense: bool,
    cached: bool,
    load: LoadOptions,
    fetch: Vec<String>,
    cache_dir: Option<PathBuf>,
    frame_graphs: Option<bool>,
    sparse_conv: SparseConvOverrides,
    vendor_convs: Option<VendorPolicy>,
    delta: Option<DeltaOptions>,
    debug: DebugOptions,
}

impl SessionBuilder {
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }
    /// GPU backends: which device — an index of `dynaspa devices`, "platform:device" (OpenCL)
    /// or part of the name (default: the backend's `DYNASPA_*_DEVICE`, else the first GPU).
    pub fn device(mut self, device: impl ToString) -> Self {
        self.device = Some(device.to_string());
        self
    }
    /// CPU worker threads (default: every core).
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = Some(threads);
        self
    }
    pub fn threads_opt(mut self, threads: Option<usize>) -> Self {
        self.threads = threads;
        self
    }
    /// The element type to compute in (default f32). No backend computes in f16 yet: asking
    /// for it makes `open` fail with [`Error::Unavailable`].
    pub fn precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }
    /// The tuned profile in `path` instead of the shipped one. The file is read here; whether it
    /// was made for this device and model is checked at open.
    pub fn profile(mut self, path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let profile = profiles::read(path)?;
        self.profile = ProfileChoice::Loaded { name: path.display().to_string(), profile: Arc::new(profile) };
        Ok(self)
    }
    /// Shipped (default), a file, a profile in memory, or calibration at open.
    pub fn profile_choice(mut self, choice: ProfileChoice) -> Self {
        self.profile = choice;
        self
    }
    /// Run the same graph densely: no sparse ops (the baseline of `dynaspa bench`).
    pub fn dense(mut self, dense: bool) -> Self {
        self.dense = dense;
        self
    }
    /// Keep the last frame's activations where a model-input mask is 0 (SIGE's cached mode)
    /// instead of the zeros the graph multiplies in.
    pub fn cached(mut self, cached: bool) -> Self {
        self.cached = cached;
        self
    }
    /// How the ONNX file is read (external data folder, symbolic dimensions).
    pub fn load_options(mut self, load: LoadOptions) -> Self {
        self.load = load;
        self
    }
    /// Graph values each run keeps besides the outputs, read with `Session::fetched` (a sparse
    /// op's mask: [`crate::sparse_mask`]).
    pub fn fetch(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.fetch.extend(names.into_iter().map(Into::into));
        self
    }
    /// Where calibrated PolyKernels and compiled GPU programs are cached (default
    /// `$DYNASPA_CACHE_DIR`, else the user cache).
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }
    /// GPU backends that record graphs (CUDA): queue repeated frames as one recorded graph
    /// (default on).
    pub fn frame_graphs(mut self, on: bool) -> Self {
        self.frame_graphs = Some(on);
        self
    }
    /// GPU backends: the sparse convs' device-dependent paths (unset fields: the device's
    /// defaults; docs/configuration.md lists them).
    pub fn sparse_conv(mut self, overrides: SparseConvOverrides) -> Self {
        self.sparse_conv = overrides;
        self
    }
    /// GPU backends with a vendor library (cuDNN on CUDA): how dense convs use it (default:
    /// timed against our kernels per conv shape).
    pub fn vendor_convs(mut self, policy: VendorPolicy) -> Self {
        self.vendor_convs = Some(policy);
        self
    }
    /// Delta mode: every frame, the runtime finds where the frame input changed since the last
    /// computed frame and every conv recomputes only outputs whose inputs changed, keeping its
    /// last activations elsewhere. The model's own masks are not used.
    pub fn delta(mut self, delta: Option<DeltaOptions>) -> Self {
        self.delta = delta;
        self
    }
    pub fn debug(mut self, debug: DebugOptions) -> Self {
        self.debug = debug;
        self
    }

    /// Loads and optimises `path` and, unless `dense`, finds its sparse ops: the graph `open`
    /// compiles, for a caller that wants to see it first (which ops run sparse, their masks).
    /// In delta mode no sparse ops are found here: `open_graph` adds the change map.
    pub fn load(&self, path: impl AsRef<Path>) -> Result<Graph> {
        let mut g = crate::load_graph(path, &self.load)?;
        if !self.dense && self.delta.is_none() {
            let found = detect_sparse_regions(&mut g, &SparseOptions { cached_model_input_masks: self.cached });
            tracing::debug!(sparse_ops = found.len(), "sparse regions");
        }
        Ok(g)
    }

    /// Loads the model and compiles it.
    pub fn open(&self, path: impl AsRef<Path>) -> Result<Session> {
        let path = path.as_ref();
        self.open_graph(self.load(path)?, Some(path))
    }

    /// Compiles a graph from [`SessionBuilder::load`]; `model` is the file it came from, by
    /// which the shipped profile is looked up (`None`: no shipped profile).
    pub fn open_graph(&self, mut g: Graph, model: Option<&Path>) -> Result<Session> {
        let delta = match (&self.delta, self.dense) {
            (Some(d), false) => {
                d.check()?;
                if matches!(self.profile, ProfileChoice::File(_) | ProfileChoice::Loaded { .. }) {
                    return Err(Error::Other("delta mode calibrates its own sparse ops and takes no profile".into()));
                }
                let input = match &d.input {
                    Some(name) => name.clone(),
                    None => dynaspa_runtime::graph::delta::default_frame_input(&g).map_err(Error::Other)?,
                };
                let plan =
                    dynaspa_runtime::graph::delta::add_change_map(&mut g, &input, d.spread).map_err(|e| Error::Other(format!("delta mode: {e}")))?;
                tracing::info!(
                    convs = plan.convs.len(),
                    elementwise = plan.elementwise.len(),
                    held_norms = plan.held_norms.len(),
                    map = %plan.map_input,
                    "delta mode"
                );
                Some(DeltaState::new(plan, d.clone()))
            }
            _ => None,
        };
        let backend = self.backend.name();
        let (line, checked) = match delta {
            Some(_) => ("none (delta mode); calibrating".to_string(), None),
            None => profiles::choose(&self.profile, model, &g, || {
                profiles::this_device(backend, self.threads, self.device.as_deref(), self.precision)
            })?,
        };
        let mut sparse = backends::SparseConfig::from_env();
        if let Some(dir) = &self.cache_dir {
            sparse.cache_dir = Some(dir.clone());
        }
        if let Some(f) = self.debug.force_member {
            sparse.force = Some(f);
        }
        sparse.profile = checked.map(|c| Arc::new(c.profile));
        let opts = BackendOptions {
            threads: self.threads,
            sparse: Some(sparse),
            device: self.device.clone(),
            poison: self.debug.poison,
            step_times: self.debug.step_times,
            frame_graphs: self.frame_graphs,
            sparse_conv: self.sparse_conv,
            vendor_convs: self.vendor_convs,
            precision: self.precision,
            // Delta mode's maps alternate between whole frames and small changes (an edit after
            // its original, a refresh among partial frames): the last frame's counts would pick
            // the wrong members, so GPU ops wait for each frame's own.
            counts: if delta.is_some() { backends::gpu::CountsSync::Exact } else { Default::default() },
            ..Default::default()
        };
        let b = backends::create_configured(backend, &opts)?;
        let mut session = Session::with_fetches(g, b.as_ref(), &self.fetch)?;
        session.set_profile_used(line);
        session.set_delta(delta);
        Ok(session)
    }
}
