//! Norms (stub).
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::graph::*;
use dynaspa_runtime::{DType, Error, Result, Tensor};
#[allow(unused_imports)]
use super::input;

pub(crate) fn batch_norm(_eps: f32, _ins: &[Option<&Tensor>], _out: &TensorSpec) -> Result<Tensor> { Err(Error::Other("BatchNormalization: not implemented yet".into())) }
pub(crate) fn layer_norm(_axis: i64, _eps: f32, _ins: &[Option<&Tensor>], _out: &TensorSpec) -> Result<Tensor> { Err(Error::Other("LayerNormalization: not implemented yet".into())) }
pub(crate) fn instance_norm(_eps: f32, _ins: &[Option<&Tensor>], _out: &TensorSpec) -> Result<Tensor> { Err(Error::Other("InstanceNormalization: not implemented yet".into())) }
pub(crate) fn group_norm(_groups: usize, _eps: f32, _per_channel: bool, _ins: &[Option<&Tensor>], _out: &TensorSpec) -> Result<Tensor> { Err(Error::Other("GroupNormalization: not implemented yet".into())) }
