//! Decoding `TensorProto` (initializers, Constant values, node-test data) into host tensors.

use super::external::{is_external, ExternalData};
use super::proto::onnx::TensorProto;
use crate::error::{Error, Result};
use crate::tensor::{DType, Tensor, TensorData};

/// Decodes a tensor; `what` names it in errors (e.g. "initializer 'conv1.weight'"). A tensor
/// with external data is refused: there is no folder to find it in (see `decode_in`).
pub fn decode(t: &TensorProto, what: &str) -> Result<Tensor> {
    decode_in(t, what, &mut ExternalData::new(None))
}

/// Decodes a tensor whose data may be stored externally, in a file that `external` finds.
pub fn decode_in(t: &TensorProto, what: &str, external: &mut ExternalData) -> Result<Tensor> {
    let code = t.data_type.unwrap_or(0);
    let dtype = DType::from_onnx(code)
        .ok_or_else(|| Error::InvalidModel(format!("{what}: data type {} is not supported", DType::onnx_name(code))))?;
    let mut shape = Vec::with_capacity(t.dims.len());
    for &d in &t.dims {
        if d < 0 {
            return Err(Error::InvalidModel(format!("{what}: negative dimension {d} in {:?}", t.dims)));
        }
        shape.push(d as usize);
    }
    let n = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .filter(|&n| n.checked_mul(8).is_some())
        .ok_or_else(|| Error::InvalidModel(format!("{what}: shape {:?} is too large", t.dims)))?;
    let data = match &t.raw_data {
        _ if is_external(t) => from_raw(external.bytes(t, what)?, dtype, n, what)?,
        Some(raw) if !raw.is_empty() || n == 0 => from_raw(raw, dtype, n, what)?,
        _ => from_fields(t, dtype, what)?,
    };
    if data.len() != n {
        return Err(Error::InvalidModel(format!(
            "{what}: shape {:?} needs {} elements of {}, the data holds {}",
            shape,
            n,
            dtype,
            data.len()
        )));
    }
    Tensor::new(shape, data)
}

fn from_raw(raw: &[u8], dtype: DType, n: usize, what: &str) -> Result<TensorData> {
    let sz = dtype.size_of();
    if raw.len() != n * sz {
        return Err(Error::InvalidModel(format!("{what}: raw data is {} bytes, {} elements of {} need {}", raw.len(), n, dtype, n * sz)));
    }
    macro_rules! le {
        ($t:ty) => {
            raw.chunks_exact(sz).map(|c| <$t>::from_le_bytes(c.try_into().unwrap())).collect()
        };
    }
    Ok(match dtype {
        DType::F32 => TensorData::F32(le!(f32)),
        DType::F64 => TensorData::F64(le!(f64)),
        DType::I64 => TensorData::I64(le!(i64)),
        DType::I32 => TensorData::I32(le!(i32)),
        DType::I8 => TensorData::I8(raw.iter().map(|&b| b as i8).collect()),
        DType::U8 => TensorData::U8(raw.to_vec()),
        DType::Bool => TensorData::Bool(raw.iter().map(|&b| b != 0).collect()),
    })
}

fn from_fields(t: &TensorProto, dtype: DType, what: &str) -> Result<TensorData> {
    // Small types travel widened in int32_data, as the ONNX schema specifies.
    Ok(match dtype {
        DType::F32 => TensorData::F32(t.float_data.clone()),
        DType::F64 => TensorData::F64(t.double_data.clone()),
        DType::I64 => TensorData::I64(t.int64_data.clone()),
        DType::I32 => TensorData::I32(t.int32_data.clone()),
        DType::I8 => TensorData::I8(narrow(&t.int32_data, what)?),
        DType::U8 => TensorData::U8(narrow(&t.int32_data, what)?),
        DType::Bool => TensorData::Bool(t.int32_data.iter().map(|&v| v != 0).collect()),
    })
}

fn narrow<T: TryFrom<i32>>(v: &[i32], what: &str) -> Result<Vec<T>> {
    v.iter().map(|&x| T::try_from(x).map_err(|_| Error::InvalidModel(format!("{what}: value {x} out of range")))).collect()
}

/// Encodes a host tensor (raw little-endian data); used to write test data and goldens.
pub fn encode(t: &Tensor, name: &str) -> TensorProto {
    let mut p = TensorProto::new();
    p.name = Some(name.to_string());
    p.dims = t.shape().iter().map(|&d| d as i64).collect();
    p.data_type = Some(t.dtype().onnx_code());
    let raw: Vec<u8> = match t.data() {
        TensorData::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        TensorData::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        TensorData::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        TensorData::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        TensorData::I8(v) => v.iter().map(|&x| x as u8).collect(),
        TensorData::U8(v) => v.clone(),
        TensorData::Bool(v) => v.iter().map(|&x| x as u8).collect(),
    };
    p.raw_data = Some(raw);
    p
}

/// Parses and decodes a serialized `TensorProto` (the node tests' `.pb` files).
pub fn decode_bytes(bytes: &[u8], what: &str) -> Result<Tensor> {
    use protobuf::Message;
    let mut input = protobuf::CodedInputStream::from_bytes(bytes);
    input.set_recursion_limit(16);
    let mut t = TensorProto::new();
    t.merge_from(&mut input).map_err(|e| Error::Decode(format!("{what}: not a TensorProto ({e})")))?;
    decode(&t, what)
}
