//! Index tables for the strided and broadcasting kernels: dims and per-operand strides with
//! unit dims dropped and adjacent dims merged wherever every operand allows it, so the kernels'
//! index arithmetic runs over as few dims as possible.

use dynaspa_runtime::tensor::strides_of;

/// Row-major strides of `shape` aligned to the right of a rank-`rank` index space, 0 along dims
/// it broadcasts (size 1, or missing on the left).
pub(crate) fn broadcast_strides(shape: &[usize], rank: usize) -> Vec<i64> {
    let own = strides_of(shape);
    let skip = rank - shape.len();
    (0..rank).map(|d| if d < skip || shape[d - skip] == 1 { 0 } else { own[d - skip] as i64 }).collect()
}

/// `dims` with one stride vector per operand, simplified: size-1 dims dropped, then neighbours
/// merged where every operand's strides are contiguous across them.
pub(crate) fn simplify(dims: &[usize], strides: &[Vec<i64>]) -> (Vec<usize>, Vec<Vec<i64>>) {
    let keep: Vec<usize> = (0..dims.len()).filter(|&d| dims[d] != 1).collect();
    let mut od: Vec<usize> = Vec::new();
    let mut os: Vec<Vec<i64>> = vec![Vec::new(); strides.len()];
    for &d in &keep {
        let mergeable = !od.is_empty() && strides.iter().zip(&os).all(|(s, o)| *o.last().unwrap() == s[d] * dims[d] as i64);
        if mergeable {
            *od.last_mut().unwrap() *= dims[d];
            for (s, o) in strides.iter().zip(os.iter_mut()) {
                *o.last_mut().unwrap() = s[d];
            }
        } else {
            od.push(dims[d]);
            for (s, o) in strides.iter().zip(os.iter_mut()) {
                o.push(s[d]);
            }
        }
    }
    (od, os)
}

/// A broadcast over `out` of operands of the given shapes: `(rank, meta)` for the elementwise
/// kernels, with rank 0 (no table) when every operand has the output's shape.
pub(crate) fn broadcast_meta(out: &[usize], operands: &[&[usize]]) -> (usize, Vec<i32>) {
    if operands.iter().all(|s| *s == out) {
        return (0, Vec::new());
    }
    let r = out.len();
    let strides: Vec<Vec<i64>> = operands.iter().map(|s| broadcast_strides(s, r)).collect();
    let (dims, strides) = simplify(out, &strides);
    let mut meta: Vec<i32> = dims.iter().map(|&d| d as i32).collect();
    for s in &strides {
        meta.extend(s.iter().map(|&x| x as i32));
    }
    (dims.len(), meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_tables_merge_and_drop_dims() {
        assert_eq!(broadcast_meta(&[2, 3], &[&[2, 3], &[2, 3]]), (0, vec![]));
        // Channel bias over NCHW: [C] inner-merged with H*W.
        let (r, m) = broadcast_meta(&[1, 4, 5, 6], &[&[1, 4, 5, 6], &[4, 1, 1]]);
        assert_eq!(r, 2);
        assert_eq!(m, vec![4, 30, 30, 1, 1, 0]);
        // Scalar operand.
        assert_eq!(broadcast_meta(&[7], &[&[7], &[]]), (1, vec![7, 1, 0]));
        let (dims, st) = simplify(&[2, 1, 3, 4], &[vec![12, 12, 4, 1], vec![0, 0, 0, 1]]);
        assert_eq!(dims, vec![6, 4]);
        assert_eq!(st, vec![vec![4, 1], vec![0, 1]]);
        assert_eq!(broadcast_strides(&[3, 1], 3), vec![0, 1, 0]);
    }
}
