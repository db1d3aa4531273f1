//! Chunked parallelism for kernels that write disjoint parts of one output. The executor
//! runs kernels inside its rayon pool, so these use that pool's threads.

use dynaspa_runtime::{Error, Result};
use rayon::prelude::*;

/// `n` copies of `v`, or an error when the allocation fails: a model asking for a tensor
/// larger than memory gets an error, not an abort.
pub(crate) fn alloc<T: Clone>(n: usize, v: T) -> Result<Vec<T>> {
    let mut out = Vec::new();
    out.try_reserve_exact(n).map_err(|_| Error::Other(format!("cannot allocate {n} elements of {} bytes", std::mem::size_of::<T>())))?;
    out.resize(n, v);
    Ok(out)
}

/// `[f(0), f(1), .., f(n - 1)]`, with the allocation failing as an error like [`alloc`].
pub(crate) fn alloc_with<T>(n: usize, f: impl FnMut(usize) -> T) -> Result<Vec<T>> {
    let mut out = Vec::new();
    out.try_reserve_exact(n).map_err(|_| Error::Other(format!("cannot allocate {n} elements of {} bytes", std::mem::size_of::<T>())))?;
    out.extend((0..n).map(f));
    Ok(out)
}

/// Below this many output elements a memory-bound kernel runs on the calling thread: waking
/// the pool costs tens of microseconds, as much as copying ~100K floats.
pub(crate) const PAR_MIN: usize = 1 << 17;
/// The same for kernels spending tens of cycles per element (exp, erf, powf).
pub(crate) const PAR_MIN_HEAVY: usize = 1 << 13;

/// Splits `out` into chunks and calls `f(first_index, chunk)` on each, in parallel when the
/// output is large. Every kernel built on this is deterministic: chunks never share outputs.
pub(crate) fn par_chunks<O: Send>(out: &mut [O], f: impl Fn(usize, &mut [O]) + Sync) {
    par_chunks_from(out, PAR_MIN, f)
}

/// [`par_chunks`] going parallel from `min` elements.
pub(crate) fn par_chunks_from<O: Send>(out: &mut [O], min: usize, f: impl Fn(usize, &mut [O]) + Sync) {
    let n = out.len();
    let threads = rayon::current_num_threads();
    if n < min || threads <= 1 {
        if n > 0 {
            f(0, out);
        }
        return;
    }
    let chunk = n.div_ceil(threads * 4).max(min / 2);
    out.par_chunks_mut(chunk).enumerate().for_each(|(i, c)| f(i * chunk, c));
}

/// A new vector of `n` elements filled by `f(first_index, chunk)` in parallel chunks.
pub(crate) fn fill_par<O: Copy + Default + Send>(n: usize, f: impl Fn(usize, &mut [O]) + Sync) -> Result<Vec<O>> {
    let mut out = alloc(n, O::default())?;
    par_chunks(&mut out, f);
    Ok(out)
}

/// `out[i] = f(src[i])`, in parallel chunks for large inputs.
pub(crate) fn map1<T: Copy + Sync, O: Copy + Default + Send>(src: &[T], f: impl Fn(T) -> O + Sync) -> Result<Vec<O>> {
    map1_from(src, PAR_MIN, f)
}

/// [`map1`] for an expensive `f`: goes parallel on smaller inputs.
pub(crate) fn map1_heavy<T: Copy + Sync, O: Copy + Default + Send>(src: &[T], f: impl Fn(T) -> O + Sync) -> Result<Vec<O>> {
    map1_from(src, PAR_MIN_HEAVY, f)
}

fn map1_from<T: Copy + Sync, O: Copy + Default + Send>(src: &[T], min: usize, f: impl Fn(T) -> O + Sync) -> Result<Vec<O>> {
    let mut out = alloc(src.len(), O::default())?;
    par_chunks_from(&mut out, min, |start, out: &mut [O]| {
        let n = out.len();
        for (d, &x) in out.iter_mut().zip(&src[start..start + n]) {
            *d = f(x);
        }
    });
    Ok(out)
}

/// Calls `f(row_index, row)` for each `row`-element row of `out`, in parallel when large.
pub(crate) fn par_rows<O: Send>(out: &mut [O], row: usize, f: impl Fn(usize, &mut [O]) + Sync) {
    if row == 0 || out.is_empty() {
        return;
    }
    let rows = out.len() / row;
    let threads = rayon::current_num_threads();
    if out.len() < PAR_MIN || threads <= 1 || rows < 2 {
        for (i, r) in out.chunks_mut(row).enumerate() {
            f(i, r);
        }
        return;
    }
    let per = rows.div_ceil(threads * 4).max((PAR_MIN / 2).div_ceil(row));
    out.par_chunks_mut(per * row).enumerate().for_each(|(ci, c)| {
        for (j, r) in c.chunks_mut(row).enumerate() {
            f(ci * per + j, r);
        }
    });
}
