//! One sparse conv of a model run outside a frame, at whatever schedule the tuner asks for
//! (`sparse::timer`; token projections: `token::timer`). The op is lowered as the executor
//! lowers it (same preparation, same launches, same member schedules from the same knobs), on
//! random operands; a mask is uploaded and turned into tile lists by the bitmask kernel once,
//! then the member is replayed and timed the way calibration times members.

use super::features::SparseConvFeatures;
use super::knobs::GpuLimits;
use super::lower::{prepare, MaskColumns, SparseConvOp, SplitBufs};
use super::schedule::{member_schedule, SparseConvSchedule};
use crate::cpu::sparse_exec::calibrate::random_tensor;
use crate::gpu::device::GpuDevice;
use crate::gpu::dtype::Precision;
use crate::gpu::lower::ctx::{replay_launches, BufId, Ctx, Launch, Resources};
use crate::gpu::sparse::bitmask::{bitmask_launch, mask_floats};
use crate::gpu::sparse::meta::MetaLayout;
use crate::gpu::sparse::timer::{SparseOpTimer, RUNS_PER_CALL};
use dynaspa_runtime::dispatch::Schedule;
use dynaspa_runtime::graph::{FillPolicy, Graph, Op};
use dynaspa_runtime::sparsity::{BitMask, Granularity};
use dynaspa_runtime::{DType, Error, Result, Tensor, TensorData};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// Tile lists for one granularity: the metadata buffer, its layout and the bitmask launch.
struct Lists<K> {
    gran: Granularity,
    meta: BufId,
    layout: MetaLayout,
    bitmask: Launch<K>,
    residual_fill: Vec<Launch<K>>,
}

pub(crate) struct SparseConvOpTimer<D: GpuDevice> {
    dev: Arc<D>,
    graph: Arc<Graph>,
    node: usize,
    res: Resources<D>,
    op: SparseConvOp,
    fill: FillPolicy,
    limits: GpuLimits,
    dense: SparseConvSchedule,
    mask_buf: BufId,
    lists: Vec<Lists<D::Kernel>>,
    /// The mask and list set the metadata holds now.
    loaded: Option<(BitMask, usize)>,
    /// The split-K scratch and its capacity in floats.
    part: Option<(BufId, usize)>,
    /// The fused finish's tile counters (when the device fuses it) and their count.
    counters: Option<(BufId, usize)>,
    /// Where self-listing split members leave their columns for the finish.
    list: Option<BufId>,
    built: HashMap<(SparseConvSchedule, usize), Vec<Launch<D::Kernel>>>,
}

/// A buffer of `shape`'s size filled with seeded random floats.
fn random_buffer<D: GpuDevice>(res: &mut Resources<D>, dev: &D, shape: &[usize], seed: u64) -> Result<BufId> {
    let t = random_tensor(DType::F32, shape, seed);
    let b = res.alloc_own(dev, t.len().max(1) * 4)?;
    res.overwrite(dev, b, &t, "random operand")?;
    Ok(b)
}

