//! Walking an output in row-major order while tracking where each of K inputs is read.
//!
//! Transpose, Slice, Expand and broadcasting elementwise ops are all "read input k at
//! `base_k + sum(i_d * stride_kd)`" with different strides (permuted, stepped or zero).
//! Dimensions are coalesced first, so a per-channel broadcast over NCHW becomes a short
//! outer loop around long contiguous runs, which is where the time goes.

use super::par::{alloc, fill_par, PAR_MIN};
use dynaspa_runtime::{Error, Result};
use rayon::prelude::*;

pub(crate) struct Walk<const K: usize> {
    /// Coalesced sizes, outermost first; never empty (a scalar walks one dim of size 1).
    sizes: Vec<usize>,
    strides: Vec<[isize; K]>,
    base: [isize; K],
}

impl<const K: usize> Walk<K> {
    /// `strides[k]` has one entry per dim of `shape`.
    pub fn new(shape: &[usize], strides: [&[isize]; K], base: [isize; K]) -> Walk<K> {
        let mut sizes: Vec<usize> = Vec::new();
        let mut st: Vec<[isize; K]> = Vec::new();
        for d in 0..shape.len() {
            if shape[d] == 1 {
                continue;
            }
            let s: [isize; K] = std::array::from_fn(|k| strides[k][d]);
            if let Some(prev) = st.last() {
                // Outer dim `prev` followed by this inner dim is one dim when stepping the
                // outer is the same as running off the end of the inner, for every input.
                if (0..K).all(|k| prev[k] == s[k] * shape[d] as isize) {
                    let l = sizes.len() - 1;
                    sizes[l] *= shape[d];
                    st[l] = s;
                    continue;
                }
            }
            sizes.push(shape[d]);
            st.push(s);
        }
        if sizes.is_empty() {
            sizes.push(1);
            st.push([0; K]);
        }
        Walk { sizes, strides: st, base }
    }

    pub fn inner_strides(&self) -> [isize; K] {
        *self.strides.last().unwrap_or(&[0; K])
    }

    /// Calls `f(pos, len, offsets)` for each run of consecutive output elements in
    /// `[start, start + len)` that lie in one innermost row; `pos` is relative to `start`,
    /// `offsets` are the input positions of the run's first element.
    pub fn runs(&self, start: usize, len: usize, mut f: impl FnMut(usize, usize, [isize; K])) {
        let r = self.sizes.len() - 1;
        let n = self.sizes[r];
        let inner = self.strides[r];
        let mut row = start / n;
        let mut col = start % n;
        let mut idx = vec![0usize; r];
        let mut off = self.base;
        for d in (0..r).rev() {
            idx[d] = row % self.sizes[d];
            row /= self.sizes[d];
            for (o, s) in off.iter_mut().zip(&self.strides[d]) {
                *o += idx[d] as isize * s;
            }
        }
        let mut done = 0;
        while done < len {
            let m = (n - col).min(len - done);
            f(done, m, std::array::from_fn(|k| off[k] + col as isize * inner[k]));
            done += m;
            col = 0;
            for d in (0..r).rev() {
                idx[d] += 1;
                for (o, s) in off.iter_mut().zip(&self.strides[d]) {
                    *o += s;
                }
                if idx[d] < self.sizes[d] {
                    break;
                }
                for (o, s) in off.iter_mut().zip(&self.strides[d]) {
                    *o -= s * self.sizes[d] as isize;
                }
                idx[d] = 0;
            }
        }
    }
}

/// Row-major strides as signed offsets.
pub(crate) fn istrides(shape: &[usize]) -> Vec<isize> {
    dynaspa_runtime::tensor::strides_of(shape).into_iter().map(|s| s as isize).collect()
}

/// Checks that every position a view reaches lies inside a buffer of `len` elements.
pub(crate) fn check_view(len: usize, offset: isize, shape: &[usize], strides: &[isize], what: &str) -> Result<()> {
    if shape.contains(&0) {
        return Ok(());
    }
    let (mut lo, mut hi) = (offset, offset);
    for (&n, &s) in shape.iter().zip(strides) {
        let span = (n as isize - 1) * s;
        if span < 0 {
            lo += span;
        } else {
            hi += span;
        }
    }
    if lo < 0 || hi >= len as isize {
        return Err(Error::Other(format!("{what}: view {shape:?} with strides {strides:?} at {offset} reads outside {len} elements")));
    }
    Ok(())
}

/// Materialises the view `src[offset + sum(i_d * strides_d)]` of `shape` as a contiguous vector.
pub(crate) fn gather_view<T: Copy + Default + Send + Sync>(
    src: &[T],
    offset: isize,
    shape: &[usize],
    strides: &[isize],
    what: &str,
) -> Result<Vec<T>> {
    check_view(src.len(), offset, shape, strides, what)?;
    let n: usize = shape.iter().product();
    let walk = Walk::<1>::new(shape, [strides], [offset]);
    if let Some(v) = tiled_transpose(src, &walk, n) {
        return v;
    }
    let inner = walk.inner_strides()[0];
    fill_par(n, |start, out: &mut [T]| {
        walk.runs(start, out.len(), |pos, len, [o]| {
            let dst = &mut out[pos..pos + len];
            let o = o as usize;
            if inner == 1 {
                dst.copy_from_slice(&src[o..o + len]);
            } else if inner == 0 {
                dst.fill(src[o]);
            } else {
                for (j, d) in dst.iter_mut().enumerate() {
                    *d = src[(o as isize + j as isize * inner) as usize];
                }
            }
        })
    })
}

