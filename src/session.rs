//! Session: a loaded, optimised graph compiled for one backend; runs frames.

use crate::builder::SessionBuilder;
use crate::delta::DeltaState;
use dynaspa_runtime::backend::{Backend, Executable};
use dynaspa_runtime::graph::Graph;
use dynaspa_runtime::{Error, Result, Tensor};
use std::sync::Arc;

pub struct Session {
    graph: Arc<Graph>,
    exec: Box<dyn Executable>,
    backend: String,
    /// Reject NaN/Inf in float inputs (a corrupt frame), on by default.
    pub check_finite: bool,
    /// Values kept from every run besides the outputs (see [`Session::with_fetches`]).
    fetches: Vec<Fetch>,
    fetched: Vec<Tensor>,
    /// Which tuned profile the sparse ops use, as [`Session::profile_used`] says it.
    profile: Option<String>,
    /// Delta mode: the change map fed with every frame.
    delta: Option<DeltaState>,
}

/// Where a fetched value comes from in a run.
#[derive(Clone, Debug)]
struct Fetch {
    name: String,
    from: FetchFrom,
}

#[derive(Clone, Debug)]
enum FetchFrom {
    /// The input at this position of `graph.inputs`.
    Input(usize),
    Constant(Arc<Tensor>),
    /// This position of the compiled graph's outputs: the model's own outputs come first,
    /// then the fetched intermediate values.
    Output(usize),
}

impl Session {
    /// Options for opening a model: backend, device, profile, precision (see [`SessionBuilder`]).
    pub fn builder() -> SessionBuilder {
        SessionBuilder::default()
    }

    /// Compiles an already loaded graph for `backend` with the backend's own settings.
    pub fn new(graph: Graph, backend: &dyn Backend) -> Result<Session> {
        Session::with_fetches(graph, backend, &[])
    }

    /// A session that also keeps the values named in `fetch` from every run, read with
    /// [`Session::fetched`] (a sparse op's mask for an overlay, an activation to debug).
    /// An intermediate value becomes an extra output of the compiled graph, so the backend
    /// keeps and returns it; with no fetches the session compiles exactly the model's graph.
    /// A name the graph does not have is an error naming it.
    pub fn with_fetches(graph: Graph, backend: &dyn Backend, fetch: &[String]) -> Result<Session> {
        let mut fetches = Vec::with_capacity(fetch.len());
        let mut extra = Vec::new();
        for name in fetch {
            let id = graph.values.iter().position(|v| &v.name == name).ok_or_else(|| {
                Error::Other(format!("cannot fetch '{name}': the graph (after import and fusion) has no value of that name"))
            })?;
            let from = if let Some(pos) = graph.inputs.iter().position(|&i| i == id) {
                FetchFrom::Input(pos)
            } else if let Some(c) = &graph.values[id].constant {
                FetchFrom::Constant(c.clone())
            } else if let Some(pos) = graph.outputs.iter().chain(&extra).position(|&o| o == id) {
                FetchFrom::Output(pos)
            } else {
                extra.push(id);
                FetchFrom::Output(graph.outputs.len() + extra.len() - 1)
            };
            fetches.push(Fetch { name: name.clone(), from });
        }
        let graph = Arc::new(graph);
        let exec = if extra.is_empty() {
            backend.compile(graph.clone())?
        } else {
            let mut compiled = (*graph).clone();
            compiled.outputs.extend(extra);
            backend.compile(Arc::new(compiled))?
        };
        Ok(Session {
            graph,
            exec,
            backend: backend.name().to_string(),
            check_finite: true,
            fetches,
            fetched: Vec::new(),
            profile: None,
            delta: None,
        })
    }

