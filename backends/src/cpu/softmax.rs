//! Softmax (stub).
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::graph::*;
use dynaspa_runtime::{DType, Error, Result, Tensor};
#[allow(unused_imports)]
use super::input;

pub(crate) fn softmax(_axis: i64, _legacy: bool, _ins: &[Option<&Tensor>], _out: &TensorSpec) -> Result<Tensor> { Err(Error::Other("Softmax: not implemented yet".into())) }
