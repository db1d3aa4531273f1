//! Element types as generics, so one kernel body serves every dtype, plus the small
//! checks the data-movement and elementwise kernels share (axes, declared outputs).

use dynaspa_runtime::tensor::numel;
use dynaspa_runtime::{DType, Error, Result, Tensor, TensorData};

pub(crate) trait Elem: Copy + Send + Sync + PartialOrd + Default + std::fmt::Debug + 'static {
    const DTYPE: DType;
    fn slice(d: &TensorData) -> Option<&[Self]>;
    fn wrap(v: Vec<Self>) -> TensorData;
    fn to_f64(self) -> f64;
    /// C-like conversion: toward zero for integers (saturating, NaN -> 0), `!= 0` for bool.
    fn from_f64(x: f64) -> Self;
    fn to_i64(self) -> i64;
    /// Two's-complement wrap-around, like a C cast between integer widths.
    fn from_i64(x: i64) -> Self;
    fn is_nan(self) -> bool {
        false
    }
    /// Identity of Max: -inf for floats, MIN for integers, false for bool.
    fn lowest() -> Self;
}

macro_rules! elem_int {
    ($t:ty, $v:ident, $d:ident) => {
        impl Elem for $t {
            const DTYPE: DType = DType::$d;
            #[inline]
            fn slice(d: &TensorData) -> Option<&[Self]> {
                if let TensorData::$v(v) = d {
                    Some(v)
                } else {
                    None
                }
            }
            #[inline]
            fn wrap(v: Vec<Self>) -> TensorData {
                TensorData::$v(v)
            }
            #[inline]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline]
            fn from_f64(x: f64) -> Self {
                x as $t
            }
            #[inline]
            fn to_i64(self) -> i64 {
                self as i64
            }
            #[inline]
            fn from_i64(x: i64) -> Self {
                x as $t
            }
            #[inline]
            fn lowest() -> Self {
                <$t>::MIN
            }
        }
    };
}
elem_int!(i64, I64, I64);
elem_int!(i32, I32, I32);
elem_int!(i8, I8, I8);
elem_int!(u8, U8, U8);

macro_rules! elem_float {
    ($t:ty, $v:ident) => {
        impl Elem for $t {
            const DTYPE: DType = DType::$v;
            #[inline]
            fn slice(d: &TensorData) -> Option<&[Self]> {
                if let TensorData::$v(v) = d {
                    Some(v)
                } else {
                    None
                }
            }
            #[inline]
            fn wrap(v: Vec<Self>) -> TensorData {
                TensorData::$v(v)
            }
            #[inline]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline]
            fn from_f64(x: f64) -> Self {
                x as $t
            }
            #[inline]
            fn to_i64(self) -> i64 {
                self as i64
            }
            #[inline]
            fn from_i64(x: i64) -> Self {
                x as $t
            }
            #[inline]
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            #[inline]
            fn lowest() -> Self {
                <$t>::NEG_INFINITY
            }
        }
    };
}
elem_float!(f32, F32);
elem_float!(f64, F64);

impl Elem for bool {
    const DTYPE: DType = DType::Bool;
    #[inline]
    fn slice(d: &TensorData) -> Option<&[Self]> {
        if let TensorData::Bool(v) = d {
            Some(v)
        } else {
            None
        }
    }
    #[inline]
    fn wrap(v: Vec<Self>) -> TensorData {
        TensorData::Bool(v)
    }
    #[inline]
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
    #[inline]
    fn from_f64(x: f64) -> Self {
        // NaN is "nonzero" here, as a C cast to bool makes it.
        x != 0.0
    }
    #[inline]
    fn to_i64(self) -> i64 {
        self as i64
    }
    #[inline]
    fn from_i64(x: i64) -> Self {
        x != 0
    }
    #[inline]
    fn lowest() -> Self {
        false
    }
}

/// Arithmetic with ONNX's integer behaviour: wrap on overflow, truncating division.
/// Callers rule out integer division by zero before calling `div`.
pub(crate) trait Arith: Elem {
    const IS_INT: bool;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    fn neg(self) -> Self;
    fn abs(self) -> Self;
    fn zero() -> Self {
        Self::default()
    }
}

