//! The portable Conv path: tiled im2col + the `gemm` crate, with the bias/add/activation
//! epilogue applied while each tile is in cache. Everywhere without AVX-512, and on AVX-512 for
//! maps with few output columns (14x14, 7x7), where its once-packed weights and row split win.

use super::conv::{Dims, Epilogue};
use super::gemm_util::{sgemm, threads, with_scratch, Layout, SendPtr};
use super::im2col::{im2col, par_im2col};
use rayon::prelude::*;

/// Bytes of im2col tile a task keeps hot: half of the 2 MiB per-core L2, leaving room for the
/// GEMM's own packed panels.
const COL_TILE_BYTES: usize = 1 << 20;
/// Narrower column tiles make the GEMM microkernel mostly edge handling.
const MIN_TILE_COLS: usize = 32;

/// Tasks are (image, group, column tile): column tiles keep the im2col tile in L2 and give both
/// cores work at batch 1. Maps too small to split by columns (7x7) split by rows instead.
pub(crate) fn gemm_conv(d: &Dims, x: &[f32], w: &[f32], ep: &Epilogue, yp: SendPtr) {
    let g = &d.geom;
    let p_n = g.out_len();
    let kdim = d.c / d.groups * g.kernel_len();
    let t = threads();
    let jobs = d.n * d.groups;
    let budget = (COL_TILE_BYTES / (4 * kdim.max(1))).max(MIN_TILE_COLS);
    let mut p_tiles = p_n.div_ceil(budget);
    if jobs < 4 * t {
        // A task count that is a multiple of the thread count leaves no core idle at the end.
        let want = (jobs * p_tiles).next_multiple_of(t).div_ceil(jobs);
        if p_n / want >= MIN_TILE_COLS {
            p_tiles = want;
        } else if jobs * p_tiles < t && d.m / d.groups >= 32 {
            return row_split_conv(d, x, w, ep, yp);
        }
    }
    let pt = p_n.div_ceil(p_tiles);
    let p_tiles = p_n.div_ceil(pt);
    (0..jobs * p_tiles).into_par_iter().with_max_len(1).for_each(|task| {
        let (job, pi) = (task / p_tiles, task % p_tiles);
        let (p0, p1) = (pi * pt, ((pi + 1) * pt).min(p_n));
        // SAFETY: this task alone owns columns p0..p1 of its image and group.
        unsafe { conv_block(d, x, w, ep, yp, job, 0, d.m / d.groups, p0, p1, None) };
    });
}

/// Few output columns: lower the whole map once (in parallel over channels) and give each
/// thread a block of output channels, instead of every thread lowering the same columns.
fn row_split_conv(d: &Dims, x: &[f32], w: &[f32], ep: &Epilogue, yp: SendPtr) {
    let g = &d.geom;
    let (cg, mg) = (d.c / d.groups, d.m / d.groups);
    let (img, p_n, klen) = (g.image_len(), g.out_len(), g.kernel_len());
    let blocks = threads().min(mg.div_ceil(16));
    let mb = mg.div_ceil(blocks).next_multiple_of(16).min(mg);
    with_scratch(cg * klen * p_n, |col| {
        for job in 0..d.n * d.groups {
            let xg = &x[((job / d.groups) * d.c + (job % d.groups) * cg) * img..][..cg * img];
            if !g.is_identity() {
                par_im2col(xg, cg, g, col);
            }
            let col: &[f32] = col;
            (0..mg.div_ceil(mb)).into_par_iter().with_max_len(1).for_each(|bi| {
                let (m0, m1) = (bi * mb, ((bi + 1) * mb).min(mg));
                // SAFETY: this task alone owns output channels m0..m1 of its image and group.
                unsafe { conv_block(d, x, w, ep, yp, job, m0, m1, 0, p_n, Some(col)) };
            });
        }
    });
}

/// Output channels `m0..m1` (within the group) x columns `p0..p1` of one (image, group) job:
/// lower the input unless `col` already holds it, GEMM, then the epilogue while it is in cache.
///
/// # Safety
/// No other thread may touch that block of `y` during the call.
#[allow(clippy::too_many_arguments)]
unsafe fn conv_block(
    d: &Dims,
    x: &[f32],
    w: &[f32],
    ep: &Epilogue,
    y: SendPtr,
    job: usize,
    m0: usize,
    m1: usize,
    p0: usize,
    p1: usize,
    col: Option<&[f32]>,
) {
    let g = &d.geom;
    let (cg, mg) = (d.c / d.groups, d.m / d.groups);
    let (img, p_n) = (g.image_len(), g.out_len());
    let kdim = cg * g.kernel_len();
    let (n, gi) = (job / d.groups, job % d.groups);
    let (m0, m1) = (gi * mg + m0, gi * mg + m1);
    let xg = &x[(n * d.c + gi * cg) * img..][..cg * img];
    let wb = &w[m0 * kdim..m1 * kdim];
    let run = |b: &[f32], lb: Layout| {
        let base = (n * d.m + m0) * p_n + p0;
        sgemm(m1 - m0, p1 - p0, kdim, 1.0, wb, Layout::row_major(kdim), b, lb, y.get().add(base), p_n, false);
        for m in m0..m1 {
            let at = (n * d.m + m) * p_n + p0;
            ep.run(std::slice::from_raw_parts_mut(y.get().add(at), p1 - p0), m, at);
        }
    };
    match col {
        _ if g.is_identity() => run(&xg[p0..], Layout::row_major(img)),
        Some(col) => run(&col[p0..], Layout::row_major(p_n)),
        None => with_scratch(kdim * (p1 - p0), |col| {
            im2col(xg, cg, g, p0, p1, col, p1 - p0, false);
            run(col, Layout::row_major(p1 - p0));
        }),
    }
}
