//! Runs the nodes `detect_sparse_regions` annotated (runtime/src/graph/sparse.rs) and the
//! attentions whose keys carry a token mask: per frame and op, mask -> `BitMask` per image ->
//! DISTile counts at every member's granularity -> the PolyKernel's choice -> that kernel over
//! the tiles, into a zero-filled buffer from the pool or the op's cached activations.

pub(crate) mod calibrate;
pub(crate) mod masks;
mod memo;
mod op_timer;
mod region;
mod residual;
mod step_build;

pub(crate) use memo::MaskMemo;
pub use op_timer::SparseOpTimer;
pub(crate) use step_build::build_steps;

/// The profile identity of this machine's CPU backend at `threads` workers: what `dynaspa
/// tune` writes into a profile and what a loaded profile must match.
pub fn cpu_device_id(threads: usize) -> dynaspa_runtime::profile::DeviceId {
    dynaspa_runtime::profile::DeviceId { backend: "cpu".into(), name: calibrate::cpu_name(), fingerprint: calibrate::fingerprint(threads) }
}

use super::sparse::{SparseConv, SparseLinear};
use super::zero_pool::{Dirty, ZeroPool};
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::dispatch::PolyKernel;
use dynaspa_runtime::graph::{Attention, FillPolicy, MaskKind, Op, SparseSpec};
use dynaspa_runtime::report::{PhaseTimes, SparseOpRecord};
use dynaspa_runtime::sparsity::{BitMask, Granularity};
use dynaspa_runtime::{Error, Result, Tensor};
use std::sync::Arc;

use crate::sparse_config::{ForceMember, SparseConfig};
use std::time::Instant;

pub(crate) enum Kernel {
    Conv(SparseConv),
    /// Token rows of `x [images, tokens, K]` times a constant `[K, N]`.
    Linear(SparseLinear),
    Attention(Attention),
    /// An elementwise op over a change map: computed on the map's positions alone (`region`).
    Elementwise,
    /// No sparse kernel for this op (yet): the dense member only, with the mask applied.
    DenseOnly,
}

pub(crate) struct SparseStep {
    pub spec: SparseSpec,
    pub mask_name: String,
    pub kernel: Kernel,
    pub poly: PolyKernel,
    pub images: usize,
    /// Mask plane: h x w positions (token ops: 1 x tokens).
    pub h: usize,
    pub w: usize,
    pub force: Option<ForceMember>,
    /// `Cached` fill: the last output, shared with the executor's value (`keep`) and reused as
    /// the next frame's buffer once that value is freed, so nothing is copied.
    cache: Option<Arc<Tensor>>,
}

/// What one sparse op produced.
pub(crate) struct StepOutput {
    pub tensor: Tensor,
    pub record: SparseOpRecord,
    /// How the buffer may be recycled once the value dies (`None`: not at all).
    pub dirty: Option<Dirty>,
}

/// Evaluates the op densely (the dense member), with the executor's prepared kernels, into the
/// node's output shape or the one given (inputs of other shapes than the graph's).
pub(crate) type DenseEval<'a> = &'a dyn Fn(&[Option<&Tensor>], Option<&TensorSpec>) -> Result<Tensor>;