impl<D: GpuDevice + 'static> SparseConvOpTimer<D> {
    pub(crate) fn new(
        dev: Arc<D>,
        graph: Arc<Graph>,
        node: usize,
        features: SparseConvFeatures,
        precision: Precision,
    ) -> Result<SparseConvOpTimer<D>> {
        let g = graph.clone();
        let n = &g.nodes[node];
        let (Op::Conv(p), Some(spec)) = (&n.op, n.sparse.as_ref()) else {
            return Err(Error::Other("not a sparse conv".into()));
        };
        let mut res = Resources::<D>::new(g.values.len(), features, precision);
        // Operands that are not constants get random values (timing on zeros or on whatever a
        // fresh buffer holds could take shortcuts real frames do not).
        for (i, v) in n.inputs.iter().enumerate() {
            if let Some(v) = *v {
                if g.values[v].constant.is_none() && res.slot[v].is_none() {
                    let b = random_buffer(&mut res, &*dev, &g.values[v].shape, 0x51ed + i as u64)?;
                    res.slot[v] = Some(b);
                }
            }
        }
        let out = n.outputs[0];
        let y = res.alloc_own(&*dev, g.values[out].shape.iter().product::<usize>().max(1) * 4)?;
        res.slot[out] = Some(y);
        let (op, dense) = {
            let mut cx = Ctx { dev: &*dev, graph: &g, node: n, res: &mut res, launches: Vec::new(), scratch: Vec::new() };
            let op = prepare(&mut cx, p)?.ok_or_else(|| Error::Other("the sparse conv kernels do not cover this conv".into()))?;
            let dense = op.dense_schedule(&cx);
            (op, dense)
        };
        let mask_buf = res.alloc_own(&*dev, op.oh * op.ow * 4)?;
        let limits = GpuLimits { self_list: features.self_list, ..GpuLimits::of(dev.info()) };
        Ok(SparseConvOpTimer {
            dev,
            graph,
            node,
            res,
            op,
            fill: spec.fill,
            limits,
            dense,
            mask_buf,
            lists: Vec::new(),
            loaded: None,
            part: None,
            counters: None,
            list: None,
            built: HashMap::new(),
        })
    }

    /// Index of the tile lists for `gran`, made on first use.
    fn lists_for(&mut self, gran: Granularity) -> Result<usize> {
        if let Some(i) = self.lists.iter().position(|l| l.gran == gran) {
            return Ok(i);
        }
        let g = self.graph.clone();
        let n = &g.nodes[self.node];
        let layout = MetaLayout::new(self.op.images, self.op.oh, self.op.ow, &[gran])?;
        let mut cx = Ctx { dev: &*self.dev, graph: &g, node: n, res: &mut self.res, launches: Vec::new(), scratch: Vec::new() };
        let meta = cx.res.upload(cx.dev, &Tensor::new(vec![layout.total()], TensorData::I32(vec![0; layout.total()]))?, "mask metadata")?;
        let grans = cx.meta(&layout.grans_table())?;
        // One mask for every image (stride 0), as the CPU's timer and calibration use.
        let bitmask = bitmask_launch(&mut cx, self.mask_buf, 0, meta, grans, &layout, None)?;
        let mut residual_fill = Vec::new();
        if self.fill == FillPolicy::Residual {
            self.op.launch_residual_fill(&mut cx, meta, &layout)?;
            residual_fill = std::mem::take(&mut cx.launches);
        }
        self.lists.push(Lists { gran, meta, layout, bitmask, residual_fill });
        Ok(self.lists.len() - 1)
    }

    /// Makes `mask` the one the metadata of list set `li` describes.
    fn load(&mut self, mask: &BitMask, li: usize) -> Result<()> {
        if self.loaded.as_ref().is_some_and(|(m, l)| *l == li && m == mask) {
            return Ok(());
        }
        self.dev.upload(&self.res.bufs[self.mask_buf], 0, &mask_floats(mask, self.res.precision)?)?;
        replay_launches(&*self.dev, &self.res.bufs, std::slice::from_ref(&self.lists[li].bitmask))?;
        self.dev.finish()?;
        self.loaded = Some((mask.clone(), li));
        Ok(())
    }

    /// The launches of `s` reading list set `li`, built on first use.
    fn launches(&mut self, s: SparseConvSchedule, li: usize) -> Result<()> {
        if self.built.contains_key(&(s, li)) {
            return Ok(());
        }
        let layout = Some(&self.lists[li].layout);
        let need = self.op.part_len(&s, layout);
        if need > 0 && self.part.is_none_or(|(_, cap)| cap < need) {
            // Launches built before keep the smaller buffer: it still fits them.
            let b = self.res.alloc_own(&*self.dev, need * 4)?;
            self.part = Some((b, need));
        }
        let g = self.graph.clone();
        let n = &g.nodes[self.node];
        let mut cx = Ctx { dev: &*self.dev, graph: &g, node: n, res: &mut self.res, launches: Vec::new(), scratch: Vec::new() };
        let tiles = self.op.counters_len(&s, layout);
        if cx.res.features.fused_finish && tiles > 0 && self.counters.is_none_or(|(_, have)| have < tiles) {
            // As the scratch: earlier launches keep theirs, which they leave zero.
            self.counters = Some((cx.zeroed_ints(tiles, "split-K tile counters")?, tiles));
        }
        let list = match self.list {
            Some(l) => l,
            None => {
                let b = cx.res.alloc_own(cx.dev, MaskColumns::list_len(self.op.images, self.op.oh * self.op.ow) * 4)?;
                *self.list.insert(b)
            }
        };
        // Self-listing members read the timer's mask (one for every image) as the bitmask does.
        // The timer's mask arrives by copy, never from a kernel.
        let columns = Some(MaskColumns { mask: self.mask_buf, stride: 0, list, report: None, prewait: true });
        let split = SplitBufs { part: self.part.map(|p| p.0), counters: self.counters.map(|c| c.0), columns };
        let meta = (self.lists[li].meta, &self.lists[li].layout);
        self.op.launch(&mut cx, &s, Some(meta), split, true)?;
        let l = std::mem::take(&mut cx.launches);
        self.built.insert((s, li), l);
        Ok(())
    }
}

impl<D: GpuDevice + 'static> SparseOpTimer for SparseConvOpTimer<D> {
    fn node(&self) -> &str {
        &self.graph.nodes[self.node].name
    }

    fn plane(&self) -> (usize, usize) {
        (self.op.oh, self.op.ow)
    }

    fn time(&mut self, schedule: Option<&Schedule>, mask: &BitMask) -> Result<f64> {
        if (mask.height(), mask.width()) != (self.op.oh, self.op.ow) {
            return Err(Error::Other(format!(
                "node '{}': mask is {}x{}, the op's output is {}x{}",
                self.node(),
                mask.height(),
                mask.width(),
                self.op.oh,
                self.op.ow
            )));
        }
        let s = match schedule {
            None => self.dense,
            Some(s) => member_schedule(self.op.kind, self.op.cout, self.op.k, self.dense, s, &self.limits).map_err(Error::Other)?,
        };
        // The dense member's masked store reads the mask words, which every list set has.
        let li = self.lists_for(s.gran.unwrap_or(Granularity::new(1, 1)))?;
        self.load(mask, li)?;
        self.launches(s, li)?;
        let (dev, bufs) = (&*self.dev, &self.res.bufs);
        let member = &self.built[&(s, li)];
        let fill = &self.lists[li].residual_fill;
        dev.finish()?;
        let t = Instant::now();
        for _ in 0..RUNS_PER_CALL {
            replay_launches(dev, bufs, fill)?;
            replay_launches(dev, bufs, member)?;
        }
        dev.finish()?;
        Ok(t.elapsed().as_secs_f64() / RUNS_PER_CALL as f64)
    }
}
