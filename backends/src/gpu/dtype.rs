//! Element types on the device. Every integer type and BOOL is one 32-bit word, i32 (so one set
//! of kernels serves them, and WGSL, which has no 64-bit or 8-bit integers, can share the
//! layout); FLOAT is an f32 word, or an IEEE half with the fp16 precision (`Precision`). INT64
//! values must fit in 32 bits, checked on upload; INT8/UINT8/BOOL results are wrapped back into
//! their range by the kernels (`narrow` codes). DOUBLE is not supported on the GPU backends.

use std::fmt;
use std::str::FromStr;

use dynaspa_runtime::{DType, Error, Result, Tensor, TensorData};

/// The precision float tensors are stored in: f32, or IEEE half (fp16: weights and activations
/// in 16 bits, every kernel's arithmetic in f32, the kernels compiled with `DSP_HALF`). Only the
/// GPU backends with half storage (cuda, opencl) take F16; the CPU backend and wgpu refuse it.
/// Integer tensors are i32 words either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Precision {
    #[default]
    F32,
    F16,
}

impl Precision {
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F16 => "f16",
        }
    }

    /// Bytes of one element of `dt` on the device.
    pub(crate) fn elem_bytes(self, dt: DType) -> usize {
        if self == Precision::F16 && dt == DType::F32 {
            2
        } else {
            4
        }
    }

    /// Whether elements of `dt` are 16-bit here (the data-movement kernels then copy 16-bit
    /// words: `MOVE16`).
    pub(crate) fn narrow_words(self, dt: DType) -> bool {
        self.elem_bytes(dt) == 2
    }

    /// The bits of `v` as a stored element of a float tensor, widened to the i32 a fill kernel
    /// takes.
    pub(crate) fn float_bits(self, v: f32) -> i32 {
        match self {
            Precision::F32 => v.to_bits() as i32,
            Precision::F16 => half::f16::from_f32(v).to_bits() as i32,
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Precision {
    type Err = Error;
    fn from_str(s: &str) -> Result<Precision> {
        match s.trim().to_ascii_lowercase().as_str() {
            "f32" | "fp32" | "float32" => Ok(Precision::F32),
            "f16" | "fp16" | "float16" => Ok(Precision::F16),
            _ => Err(Error::Other(format!("unknown precision '{s}'; the precisions are f32, f16"))),
        }
    }
}

/// The identity calibration caches and profiles key on: the device's fingerprint, and the
/// precision past f32 (times and winners measured in f32 say nothing of half kernels).
pub fn fingerprint_at(info: &crate::gpu::DeviceInfo, p: Precision) -> String {
    match p {
        Precision::F32 => info.fingerprint(),
        Precision::F16 => format!("{}|f16", info.fingerprint()),
    }
}

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

/// A tensor as device elements at precision `p`.
pub(crate) fn to_words(t: &Tensor, what: &str, p: Precision) -> Result<Vec<u8>> {
    let mut out = vec![0u8; t.len() * p.elem_bytes(t.dtype())];
    write_words(t, what, &mut out, p)?;
    Ok(out)
}

/// `t` as device elements (`to_words`) into `out`, which holds exactly `t.len()` of them.
pub(crate) fn write_words(t: &Tensor, what: &str, out: &mut [u8], p: Precision) -> Result<()> {
    let size = p.elem_bytes(t.dtype());
    if out.len() != t.len() * size {
        return Err(Error::Other(format!("{what}: {} bytes of room for {} elements of {size} bytes", out.len(), t.len())));
    }
    if let (TensorData::F32(v), 2) = (t.data(), size) {
        for (o, &x) in out.chunks_exact_mut(2).zip(v) {
            o.copy_from_slice(&half::f16::from_f32(x).to_le_bytes());
        }
        return Ok(());
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

/// Device elements at precision `p` back to a host tensor of `dtype`.
pub(crate) fn from_words(bytes: &[u8], dtype: DType, shape: Vec<usize>, p: Precision) -> Result<Tensor> {
    if p.elem_bytes(dtype) == 2 {
        let v = bytes.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect();
        return Tensor::new(shape, TensorData::F32(v));
    }
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
    fn precisions_parse_from_their_names_and_refuse_others() {
        for p in [Precision::F32, Precision::F16] {
            assert_eq!(p.to_string().to_uppercase().parse::<Precision>().unwrap(), p);
        }
        assert_eq!("fp16".parse::<Precision>().unwrap(), Precision::F16);
        assert!("int8".parse::<Precision>().unwrap_err().to_string().contains("'int8'"));
    }

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
            for p in [Precision::F32, Precision::F16] {
                let w = to_words(&t, "t", p).unwrap();
                assert_eq!(w.len(), t.len() * p.elem_bytes(t.dtype()));
                let back = from_words(&w, t.dtype(), t.shape().to_vec(), p).unwrap();
                assert_eq!(format!("{back:?}"), format!("{t:?}"), "{p:?}");
            }
        }
        let big = Tensor::new(vec![1], TensorData::I64(vec![1 << 40])).unwrap();
        assert!(to_words(&big, "x", Precision::F32).unwrap_err().to_string().contains("32 bits"));
        let d = Tensor::new(vec![1], TensorData::F64(vec![1.0])).unwrap();
        assert!(to_words(&d, "x", Precision::F16).unwrap_err().to_string().contains("DOUBLE"));
    }

    /// Half storage rounds to nearest even and keeps what f16 can hold: the exact bits of a few
    /// values, overflow to infinity, and NaN.
    #[test]
    fn half_storage_rounds_to_nearest_even() {
        // Ties at 1 + 2^-11 (between 0x3c00 and 0x3c01) and 1 + 3 * 2^-11 (0x3c01 / 0x3c02) go
        // to the even neighbour.
        let v = vec![1.0, -2.5, 65504.0, 1.0e6, 1.0 + 1.0 / 2048.0, 1.0 + 3.0 / 2048.0, f32::NAN];
        let t = Tensor::from_f32(vec![7], v).unwrap();
        let w = to_words(&t, "t", Precision::F16).unwrap();
        let bits: Vec<u16> = w.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
        assert_eq!(&bits[..6], &[0x3c00, 0xc100, 0x7bff, 0x7c00, 0x3c00, 0x3c02]);
        assert_eq!(bits[6] & 0x7c00, 0x7c00);
        assert_ne!(bits[6] & 0x03ff, 0);
        assert_eq!(Precision::F16.float_bits(1.0), 0x3c00);
        assert_eq!(Precision::F32.float_bits(1.0), 0x3f80_0000);
        assert_eq!(Precision::F16.elem_bytes(DType::I64), 4);
    }
}
