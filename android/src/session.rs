//! The session behind a `dynaspa_session *` and a Java `ai.dynaspa.Session`: a
//! `dynaspa::Session` with its inputs and outputs described once (names as C strings, shapes,
//! element counts), running frames from and into buffers the caller owns. Both the C ABI and
//! the JNI glue go through here, so they check arguments the same way.

use crate::error::{Failure, Status, DYNASPA_ERR_BACKEND, DYNASPA_ERR_RUN};
use dynaspa::{Backend, DType, Session, Tensor, TensorData};
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use dynaspa::ProfileChoice;

/// What a caller chooses at open, in Rust terms.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// CPU worker threads (`None`: every core).
    pub threads: Option<usize>,
    /// Inactive outputs keep the last frame's values (SIGE's cached mode) instead of zeros.
    pub cached: bool,
    /// Run every op densely (the baseline of `dynaspa bench`).
    pub dense: bool,
    pub profile: ProfileChoice,
    /// GPU backends: which device (`None`: the backend's default).
    pub device: Option<String>,
    /// Where calibrated kernels are cached (`None`: from the environment, as the CLI does).
    pub cache_dir: Option<PathBuf>,
}

/// One input or output of the model.
#[derive(Debug)]
pub struct Port {
    pub name: CString,
    pub shape: Vec<usize>,
    /// Elements (the product of `shape`).
    pub len: usize,
    pub dtype: DType,
}

/// What the last frame did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Report {
    /// Wall time of the whole graph.
    pub latency: Duration,
    /// Mean mask density over the sparse ops (`None`: no op ran sparse).
    pub density: Option<f64>,
    pub sparse_ops: usize,
    /// Time spent in sparse ops, all phases.
    pub sparse_time: Duration,
}

pub struct FfiSession {
    session: Session,
    pub inputs: Vec<Port>,
    pub outputs: Vec<Port>,
    /// Set while a frame runs; still set after a panic, which leaves the session unusable.
    running: bool,
}

// Sessions move between threads (one at a time): a JVM calls from any of its threads.
const _: () = {
    const fn is_send<T: Send>() {}
    is_send::<FfiSession>()
};

impl FfiSession {
    pub fn open(model: &Path, backend: &str, s: &Settings) -> Status<FfiSession> {
        // Parsing the name does not probe which backends this machine has: probing loads GPU
        // drivers (PoCL brings LLVM, which replaces a JVM's signal handlers).
        let backend: Backend = backend.parse().map_err(|e: dynaspa::Error| Failure::new(DYNASPA_ERR_BACKEND, e.to_string()))?;
        let mut b =
            Session::builder().backend(backend).threads_opt(s.threads).dense(s.dense).cached(s.cached).profile_choice(s.profile.clone());
        if let Some(d) = &s.device {
            b = b.device(d);
        }
        if let Some(dir) = &s.cache_dir {
            b = b.cache_dir(dir);
        }
        let session = b.open(model)?;
        tracing::debug!("profile: {}", session.profile_used().unwrap_or("none"));
        let g = session.graph();
        let port = |id: usize| {
            let v = &g.values[id];
            Port {
                // Names come from a protobuf string; one holding a NUL is cut there.
                name: CString::new(v.name.split('\0').next().unwrap_or_default()).unwrap_or_default(),
                shape: v.shape.clone(),
                len: v.shape.iter().product(),
                dtype: v.dtype,
            }
        };
        let inputs = g.inputs.iter().map(|&i| port(i)).collect();
        let outputs = g.outputs.iter().map(|&i| port(i)).collect();
        Ok(FfiSession { session, inputs, outputs, running: false })
    }

    pub fn input(&self, index: usize) -> Status<&Port> {
        self.inputs
            .get(index)
            .ok_or_else(|| Failure::argument(format!("input index {index} out of range: the model has {} inputs", self.inputs.len())))
    }
    pub fn output(&self, index: usize) -> Status<&Port> {
        self.outputs
            .get(index)
            .ok_or_else(|| Failure::argument(format!("output index {index} out of range: the model has {} outputs", self.outputs.len())))
    }

    /// Runs one frame: `inputs[i]` holds input i as float32 in C order, `outputs[j]` receives
    /// output j (converted to float32 where the model's output is of another type). Every
    /// length is checked before anything runs; on an error no output buffer has been written.
    pub fn run(&mut self, inputs: Vec<Vec<f32>>, outputs: &mut [&mut [f32]]) -> Status<()> {
        if self.running {
            return Err(Failure::new(
                DYNASPA_ERR_RUN,
                "this session is unusable: an earlier frame stopped on an internal error; close it and open another",
            ));
        }
        check_count("inputs", inputs.len(), self.inputs.len())?;
        check_count("outputs", outputs.len(), self.outputs.len())?;
        let mut feeds = Vec::with_capacity(inputs.len());
        for (i, (p, data)) in self.inputs.iter().zip(inputs).enumerate() {
            let name = p.name.to_string_lossy();
            if p.dtype != DType::F32 {
                return Err(Failure::argument(format!("input {i} ('{name}') is {}: only float32 inputs can be fed", p.dtype)));
            }
            check_len("input", i, &name, p, data.len())?;
            feeds.push((name.into_owned(), Tensor::from_f32(p.shape.clone(), data)?));
        }
        for (j, (p, buf)) in self.outputs.iter().zip(outputs.iter()).enumerate() {
            check_len("output", j, &p.name.to_string_lossy(), p, buf.len())?;
        }
        self.running = true;
        let result = self.session.run(feeds);
        self.running = false;
        let result = result.map_err(|e| match e {
            dynaspa::Error::Input { .. } => Failure::from(e),
            e => Failure::new(DYNASPA_ERR_RUN, e.to_string()),
        })?;
        for (j, ((name, t), buf)) in result.iter().zip(outputs.iter_mut()).enumerate() {
            if t.len() != buf.len() {
                return Err(Failure::new(
                    DYNASPA_ERR_RUN,
                    format!("output {j} ('{name}'): the backend returned {} elements for a declared {}", t.len(), buf.len()),
                ));
            }
            match t.data() {
                TensorData::F32(v) => buf.copy_from_slice(v),
                _ => buf.iter_mut().zip(t.to_f64_vec()).for_each(|(o, v)| *o = v as f32),
            }
        }
        Ok(())
    }

    pub fn report(&self) -> Status<Report> {
        let r =
            self.session.last_report().ok_or_else(|| Failure::new(DYNASPA_ERR_RUN, "no report: the session has not run a frame yet"))?;
        let n = r.sparse_ops.len();
        let density = (n > 0).then(|| r.sparse_ops.iter().map(|o| o.density).sum::<f64>() / n as f64);
        Ok(Report { latency: r.total, density, sparse_ops: n, sparse_time: r.sparse_time() })
    }
}

fn check_count(what: &str, got: usize, want: usize) -> Status<()> {
    if got != want {
        return Err(Failure::argument(format!("{got} {what} given; the model has {want}")));
    }
    Ok(())
}

fn check_len(what: &str, i: usize, name: &str, p: &Port, got: usize) -> Status<()> {
    if got != p.len {
        return Err(Failure::argument(format!("{what} {i} ('{name}'): {got} floats given; its shape {:?} has {}", p.shape, p.len)));
    }
    Ok(())
}
