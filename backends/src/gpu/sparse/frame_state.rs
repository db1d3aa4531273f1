//! What a frame replayed from a recorded graph (`gpu/frame_graphs.rs`) needs of the sparse ops'
//! per-frame state: the members the frame will run, known before any launch, and the state
//! `run_op` would have left, set without running it.

use super::{choose, expected_columns, CountsSync, Frames};
use crate::gpu::device::GpuDevice;
use crate::gpu::lower::ctx::column_bucket;
use dynaspa_runtime::graph::FillPolicy;
use dynaspa_runtime::Result;

impl<D: GpuDevice> Frames<D> {
    /// The member each sparse op will run this frame, in op order, then the columns each
    /// expects (the power of two its narrowed grids are launched for, `ColumnGrid`; 0 for
    /// whole grids), where that is known before the frame runs: every op selects with its
    /// mask's counts of the last frame (lagged counts, not the first frame) and no op computes
    /// its first cached frame. `None` otherwise: the frame then runs launch by launch.
    pub(crate) fn frame_key(&self) -> Option<Vec<u16>> {
        if self.sync != CountsSync::Lagged {
            return None;
        }
        let mut key = Vec::with_capacity(2 * self.ops.len());
        let mut columns = Vec::with_capacity(self.ops.len());
        for op in &self.ops {
            let c = self.counts.get(op.mask)?;
            if op.fill == FillPolicy::Cached && !op.cached_ready {
                return None;
            }
            let (layout, last) = (&self.masks[op.mask].layout, c.last.as_ref()?);
            let pick = choose(op, layout, last).ok()?;
            key.push(u16::try_from(pick).ok()?);
            columns.push(expected_columns(layout, last).map_or(0, |e| column_bucket(e).trailing_zeros() as u16 + 1));
        }
        key.extend(columns);
        Some(key)
    }

    /// Leaves the state a frame run op by op with `key`'s members leaves (`run_op`), for a frame
    /// queued as a graph: each mask's counts of this frame in flight to the host, written by
    /// the graph's work into mapped memory (marked after it on the main queue) or copied after
    /// it, and no bitmask launch pending.
    pub(crate) fn after_frame_graph(&mut self, dev: &D, bufs: &[D::Buffer], key: &[u16]) -> Result<()> {
        self.begin_frame();
        for (op, &pick) in self.ops.iter_mut().zip(key) {
            op.last_pick = Some(pick as usize);
        }
        for m in 0..self.counts.len() {
            if !self.ops.iter().any(|o| o.mask == m) {
                continue;
            }
            self.queue_counts(dev, bufs, m, None, false, true)?;
        }
        self.drop_pending_launches();
        Ok(())
    }

    /// Forgets the bitmask launches queued ahead of their ops: none is pending after a whole
    /// frame, run or abandoned.
    fn drop_pending_launches(&mut self) {
        self.pending.iter_mut().for_each(|p| *p = None);
    }

    /// Drops the events of a recording that was abandoned: they order nothing that runs.
    pub(crate) fn forget_recorded_events(&mut self) {
        self.drop_pending_launches();
        self.zero_events.iter_mut().for_each(|p| *p = None);
    }
}
