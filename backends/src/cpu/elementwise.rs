//! Elementwise kernels: activations and other unary maps, Clip, Cast, Where, and (through
//! `binary`) the broadcasting two-input ops.

use super::broadcast::{broadcast_shape, map3};
use super::elem::{conv, expect_out, make, numeric, typed, Arith, Elem, Real};
use super::input;
use super::par::{map1, map1_heavy};
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::graph::*;
use dynaspa_runtime::{map_data, DType, Error, Result, Tensor, TensorData};

pub(crate) fn unary(k: UnaryKind, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    let name = Op::Unary(k).name();
    let x = input(ins, 0, name)?;
    expect_out(name, x.dtype(), x.shape(), out.dtype, &out.shape)?;
    let unsupported = || Error::Other(format!("{name}: {} input is not supported", x.dtype()));
    let data = match (k, x.data()) {
        (UnaryKind::Not, TensorData::Bool(v)) => TensorData::Bool(map1(v, |b| !b)?),
        (UnaryKind::Not, _) => return Err(unsupported()),
        (_, TensorData::F32(v)) => match super::unary_f32::try_unary(k, v) {
            Some(r) => TensorData::F32(r?),
            None => TensorData::F32(real_unary(k, v)?),
        },
        (_, TensorData::F64(v)) => TensorData::F64(real_unary(k, v)?),
        (_, TensorData::Bool(_)) => return Err(unsupported()),
        (UnaryKind::Relu | UnaryKind::Neg | UnaryKind::Abs | UnaryKind::Sign, d) => {
            numeric!(d, v => int_unary(k, v).ok_or_else(unsupported)??, bool => return Err(unsupported()))
        }
        _ => return Err(unsupported()),
    };
    Tensor::new(out.shape.clone(), data)
}

/// `None` for activations integer types do not have.
fn int_unary<T: Arith>(k: UnaryKind, v: &[T]) -> Option<Result<TensorData>> {
    let z = T::zero();
    let r = match k {
        UnaryKind::Relu => map1(v, |x| if x < z { z } else { x }),
        UnaryKind::Neg => map1(v, |x| x.neg()),
        UnaryKind::Abs => map1(v, |x| x.abs()),
        UnaryKind::Sign => map1(v, |x| {
            T::from_i64(if x > z {
                1
            } else if x < z {
                -1
            } else {
                0
            })
        }),
        _ => return None,
    };
    Some(r.map(T::wrap))
}

fn real_unary<T: Real>(k: UnaryKind, v: &[T]) -> Result<Vec<T>> {
    let c = T::of;
    let (zero, one, half) = (c(0.0), c(1.0), c(0.5));
    // Comparisons are written so that NaN inputs stay NaN, as numpy's reference does.
    match k {
        UnaryKind::Relu => map1(v, |x| if x < zero { zero } else { x }),
        UnaryKind::LeakyRelu(a) => {
            let a = c(a as f64);
            map1(v, |x| if x < zero { a.mul(x) } else { x })
        }
        UnaryKind::Sigmoid => map1_heavy(v, |x| one.div(one.add(x.neg().exp()))),
        UnaryKind::HardSigmoid(a, b) => {
            let (a, b) = (c(a as f64), c(b as f64));
            map1(v, |x| clamp01(a.mul(x).add(b), zero, one))
        }
        UnaryKind::HardSwish => {
            let sixth = c(1.0 / 6.0);
            map1(v, |x| x.mul(clamp01(x.mul(sixth).add(half), zero, one)))
        }
        UnaryKind::Tanh => map1_heavy(v, |x| x.tanh()),
        UnaryKind::Erf => map1_heavy(v, |x| x.erf()),
        UnaryKind::Gelu(false) => {
            // 1 + erf(z) = erfc(-z), which keeps relative accuracy in the negative tail.
            let r = c(-std::f64::consts::FRAC_1_SQRT_2);
            map1_heavy(v, |x| half.mul(x).mul(x.mul(r).erfc()))
        }
        UnaryKind::Gelu(true) => {
            let (s, k3) = (c((2.0 / std::f64::consts::PI).sqrt()), c(0.044715));
            map1_heavy(v, |x| half.mul(x).mul(one.add(s.mul(x.add(k3.mul(x).mul(x).mul(x))).tanh())))
        }
        UnaryKind::Exp => map1_heavy(v, |x| x.exp()),
        UnaryKind::Sqrt => map1_heavy(v, |x| x.sqrt()),
        UnaryKind::Neg => map1(v, |x| x.neg()),
        UnaryKind::Abs => map1(v, |x| x.abs()),
        UnaryKind::Not => Ok(v.to_vec()),
        // Zeros (of either sign) and NaN stay as they are.
        UnaryKind::Sign => map1(v, |x| {
            if x > zero {
                one
            } else if x < zero {
                one.neg()
            } else {
                x
            }
        }),
        UnaryKind::Round => map1(v, |x| x.round_even()),
        UnaryKind::Floor => map1(v, |x| x.floor()),
        UnaryKind::Ceil => map1(v, |x| x.ceil()),
        UnaryKind::Reciprocal => map1(v, |x| one.div(x)),
        UnaryKind::Log => map1_heavy(v, |x| x.ln()),
        // ln(1 + e^x) as max(x, 0) + ln(1 + e^-|x|): no overflow for large x, and the small
        // values of the negative tail keep their relative accuracy.
        UnaryKind::Softplus => map1_heavy(v, |x| if x > zero { x.add(x.neg().exp().ln_1p()) } else { x.exp().ln_1p() }),
        UnaryKind::Sin => map1_heavy(v, |x| x.sin()),
        UnaryKind::Cos => map1_heavy(v, |x| x.cos()),
    }
}

