//! What every backend implements: compiling a loaded graph into something that runs frames,
//! and evaluating single ops (used for constant folding at load time).

use crate::error::Result;
use crate::graph::{Graph, Op};
use crate::tensor::{DType, Tensor};
use std::sync::Arc;

/// Type and shape of one op output, as shape inference determined it.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorSpec {
    pub dtype: DType,
    pub shape: Vec<usize>,
}

/// Evaluates one op on host tensors. `inputs[i]` is `None` for an omitted optional input.
pub trait OpEvaluator: Send + Sync {
    fn eval(&self, op: &Op, inputs: &[Option<&Tensor>], outputs: &[TensorSpec]) -> Result<Vec<Tensor>>;
}

pub trait Backend: Send + Sync {
    fn name(&self) -> &str;
    /// Prepares kernels and buffers for `graph`; shapes are static from here on.
    fn compile(&self, graph: Arc<Graph>) -> Result<Box<dyn Executable>>;
}

/// A graph compiled for one backend.
pub trait Executable: Send {
    /// `inputs` in the order of `graph.inputs`, already checked against their specs;
    /// returns the graph outputs in order.
    fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>>;
    /// `run` on inputs the caller hands over: a backend that keeps its inputs as values of the
    /// frame (the CPU) takes them without copying.
    fn run_owned(&mut self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        self.run(&inputs)
    }
    /// What the last `run` did; `None` before the first run or where a backend keeps no report.
    fn last_report(&self) -> Option<&crate::report::FrameReport> {
        None
    }
}
