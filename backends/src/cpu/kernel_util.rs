//! Argument checks and the fused epilogue shared by the dense kernels.

use dynaspa_runtime::graph::Activation;
use dynaspa_runtime::{Error, Result, Tensor};

/// The f32 contents of `t`, or an error naming the op, the input and the dtype found.
pub(crate) fn f32_data<'a>(t: &'a Tensor, op: &str, what: &str) -> Result<&'a [f32]> {
    t.as_f32().map_err(|_| Error::Other(format!("{op}: input {what} must be FLOAT, got {} (only f32 is supported)", t.dtype())))
}

pub(crate) fn err<T>(msg: String) -> Result<T> {
    Err(Error::Other(msg))
}

/// Bound on strides, dilations and pads, so window arithmetic in `isize` cannot overflow.
const ATTR_MAX: usize = i32::MAX as usize;

/// A per-axis attribute (strides, dilations), defaulting to ones when absent.
pub(crate) fn per_axis(op: &str, name: &str, v: &[usize], n: usize) -> Result<Vec<usize>> {
    if v.is_empty() {
        return Ok(vec![1; n]);
    }
    if v.len() != n {
        return err(format!("{op}: {name} has {} values, expected {n} (one per spatial axis)", v.len()));
    }
    if v.iter().any(|&x| x == 0 || x > ATTR_MAX) {
        return err(format!("{op}: {name} {v:?} must be positive and at most {ATTR_MAX}"));
    }
    Ok(v.to_vec())
}

/// Pads as (begins, ends), defaulting to zeros when absent.
pub(crate) fn split_pads(op: &str, pads: &[usize], n: usize) -> Result<(Vec<usize>, Vec<usize>)> {
    if pads.is_empty() {
        return Ok((vec![0; n], vec![0; n]));
    }
    if pads.len() != 2 * n {
        return err(format!("{op}: pads has {} values, expected {} (begins then ends)", pads.len(), 2 * n));
    }
    if pads.iter().any(|&x| x > ATTR_MAX) {
        return err(format!("{op}: pads {pads:?} must be at most {ATTR_MAX}"));
    }
    Ok((pads[..n].to_vec(), pads[n..].to_vec()))
}

/// Normalises an axis in `[-rank, rank)` (or `[-rank, rank]` when `inclusive`).
pub(crate) fn norm_axis(op: &str, axis: i64, rank: usize, inclusive: bool) -> Result<usize> {
    let r = rank as i64;
    let hi = if inclusive { r } else { r - 1 };
    if axis < -r || axis > hi {
        return err(format!("{op}: axis {axis} out of range for a rank-{rank} input"));
    }
    Ok(if axis < 0 { (axis + r) as usize } else { axis as usize })
}

multiversion! {
/// `row = act(row + bias [+ add])` in one pass, with the activation chosen once per row so
/// the loop body is a straight vectorisable expression.
pub(crate) fn epilogue(row: &mut [f32], bias: f32, add: Option<&[f32]>, act: Option<Activation>) {
    match act {
        None => epi(row, bias, add, |x| x),
        Some(Activation::Relu) => epi(row, bias, add, |x| x.max(0.0)),
        Some(Activation::LeakyRelu(a)) => epi(row, bias, add, move |x| if x < 0.0 { a * x } else { x }),
        Some(Activation::Clip(lo, hi)) => epi(row, bias, add, move |x| x.max(lo).min(hi)),
        Some(a) => epi(row, bias, add, move |x| a.apply(x)),
    }
}
}

#[inline(always)]
fn epi(row: &mut [f32], bias: f32, add: Option<&[f32]>, f: impl Fn(f32) -> f32) {
    match add {
        Some(add) => {
            for (y, &r) in row.iter_mut().zip(add) {
                *y = f(*y + bias + r);
            }
        }
        None => {
            for y in row {
                *y = f(*y + bias);
            }
        }
    }
}

/// Whether the AVX-512 flavour of `multiversion!` functions can run (detection is cached).
#[inline(always)]
pub(crate) fn has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512vl")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Defines a function whose body is also compiled for AVX-512 and picks that copy at run time.
/// The crate targets baseline x86-64 (SSE2), so loops the compiler vectorises would otherwise
/// use 4-lane vectors; helpers the body calls must be `#[inline(always)]` to be widened too.
/// Arguments must be plain identifiers with concrete types (no generics).
macro_rules! multiversion {
    ($(#[$m:meta])* $vis:vis fn $name:ident($($a:ident : $t:ty),* $(,)?) $(-> $r:ty)? $body:block) => {
        $(#[$m])*
        $vis fn $name($($a: $t),*) $(-> $r)? {
            #[inline(always)]
            fn imp($($a: $t),*) $(-> $r)? $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
                unsafe fn wide($($a: $t),*) $(-> $r)? {
                    imp($($a),*)
                }
                if $crate::cpu::kernel_util::has_avx512() {
                    // SAFETY: the features `wide` is compiled for were just detected.
                    return unsafe { wide($($a),*) };
                }
            }
            imp($($a),*)
        }
    };
}
pub(crate) use multiversion;
