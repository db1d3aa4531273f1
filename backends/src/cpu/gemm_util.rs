//! The GEMM entry points of the dense kernels, on top of the `gemm` crate.
//!
//! Measured on the 2-core AVX-512 box: the crate's own `Parallelism::Rayon` reaches ~150 GFLOP/s
//! on ResNet-sized problems while splitting the problem ourselves into one single-threaded call
//! per worker reaches ~240, so every caller partitions work itself and calls `sgemm` serially.

use gemm::Parallelism;
use rayon::prelude::*;
use std::cell::RefCell;

/// Element (i, j) of a matrix lives at `i * rs + j * cs` of its slice.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout {
    pub rs: usize,
    pub cs: usize,
}

impl Layout {
    pub fn row_major(cols: usize) -> Layout {
        Layout { rs: cols, cs: 1 }
    }
    pub fn col_major(rows: usize) -> Layout {
        Layout { rs: 1, cs: rows }
    }
    /// Smallest slice length holding a `rows` x `cols` matrix with this layout.
    fn extent(self, rows: usize, cols: usize) -> usize {
        if rows == 0 || cols == 0 {
            0
        } else {
            (rows - 1) * self.rs + (cols - 1) * self.cs + 1
        }
    }
}

/// A raw output pointer that parallel tasks share; each task writes a disjoint region.
#[derive(Clone, Copy)]
pub(crate) struct SendPtr(*mut f32);
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

impl SendPtr {
    pub fn new(s: &mut [f32]) -> SendPtr {
        SendPtr(s.as_mut_ptr())
    }
    /// For writing into a buffer that is not initialised yet (a `Vec`'s spare capacity).
    pub fn raw(p: *mut f32) -> SendPtr {
        SendPtr(p)
    }
    /// A method rather than field access so closures capture the whole (Send) wrapper.
    pub fn get(self) -> *mut f32 {
        self.0
    }
}

/// `C[m x n] = alpha * A[m x k] * B[k x n]` (`+= ` when `accumulate`), on the calling thread.
/// `c` is row-major with row stride `ldc`.
///
/// # Safety
/// `c` must be valid for reads and writes at `i * ldc + j` for all `i < m`, `j < n`, and no
/// other thread may access those elements during the call.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn sgemm(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: &[f32],
    la: Layout,
    b: &[f32],
    lb: Layout,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
) {
    // The crate reads through raw pointers; these bounds are what keeps that sound.
    assert!(la.extent(m, k) <= a.len(), "sgemm: A out of bounds");
    assert!(lb.extent(k, n) <= b.len(), "sgemm: B out of bounds");
    if m == 0 || n == 0 {
        return;
    }
    // The crate computes dst = alpha' * dst + beta' * A * B.
    gemm::gemm(
        m,
        n,
        k,
        c,
        1,
        ldc as isize,
        accumulate,
        a.as_ptr(),
        la.cs as isize,
        la.rs as isize,
        b.as_ptr(),
        lb.cs as isize,
        lb.rs as isize,
        1.0,
        alpha,
        false,
        false,
        false,
        Parallelism::None,
    );
}

/// Below this many multiply-adds a second thread costs more than it saves.
const PAR_MIN_MACS: usize = 1 << 18;

/// Worker count of the pool the caller runs in (the executor's, inside `pool.install`).
pub(crate) fn threads() -> usize {
    rayon::current_num_threads().max(1)
}

/// `sgemm` over the whole current rayon pool: splits rows when each worker still gets a
/// panel of at least 64 rows (what the microkernel amortises well), columns otherwise.
/// `c` is row-major `m x n` with row stride `ldc`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn par_sgemm(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: &[f32],
    la: Layout,
    b: &[f32],
    lb: Layout,
    c: &mut [f32],
    ldc: usize,
    accumulate: bool,
) {
    if m == 0 || n == 0 {
        return;
    }
    assert!((m - 1) * ldc + n <= c.len(), "par_sgemm: C out of bounds");
    let t = threads();
    let macs = m.saturating_mul(n).saturating_mul(k.max(1));
    let cp = SendPtr::new(c);
    if t == 1 || macs < PAR_MIN_MACS {
        unsafe { sgemm(m, n, k, alpha, a, la, b, lb, cp.get(), ldc, accumulate) };
        return;
    }
    let split_rows = m >= 64 * t || n < 2 * 16;
    let len = if split_rows { m } else { n };
    // Pieces rounded to 16 so the vector microkernels see full tiles except at the end.
    let pieces = t.min(len.div_ceil(16)).max(1);
    let step = len.div_ceil(pieces).next_multiple_of(16).min(len);
    let count = len.div_ceil(step);
    (0..count).into_par_iter().with_max_len(1).for_each(|i| {
        let lo = i * step;
        let hi = (lo + step).min(len);
        unsafe {
            if split_rows {
                sgemm(hi - lo, n, k, alpha, &a[lo * la.rs..], la, b, lb, cp.get().add(lo * ldc), ldc, accumulate);
            } else {
                sgemm(m, hi - lo, k, alpha, a, la, &b[lo * lb.cs..], lb, cp.get().add(lo), ldc, accumulate);
            }
        }
    });
}

thread_local! {
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    static SCRATCH2: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on a per-thread buffer of `len` floats with unspecified contents, reused across
/// calls so large im2col tiles do not page-fault in fresh memory every time.
pub(crate) fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    scratch(&SCRATCH, len, f)
}

/// A second per-thread buffer, for a caller that holds one while its parallel tasks use
/// `with_scratch`.
pub(crate) fn with_scratch2<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    scratch(&SCRATCH2, len, f)
}

fn scratch<R>(key: &'static std::thread::LocalKey<RefCell<Vec<f32>>>, len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    key.with(|s| match s.try_borrow_mut() {
        Ok(mut v) => {
            if v.len() < len {
                v.resize(len, 0.0);
            }
            f(&mut v[..len])
        }
        // Re-entered through rayon work stealing: fall back to a private buffer.
        Err(_) => f(&mut vec![0.0; len]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::test_util::*;

    fn naive(m: usize, n: usize, k: usize, a: &[f32], la: Layout, b: &[f32], lb: Layout) -> Vec<f32> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0f64;
                for p in 0..k {
                    s += a[i * la.rs + p * la.cs] as f64 * b[p * lb.rs + j * lb.cs] as f64;
                }
                c[i * n + j] = s as f32;
            }
        }
        c
    }

    #[test]
    fn par_sgemm_matches_naive_all_layouts() {
        let mut rng = Rng::new(1);
        for &(m, n, k) in &[(1, 1, 1), (3, 5, 7), (200, 17, 33), (17, 300, 65), (130, 140, 150), (4, 4, 0)] {
            for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                let a = rng.vec(m * k);
                let b = rng.vec(k * n);
                let la = if ta { Layout::col_major(m) } else { Layout::row_major(k) };
                let lb = if tb { Layout::col_major(k) } else { Layout::row_major(n) };
                let want = naive(m, n, k, &a, la, &b, lb);
                let mut c = rng.vec(m * n);
                par_sgemm(m, n, k, 1.0, &a, la, &b, lb, &mut c, n, false);
                assert_close(&c, &want, 1e-4, &format!("{m}x{n}x{k} ta={ta} tb={tb}"));
                let before = c.clone();
                par_sgemm(m, n, k, 0.5, &a, la, &b, lb, &mut c, n, true);
                let want2: Vec<f32> = before.iter().zip(&want).map(|(x, w)| x + 0.5 * w).collect();
                assert_close(&c, &want2, 1e-4, "accumulate");
            }
        }
    }
}
