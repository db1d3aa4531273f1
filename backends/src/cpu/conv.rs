//! Conv (stub until the kernel lands).
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::graph::*;
use dynaspa_runtime::{DType, Error, Result, Tensor};
#[allow(unused_imports)]
use super::input;

pub(crate) fn conv(_p: &Conv, _ins: &[Option<&Tensor>], _out: &TensorSpec) -> Result<Tensor> { Err(Error::Other("Conv: not implemented yet".into())) }
