//! MatMul (numpy semantics: 1-D promotion, broadcast batch dims) and Gemm, both on `sgemm`.

use super::gemm_util::{par_sgemm, sgemm, threads, Layout};
use super::input;
use super::kernel_util::{err, f32_data};
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::{Result, Tensor};
use rayon::prelude::*;

/// Per-matrix multiply-adds below which batches are spread over threads rather than rows.
const SMALL_MACS: usize = 1 << 20;

pub(crate) fn matmul(ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    const OP: &str = "MatMul";
    let (a, b) = (input(ins, 0, OP)?, input(ins, 1, OP)?);
    let (ad, bd) = (f32_data(a, OP, "A")?, f32_data(b, OP, "B")?);
    let (sa, sb) = (a.shape(), b.shape());
    if sa.is_empty() || sb.is_empty() {
        return err(format!("{OP}: inputs must have rank >= 1, got {sa:?} and {sb:?}"));
    }
    let (ra, rb) = (sa.len(), sb.len());
    let (m, k) = if ra == 1 { (1, sa[0]) } else { (sa[ra - 2], sa[ra - 1]) };
    let (k2, n) = if rb == 1 { (sb[0], 1) } else { (sb[rb - 2], sb[rb - 1]) };
    if k != k2 {
        return err(format!("{OP}: inner dimensions differ: A {sa:?} x B {sb:?}"));
    }
    let ba = &sa[..ra.saturating_sub(2)];
    let bb = &sb[..rb.saturating_sub(2)];
    let batch = broadcast(ba, bb)
        .ok_or_else(|| dynaspa_runtime::Error::Other(format!("{OP}: batch dimensions of A {sa:?} and B {sb:?} do not broadcast")))?;
    let mut want = batch.clone();
    if ra > 1 {
        want.push(m);
    }
    if rb > 1 {
        want.push(n);
    }
    if want != out.shape {
        return err(format!("{OP}: output shape {:?} does not match the computed {want:?}", out.shape));
    }
    let nb: usize = batch.iter().product();
    let mut y = vec![0.0f32; nb * m * n];
    if y.is_empty() {
        return Tensor::from_f32(want, y);
    }
    let (la, lb) = (Layout::row_major(k), Layout::row_major(n));
    if bb.iter().product::<usize>() == 1 {
        // B is shared by every batch: stack A's batches into the rows of one GEMM.
        par_sgemm(nb * m, n, k, 1.0, ad, la, bd, lb, &mut y, n, false);
        return Tensor::from_f32(want, y);
    }
    let offa = batch_offsets(ba, &batch, m * k);
    let offb = batch_offsets(bb, &batch, k * n);
    let one = |i: usize, yc: &mut [f32]| {
        // SAFETY: `yc` is this batch's own m x n block.
        unsafe { sgemm(m, n, k, 1.0, &ad[offa[i]..], la, &bd[offb[i]..], lb, yc.as_mut_ptr(), n, false) }
    };
    if nb >= 2 * threads() || m * n * k < SMALL_MACS {
        y.par_chunks_mut(m * n).enumerate().for_each(|(i, yc)| one(i, yc));
    } else {
        for (i, yc) in y.chunks_mut(m * n).enumerate() {
            par_sgemm(m, n, k, 1.0, &ad[offa[i]..], la, &bd[offb[i]..], lb, yc, n, false);
        }
    }
    Tensor::from_f32(want, y)
}

/// Numpy broadcast of two shapes, or `None` when they are incompatible.
fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let r = a.len().max(b.len());
    (0..r)
        .map(|i| {
            let x = if i + a.len() >= r { a[i + a.len() - r] } else { 1 };
            let y = if i + b.len() >= r { b[i + b.len() - r] } else { 1 };
            match (x, y) {
                (x, y) if x == y => Some(x),
                (1, y) => Some(y),
                (x, 1) => Some(x),
                _ => None,
            }
        })
        .collect()
}

/// Element offset of each output batch's matrix inside an operand with batch dims `dims`
/// (right-aligned against `batch`, size-1 dims repeating).
fn batch_offsets(dims: &[usize], batch: &[usize], mat: usize) -> Vec<usize> {
    let skip = batch.len() - dims.len();
    let mut strides = vec![0; batch.len()];
    let mut s = mat;
    for i in (0..dims.len()).rev() {
        strides[skip + i] = if dims[i] == 1 { 0 } else { s };
        s *= dims[i];
    }
    let nb: usize = batch.iter().product();
    (0..nb)
        .map(|mut i| {
            let mut off = 0;
            for d in (0..batch.len()).rev() {
                off += (i % batch[d]) * strides[d];
                i /= batch[d];
            }
            off
        })
        .collect()
}

