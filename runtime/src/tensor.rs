//! Host tensors: a shape and a typed, contiguous, row-major buffer.

use crate::error::{Error, Result};

/// Element types the runtime computes with. Codes are ONNX `TensorProto.DataType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum DType {
    F32,
    F64,
    I64,
    I32,
    I8,
    U8,
    Bool,
}

impl DType {
    pub fn from_onnx(code: i32) -> Option<DType> {
        Some(match code {
            1 => DType::F32,
            2 => DType::U8,
            3 => DType::I8,
            6 => DType::I32,
            7 => DType::I64,
            9 => DType::Bool,
            11 => DType::F64,
            _ => return None,
        })
    }
    pub fn onnx_code(self) -> i32 {
        match self {
            DType::F32 => 1,
            DType::U8 => 2,
            DType::I8 => 3,
            DType::I32 => 6,
            DType::I64 => 7,
            DType::Bool => 9,
            DType::F64 => 11,
        }
    }
    /// Name of any ONNX data type code, including the ones we do not support.
    pub fn onnx_name(code: i32) -> &'static str {
        match code {
            0 => "UNDEFINED",
            1 => "FLOAT",
            2 => "UINT8",
            3 => "INT8",
            4 => "UINT16",
            5 => "INT16",
            6 => "INT32",
            7 => "INT64",
            8 => "STRING",
            9 => "BOOL",
            10 => "FLOAT16",
            11 => "DOUBLE",
            12 => "UINT32",
            13 => "UINT64",
            14 => "COMPLEX64",
            15 => "COMPLEX128",
            16 => "BFLOAT16",
            17..=20 => "FLOAT8",
            21 | 22 => "INT4/UINT4",
            23 => "FLOAT4E2M1",
            24 => "FLOAT8E8M0",
            25 | 26 => "INT2/UINT2",
            _ => "unknown",
        }
    }
    pub fn size_of(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
            DType::I8 | DType::U8 | DType::Bool => 1,
        }
    }
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(DType::onnx_name(self.onnx_code()))
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum TensorData {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I64(Vec<i64>),
    I32(Vec<i32>),
    I8(Vec<i8>),
    U8(Vec<u8>),
    Bool(Vec<bool>),
}

/// Applies the same expression to whichever typed vector a `TensorData` holds.
#[macro_export]
macro_rules! map_data {
    ($data:expr, $v:ident => $e:expr) => {
        match $data {
            $crate::tensor::TensorData::F32($v) => $e,
            $crate::tensor::TensorData::F64($v) => $e,
            $crate::tensor::TensorData::I64($v) => $e,
            $crate::tensor::TensorData::I32($v) => $e,
            $crate::tensor::TensorData::I8($v) => $e,
            $crate::tensor::TensorData::U8($v) => $e,
            $crate::tensor::TensorData::Bool($v) => $e,
        }
    };
}

