//! Reductions (stub).
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::graph::*;
use dynaspa_runtime::{DType, Error, Result, Tensor};
#[allow(unused_imports)]
use super::input;

pub(crate) fn reduce(_r: &Reduce, _ins: &[Option<&Tensor>], _out: &TensorSpec) -> Result<Tensor> { Err(Error::Other("Reduce: not implemented yet".into())) }
pub(crate) fn cumsum(_exclusive: bool, _reverse: bool, _ins: &[Option<&Tensor>], _out: &TensorSpec) -> Result<Tensor> { Err(Error::Other("CumSum: not implemented yet".into())) }
