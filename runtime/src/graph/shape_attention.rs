//! Shape inference for the fused `Attention` op. Every operand is checked against the others
//! exactly: the op never broadcasts q, k or v, so a mismatch is a malformed node, not a
//! broadcast to resolve.

use super::op::Attention;
use super::shape::{broadcast, In};
use crate::backend::TensorSpec;
use crate::error::{Error, Result};
use crate::tensor::{numel, DType};

fn err(msg: impl Into<String>) -> Error {
    Error::Other(msg.into())
}

/// `[B, H, Tq, dk]`, `[B, H, Tk, dk]` and `[B, H, Tk, dv]` as the tuple (B, H, Tq, Tk, dk, dv).
pub fn dims(a: &Attention, q: &[usize], k: &[usize], v: &[usize]) -> Result<[usize; 6]> {
    let rank4 = |s: &[usize], what: &str| -> Result<()> {
        if s.len() != 4 {
            return Err(err(format!("{what} must be [batch, heads, tokens, dim], has shape {s:?}")));
        }
        Ok(())
    };
    rank4(q, "q (input 0)")?;
    rank4(k, "k (input 1)")?;
    rank4(v, "v (input 2)")?;
    let (b, h, tq, dk) = (q[0], q[1], q[2], q[3]);
    let (tk, kd) = if a.k_transposed { (k[3], k[2]) } else { (k[2], k[3]) };
    if k[0] != b || k[1] != h || kd != dk {
        let want = if a.k_transposed { format!("[{b}, {h}, {dk}, Tk]") } else { format!("[{b}, {h}, Tk, {dk}]") };
        return Err(err(format!("k (input 1) has shape {k:?}, expected {want} for q {q:?}")));
    }
    if v[0] != b || v[1] != h || v[2] != tk {
        return Err(err(format!("v (input 2) has shape {v:?}, expected [{b}, {h}, {tk}, dv]")));
    }
    if a.heads != h {
        return Err(err(format!("the op says {} heads but q {q:?} has {h}", a.heads)));
    }
    Ok([b, h, tq, tk, dk, v[3]])
}

