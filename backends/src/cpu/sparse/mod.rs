//! CPU kernels that compute an op only at the output positions of a DISTile list and write only
//! the positions whose mask bit is set (everything else in the output buffer is left as it was,
//! so a zero-filled buffer ends up holding `mask * dense_op(x)` and a cached one keeps its values).
//!
//! ```text
//! let conv = SparseConv::new(&conv_attrs, &[n, c, h, w], &weight, Some(&bias))?;   // packs weights
//! conv.run(x_image, out_image, &tiles, &mask, residual)?;    // per image, NCHW, tiles at any granularity
//! conv.run_positions(x_image, out_image, &mask, residual)?;  // the positions schedule, no tiles
//! let lin = SparseLinear::new(&w_kn, Some(&bias), act)?;
//! lin.run(x_tk, tokens, out_tn, &active_rows)?;              // rows strictly increasing
//! ```
//!
//! How the convs run: the output positions of the tiles become GEMM columns (row runs, see
//! `columns`); 64 of them at a time are gathered into an im2col panel (`gather`), multiplied by
//! weights packed once at preparation (`micro`), and scattered back with the bias, residual and
//! activation, testing the mask per position. Depthwise convs run directly (`depthwise`).
//! The granularity of the `TileSet` a caller passes is the schedule knob: 1x1 tiles are the
//! positions schedule (only active positions are computed); larger tiles also compute their
//! inactive positions. On CPU the gather reads any position list at about the same cost, so
//! the positions schedule was the fastest at every density measured (`sparse_ops_bench`).
//!
//! `NhwcConv`, `NhwcDepthwise` and `NhwcGatherProbe` exist to measure the activation-layout
//! decision of DESIGN.md (the same kernels over NHWC data); the runtime is NCHW today.

mod columns;
mod conv;
#[cfg(test)]
mod conv_tests;
mod depthwise;
pub(crate) mod gather;
mod layout_probe;
mod linear;
#[cfg(test)]
mod linear_tests;
#[cfg(target_arch = "x86_64")]
mod micro;
#[cfg(target_arch = "x86_64")]
mod nhwc;
mod scratch;
#[cfg(test)]
mod testkit;

pub use conv::{ConvKind, SparseConv};
pub use layout_probe::NhwcGatherProbe;
pub use linear::SparseLinear;
#[cfg(target_arch = "x86_64")]
pub use nhwc::{NhwcConv, NhwcDepthwise};

use std::sync::atomic::{AtomicU64, Ordering};

/// Nanoseconds spent in each phase of sparse calls, summed over all threads (so with 2 threads
/// the total is about twice the wall time). Pass one to the `*_timed` entry points to see where
/// the time goes; the untimed entry points do not read any clock.
#[derive(Debug)]
pub struct PhaseTimes {
    /// Building run lists and per-panel gather/scatter plans.
    pub plan: AtomicU64,
    /// Lowering inputs into GEMM panels.
    pub gather: AtomicU64,
    /// Multiply-adds (for depthwise: the direct kernel).
    pub gemm: AtomicU64,
    /// Epilogue and masked writes of results.
    pub scatter: AtomicU64,
    clock: fn() -> u64,
}

impl Default for PhaseTimes {
    fn default() -> PhaseTimes {
        PhaseTimes::with_clock(wall_nanos)
    }
}

fn wall_nanos() -> u64 {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    EPOCH.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
}

impl PhaseTimes {
    /// Phases timed with `clock` (nanoseconds from any origin) instead of wall time, e.g. the
    /// thread's CPU time, which other processes on a shared machine do not inflate.
    pub fn with_clock(clock: fn() -> u64) -> PhaseTimes {
        PhaseTimes { plan: AtomicU64::new(0), gather: AtomicU64::new(0), gemm: AtomicU64::new(0), scatter: AtomicU64::new(0), clock }
    }
    /// `[plan, gather, gemm, scatter]` in seconds.
    pub fn secs(&self) -> [f64; 4] {
        [&self.plan, &self.gather, &self.gemm, &self.scatter].map(|a| a.load(Ordering::Relaxed) as f64 * 1e-9)
    }
    pub fn reset(&self) {
        for a in [&self.plan, &self.gather, &self.gemm, &self.scatter] {
            a.store(0, Ordering::Relaxed);
        }
    }
}

/// Times a phase, only when a `PhaseTimes` was given: the counter, the clock, the start.
pub(crate) struct Clock<'a>(Option<Running<'a>>);

type Running<'a> = (&'a AtomicU64, fn() -> u64, u64);

impl<'a> Clock<'a> {
    #[inline]
    pub fn start(t: Option<&'a PhaseTimes>, pick: fn(&PhaseTimes) -> &AtomicU64) -> Clock<'a> {
        Clock(t.map(|t| (pick(t), t.clock, (t.clock)())))
    }
}

impl Drop for Clock<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some((a, clock, t0)) = self.0.take() {
            a.fetch_add(clock().saturating_sub(t0), Ordering::Relaxed);
        }
    }
}