const TILE: usize = 32;

/// Permutations that move the contiguous input dim away from the innermost output position
/// (NCHW <-> NHWC) read with a large stride; copying 32x32 tiles keeps both sides in cache.
/// Applies when the input-contiguous dim is the one just outside the innermost output dim.
fn tiled_transpose<T: Copy + Default + Send + Sync>(src: &[T], walk: &Walk<1>, n: usize) -> Option<Result<Vec<T>>> {
    let r = walk.sizes.len();
    if r < 2 || n < 4096 {
        return None;
    }
    let (ni, si) = (walk.sizes[r - 1], walk.strides[r - 1][0]);
    let (nk, sk) = (walk.sizes[r - 2], walk.strides[r - 2][0]);
    if sk != 1 || si <= 1 || ni < 8 || nk < 8 {
        return None;
    }
    // Rows of the output are (batch..., k); walk over rows of length `ni` with a walk of
    // the outer dims to find each batch's base.
    let outer = Walk::<1> { sizes: walk.sizes[..r - 1].to_vec(), strides: walk.strides[..r - 1].to_vec(), base: walk.base };
    let mut out = match alloc(n, T::default()) {
        Ok(v) => v,
        Err(e) => return Some(Err(e)),
    };
    // A chunk is TILE output rows; where it crosses a batch boundary it is split there.
    let tile_rows = |(ci, chunk): (usize, &mut [T])| {
        let row0 = ci * TILE;
        let nrows = chunk.len() / ni;
        let mut r0 = 0;
        while r0 < nrows {
            let row = row0 + r0;
            let seg = (nk - row % nk).min(nrows - r0);
            let mut base = 0isize;
            outer.runs(row, 1, |_, _, [o]| base = o);
            for ib in (0..ni).step_by(TILE) {
                let ie = (ib + TILE).min(ni);
                for kk in 0..seg {
                    let d = &mut chunk[(r0 + kk) * ni..(r0 + kk + 1) * ni];
                    let s0 = base + kk as isize;
                    for (i, x) in d[ib..ie].iter_mut().enumerate() {
                        *x = src[(s0 + (ib + i) as isize * si) as usize];
                    }
                }
            }
            r0 += seg;
        }
    };
    if n >= PAR_MIN && rayon::current_num_threads() > 1 {
        out.par_chunks_mut(TILE * ni).enumerate().for_each(tile_rows);
    } else {
        out.chunks_mut(TILE * ni).enumerate().for_each(tile_rows);
    }
    Some(Ok(out))
}

/// Builds the output of shape `maps[d].len()` per dim where output index `o_d` reads input
/// index `maps[d][o_d]`, or `fill` when any of them is negative (Pad's outside, Resize's
/// extrapolation). Runs of consecutive indices along the last dim are copied as slices.
pub(crate) fn gather_axes<T: Copy + Default + Send + Sync>(
    src: &[T],
    shape: &[usize],
    maps: &[Vec<i64>],
    fill: T,
    what: &str,
) -> Result<Vec<T>> {
    let r = shape.len();
    let bad = maps.len() != r
        || src.len() != shape.iter().product::<usize>()
        || maps.iter().zip(shape).any(|(m, &n)| m.iter().any(|&k| k >= n as i64));
    if bad {
        return Err(Error::Other(format!("{what}: index maps do not fit input {shape:?}")));
    }
    if r == 0 {
        return Ok(src.to_vec());
    }
    let out_shape: Vec<usize> = maps.iter().map(|m| m.len()).collect();
    let n: usize = out_shape.iter().product();
    let mut out = alloc(n, T::default())?;
    let st = dynaspa_runtime::tensor::strides_of(shape);
    // (output start, length, input start or -1) along the last dim.
    let mut runs: Vec<(usize, usize, i64)> = Vec::new();
    for (j, &k) in maps[r - 1].iter().enumerate() {
        match runs.last_mut() {
            Some((_, len, s)) if (*s < 0 && k < 0) || (*s >= 0 && k == *s + *len as i64) => *len += 1,
            _ => runs.push((j, 1, if k < 0 { -1 } else { k })),
        }
    }
    let last = &maps[r - 1];
    // Short runs (nearest upsampling repeats each index) are cheaper element by element.
    let per_element = runs.len() * 4 > last.len();
    super::par::par_rows(&mut out, out_shape[r - 1], |row, dst| {
        let mut rem = row;
        let mut base = 0usize;
        let mut outside = false;
        for d in (0..r - 1).rev() {
            let k = maps[d][rem % out_shape[d]];
            rem /= out_shape[d];
            if k < 0 {
                outside = true;
            } else {
                base += k as usize * st[d];
            }
        }
        if outside {
            dst.fill(fill);
        } else if per_element {
            let row = &src[base..];
            for (d, &k) in dst.iter_mut().zip(last) {
                *d = if k < 0 { fill } else { row[k as usize] };
            }
        } else {
            for &(o, len, s) in &runs {
                if s < 0 {
                    dst[o..o + len].fill(fill);
                } else {
                    let s = base + s as usize;
                    dst[o..o + len].copy_from_slice(&src[s..s + len]);
                }
            }
        }
    });
    Ok(out)
}