macro_rules! arith_int {
    ($t:ty, $abs:expr) => {
        impl Arith for $t {
            const IS_INT: bool = true;
            #[inline]
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            #[inline]
            fn sub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            #[inline]
            fn mul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            #[inline]
            fn div(self, o: Self) -> Self {
                if o == 0 {
                    0
                } else {
                    self.wrapping_div(o)
                }
            }
            #[inline]
            fn neg(self) -> Self {
                self.wrapping_neg()
            }
            #[inline]
            fn abs(self) -> Self {
                let f: fn($t) -> $t = $abs;
                f(self)
            }
        }
    };
}
arith_int!(i64, |x| x.wrapping_abs());
arith_int!(i32, |x| x.wrapping_abs());
arith_int!(i8, |x| x.wrapping_abs());
arith_int!(u8, |x| x);

macro_rules! arith_float {
    ($t:ty) => {
        impl Arith for $t {
            const IS_INT: bool = false;
            #[inline]
            fn add(self, o: Self) -> Self {
                self + o
            }
            #[inline]
            fn sub(self, o: Self) -> Self {
                self - o
            }
            #[inline]
            fn mul(self, o: Self) -> Self {
                self * o
            }
            #[inline]
            fn div(self, o: Self) -> Self {
                self / o
            }
            #[inline]
            fn neg(self) -> Self {
                -self
            }
            #[inline]
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
        }
    };
}
arith_float!(f32);
arith_float!(f64);

/// Runs `$body` with `$v` bound to the typed slice of a numeric (non-bool) tensor's data;
/// bool data evaluates `$bool` instead.
macro_rules! numeric {
    ($data:expr, $v:ident => $body:expr, bool => $bool:expr) => {
        match $data {
            dynaspa_runtime::TensorData::F32($v) => $body,
            dynaspa_runtime::TensorData::F64($v) => $body,
            dynaspa_runtime::TensorData::I64($v) => $body,
            dynaspa_runtime::TensorData::I32($v) => $body,
            dynaspa_runtime::TensorData::I8($v) => $body,
            dynaspa_runtime::TensorData::U8($v) => $body,
            dynaspa_runtime::TensorData::Bool(_) => $bool,
        }
    };
}
pub(crate) use numeric;

/// The typed contents of `t`, or an error naming both types.
pub(crate) fn typed<'a, T: Elem>(t: &'a Tensor, what: &str) -> Result<&'a [T]> {
    T::slice(t.data()).ok_or_else(|| Error::Other(format!("{what}: expected {}, got {}", T::DTYPE, t.dtype())))
}

pub(crate) fn make<T: Elem>(shape: &[usize], v: Vec<T>) -> Result<Tensor> {
    Tensor::new(shape.to_vec(), T::wrap(v))
}

/// `axis` in `[-rank, rank)` made non-negative.
pub(crate) fn norm_axis(axis: i64, rank: usize, what: &str) -> Result<usize> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(Error::Other(format!("{what}: axis {axis} is out of range for rank {rank}")));
    }
    Ok(if axis < 0 { axis + r } else { axis } as usize)
}

/// Checks that a kernel is about to produce what shape inference promised, and that it is
/// small enough to allocate at all.
pub(crate) fn expect_out(what: &str, dtype: DType, shape: &[usize], want_dtype: DType, want: &[usize]) -> Result<()> {
    if dtype != want_dtype || shape != want {
        return Err(Error::Other(format!("{what}: computed {dtype} {shape:?} but the output is declared {want_dtype} {want:?}")));
    }
    checked_numel(shape, what).map(|_| ())
}

/// Number of elements of `shape`, or an error when its size in bytes would not fit in memory.
pub(crate) fn checked_numel(shape: &[usize], what: &str) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .filter(|&n| n <= isize::MAX as usize / 8)
        .ok_or_else(|| Error::Other(format!("{what}: shape {shape:?} is too large")))
}

