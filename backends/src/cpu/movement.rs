//! Data movement (stub).
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::graph::*;
use dynaspa_runtime::{DType, Error, Result, Tensor};
#[allow(unused_imports)]
use super::input;

pub(crate) fn reshape_like(_ins: &[Option<&Tensor>], _out: &TensorSpec) -> Result<Tensor> { Err(Error::Other("Reshape: not implemented yet".into())) }
pub(crate) fn transpose(_perm: &[usize], _ins: &[Option<&Tensor>], _out: &TensorSpec) -> Result<Tensor> { Err(Error::Other("Transpose: not implemented yet".into())) }
pub(crate) fn concat(_axis: i64, _ins: &[Option<&Tensor>], _out: &TensorSpec) -> Result<Tensor> { Err(Error::Other("Concat: not implemented yet".into())) }
pub(crate) fn slice(_ins: &[Option<&Tensor>], _out: &TensorSpec) -> Result<Tensor> { Err(Error::Other("Slice: not implemented yet".into())) }
pub(crate) fn split(_axis: i64, _ins: &[Option<&Tensor>], _outs: &[TensorSpec]) -> Result<Vec<Tensor>> { Err(Error::Other("Split: not implemented yet".into())) }
pub(crate) fn gather(_axis: i64, _ins: &[Option<&Tensor>], _out: &TensorSpec) -> Result<Tensor> { Err(Error::Other("Gather: not implemented yet".into())) }
pub(crate) fn expand(_ins: &[Option<&Tensor>], _out: &TensorSpec) -> Result<Tensor> { Err(Error::Other("Expand: not implemented yet".into())) }
pub(crate) fn shape(_start: i64, _end: Option<i64>, _ins: &[Option<&Tensor>], _out: &TensorSpec) -> Result<Tensor> { Err(Error::Other("Shape: not implemented yet".into())) }
pub(crate) fn constant_of_shape(_value: &Tensor, _out: &TensorSpec) -> Result<Tensor> { Err(Error::Other("ConstantOfShape: not implemented yet".into())) }
