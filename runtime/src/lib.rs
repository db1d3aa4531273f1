//! dynaspa-runtime: ONNX import, the IR and its passes, sparsity, dispatch, planning.
//! No GPU dependencies live here; backends implement [`backend::Backend`].

pub mod backend;
pub mod dispatch;
pub mod error;
pub mod graph;
pub mod load;
pub mod onnx;
pub mod plan;
pub mod profile;
pub mod report;
pub mod sparsity;
pub mod tensor;

pub use error::{Error, Result};
pub use tensor::{DType, Tensor, TensorData};