impl SparseStep {
    pub fn run(
        &mut self,
        node: &str,
        op: &Op,
        ins: &[Option<&Tensor>],
        mask: &Tensor,
        spec_out: &TensorSpec,
        pool: &mut ZeroPool,
        memo: &mut MaskMemo,
        dense: DenseEval,
    ) -> Result<StepOutput> {
        let mut ph = PhaseTimes::default();
        // One clock read per phase boundary: at ~10 µs per op, clock reads are not free.
        let t0 = Instant::now();
        let (kind, images, h, w) = (self.spec.kind, self.images, self.h, self.w);
        let info = {
            let _s = tracing::trace_span!("bitmask").entered();
            memo.get(self.spec.mask, (kind, images, h, w), &masks::Reading { mask, name: &self.mask_name, kind, images, h, w })?
        };
        let (masks, density) = (info.masks.clone(), info.density);
        // Held results are recomputed on whole frames only: nothing to select on the others.
        let partial = |ones: usize| ones < masks.iter().map(BitMask::len).sum::<usize>();
        if let Some(held) = self.cache.as_ref().filter(|_| self.spec.fill == FillPolicy::Held && partial(info.ones)) {
            let tensor = (**held).clone();
            ph.bitmask = t0.elapsed();
            let record =
                SparseOpRecord { node: node.to_string(), op: op.name().to_string(), density, member: "held".into(), granularity: None, tiles: 0, phases: ph };
            return Ok(StepOutput { tensor, record, dirty: None });
        }
        let t1 = Instant::now();
        // Selection asks for DISTile counts only where they could change its choice; the time
        // spent counting them is the `tiles` phase, the rest of the selection `select`.
        let mut counting = std::time::Duration::ZERO;
        let member = {
            let _s = tracing::trace_span!("select").entered();
            self.choose(info, &mut counting)
        };
        let t2 = Instant::now();
        (ph.bitmask, ph.tiles, ph.select) = (t1 - t0, counting, (t2 - t1).saturating_sub(counting));
        let schedule = &self.poly.members()[member].schedule;
        let (member_name, gran) = (schedule.name.clone(), schedule.granularity);
        let first_cached_frame = self.spec.fill == FillPolicy::Cached && self.cache.is_none();

        let ran_sparse = gran.is_some() && !first_cached_frame && !matches!(self.kernel, Kernel::DenseOnly);
        let (tensor, tiles, dirty) = match gran {
            Some(_) if ran_sparse && matches!(self.kernel, Kernel::Elementwise) => self.run_region(ins, &masks, spec_out, dense, &mut ph)?,
            Some(g) if ran_sparse => self.run_sparse(op, ins, &masks, g, spec_out, pool, &mut ph)?,
            _ => {
                let t = Instant::now();
                let _s = tracing::trace_span!("kernel").entered();
                let mut out = dense(ins, None)?;
                // Whatever member runs, inactive outputs are what the fill policy says: zeros
                // where the multiplication was folded in, the cache where the op is cached (the
                // first cached frame has none yet and computes everything).
                match (self.spec.fill, self.cache.take()) {
                    (FillPolicy::Zero, _) if self.spec.fused_mul => apply_mask(&mut out, &masks, self.spec.kind, None)?,
                    (FillPolicy::Cached, Some(c)) if partial(info.ones) => {
                        apply_mask(&mut out, &masks, self.spec.kind, Some(&c))?
                    }
                    (FillPolicy::Residual, _) => {
                        let r = residual_of(ins)?.ok_or_else(|| Error::Other("residual fill without a residual input".into()))?;
                        residual::fill_inactive(op, out.as_f32_mut()?, r, &masks)?;
                    }
                    _ => {}
                }
                ph.compute = t.elapsed();
                let dirty = (self.spec.fill == FillPolicy::Zero).then_some(Dirty::All);
                (out, 0, dirty)
            }
        };
        let record = SparseOpRecord {
            node: node.to_string(),
            op: op.name().to_string(),
            density,
            member: match (ran_sparse, first_cached_frame) {
                (true, _) => member_name,
                (false, true) => "dense (first cached frame)".into(),
                (false, false) => self.poly.members()[self.poly.dense_index()].schedule.name.clone(),
            },
            granularity: gran.filter(|_| ran_sparse),
            tiles,
            phases: ph,
        };
        Ok(StepOutput { tensor, record, dirty })
    }

    /// Keeps the op's result (`Cached` fill) for the next frame; the executor's value and the
    /// cache share it.
    pub fn keep(&mut self, result: &Arc<Tensor>) {
        if matches!(self.spec.fill, FillPolicy::Cached | FillPolicy::Held) {
            self.cache = Some(result.clone());
        }
    }

    /// An elementwise op on the mask's positions, into its last output (`Cached` fill).
    fn run_region(
        &mut self,
        ins: &[Option<&Tensor>],
        masks: &Arc<[BitMask]>,
        spec_out: &TensorSpec,
        dense: DenseEval,
        ph: &mut PhaseTimes,
    ) -> Result<(Tensor, usize, Option<Dirty>)> {
        let t = Instant::now();
        let cache = self.cache.take().ok_or_else(|| Error::Other("an elementwise op over a change map has no last output".into()))?;
        // The value is freed by now unless it is a graph output: then copy.
        let c = Arc::try_unwrap(cache).unwrap_or_else(|shared| (*shared).clone());
        let mut buf = c.into_data().into_f32().map_err(|_| Error::Other("cached activations are not FLOAT".into()))?;
        let [mask] = &masks[..] else { return Err(Error::Other("an elementwise op over a change map takes one image".into())) };
        let runs = region::runs(mask);
        region::eval_on_runs(ins, &runs, self.h * self.w, &mut buf, dense)?;
        ph.compute = t.elapsed();
        Ok((Tensor::from_f32(spec_out.shape.clone(), buf)?, mask.count_ones(), None))
    }