pub fn infer(a: &Attention, ins: &[Option<In>]) -> Result<Vec<TensorSpec>> {
    let get = |i: usize, what: &str| ins.get(i).copied().flatten().ok_or_else(|| err(format!("required input {i} ({what}) is missing")));
    let (q, k, v) = (get(0, "q")?, get(1, "k")?, get(2, "v")?);
    for (i, x) in [q, k, v].iter().enumerate() {
        if x.dtype != DType::F32 {
            return Err(err(format!("input {i} is {}; only FLOAT is supported", x.dtype)));
        }
    }
    let [b, h, tq, tk, _, dv] = dims(a, q.shape, k.shape, v.shape)?;
    let scores = [b, h, tq, tk];
    let bias = ins.get(3).copied().flatten();
    if let Some(x) = bias {
        if x.dtype != DType::F32 {
            return Err(err(format!("bias (input 3) is {}; only FLOAT is supported", x.dtype)));
        }
        if x.shape.len() > 4 || broadcast(&[x.shape, &scores]).ok().as_deref() != Some(&scores[..]) {
            return Err(err(format!("bias (input 3) of shape {:?} does not broadcast to the scores {scores:?}", x.shape)));
        }
    }
    let mask = ins.get(4).copied().flatten();
    match (&a.key_mask, mask) {
        (None, Some(_)) => return Err(err("input 4 (token mask) is given but the op has no key mask")),
        (Some(_), None) => return Err(err("the op has a key mask but input 4 (token mask) is missing")),
        (Some(km), Some(m)) => {
            if !(km.c.is_finite() && km.c > 0.0) {
                return Err(err(format!("key mask factor {} must be finite and positive", km.c)));
            }
            if bias.is_none() {
                return Err(err("a key mask needs the bias (input 3) it was recognised in"));
            }
            if tq != tk {
                return Err(err(format!("a key mask needs as many queries as keys, have {tq} and {tk}")));
            }
            let ok_shape = m.shape == [b, tk] || m.shape == [b, tk, 1];
            if m.dtype != DType::F32 || !ok_shape || numel(m.shape) != b * tk {
                return Err(err(format!("token mask (input 4) must be FLOAT [{b}, {tk}] or [{b}, {tk}, 1], is {} {:?}", m.dtype, m.shape)));
            }
        }
        (None, None) => {}
    }
    Ok(vec![TensorSpec { dtype: DType::F32, shape: vec![b, h, tq, dv] }])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::op::{KeyMaskBias, ScoreScale};

    fn op(heads: usize, kt: bool, mask: bool) -> Attention {
        Attention { heads, scale: ScoreScale::Mul(0.125), k_transposed: kt, key_mask: mask.then_some(KeyMaskBias { c: 1e4 }) }
    }

    fn input(shape: &[usize]) -> Option<In<'_>> {
        Some(In { dtype: DType::F32, shape, value: None })
    }

    #[test]
    fn output_shape_and_operand_checks() {
        let (q, k, kt, v) = ([2, 3, 5, 8], [2, 3, 7, 8], [2, 3, 8, 7], [2, 3, 7, 4]);
        let out = infer(&op(3, false, false), &[input(&q), input(&k), input(&v)]).unwrap();
        assert_eq!(out[0].shape, vec![2, 3, 5, 4]);
        let out = infer(&op(3, true, false), &[input(&q), input(&kt), input(&v), input(&[7])]).unwrap();
        assert_eq!(out[0].shape, vec![2, 3, 5, 4]);
        // k given in the wrong layout for the flag.
        let e = infer(&op(3, true, false), &[input(&q), input(&k), input(&v)]).unwrap_err().to_string();
        assert!(e.contains("k (input 1)"), "{e}");
        let e = infer(&op(4, false, false), &[input(&q), input(&k), input(&v)]).unwrap_err().to_string();
        assert!(e.contains("4 heads"), "{e}");
        let e = infer(&op(3, false, false), &[input(&q), input(&k), input(&[2, 3, 6, 4])]).unwrap_err().to_string();
        assert!(e.contains("v (input 2)"), "{e}");
        let e = infer(&op(3, false, false), &[input(&q), input(&k)]).unwrap_err().to_string();
        assert!(e.contains("input 2"), "{e}");
        let e = infer(&op(3, false, false), &[input(&[2, 3, 5]), input(&k), input(&v)]).unwrap_err().to_string();
        assert!(e.contains("q (input 0)"), "{e}");
        // A bias that would grow the scores is not an attention bias.
        let e = infer(&op(3, false, false), &[input(&q), input(&k), input(&v), input(&[4, 2, 3, 5, 7])]).unwrap_err().to_string();
        assert!(e.contains("bias"), "{e}");
        let e = infer(&op(3, false, false), &[input(&q), input(&k), input(&v), input(&[2, 3, 5, 6])]).unwrap_err().to_string();
        assert!(e.contains("bias"), "{e}");
        let i64in = Some(In { dtype: DType::I64, shape: &v, value: None });
        assert!(infer(&op(3, false, false), &[input(&q), input(&k), i64in]).is_err());
    }

    #[test]
    fn key_mask_needs_matching_mask_input() {
        let (q, k, v, bias) = ([2, 3, 7, 8], [2, 3, 7, 8], [2, 3, 7, 4], [2, 1, 1, 7]);
        let a = op(3, false, true);
        for m in [&[2usize, 7][..], &[2, 7, 1]] {
            let out = infer(&a, &[input(&q), input(&k), input(&v), input(&bias), input(m)]).unwrap();
            assert_eq!(out[0].shape, vec![2, 3, 7, 4]);
        }
        let e = infer(&a, &[input(&q), input(&k), input(&v), input(&bias)]).unwrap_err().to_string();
        assert!(e.contains("input 4"), "{e}");
        let e = infer(&a, &[input(&q), input(&k), input(&v), input(&bias), input(&[2, 6])]).unwrap_err().to_string();
        assert!(e.contains("token mask"), "{e}");
        let e = infer(&op(3, false, false), &[input(&q), input(&k), input(&v), input(&bias), input(&[2, 7])]).unwrap_err().to_string();
        assert!(e.contains("no key mask"), "{e}");
        let mut bad = a.clone();
        bad.key_mask = Some(KeyMaskBias { c: f32::NAN });
        assert!(infer(&bad, &[input(&q), input(&k), input(&v), input(&bias), input(&[2, 7])]).is_err());
        // Cross attention (Tq != Tk) cannot share one token mask between queries and keys.
        let e = infer(&a, &[input(&[2, 3, 5, 8]), input(&k), input(&v), input(&[2, 1, 1, 7]), input(&[2, 7])]).unwrap_err().to_string();
        assert!(e.contains("as many queries as keys"), "{e}");
    }
}
