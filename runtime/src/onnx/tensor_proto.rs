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

/// ONNX's FLOAT16 and BFLOAT16 codes: values stored in half precision, widened to F32 at load
/// (the runtime computes them in fp32).
const HALF: [i32; 2] = [10, 16];

/// The type a value of ONNX element type `code` has here: `DType::from_onnx`, with the
/// half-precision floats widened to F32.
pub fn widened(code: i32) -> Option<DType> {
    if HALF.contains(&code) {
        Some(DType::F32)
    } else {
        DType::from_onnx(code)
    }
}

/// Whether ONNX element type `code` is a half-precision float that loads widened.
pub fn is_half(code: i32) -> bool {
    HALF.contains(&code)
}

/// Decodes a tensor whose data may be stored externally, in a file that `external` finds.
pub fn decode_in(t: &TensorProto, what: &str, external: &mut ExternalData) -> Result<Tensor> {
    let code = t.data_type.unwrap_or(0);
    let dtype =
        widened(code).ok_or_else(|| Error::InvalidModel(format!("{what}: data type {} is not supported", DType::onnx_name(code))))?;
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
    // The bytes of the data, external or inline; `None`: the typed fields hold it.
    let raw = match &t.raw_data {
        _ if is_external(t) => Some(external.bytes(t, what)?),
        Some(raw) if !raw.is_empty() || n == 0 => Some(raw.as_slice()),
        _ => None,
    };
    let data = match (is_half(code), raw) {
        (true, raw) => TensorData::F32(half_values(t, raw, code, n, what)?),
        (false, Some(raw)) => from_raw(raw, dtype, n, what)?,
        (false, None) => from_fields(t, dtype, what)?,
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

/// The `n` values of a FLOAT16 or BFLOAT16 tensor as f32 (exact: both widen without rounding).
/// Raw data holds two little-endian bytes per value; without it `int32_data` holds one value's
/// bits per entry.
fn half_values(t: &TensorProto, raw: Option<&[u8]>, code: i32, n: usize, what: &str) -> Result<Vec<f32>> {
    let widen = |bits: u16| if code == 10 { half::f16::from_bits(bits).to_f32() } else { half::bf16::from_bits(bits).to_f32() };
    match raw {
        Some(raw) if raw.len() != n * 2 => Err(Error::InvalidModel(format!(
            "{what}: raw data is {} bytes, {n} elements of {} need {}",
            raw.len(),
            DType::onnx_name(code),
            n * 2
        ))),
        Some(raw) => Ok(raw.chunks_exact(2).map(|c| widen(u16::from_le_bytes([c[0], c[1]]))).collect()),
        None => t
            .int32_data
            .iter()
            .map(|&v| {
                u16::try_from(v).map(widen).map_err(|_| Error::InvalidModel(format!("{what}: {v} is not the bits of a 16-bit float")))
            })
            .collect(),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn half_proto(code: i32, dims: &[i64]) -> TensorProto {
        let mut t = TensorProto::new();
        t.data_type = Some(code);
        t.dims = dims.to_vec();
        t
    }

    #[test]
    fn float16_values_widen_exactly_from_raw_data_and_from_int32_data() {
        // 1, -2, the largest finite half, the smallest subnormal, -0, +inf.
        let bits = [0x3C00u16, 0xC000, 0x7BFF, 0x0001, 0x8000, 0x7C00];
        let want = [1.0f32, -2.0, 65504.0, 2f32.powi(-24), -0.0, f32::INFINITY];
        let mut raw = half_proto(10, &[2, 3]);
        raw.raw_data = Some(bits.iter().flat_map(|b| b.to_le_bytes()).collect());
        let mut fields = half_proto(10, &[2, 3]);
        fields.int32_data = bits.iter().map(|&b| b as i32).collect();
        for t in [raw, fields] {
            let d = decode(&t, "t").unwrap();
            assert_eq!(d.dtype(), DType::F32);
            assert_eq!(d.shape(), &[2, 3]);
            let got = d.as_f32().unwrap();
            assert!(got.iter().zip(&want).all(|(g, w)| g.to_bits() == w.to_bits()), "{got:?}");
        }
    }

    #[test]
    fn bfloat16_values_widen_exactly() {
        let mut t = half_proto(16, &[3]);
        t.raw_data = Some([0x3F80u16, 0xC040, 0x4049].iter().flat_map(|b| b.to_le_bytes()).collect());
        assert_eq!(decode(&t, "t").unwrap().as_f32().unwrap(), &[1.0, -3.0, 3.140625]);
    }

    #[test]
    fn malformed_half_data_is_an_error_naming_the_tensor() {
        let mut t = half_proto(10, &[3]);
        t.raw_data = Some(vec![0; 5]);
        let e = decode(&t, "initializer 'w'").unwrap_err().to_string();
        assert!(e.contains("initializer 'w'") && e.contains("5 bytes") && e.contains("FLOAT16") && e.contains("need 6"), "{e}");
        let mut t = half_proto(10, &[1]);
        t.int32_data = vec![70000];
        let e = decode(&t, "initializer 'w'").unwrap_err().to_string();
        assert!(e.contains("70000") && e.contains("16-bit"), "{e}");
        let mut t = half_proto(10, &[2]);
        t.int32_data = vec![0x3C00];
        let e = decode(&t, "initializer 'w'").unwrap_err().to_string();
        assert!(e.contains("needs 2 elements") && e.contains("holds 1"), "{e}");
    }
}
