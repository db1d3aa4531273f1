//! Pad (stub).
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::graph::*;
use dynaspa_runtime::{DType, Error, Result, Tensor};
#[allow(unused_imports)]
use super::input;

pub(crate) fn pad(_mode: PadMode, _ins: &[Option<&Tensor>], _out: &TensorSpec) -> Result<Tensor> { Err(Error::Other("Pad: not implemented yet".into())) }
