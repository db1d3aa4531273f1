//! Test helpers for the elementwise, movement, reduce, resize and pad kernels: a tiny
//! deterministic RNG, tensor builders, and naive index arithmetic to check against.

use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::graph::Op;
use dynaspa_runtime::tensor::{numel, strides_of};
use dynaspa_runtime::{DType, Result, Tensor, TensorData};

pub(crate) struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    /// Uniform in [lo, hi).
    pub fn f32(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * ((self.next() >> 40) as f32 / (1u64 << 24) as f32)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn vec_f32(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.f32(lo, hi)).collect()
    }
    pub fn vec_i64(&mut self, n: usize, lo: i64, hi: i64) -> Vec<i64> {
        (0..n).map(|_| lo + self.below((hi - lo) as u64) as i64).collect()
    }
}

pub(crate) fn f32t(shape: &[usize], v: Vec<f32>) -> Tensor {
    Tensor::new(shape.to_vec(), TensorData::F32(v)).unwrap()
}
pub(crate) fn i64t(shape: &[usize], v: Vec<i64>) -> Tensor {
    Tensor::new(shape.to_vec(), TensorData::I64(v)).unwrap()
}
pub(crate) fn data(shape: &[usize], d: TensorData) -> Tensor {
    Tensor::new(shape.to_vec(), d).unwrap()
}
pub(crate) fn spec(dtype: DType, shape: &[usize]) -> TensorSpec {
    TensorSpec { dtype, shape: shape.to_vec() }
}

/// Runs `op` through the CPU dispatcher with one declared output.
pub(crate) fn run(op: &Op, ins: &[Option<&Tensor>], out: TensorSpec) -> Result<Tensor> {
    super::eval_op(op, ins, &[out]).map(|mut v| v.remove(0))
}

pub(crate) fn f32s(t: &Tensor) -> Vec<f32> {
    t.as_f32().unwrap().to_vec()
}

pub(crate) fn assert_close(got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || (g - w).abs() <= tol * (1.0 + w.abs());
        assert!(ok, "element {i}: got {g}, want {w}\n got {got:?}\nwant {want:?}");
    }
}

/// Multi-index of flat position `i` in `shape`.
pub(crate) fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
    idx
}

/// Flat position in `shape` of the numpy-broadcast read of output index `idx`.
pub(crate) fn bcast_index(idx: &[usize], shape: &[usize]) -> usize {
    let lead = idx.len() - shape.len();
    let st = strides_of(shape);
    shape.iter().enumerate().map(|(d, &n)| if n == 1 { 0 } else { idx[lead + d] * st[d] }).sum()
}

pub(crate) fn count(shape: &[usize]) -> usize {
    numel(shape)
}

#[path = "ops_fuzz_tests.rs"]
mod fuzz;
