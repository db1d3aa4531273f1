//! Two-input elementwise ops with numpy broadcasting: arithmetic, Pow, Mod, comparisons, logic,
//! and Min/Max over one or more inputs.

use super::broadcast::{broadcast_shape, map2};
use super::elem::{conv, expect_out, make, numeric, typed, Arith, Elem, Real};
use super::input;
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::graph::{BinaryKind, Op};
use dynaspa_runtime::{map_data, DType, Error, Result, Tensor, TensorData};

pub(crate) fn binary(k: BinaryKind, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    let name = Op::Binary(k).name();
    if k.is_variadic() {
        // One input is enough, so this goes before the pair is read.
        return extremum(k, ins, out);
    }
    let a = input(ins, 0, name)?;
    let b = input(ins, 1, name)?;
    let shape = broadcast_shape(&[a.shape(), b.shape()], name)?;
    if k != BinaryKind::Pow && a.dtype() != b.dtype() {
        return Err(Error::Other(format!("{name}: inputs are {} and {}", a.dtype(), b.dtype())));
    }
    let dtype = if k.is_predicate() { DType::Bool } else { a.dtype() };
    expect_out(name, dtype, &shape, out.dtype, &out.shape)?;
    let unsupported = || Error::Other(format!("{name}: {} inputs are not supported", a.dtype()));
    let (ash, bsh) = (a.shape(), b.shape());
    match k {
        BinaryKind::Add | BinaryKind::Sub | BinaryKind::Mul | BinaryKind::Div => {
            numeric!(a.data(), av => arith(k, av, ash, typed(b, name)?, bsh, &shape), bool => Err(unsupported()))
        }
        BinaryKind::And | BinaryKind::Or | BinaryKind::Xor => {
            let (av, bv) = (typed::<bool>(a, name)?, typed::<bool>(b, name)?);
            let v = match k {
                BinaryKind::And => map2(av, ash, bv, bsh, &shape, name, |x, y| x && y)?,
                BinaryKind::Or => map2(av, ash, bv, bsh, &shape, name, |x, y| x || y)?,
                _ => map2(av, ash, bv, bsh, &shape, name, |x, y| x != y)?,
            };
            make(&shape, v)
        }
        BinaryKind::Greater | BinaryKind::Less | BinaryKind::Equal | BinaryKind::GreaterOrEqual | BinaryKind::LessOrEqual => {
            map_data!(a.data(), av => compare(k, av, ash, typed(b, name)?, bsh, &shape))
        }
        BinaryKind::Min | BinaryKind::Max => extremum(k, ins, out),
        BinaryKind::Pow => pow(a, b, &shape),
        BinaryKind::Mod { fmod } => {
            numeric!(a.data(), av => modulo(av, ash, typed(b, name)?, bsh, &shape, fmod), bool => Err(unsupported()))
        }
    }
}

/// Mod: floats through f64, where the remainder of two f32 values is exact, so rounding back
/// gives C's fmod of the f32 values; integers through i64, which holds every integer type we take.
fn modulo<T: Arith>(a: &[T], ash: &[usize], b: &[T], bsh: &[usize], osh: &[usize], fmod: bool) -> Result<Tensor> {
    if !T::IS_INT {
        if !fmod {
            return Err(Error::Other(format!("Mod: {} inputs need fmod=1", T::DTYPE)));
        }
        return make(osh, map2(a, ash, b, bsh, osh, "Mod", |x, y| T::from_f64(x.to_f64() % y.to_f64()))?);
    }
    if b.iter().any(|&y| y == T::zero()) {
        return Err(Error::Other(format!("Mod: integer division by zero ({} divisor)", T::DTYPE)));
    }
    let v = map2(a, ash, b, bsh, osh, "Mod", |x, y| {
        let (x, y) = (x.to_i64(), y.to_i64());
        let r = x.wrapping_rem(y);
        // Python's `%`: a non-zero remainder moves to the divisor's side of zero.
        T::from_i64(if !fmod && r != 0 && (r < 0) != (y < 0) { r + y } else { r })
    })?;
    make(osh, v)
}

/// Min or Max of one or more inputs, combined left to right with numpy broadcasting; a NaN
/// operand gives NaN, as numpy's `minimum` and `maximum` do.
fn extremum(k: BinaryKind, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    let name = Op::Binary(k).name();
    let xs = (0..ins.len().max(1)).map(|i| input(ins, i, name)).collect::<Result<Vec<_>>>()?;
    if let Some(x) = xs.iter().find(|x| x.dtype() != xs[0].dtype()) {
        return Err(Error::Other(format!("{name}: inputs are {} and {}", xs[0].dtype(), x.dtype())));
    }
    let shape = broadcast_shape(&xs.iter().map(|x| x.shape()).collect::<Vec<_>>(), name)?;
    expect_out(name, xs[0].dtype(), &shape, out.dtype, &out.shape)?;
    let unsupported = || Error::Other(format!("{name}: {} inputs are not supported", xs[0].dtype()));
    numeric!(xs[0].data(), v => fold_extremum(k == BinaryKind::Max, v, &xs, &shape, name), bool => Err(unsupported()))
}

