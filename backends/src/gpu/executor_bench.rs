//! Hooks for benchmarks (backends/examples/gpu_sparse_bench.rs): time one member of a sparse
//! op, or its per-frame dispatch, on the values the last `run` left on the device.

use super::{replay_launches_refs, GpuExecutable};
use crate::gpu::device::GpuDevice;
use dynaspa_runtime::sparsity::Granularity;
use dynaspa_runtime::{Error, Result};
use std::time::Instant;

/// A sparse op of an executable: its node and its members' names.
#[derive(Clone, Debug)]
pub struct SparseOpInfo {
    pub node: String,
    pub members: Vec<String>,
    /// What the dense member runs when it is a vendor library's conv ("cudnn ..."), else `None`.
    pub dense_vendor: Option<String>,
}

impl<D: GpuDevice> GpuExecutable<D> {
    pub fn sparse_ops(&self) -> Vec<SparseOpInfo> {
        (0..self.frames.ops.len())
            .map(|i| SparseOpInfo {
                node: self.frames.ops[i].node.clone(),
                members: self.frames.member_names(i),
                dense_vendor: self.frames.ops[i].dense_vendor.clone(),
            })
            .collect()
    }

    /// Time per run (µs) of member `member` of sparse op `op`: `samples` samples, each `runs`
    /// launches queued back to back and bracketed by `finish` (so the sync is shared by the runs).
    /// Run a frame first: the member reads its inputs and the tile lists of that frame.
    pub fn time_member(&mut self, op: usize, member: &str, samples: usize, runs: usize) -> Result<Vec<f64>> {
        let launches = self
            .frames
            .member_launches(op, member)
            .ok_or_else(|| Error::Other(format!("sparse op {op} has no member '{member}'")))?;
        self.dev.finish()?;
        let mut out = Vec::with_capacity(samples);
        for _ in 0..samples {
            let t = Instant::now();
            for _ in 0..runs.max(1) {
                replay_launches_refs(&*self.dev, &self.bufs, &launches)?;
            }
            self.dev.finish()?;
            out.push(t.elapsed().as_secs_f64() * 1e6 / runs.max(1) as f64);
        }
        Ok(out)
    }

    /// Time (µs) of op `op`'s per-frame dispatch: bitmask launch, counts readback (a host sync),
    /// selection; one sample per call, each from an idle queue. Returns the times and the member
    /// the last sample chose.
    pub fn time_dispatch(&mut self, op: usize, samples: usize) -> Result<(Vec<f64>, String)> {
        let mut out = Vec::with_capacity(samples);
        let mut chosen = String::new();
        for _ in 0..samples {
            self.dev.finish()?;
            let t = Instant::now();
            chosen = self.frames.dispatch_once(&*self.dev, &self.bufs, op)?;
            out.push(t.elapsed().as_secs_f64() * 1e6);
        }
        Ok((out, chosen))
    }

    /// DISTiles of `gran` in op `op`'s mask in the last frame or dispatch.
    pub fn last_tiles(&self, op: usize, gran: Option<Granularity>) -> usize {
        self.frames.last_tiles(op, gran)
    }
}