/// The one value of a single-element tensor (shape `[]` or `[1]`), as i64.
pub(crate) fn scalar_i64(t: &Tensor, what: &str) -> Result<i64> {
    let v = t.to_i64_vec().map_err(|e| Error::Other(format!("{what}: {e}")))?;
    match v.as_slice() {
        [x] => Ok(*x),
        _ => Err(Error::Other(format!("{what}: expected one value, got shape {:?}", t.shape()))),
    }
}

/// Same data as `t` with the element count checked against `shape`.
pub(crate) fn same_count(t: &Tensor, shape: &[usize], what: &str) -> Result<()> {
    if t.len() != numel(shape) {
        return Err(Error::Other(format!(
            "{what}: input {:?} has {} elements, output {:?} needs {}",
            t.shape(),
            t.len(),
            shape,
            numel(shape)
        )));
    }
    Ok(())
}

/// Converts between element types with ONNX Cast semantics (see [`Elem::from_f64`]):
/// floats go through f64, integers and bool through i64, so no precision is lost on the way.
#[inline]
pub(crate) fn conv<S: Elem, D: Elem>(x: S) -> D {
    if S::DTYPE.is_float() {
        D::from_f64(x.to_f64())
    } else {
        D::from_i64(x.to_i64())
    }
}

/// Floating-point element types.
pub(crate) trait Real: Arith {
    fn of(x: f64) -> Self;
    fn exp(self) -> Self;
    fn tanh(self) -> Self;
    fn sqrt(self) -> Self;
    fn erf(self) -> Self;
    fn erfc(self) -> Self;
    fn powf(self, e: Self) -> Self;
    fn ln(self) -> Self;
    fn ln_1p(self) -> Self;
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    /// Nearest integer, halves to the even one (ONNX Round).
    fn round_even(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
}

impl Real for f32 {
    #[inline]
    fn of(x: f64) -> Self {
        x as f32
    }
    #[inline]
    fn exp(self) -> Self {
        super::mathf::exp_f32(self)
    }
    #[inline]
    fn tanh(self) -> Self {
        super::mathf::tanh_f32(self)
    }
    #[inline]
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
    #[inline]
    fn erf(self) -> Self {
        super::mathf::erf_f32(self)
    }
    #[inline]
    fn erfc(self) -> Self {
        super::mathf::erfc_f32(self)
    }
    #[inline]
    fn powf(self, e: Self) -> Self {
        f32::powf(self, e)
    }
    #[inline]
    fn ln(self) -> Self {
        f32::ln(self)
    }
    #[inline]
    fn ln_1p(self) -> Self {
        f32::ln_1p(self)
    }
    #[inline]
    fn floor(self) -> Self {
        f32::floor(self)
    }
    #[inline]
    fn ceil(self) -> Self {
        f32::ceil(self)
    }
    #[inline]
    fn round_even(self) -> Self {
        f32::round_ties_even(self)
    }
    #[inline]
    fn sin(self) -> Self {
        f32::sin(self)
    }
    #[inline]
    fn cos(self) -> Self {
        f32::cos(self)
    }
}

impl Real for f64 {
    #[inline]
    fn of(x: f64) -> Self {
        x
    }
    #[inline]
    fn exp(self) -> Self {
        f64::exp(self)
    }
    #[inline]
    fn tanh(self) -> Self {
        f64::tanh(self)
    }
    #[inline]
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
    #[inline]
    fn erf(self) -> Self {
        super::mathf::erf_f64(self)
    }
    #[inline]
    fn erfc(self) -> Self {
        super::mathf::erfc_f64(self)
    }
    #[inline]
    fn powf(self, e: Self) -> Self {
        f64::powf(self, e)
    }
    #[inline]
    fn ln(self) -> Self {
        f64::ln(self)
    }
    #[inline]
    fn ln_1p(self) -> Self {
        f64::ln_1p(self)
    }
    #[inline]
    fn floor(self) -> Self {
        f64::floor(self)
    }
    #[inline]
    fn ceil(self) -> Self {
        f64::ceil(self)
    }
    #[inline]
    fn round_even(self) -> Self {
        f64::round_ties_even(self)
    }
    #[inline]
    fn sin(self) -> Self {
        f64::sin(self)
    }
    #[inline]
    fn cos(self) -> Self {
        f64::cos(self)
    }
}