fn fold_extremum<T: Elem>(max: bool, first: &[T], xs: &[&Tensor], osh: &[usize], name: &str) -> Result<Tensor> {
    let pick = |x: T, y: T| if y.is_nan() || (if max { y > x } else { y < x }) { y } else { x };
    let Some((second, rest)) = xs[1..].split_first() else {
        return make(osh, first.to_vec());
    };
    let mut acc = map2(first, xs[0].shape(), typed::<T>(second, name)?, second.shape(), osh, name, pick)?;
    for x in rest {
        acc = map2(&acc, osh, typed::<T>(x, name)?, x.shape(), osh, name, pick)?;
    }
    make(osh, acc)
}

fn arith<T: Arith>(k: BinaryKind, a: &[T], ash: &[usize], b: &[T], bsh: &[usize], osh: &[usize]) -> Result<Tensor> {
    let w = "arithmetic";
    let v = match k {
        BinaryKind::Add => map2(a, ash, b, bsh, osh, w, |x, y| x.add(y))?,
        BinaryKind::Sub => map2(a, ash, b, bsh, osh, w, |x, y| x.sub(y))?,
        BinaryKind::Mul => map2(a, ash, b, bsh, osh, w, |x, y| x.mul(y))?,
        _ => {
            if T::IS_INT && b.iter().any(|&y| y == T::zero()) {
                return Err(Error::Other(format!("Div: integer division by zero ({} divisor)", T::DTYPE)));
            }
            map2(a, ash, b, bsh, osh, w, |x, y| x.div(y))?
        }
    };
    make(osh, v)
}

fn compare<T: Elem>(k: BinaryKind, a: &[T], ash: &[usize], b: &[T], bsh: &[usize], osh: &[usize]) -> Result<Tensor> {
    let w = "comparison";
    let v = match k {
        BinaryKind::Greater => map2(a, ash, b, bsh, osh, w, |x, y| x > y)?,
        BinaryKind::Less => map2(a, ash, b, bsh, osh, w, |x, y| x < y)?,
        BinaryKind::GreaterOrEqual => map2(a, ash, b, bsh, osh, w, |x, y| x >= y)?,
        BinaryKind::LessOrEqual => map2(a, ash, b, bsh, osh, w, |x, y| x <= y)?,
        _ => map2(a, ash, b, bsh, osh, w, |x, y| x == y)?,
    };
    make(osh, v)
}

/// Pow(X, Y): the result has X's type. Float X: `powf` in X's precision. Integer X with an
/// integer exponent >= 0: exact repeated squaring (wrapping); otherwise through f64 and
/// truncated, as the ONNX reference casts the float power back.
fn pow(a: &Tensor, b: &Tensor, osh: &[usize]) -> Result<Tensor> {
    let bad = || Error::Other(format!("Pow: {} base with {} exponent is not supported", a.dtype(), b.dtype()));
    let (ash, bsh) = (a.shape(), b.shape());
    match a.data() {
        TensorData::F32(av) => {
            numeric!(b.data(), bv => make(osh, pow_real(av, ash, bv, bsh, osh)?), bool => Err(bad()))
        }
        TensorData::F64(av) => {
            numeric!(b.data(), bv => make(osh, pow_real(av, ash, bv, bsh, osh)?), bool => Err(bad()))
        }
        TensorData::Bool(_) => Err(bad()),
        d => numeric!(d, av => {
            numeric!(b.data(), bv => make(osh, pow_int(av, ash, bv, bsh, osh)?), bool => Err(bad()))
        }, bool => Err(bad())),
    }
}

fn pow_real<T: Real, E: Elem>(a: &[T], ash: &[usize], b: &[E], bsh: &[usize], osh: &[usize]) -> Result<Vec<T>> {
    // x^2 is common (variance in decomposed LayerNorm) and exact as a product.
    if b.len() == 1 && b[0].to_f64() == 2.0 {
        return map2(a, ash, b, bsh, osh, "Pow", |x, _| x.mul(x));
    }
    map2(a, ash, b, bsh, osh, "Pow", |x, e| x.powf(conv(e)))
}

fn pow_int<T: Elem, E: Elem>(a: &[T], ash: &[usize], b: &[E], bsh: &[usize], osh: &[usize]) -> Result<Vec<T>> {
    map2(a, ash, b, bsh, osh, "Pow", |x: T, e: E| {
        if !E::DTYPE.is_float() && e.to_i64() >= 0 {
            T::from_i64(ipow(x.to_i64(), e.to_i64() as u64))
        } else {
            T::from_f64(x.to_f64().powf(e.to_f64()))
        }
    })
}

fn ipow(mut x: i64, mut e: u64) -> i64 {
    let mut r: i64 = 1;
    while e > 0 {
        if e & 1 == 1 {
            r = r.wrapping_mul(x);
        }
        x = x.wrapping_mul(x);
        e >>= 1;
    }
    r
}