    /// The value `name` (one of the session's fetches) as the last successful `run` computed
    /// it; `None` for a name not fetched, or before the first run.
    pub fn fetched(&self, name: &str) -> Option<&Tensor> {
        self.fetches.iter().zip(&self.fetched).find(|(f, _)| f.name == name).map(|(_, t)| t)
    }
    pub fn graph(&self) -> &Graph {
        &self.graph
    }
    pub fn backend_name(&self) -> &str {
        &self.backend
    }
    /// The profile the sparse ops use, or why there is none: the file and what it was tuned
    /// for ("profiles/cpu-x86_64/dynconv.json (shipped, tuned for cpu '…', 7 of 7 sparse ops)"),
    /// or "none (…); calibrating". `None` for a session opened without the builder.
    pub fn profile_used(&self) -> Option<&str> {
        self.profile.as_deref()
    }
    pub(crate) fn set_profile_used(&mut self, line: String) {
        self.profile = Some(line);
    }
    pub(crate) fn set_delta(&mut self, delta: Option<DeltaState>) {
        self.delta = delta;
    }
    /// Delta mode: the fraction of the frame's positions that counted as changed in the last
    /// run (1.0 for a frame computed whole); `None` outside delta mode or before a run.
    pub fn last_changed_fraction(&self) -> Option<f64> {
        self.delta.as_ref().and_then(|d| d.last_changed)
    }
    /// Delta mode: the next frame is computed whole (after a scene cut, or to reset drift).
    pub fn refresh(&mut self) {
        if let Some(d) = self.delta.as_mut() {
            d.must_refresh = true;
        }
    }
    /// Per sparse op: density, chosen kernel and phase times of the last `run`.
    pub fn last_report(&self) -> Option<&dynaspa_runtime::report::FrameReport> {
        self.exec.last_report()
    }
    /// Runs one frame. `inputs` are (name, tensor) pairs covering every graph input.
    pub fn run(&mut self, inputs: Vec<(String, Tensor)>) -> Result<Vec<(String, Tensor)>> {
        let g = &self.graph;
        let mut ordered: Vec<Option<Tensor>> = vec![None; g.inputs.len()];
        let map_input = self.delta.as_ref().map(|d| d.plan.map_input.clone());
        for (name, t) in inputs {
            if map_input.as_ref() == Some(&name) {
                return Err(Error::Input { name, msg: "is delta mode's change map, which the session computes; do not give it".into() });
            }
            let pos = g.inputs.iter().position(|&i| g.values[i].name == name).ok_or_else(|| Error::Input {
                name: name.clone(),
                msg: format!("the model has no such input; its inputs are: {}", g.input_names().join(", ")),
            })?;
            let v = &g.values[g.inputs[pos]];
            if t.dtype() != v.dtype || t.shape() != v.shape.as_slice() {
                return Err(Error::Input { name, msg: format!("expected {} {:?}, got {} {:?}", v.dtype, v.shape, t.dtype(), t.shape()) });
            }
            if self.check_finite && t.has_non_finite() {
                return Err(Error::Input { name, msg: "contains NaN or infinite values".into() });
            }
            if ordered[pos].replace(t).is_some() {
                return Err(Error::Input { name: v.name.clone(), msg: "given more than once".into() });
            }
        }
        let missing: Vec<&str> = g
            .inputs
            .iter()
            .zip(&ordered)
            .filter(|(&i, t)| t.is_none() && map_input.as_deref() != Some(g.values[i].name.as_str()))
            .map(|(&i, _)| g.values[i].name.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(Error::Input { name: missing.join(", "), msg: "required input not given".into() });
        }
        if let Some(d) = self.delta.as_mut() {
            let pos_of = |name: &str| g.inputs.iter().position(|&i| g.values[i].name == name);
            let (Some(f), Some(m)) = (pos_of(&d.plan.frame_input), pos_of(&d.plan.map_input)) else {
                return Err(Error::Other("delta mode: the compiled graph lost its frame or change-map input".into()));
            };
            let frame = ordered[f]
                .as_ref()
                .ok_or_else(|| Error::Input { name: d.plan.frame_input.clone(), msg: "required input not given".into() })?;
            let map = d.map_for(frame)?;
            ordered[m] = Some(map);
            // A failed run may leave some ops' caches updated and others not.
            d.must_refresh = true;
        }
        let ordered: Vec<Tensor> = ordered.into_iter().flatten().collect();
        self.fetched.clear();
        // Fetched inputs are copied before the inputs go to the run; the rest after it.
        let mut fetched: Vec<Option<Tensor>> =
            self.fetches.iter().map(|f| if let FetchFrom::Input(i) = f.from { Some(ordered[i].clone()) } else { None }).collect();
        let mut outs = self.exec.run_owned(ordered)?;
        if let Some(d) = self.delta.as_mut() {
            d.must_refresh = false;
        }
        if !self.fetches.is_empty() {
            for (slot, f) in fetched.iter_mut().zip(&self.fetches) {
                match &f.from {
                    FetchFrom::Input(_) => {}
                    FetchFrom::Constant(c) => *slot = Some((**c).clone()),
                    FetchFrom::Output(i) => *slot = Some(outs[*i].clone()),
                }
            }
            self.fetched = fetched.into_iter().flatten().collect();
            outs.truncate(g.outputs.len());
        }
        Ok(g.outputs.iter().map(|&o| g.values[o].name.clone()).zip(outs).collect())
    }
}
