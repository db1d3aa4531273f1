//! Element types on the device. Every element is one 32-bit word: FLOAT as f32, every integer
//! type and BOOL as i32 (so one set of kernels serves them, and WGSL, which has no 64-bit or
//! 8-bit integers, can share the layout). INT64 values must fit in 32 bits, checked on upload;
//! INT8/UINT8/BOOL results are wrapped back into their range by the kernels (`narrow` codes).
//! DOUBLE is not supported on the GPU backends.

use dynaspa_runtime::{DType, Error, Result, Tensor, TensorData};

/// What a device word holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Word {
    F32,
    I32,
}

pub(crate) fn word(dt: DType) -> Option<Word> {
    match dt {
        DType::F32 => Some(Word::F32),
        DType::I64 | DType::I32 | DType::I8 | DType::U8 | DType::Bool => Some(Word::I32),
        DType::F64 => None,
    }
}

/// How an i32 result is brought back into the range of `dt` (the kernels' `narrow` argument).
pub(crate) fn narrow(dt: DType) -> i32 {
    match dt {
        DType::I8 => 1,
        DType::U8 => 2,
        DType::Bool => 3,
        _ => 0,
    }
}

/// Saturation bounds of a float -> `dt` conversion (the CPU's `as` casts saturate).
pub(crate) fn int_range(dt: DType) -> (f32, f32) {
    match dt {
        DType::I8 => (-128.0, 127.0),
        DType::U8 => (0.0, 255.0),
        // The largest f32 below 2^31; INT64 lives in 32 bits on the device.
        _ => (-2147483648.0, 2147483520.0),
    }
}

/// A tensor as device words.
pub(crate) fn to_words(t: &Tensor, what: &str) -> Result<Vec<u8>> {
    let mut out = vec![0u8; t.len() * 4];
    write_words(t, what, &mut out)?;
    Ok(out)
}

/// `t` as device words (`to_words`) into `out`, which holds exactly `t.len()` words.
pub(crate) fn write_words(t: &Tensor, what: &str, out: &mut [u8]) -> Result<()> {
    if out.len() != t.len() * 4 {
        return Err(Error::Other(format!("{what}: {} bytes of room for {} words", out.len(), t.len())));
    }
    fn put<T: Copy>(v: &[T], out: &mut [u8], word: impl Fn(T) -> u32) {
        for (o, &x) in out.chunks_exact_mut(4).zip(v) {
            o.copy_from_slice(&word(x).to_le_bytes());
        }
    }
    match t.data() {
        TensorData::F32(v) => put(v, out, f32::to_bits),
        TensorData::I32(v) => put(v, out, |x| x as u32),
        TensorData::I8(v) => put(v, out, |x| x as i32 as u32),
        TensorData::U8(v) => put(v, out, u32::from),
        TensorData::Bool(v) => put(v, out, u32::from),
        TensorData::I64(v) => {
            for (i, (o, &x)) in out.chunks_exact_mut(4).zip(v.iter()).enumerate() {
                let y = i32::try_from(x).map_err(|_| {
                    Error::Other(format!("{what}: INT64 element {i} = {x} does not fit in 32 bits, which the GPU backends store INT64 in"))
                })?;
                o.copy_from_slice(&(y as u32).to_le_bytes());
            }
        }
        TensorData::F64(_) => {
            return Err(Error::Unsupported(vec![format!("{what}: DOUBLE tensors are not supported on the GPU backends")]))
        }
    }
    Ok(())
}

/// Device words back to a host tensor of `dtype`.
pub(crate) fn from_words(bytes: &[u8], dtype: DType, shape: Vec<usize>) -> Result<Tensor> {
    let words = bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
    let data = match dtype {
        DType::F32 => TensorData::F32(words.map(f32::from_bits).collect()),
        DType::I32 => TensorData::I32(words.map(|w| w as i32).collect()),
        DType::I64 => TensorData::I64(words.map(|w| w as i32 as i64).collect()),
        DType::I8 => TensorData::I8(words.map(|w| w as i32 as i8).collect()),
        DType::U8 => TensorData::U8(words.map(|w| w as u8).collect()),
        DType::Bool => TensorData::Bool(words.map(|w| w != 0).collect()),
        DType::F64 => return Err(Error::Unsupported(vec!["DOUBLE tensors are not supported on the GPU backends".into()])),
    };
    Tensor::new(shape, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_every_type() {
        let cases = vec![
            Tensor::from_f32(vec![3], vec![1.5, -0.0, f32::NAN]).unwrap(),
            Tensor::new(vec![2], TensorData::I64(vec![-5, 1 << 30])).unwrap(),
            Tensor::new(vec![2], TensorData::I32(vec![i32::MIN, 7])).unwrap(),
            Tensor::new(vec![2], TensorData::I8(vec![-128, 127])).unwrap(),
            Tensor::new(vec![2], TensorData::U8(vec![0, 255])).unwrap(),
            Tensor::new(vec![2], TensorData::Bool(vec![true, false])).unwrap(),
        ];
        for t in cases {
            let w = to_words(&t, "t").unwrap();
            assert_eq!(w.len(), t.len() * 4);
            let back = from_words(&w, t.dtype(), t.shape().to_vec()).unwrap();
            assert_eq!(format!("{back:?}"), format!("{t:?}"));
        }
        let big = Tensor::new(vec![1], TensorData::I64(vec![1 << 40])).unwrap();
        assert!(to_words(&big, "x").unwrap_err().to_string().contains("32 bits"));
        let d = Tensor::new(vec![1], TensorData::F64(vec![1.0])).unwrap();
        assert!(to_words(&d, "x").unwrap_err().to_string().contains("DOUBLE"));
    }
}