pub(crate) fn gemm(alpha: f32, beta: f32, ta: bool, tb: bool, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    const OP: &str = "Gemm";
    let (a, b) = (input(ins, 0, OP)?, input(ins, 1, OP)?);
    let (ad, bd) = (f32_data(a, OP, "A")?, f32_data(b, OP, "B")?);
    let (sa, sb) = (a.shape(), b.shape());
    if sa.len() != 2 || sb.len() != 2 {
        return err(format!("{OP}: A {sa:?} and B {sb:?} must be 2-D"));
    }
    let (m, k) = if ta { (sa[1], sa[0]) } else { (sa[0], sa[1]) };
    let (k2, n) = if tb { (sb[1], sb[0]) } else { (sb[0], sb[1]) };
    if k != k2 {
        return err(format!("{OP}: inner dimensions differ: A {sa:?} (transA={ta}) x B {sb:?} (transB={tb})"));
    }
    if out.shape != [m, n] {
        return err(format!("{OP}: output shape {:?} must be [{m}, {n}]", out.shape));
    }
    let mut y = vec![0.0f32; m * n];
    let c = ins.get(2).copied().flatten();
    let with_c = c.is_some() && beta != 0.0;
    if let (Some(c), true) = (c, with_c) {
        let cd = f32_data(c, OP, "C")?;
        let sc = c.shape();
        let (cm, cn) = match *sc {
            [] => (1, 1),
            [x] => (1, x),
            [x, z] => (x, z),
            _ => return err(format!("{OP}: C {sc:?} must have rank <= 2")),
        };
        if !(cm == 1 || cm == m) || !(cn == 1 || cn == n) {
            return err(format!("{OP}: C {sc:?} does not broadcast to [{m}, {n}]"));
        }
        for (i, row) in y.chunks_mut(n.max(1)).enumerate() {
            let ci = if cm == 1 { 0 } else { i };
            for (j, v) in row.iter_mut().enumerate() {
                *v = beta * cd[ci * cn + if cn == 1 { 0 } else { j }];
            }
        }
    }
    if !y.is_empty() {
        let la = if ta { Layout::col_major(m) } else { Layout::row_major(k) };
        let lb = if tb { Layout::col_major(k) } else { Layout::row_major(n) };
        par_sgemm(m, n, k, alpha, ad, la, bd, lb, &mut y, n, with_c);
    }
    Tensor::from_f32(out.shape.clone(), y)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::test_util::*;

    /// (batch..., m, k) x (batch..., k, n) with explicit broadcasting, in f64.
    fn naive_matmul(sa: &[usize], a: &[f32], sb: &[usize], b: &[f32]) -> (Vec<usize>, Vec<f32>) {
        let pa: Vec<usize> = if sa.len() == 1 { vec![1, sa[0]] } else { sa.to_vec() };
        let pb: Vec<usize> = if sb.len() == 1 { vec![sb[0], 1] } else { sb.to_vec() };
        let (m, k, n) = (pa[pa.len() - 2], pa[pa.len() - 1], pb[pb.len() - 1]);
        let batch = broadcast(&pa[..pa.len() - 2], &pb[..pb.len() - 2]).unwrap();
        let oa = batch_offsets(&pa[..pa.len() - 2], &batch, m * k);
        let ob = batch_offsets(&pb[..pb.len() - 2], &batch, k * n);
        let nb: usize = batch.iter().product();
        let mut y = vec![];
        for bi in 0..nb {
            for i in 0..m {
                for j in 0..n {
                    let s: f64 = (0..k).map(|p| a[oa[bi] + i * k + p] as f64 * b[ob[bi] + p * n + j] as f64).sum();
                    y.push(s as f32);
                }
            }
        }
        let mut shape = batch;
        if sa.len() > 1 {
            shape.push(m);
        }
        if sb.len() > 1 {
            shape.push(n);
        }
        (shape, y)
    }

    #[test]
    fn matmul_broadcasting_and_promotion() {
        let cases: &[(&[usize], &[usize])] = &[
            (&[3, 4], &[4, 5]),
            (&[4], &[4, 5]),
            (&[3, 4], &[4]),
            (&[4], &[4]),
            (&[2, 3, 4], &[4, 5]),
            (&[2, 3, 4], &[2, 4, 5]),
            (&[1, 3, 4], &[6, 4, 5]),
            (&[2, 1, 3, 4], &[5, 4, 2]),
            (&[4], &[3, 4, 2]),
            (&[2, 3, 4], &[4]),
            (&[7, 70, 90], &[7, 90, 80]),
            (&[3, 200, 64], &[3, 64, 300]),
            (&[2, 100, 256], &[256, 130]),
            (&[1, 1, 4], &[1, 4, 3]),
            (&[3, 0, 4], &[4, 5]),
        ];
        let mut rng = Rng::new(21);
        for (sa, sb) in cases {
            let a = rng.tensor(sa);
            let b = rng.tensor(sb);
            let (shape, want) = naive_matmul(sa, a.as_f32().unwrap(), sb, b.as_f32().unwrap());
            let got = matmul(&[Some(&a), Some(&b)], &spec(&shape)).unwrap();
            assert_eq!(got.shape(), shape.as_slice());
            assert_close(got.as_f32().unwrap(), &want, 1e-4, &format!("{sa:?} x {sb:?}"));
        }
    }

    #[test]
    fn matmul_rejects_bad_shapes() {
        let mut rng = Rng::new(2);
        let a = rng.tensor(&[2, 3, 4]);
        let b = rng.tensor(&[3, 4, 5]);
        assert!(matmul(&[Some(&a), Some(&b)], &spec(&[3, 3, 5])).is_err());
        let b2 = rng.tensor(&[5, 4]);
        assert!(matmul(&[Some(&a), Some(&b2)], &spec(&[2, 3, 4])).is_err());
        let b3 = rng.tensor(&[4, 5]);
        assert!(matmul(&[Some(&a), Some(&b3)], &spec(&[2, 3, 6])).is_err());
        let s = Tensor::scalar_f32(1.0);
        assert!(matmul(&[Some(&s), Some(&b3)], &spec(&[5])).is_err());
        let bi = Tensor::from_i64(vec![4, 5], vec![1; 20]).unwrap();
        assert!(matmul(&[Some(&a), Some(&bi)], &spec(&[2, 3, 5])).unwrap_err().to_string().contains("INT64"));
    }

    #[test]
    fn gemm_transposes_alpha_beta_and_c_broadcast() {
        let mut rng = Rng::new(8);
        let (m, k, n) = (13, 29, 17);
        let c_shapes: &[Option<&[usize]>] = &[None, Some(&[]), Some(&[1]), Some(&[n]), Some(&[1, n]), Some(&[m, 1]), Some(&[m, n])];
        for &(ta, tb) in &[(false, false), (true, false), (false, true), (true, true)] {
            for cs in c_shapes {
                for &(alpha, beta) in &[(1.0, 1.0), (0.5, -2.0), (1.5, 0.0)] {
                    let a = rng.tensor(&if ta { [k, m] } else { [m, k] });
                    let b = rng.tensor(&if tb { [n, k] } else { [k, n] });
                    let c = cs.map(|s| rng.tensor(s));
                    let (ad, bd) = (a.as_f32().unwrap(), b.as_f32().unwrap());
                    let mut want = vec![0.0f32; m * n];
                    for i in 0..m {
                        for j in 0..n {
                            let mut s = 0.0f64;
                            for p in 0..k {
                                let av = if ta { ad[p * m + i] } else { ad[i * k + p] };
                                let bv = if tb { bd[j * k + p] } else { bd[p * n + j] };
                                s += av as f64 * bv as f64;
                            }
                            let mut v = alpha as f64 * s;
                            if let Some(c) = &c {
                                let cd = c.as_f32().unwrap();
                                let sh = c.shape();
                                let ci = match sh.len() {
                                    0 => 0,
                                    1 => {
                                        if sh[0] == 1 {
                                            0
                                        } else {
                                            j
                                        }
                                    }
                                    _ => (if sh[0] == 1 { 0 } else { i }) * sh[1] + if sh[1] == 1 { 0 } else { j },
                                };
                                v += beta as f64 * cd[ci] as f64;
                            }
                            want[i * n + j] = v as f32;
                        }
                    }
                    let got = gemm(alpha, beta, ta, tb, &[Some(&a), Some(&b), c.as_ref()], &spec(&[m, n])).unwrap();
                    assert_close(got.as_f32().unwrap(), &want, 1e-4, &format!("ta={ta} tb={tb} c={cs:?}"));
                }
            }
        }
    }

    #[test]
    fn gemm_rejects_bad_shapes() {
        let mut rng = Rng::new(3);
        let a = rng.tensor(&[3, 4]);
        let b = rng.tensor(&[4, 5]);
        assert!(gemm(1.0, 1.0, false, false, &[Some(&a), Some(&b)], &spec(&[3, 5])).is_ok());
        assert!(gemm(1.0, 1.0, true, false, &[Some(&a), Some(&b)], &spec(&[4, 5])).is_err());
        let c = rng.tensor(&[2, 5]);
        assert!(gemm(1.0, 1.0, false, false, &[Some(&a), Some(&b), Some(&c)], &spec(&[3, 5])).is_err());
        let c3 = rng.tensor(&[1, 3, 5]);
        assert!(gemm(1.0, 1.0, false, false, &[Some(&a), Some(&b), Some(&c3)], &spec(&[3, 5])).is_err());
        let a3 = rng.tensor(&[1, 3, 4]);
        assert!(gemm(1.0, 1.0, false, false, &[Some(&a3), Some(&b)], &spec(&[3, 5])).is_err());
    }
}