#[inline]
fn clamp01<T: Real>(x: T, zero: T, one: T) -> T {
    if x < zero {
        zero
    } else if x > one {
        one
    } else {
        x
    }
}

/// Clip(X, [min], [max]). Bounds given as other numeric types are converted; with
/// min > max every element becomes max, as ONNX specifies.
pub(crate) fn clip(ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    let x = input(ins, 0, "Clip")?;
    expect_out("Clip", x.dtype(), x.shape(), out.dtype, &out.shape)?;
    let data = numeric!(x.data(), v => {
        let lo = bound(ins.get(1).copied().flatten(), "min")?;
        let hi = bound(ins.get(2).copied().flatten(), "max")?;
        clip_typed(v, lo, hi)?
    }, bool => return Err(Error::Other("Clip: BOOL input is not supported".into())));
    Tensor::new(out.shape.clone(), data)
}

fn bound<T: Elem>(t: Option<&Tensor>, what: &str) -> Result<Option<T>> {
    let Some(t) = t else { return Ok(None) };
    match t.len() {
        0 => Ok(None),
        1 => Ok(Some(map_data!(t.data(), v => conv(v[0])))),
        _ => Err(Error::Other(format!("Clip: {what} must be a scalar, got shape {:?}", t.shape()))),
    }
}

fn clip_typed<T: Elem>(v: &[T], lo: Option<T>, hi: Option<T>) -> Result<TensorData> {
    map1(v, |x| {
        let x = match lo {
            Some(l) if x < l => l,
            _ => x,
        };
        match hi {
            Some(h) if x > h => h,
            _ => x,
        }
    })
    .map(T::wrap)
}

pub(crate) fn cast(to: DType, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    let x = input(ins, 0, "Cast")?;
    expect_out("Cast", to, x.shape(), out.dtype, &out.shape)?;
    if x.dtype() == to {
        return Ok(x.clone());
    }
    let data = map_data!(x.data(), v => cast_slice(v, to)?);
    Tensor::new(out.shape.clone(), data)
}

pub(crate) fn cast_slice<S: Elem>(v: &[S], to: DType) -> Result<TensorData> {
    Ok(match to {
        DType::F32 => TensorData::F32(map1(v, conv)?),
        DType::F64 => TensorData::F64(map1(v, conv)?),
        DType::I64 => TensorData::I64(map1(v, conv)?),
        DType::I32 => TensorData::I32(map1(v, conv)?),
        DType::I8 => TensorData::I8(map1(v, conv)?),
        DType::U8 => TensorData::U8(map1(v, conv)?),
        DType::Bool => TensorData::Bool(map1(v, conv)?),
    })
}

pub(crate) fn binary(k: BinaryKind, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    super::binary::binary(k, ins, out)
}

pub(crate) fn where_(ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    let c = input(ins, 0, "Where")?;
    let x = input(ins, 1, "Where")?;
    let y = input(ins, 2, "Where")?;
    let cond = typed::<bool>(c, "Where condition")?;
    if x.dtype() != y.dtype() {
        return Err(Error::Other(format!("Where: X is {} but Y is {}", x.dtype(), y.dtype())));
    }
    let shape = broadcast_shape(&[c.shape(), x.shape(), y.shape()], "Where")?;
    expect_out("Where", x.dtype(), &shape, out.dtype, &out.shape)?;
    map_data!(x.data(), xv => where_typed(cond, c.shape(), xv, x.shape(), y, &shape))
}

fn where_typed<T: Elem>(c: &[bool], csh: &[usize], x: &[T], xsh: &[usize], y: &Tensor, osh: &[usize]) -> Result<Tensor> {
    let yv = typed::<T>(y, "Where Y")?;
    let v = map3((c, csh), (x, xsh), (yv, y.shape()), osh, "Where", |c, x, y| if c { x } else { y })?;
    make(osh, v)
}

#[cfg(test)]
#[path = "elementwise_tests.rs"]
mod tests;