    fn choose(&self, info: &mut memo::MaskInfo, counting: &mut std::time::Duration) -> usize {
        let members = self.poly.members();
        match self.force {
            Some(ForceMember::Dense) => self.poly.dense_index(),
            Some(ForceMember::Tiles(g)) => {
                // The member whose granularity is closest to the forced one.
                let dist = |h: Granularity| (h.h as i32 - g.h as i32).abs() + (h.w as i32 - g.w as i32).abs();
                members
                    .iter()
                    .enumerate()
                    .filter_map(|(i, m)| m.schedule.granularity.map(|h| (dist(h), i)))
                    .min()
                    .map_or(self.poly.dense_index(), |(_, i)| i)
            }
            None => {
                let ones = info.ones;
                self.poly.select_lazy(ones, |g| info.count(g, counting))
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn run_sparse(
        &mut self,
        op: &Op,
        ins: &[Option<&Tensor>],
        masks: &Arc<[BitMask]>,
        g: Granularity,
        spec_out: &TensorSpec,
        pool: &mut ZeroPool,
        ph: &mut PhaseTimes,
    ) -> Result<(Tensor, usize, Option<Dirty>)> {
        let len: usize = spec_out.shape.iter().product();
        let t = Instant::now();
        let (mut buf, reusable) = {
            let _s = tracing::trace_span!("zero_fill").entered();
            match (self.spec.fill, self.cache.take()) {
                (_, Some(c)) => {
                    // The value is freed by now unless it is a graph output: then copy.
                    let c = Arc::try_unwrap(c).unwrap_or_else(|shared| (*shared).clone());
                    (c.into_data().into_f32().map_err(|_| Error::Other("cached activations are not FLOAT".into()))?, false)
                }
                (FillPolicy::Residual, None) => {
                    let r = residual_of(ins)?.ok_or_else(|| Error::Other("residual fill without a residual input".into()))?;
                    (residual::start_buffer(op, r)?, false)
                }
                _ => (pool.take(len).0, true),
            }
        };
        ph.zero_fill = t.elapsed();
        if buf.len() != len {
            return Err(Error::Other(format!("sparse output buffer has {} values, expected {len}", buf.len())));
        }
        let x = ins.first().copied().flatten().ok_or_else(|| Error::Other("sparse op without its input".into()))?;
        let xd = x.as_f32()?;
        let images = self.images;
        let mut tiles_total = 0usize;
        let t = Instant::now();
        match &self.kernel {
            Kernel::Conv(conv) => {
                let residual = residual_of(ins)?;
                let (xi, oi) = (xd.len() / images, len / images);
                for (img, m) in masks.iter().enumerate() {
                    let (x, o, r) = (&xd[img * xi..][..xi], &mut buf[img * oi..][..oi], residual.map(|r| &r[img * oi..][..oi]));
                    // 1x1 tiles are the active positions: the kernel reads them straight from
                    // the mask instead of from a list built first.
                    if g == Granularity::new(1, 1) {
                        tiles_total += m.count_ones();
                        let _s = tracing::trace_span!("kernel").entered();
                        conv.run_positions(x, o, m, r)?;
                        continue;
                    }
                    let ts = {
                        let t0 = Instant::now();
                        let _s = tracing::trace_span!("tiles").entered();
                        let ts = m.aligned_tiles(g);
                        ph.tiles += t0.elapsed();
                        ts
                    };
                    tiles_total += ts.len();
                    let _s = tracing::trace_span!("kernel").entered();
                    conv.run(x, o, &ts, m, r)?;
                }
            }
            Kernel::Linear(lin) => {
                let (k, n) = lin.dims();
                let tokens = self.w;
                for (img, m) in masks.iter().enumerate() {
                    let rows: Vec<u32> = (0..tokens).filter(|&t| m.get(0, t)).map(|t| t as u32).collect();
                    tiles_total += rows.len();
                    let _s = tracing::trace_span!("kernel").entered();
                    lin.run(&xd[img * tokens * k..][..tokens * k], tokens, &mut buf[img * tokens * n..][..tokens * n], &rows)?;
                }
            }
            Kernel::Attention(a) => {
                let _s = tracing::trace_span!("kernel").entered();
                let (out, _) = super::attention_node_active(a, ins, spec_out)?;
                tiles_total = masks.iter().map(BitMask::count_ones).sum();
                buf = out.into_data().into_f32().map_err(|_| Error::Other("attention output is not FLOAT".into()))?;
            }
            Kernel::DenseOnly | Kernel::Elementwise => unreachable!("run_sparse is not called for dense-only or elementwise ops"),
        }
        ph.compute = t.elapsed().saturating_sub(ph.tiles);
        let dirty = match (&self.kernel, reusable) {
            (_, false) => None,
            (Kernel::Conv(_), true) => match self.spec.kind {
                MaskKind::Spatial => Some(Dirty::Positions { masks: masks.clone(), channels: len / (images * self.h * self.w) }),
                MaskKind::Token => Some(Dirty::All),
            },
            (_, true) => Some(Dirty::All),
        };
        Ok((Tensor::from_f32(spec_out.shape.clone(), buf)?, tiles_total, dirty))
    }
}

/// A conv's fused residual (input 3), if it has one.
pub(crate) fn residual_of<'a>(ins: &[Option<&'a Tensor>]) -> Result<Option<&'a [f32]>> {
    ins.get(3).copied().flatten().map(Tensor::as_f32).transpose()
}

