//! Elementwise (stub).
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::graph::*;
use dynaspa_runtime::{DType, Error, Result, Tensor};
#[allow(unused_imports)]
use super::input;

pub(crate) fn unary(_k: UnaryKind, _ins: &[Option<&Tensor>], _out: &TensorSpec) -> Result<Tensor> { Err(Error::Other("Unary: not implemented yet".into())) }
pub(crate) fn clip(_ins: &[Option<&Tensor>], _out: &TensorSpec) -> Result<Tensor> { Err(Error::Other("Clip: not implemented yet".into())) }
pub(crate) fn binary(_k: BinaryKind, _ins: &[Option<&Tensor>], _out: &TensorSpec) -> Result<Tensor> { Err(Error::Other("Binary: not implemented yet".into())) }
pub(crate) fn cast(_to: DType, _ins: &[Option<&Tensor>], _out: &TensorSpec) -> Result<Tensor> { Err(Error::Other("Cast: not implemented yet".into())) }
pub(crate) fn where_(_ins: &[Option<&Tensor>], _out: &TensorSpec) -> Result<Tensor> { Err(Error::Other("Where: not implemented yet".into())) }
