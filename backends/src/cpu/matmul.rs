//! MatMul/Gemm (stub).
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::graph::*;
use dynaspa_runtime::{DType, Error, Result, Tensor};
#[allow(unused_imports)]
use super::input;

pub(crate) fn matmul(_ins: &[Option<&Tensor>], _out: &TensorSpec) -> Result<Tensor> { Err(Error::Other("MatMul: not implemented yet".into())) }
pub(crate) fn gemm(_alpha: f32, _beta: f32, _ta: bool, _tb: bool, _ins: &[Option<&Tensor>], _out: &TensorSpec) -> Result<Tensor> { Err(Error::Other("Gemm: not implemented yet".into())) }