impl TensorData {
    pub fn dtype(&self) -> DType {
        match self {
            TensorData::F32(_) => DType::F32,
            TensorData::F64(_) => DType::F64,
            TensorData::I64(_) => DType::I64,
            TensorData::I32(_) => DType::I32,
            TensorData::I8(_) => DType::I8,
            TensorData::U8(_) => DType::U8,
            TensorData::Bool(_) => DType::Bool,
        }
    }
    pub fn len(&self) -> usize {
        map_data!(self, v => v.len())
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The float buffer, for reuse; a tensor of another type comes back unchanged as the error.
    pub fn into_f32(self) -> std::result::Result<Vec<f32>, TensorData> {
        match self {
            TensorData::F32(v) => Ok(v),
            other => Err(other),
        }
    }
    pub fn zeros(dtype: DType, n: usize) -> TensorData {
        match dtype {
            DType::F32 => TensorData::F32(vec![0.0; n]),
            DType::F64 => TensorData::F64(vec![0.0; n]),
            DType::I64 => TensorData::I64(vec![0; n]),
            DType::I32 => TensorData::I32(vec![0; n]),
            DType::I8 => TensorData::I8(vec![0; n]),
            DType::U8 => TensorData::U8(vec![0; n]),
            DType::Bool => TensorData::Bool(vec![false; n]),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    shape: Vec<usize>,
    data: TensorData,
}

pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Row-major strides, in elements.
pub fn strides_of(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

impl Tensor {
    pub fn new(shape: Vec<usize>, data: TensorData) -> Result<Tensor> {
        let n = numel(&shape);
        if n != data.len() {
            return Err(Error::Other(format!("tensor of shape {:?} needs {} elements, got {}", shape, n, data.len())));
        }
        Ok(Tensor { shape, data })
    }
    pub fn zeros(dtype: DType, shape: Vec<usize>) -> Tensor {
        let n = numel(&shape);
        Tensor { shape, data: TensorData::zeros(dtype, n) }
    }
    pub fn from_f32(shape: Vec<usize>, v: Vec<f32>) -> Result<Tensor> {
        Tensor::new(shape, TensorData::F32(v))
    }
    pub fn from_i64(shape: Vec<usize>, v: Vec<i64>) -> Result<Tensor> {
        Tensor::new(shape, TensorData::I64(v))
    }
    pub fn scalar_f32(v: f32) -> Tensor {
        Tensor { shape: vec![], data: TensorData::F32(vec![v]) }
    }
    pub fn scalar_i64(v: i64) -> Tensor {
        Tensor { shape: vec![], data: TensorData::I64(vec![v]) }
    }
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    pub fn rank(&self) -> usize {
        self.shape.len()
    }
    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }
    pub fn len(&self) -> usize {
        self.data.len()
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    pub fn data(&self) -> &TensorData {
        &self.data
    }
    pub fn data_mut(&mut self) -> &mut TensorData {
        &mut self.data
    }
    pub fn into_data(self) -> TensorData {
        self.data
    }
    pub fn into_parts(self) -> (Vec<usize>, TensorData) {
        (self.shape, self.data)
    }
    /// Same data, new shape of equal element count.
    pub fn reshaped(mut self, shape: Vec<usize>) -> Result<Tensor> {
        if numel(&shape) != self.len() {
            return Err(Error::Other(format!("cannot reshape {:?} to {:?}", self.shape, shape)));
        }
        self.shape = shape;
        Ok(self)
    }
    pub fn as_f32(&self) -> Result<&[f32]> {
        match &self.data {
            TensorData::F32(v) => Ok(v),
            d => Err(Error::Other(format!("expected a FLOAT tensor, got {}", d.dtype()))),
        }
    }
    pub fn as_f32_mut(&mut self) -> Result<&mut [f32]> {
        match &mut self.data {
            TensorData::F32(v) => Ok(v),
            d => Err(Error::Other(format!("expected a FLOAT tensor, got {}", d.dtype()))),
        }
    }
    /// Integer contents (INT64/INT32/INT8/UINT8) widened to i64: shapes, axes, indices.
    pub fn to_i64_vec(&self) -> Result<Vec<i64>> {
        Ok(match &self.data {
            TensorData::I64(v) => v.clone(),
            TensorData::I32(v) => v.iter().map(|&x| x as i64).collect(),
            TensorData::I8(v) => v.iter().map(|&x| x as i64).collect(),
            TensorData::U8(v) => v.iter().map(|&x| x as i64).collect(),
            d => return Err(Error::Other(format!("expected an integer tensor, got {}", d.dtype()))),
        })
    }
    /// Float contents widened to f64 (for scalar attributes given as tensors, e.g. Clip bounds).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match &self.data {
            TensorData::F32(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::F64(v) => v.clone(),
            TensorData::I64(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::I32(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::I8(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::U8(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::Bool(v) => v.iter().map(|&x| x as u8 as f64).collect(),
        }
    }
    pub fn size_bytes(&self) -> usize {
        self.len() * self.dtype().size_of()
    }
    /// True when any float element is NaN or infinite (its exponent bits all ones). Checked
    /// per block without branching inside it, so the scan vectorizes: a camera frame is checked
    /// every run.
    pub fn has_non_finite(&self) -> bool {
        const BLOCK: usize = 1024;
        match &self.data {
            TensorData::F32(v) => {
                const EXP: u32 = 0x7f80_0000;
                v.chunks(BLOCK).any(|c| c.iter().fold(false, |bad, x| bad | (x.to_bits() & EXP == EXP)))
            }
            TensorData::F64(v) => {
                const EXP: u64 = 0x7ff0_0000_0000_0000;
                v.chunks(BLOCK).any(|c| c.iter().fold(false, |bad, x| bad | (x.to_bits() & EXP == EXP)))
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sparsity::test_rng::TestRng;

    #[test]
    fn non_finite_found_wherever_it_is() {
        let (mut rng, _seed) = TestRng::fresh();
        for n in [1usize, 1023, 1024, 1025, 5000] {
            let mut v: Vec<f32> = (0..n).map(|_| (rng.next_u64() % 2001) as f32 - 1000.0).collect();
            v[rng.next_u64() as usize % n] = f32::MAX;
            v[rng.next_u64() as usize % n] = f32::MIN_POSITIVE / 4.0;
            let t = Tensor::new(vec![n], TensorData::F32(v.clone())).unwrap();
            assert!(!t.has_non_finite(), "{n} finite values");
            for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -f32::NAN] {
                let mut w = v.clone();
                w[rng.next_u64() as usize % n] = bad;
                assert!(Tensor::new(vec![n], TensorData::F32(w)).unwrap().has_non_finite(), "{bad} among {n}");
            }
            let mut d: Vec<f64> = v.iter().map(|&x| f64::from(x)).collect();
            d[0] = f64::MAX;
            assert!(!Tensor::new(vec![n], TensorData::F64(d.clone())).unwrap().has_non_finite());
            d[rng.next_u64() as usize % n] = f64::NAN;
            assert!(Tensor::new(vec![n], TensorData::F64(d)).unwrap().has_non_finite());
        }
        assert!(!Tensor::new(vec![2], TensorData::I32(vec![i32::MAX, 0])).unwrap().has_non_finite());
    }
}
