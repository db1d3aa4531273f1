//! Pools (stub).
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::graph::*;
use dynaspa_runtime::{DType, Error, Result, Tensor};
#[allow(unused_imports)]
use super::input;

pub(crate) fn max_pool(_p: &Pool, _ins: &[Option<&Tensor>], _out: &TensorSpec) -> Result<Tensor> { Err(Error::Other("MaxPool: not implemented yet".into())) }
pub(crate) fn average_pool(_p: &Pool, _ins: &[Option<&Tensor>], _out: &TensorSpec) -> Result<Tensor> { Err(Error::Other("AveragePool: not implemented yet".into())) }
pub(crate) fn global_average_pool(_ins: &[Option<&Tensor>], _out: &TensorSpec) -> Result<Tensor> { Err(Error::Other("GlobalAveragePool: not implemented yet".into())) }
