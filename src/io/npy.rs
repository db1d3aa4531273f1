//! NumPy `.npy` (format versions 1–3), little-endian, C order.

use dynaspa_runtime::{DType, Error, Result, Tensor, TensorData};

const MAGIC: &[u8] = b"\x93NUMPY";

fn bad(msg: impl Into<String>) -> Error {
    Error::Other(format!("invalid .npy: {}", msg.into()))
}

/// Parses a `.npy` file's bytes.
pub fn decode(bytes: &[u8]) -> Result<Tensor> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(bad("missing the \\x93NUMPY magic (not a .npy file)"));
    }
    let (hlen, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize, 12),
        v => return Err(bad(format!("unsupported format version {v}"))),
    };
    let header = bytes.get(start..start + hlen).ok_or_else(|| bad("truncated header"))?;
    let header = std::str::from_utf8(header).map_err(|_| bad("header is not text"))?;
    let descr = field(header, "descr")?;
    let descr = descr.trim_matches(|c| c == '\'' || c == '"');
    if field(header, "fortran_order")?.trim() != "False" {
        return Err(bad("Fortran-ordered arrays are not supported; save with np.ascontiguousarray"));
    }
    let shape = parse_shape(field(header, "shape")?)?;
    let dtype = match descr {
        "<f4" => DType::F32,
        "<f8" => DType::F64,
        "<i8" => DType::I64,
        "<i4" => DType::I32,
        "|i1" => DType::I8,
        "|u1" => DType::U8,
        "|b1" => DType::Bool,
        d => return Err(bad(format!("dtype '{d}' is not supported (float32, float64, int64, int32, int8, uint8, bool)"))),
    };
    let n: usize = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or_else(|| bad("shape too large"))?;
    let body = &bytes[start + hlen..];
    let sz = dtype.size_of();
    if body.len() != n * sz {
        return Err(bad(format!("shape {shape:?} of {descr} needs {} data bytes, file has {}", n * sz, body.len())));
    }
    macro_rules! le {
        ($t:ty) => {
            body.chunks_exact(sz).map(|c| <$t>::from_le_bytes(c.try_into().unwrap())).collect()
        };
    }
    let data = match dtype {
        DType::F32 => TensorData::F32(le!(f32)),
        DType::F64 => TensorData::F64(le!(f64)),
        DType::I64 => TensorData::I64(le!(i64)),
        DType::I32 => TensorData::I32(le!(i32)),
        DType::I8 => TensorData::I8(body.iter().map(|&b| b as i8).collect()),
        DType::U8 => TensorData::U8(body.to_vec()),
        DType::Bool => TensorData::Bool(body.iter().map(|&b| b != 0).collect()),
    };
    Tensor::new(shape, data)
}

fn field<'a>(header: &'a str, key: &str) -> Result<&'a str> {
    let k = header
        .find(&format!("'{key}'"))
        .or_else(|| header.find(&format!("\"{key}\"")))
        .ok_or_else(|| bad(format!("header lacks '{key}'")))?;
    let rest = &header[k + key.len() + 2..];
    let rest = rest.trim_start().strip_prefix(':').ok_or_else(|| bad("malformed header"))?.trim_start();
    let end =
        if rest.starts_with('(') { rest.find(')').map(|e| e + 1) } else { rest.find([',', '}']) }.ok_or_else(|| bad("malformed header"))?;
    Ok(&rest[..end])
}

fn parse_shape(s: &str) -> Result<Vec<usize>> {
    let inner = s.trim().strip_prefix('(').and_then(|s| s.strip_suffix(')')).ok_or_else(|| bad("malformed shape"))?;
    inner
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| p.parse::<usize>().map_err(|_| bad(format!("malformed shape entry '{p}'"))))
        .collect()
}

/// Serialises a tensor as `.npy` version 1.0.
pub fn encode(t: &Tensor) -> Vec<u8> {
    let descr = match t.dtype() {
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::I64 => "<i8",
        DType::I32 => "<i4",
        DType::I8 => "|i1",
        DType::U8 => "|u1",
        DType::Bool => "|b1",
    };
    let shape = match t.shape() {
        [] => "()".to_string(),
        [d] => format!("({d},)"),
        s => format!("({})", s.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // Pad so the data starts on a 64-byte boundary, newline-terminated, as NumPy does.
    let total = MAGIC.len() + 4 + header.len() + 1;
    header.push_str(&" ".repeat((64 - total % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + t.size_bytes());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    match t.data() {
        TensorData::F32(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        TensorData::F64(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        TensorData::I64(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        TensorData::I32(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        TensorData::I8(v) => out.extend(v.iter().map(|&x| x as u8)),
        TensorData::U8(v) => out.extend_from_slice(v),
        TensorData::Bool(v) => out.extend(v.iter().map(|&x| x as u8)),
    }
    out
}

pub fn read(path: &std::path::Path) -> Result<Tensor> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    decode(&bytes).map_err(|e| Error::Other(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_shape_type_and_values() {
        let t = Tensor::from_f32(vec![2, 3], vec![1.5, -2.0, 3.25, 0.1, 7.0, -9.5]).unwrap();
        assert_eq!(decode(&encode(&t)).unwrap(), t);
        let s = Tensor::from_i64(vec![], vec![42]).unwrap();
        assert_eq!(decode(&encode(&s)).unwrap(), s);
    }

    #[test]
    fn truncated_and_foreign_files_are_errors() {
        let t = Tensor::from_f32(vec![4], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
        let b = encode(&t);
        assert!(decode(&b[..b.len() - 3]).is_err());
        assert!(decode(b"hello world").is_err());
        assert!(decode(&[]).is_err());
    }
}