/// Inactive outputs (mask 0, broadcast over channels) become 0, or `keep`'s values when given.
/// Spatial outputs are `[N, C, h, w]`, token outputs `[N, t, C]`. The mask is expanded to one
/// float per position once per image, so the per-element work is a multiply or a select that
/// vectorises (this runs on the whole output whenever the dense member is chosen).
pub(crate) fn apply_mask(out: &mut Tensor, masks: &[BitMask], kind: MaskKind, keep: Option<&Tensor>) -> Result<()> {
    use rayon::prelude::*;
    let images = masks.len().max(1);
    let keep = match keep {
        Some(k) if k.shape() == out.shape() => Some(k.as_f32()?),
        Some(k) => return Err(Error::Other(format!("cached activations {:?} do not match the output {:?}", k.shape(), out.shape()))),
        None => None,
    };
    let v = out.as_f32_mut()?;
    let per = v.len() / images;
    for (img, m) in masks.iter().enumerate() {
        // The inactive runs of the mask, as [start, end) over its positions.
        let mut idle = Vec::new();
        let mut at = 0;
        m.for_each_run(|a, b| {
            if a > at {
                idle.push((at, a));
            }
            at = b;
        });
        if at < m.len() {
            idle.push((at, m.len()));
        }
        if idle.is_empty() {
            continue;
        }
        let o = &mut v[img * per..][..per];
        let k = keep.map(|k| &k[img * per..][..per]);
        // Spatial: each channel plane against the mask; token: position t is a row of
        // `per / tokens` values.
        let (plane, unit) = match kind {
            MaskKind::Spatial => (m.len().max(1), 1),
            MaskKind::Token => (per, (per / m.len().max(1)).max(1)),
        };
        o.par_chunks_mut(plane).enumerate().for_each(|(ci, oc)| {
            for &(a, b) in &idle {
                let r = a * unit..(b * unit).min(oc.len());
                match k {
                    // The graph's multiplication by 0 (an infinite value becomes NaN, as there).
                    None => oc[r].iter_mut().for_each(|x| *x *= 0.0),
                    Some(k) => {
                        let base = ci * plane;
                        oc[r.clone()].copy_from_slice(&k[base + r.start..base + r.end]);
                    }
                }
            }
        });
    }
    Ok(())
}

pub(crate) fn new_step(
    spec: SparseSpec,
    mask_name: String,
    kernel: Kernel,
    poly: PolyKernel,
    (images, h, w): (usize, usize, usize),
    force: Option<ForceMember>,
) -> SparseStep {
    SparseStep { spec, mask_name, kernel, poly, images, h, w, force, cache: None }
}

#[allow(dead_code)]
fn _assert_send(s: SparseStep) -> Arc<std::sync::Mutex<SparseStep>> {
    Arc::new(std::sync::Mutex::new(s))
}
