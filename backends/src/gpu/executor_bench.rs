//! Hooks for benchmarks (backends/examples/gpu_sparse_bench.rs): time one member of a sparse
//! op, or its per-frame dispatch, or one node's launches, on the values the last `run` left on
//! the device.

use super::{replay_launches_refs, GpuExecutable};
use crate::gpu::device::GpuDevice;
use crate::gpu::lower::ctx::{LArg, Launch};
use crate::gpu::sparse::step::CountsSync;
use crate::gpu::sparse_conv::features::SparseConvFeatures;
pub use crate::gpu::token::lower::TokenOpInfo;
use dynaspa_runtime::dispatch::Schedule;
use dynaspa_runtime::sparsity::Granularity;
use dynaspa_runtime::{Error, Result};
use std::time::Instant;

/// Which launches of a node `GpuExecutable::time_node` times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodePart {
    All,
    /// The token compaction the node launches as its mask's first reader.
    Compaction,
    WithoutCompaction,
}

/// A sparse op of an executable: its node, its members' names and schedules, and whether its
/// PolyKernel came from a profile (else calibration).
#[derive(Clone, Debug)]
pub struct SparseOpInfo {
    pub node: String,
    pub members: Vec<String>,
    /// What the dense member runs when it is a vendor library's conv ("cudnn ..."), else `None`.
    pub dense_vendor: Option<String>,
    pub schedules: Vec<Schedule>,
    pub from_profile: bool,
    /// Kernel launches of each member, fill excluded: a split-K GEMM is one with the fused
    /// finish, two without.
    pub launches: Vec<usize>,
    /// Work-group size of each launch of each member (a sliced GEMM's third dimension is its
    /// `WK`).
    pub local_sizes: Vec<Vec<[u32; 3]>>,
}

impl<D: GpuDevice> GpuExecutable<D> {
    pub fn sparse_ops(&self) -> Vec<SparseOpInfo> {
        (0..self.frames.ops.len())
            .map(|i| {
                let op = &self.frames.ops[i];
                SparseOpInfo {
                    node: op.node.clone(),
                    members: self.frames.member_names(i),
                    schedules: op.poly.members().iter().map(|m| m.schedule.clone()).collect(),
                    from_profile: op.from_profile,
                    dense_vendor: op.dense_vendor.clone(),
                    launches: op.members.iter().map(Vec::len).collect(),
                    local_sizes: op.members.iter().map(|m| m.iter().map(|l| l.local).collect()).collect(),
                }
            })
            .collect()
    }

    /// Why the profile of the options was refused as a whole (made for another device or
    /// backend), with both fingerprints; `None` when it was used or none was given.
    pub fn profile_refused(&self) -> Option<&str> {
        self.profile_refused.as_deref()
    }

    /// Whether this executable's split-K convs finish in their GEMM (one launch) rather than in
    /// a second kernel: the options' choice, or the device's default.
    pub fn fused_finish(&self) -> bool {
        self.features.fused_finish
    }

    /// How this executable's sparse convs run on its device (`GpuOptions::sparse_conv` resolved
    /// for it).
    pub fn sparse_conv_features(&self) -> SparseConvFeatures {
        self.features
    }

    /// The launches of member `member` of sparse op `op`, or an error naming both.
    fn member(&self, op: usize, member: &str) -> Result<Vec<Launch<D::Kernel>>> {
        self.frames.member_launches(op, member).ok_or_else(|| Error::Other(format!("sparse op {op} has no member '{member}'")))
    }

    /// Time per run (µs) of member `member` of sparse op `op`: `samples` samples, each `runs`
    /// launches queued back to back and bracketed by `finish` (so the sync is shared by the runs).
    /// Run a frame first: the member reads its inputs and the tile lists of that frame.
    pub fn time_member(&mut self, op: usize, member: &str, samples: usize, runs: usize) -> Result<Vec<f64>> {
        let (dev, bufs, frames) = (&*self.dev, &self.bufs, &mut self.frames);
        time_runs(dev, samples, runs, || frames.replay_member(dev, bufs, op, member))
    }

    /// Time per run (µs) of op `op`'s mask launch (bitmask or compaction) followed by member
    /// `member`, as `time_member`: a frame's dispatch without the counts copy and selection, so
    /// that `time_dispatched` minus this is what the copy and the host add.
    pub fn time_member_after_mask(&mut self, op: usize, member: &str, samples: usize, runs: usize) -> Result<Vec<f64>> {
        let mask = self.frames.mask_launch(op).ok_or_else(|| Error::Other(format!("sparse op {op} has no mask launch")))?;
        let member = self.member(op, member)?;
        let launches: Vec<_> = std::iter::once(mask).chain(&member).collect();
        time_launches(&*self.dev, &self.bufs, &launches, samples, runs)
    }

    /// Time per run (µs) of a launch that does nothing (one work-group of fill_words over no
    /// words) followed by member `member` of op `op`, as `time_member_after_mask`: what any
    /// separate launch in front of the member costs the queue, the floor of a mask launch.
    pub fn time_member_after_empty(&mut self, op: usize, member: &str, samples: usize, runs: usize) -> Result<Vec<f64>> {
        let member = self.member(op, member)?;
        let buf = member
            .first()
            .and_then(|l| l.args.iter().find_map(|a| if let LArg::Buf(b) = a { Some(*b) } else { None }))
            .ok_or_else(|| Error::Other(format!("sparse op {op}: the member reads no buffer")))?;
        let spec = crate::gpu::kernels::spec(crate::gpu::kernels::Src::Elementwise, "fill_words", &[]);
        let empty = Launch {
            kernel: std::sync::Arc::new(self.dev.kernel(&spec)?),
            groups: [1, 1, 1],
            local: [32, 1, 1],
            args: vec![LArg::Buf(buf), LArg::I32(0), LArg::I32(0), LArg::I32(0)],
            columns: None,
        };
        let launches: Vec<_> = std::iter::once(&empty).chain(&member).collect();
        time_launches(&*self.dev, &self.bufs, &launches, samples, runs)
    }

    /// Time (µs) of each launch of `member` alone, in launch order (a split-K GEMM, then its
    /// finish): median of `samples` samples of `runs` launches, as `time_member`.
    pub fn time_member_launches(&mut self, op: usize, member: &str, samples: usize, runs: usize) -> Result<Vec<f64>> {
        let launches = self.member(op, member)?;
        let mut out = Vec::with_capacity(launches.len());
        for l in &launches {
            let mut t = time_launches(&*self.dev, &self.bufs, &[l], samples.max(1), runs)?;
            t.sort_by(f64::total_cmp);
            out.push(t[t.len() / 2]);
        }
        Ok(out)
    }

    /// Time (µs) of op `op`'s per-frame dispatch with exact counts: bitmask launch, counts
    /// readback (a host sync), selection; one sample per call, each from an idle queue. Returns
    /// the times and the member the last sample chose.
    pub fn time_dispatch(&mut self, op: usize, samples: usize) -> Result<(Vec<f64>, String)> {
        let saved = std::mem::replace(&mut self.frames.sync, CountsSync::Exact);
        let mut out = Vec::with_capacity(samples);
        let mut chosen = Ok(String::new());
        for _ in 0..samples {
            self.dev.finish()?;
            let t = Instant::now();
            chosen = self.frames.dispatch_once(&*self.dev, &self.bufs, op);
            if chosen.is_err() {
                break;
            }
            out.push(t.elapsed().as_secs_f64() * 1e6);
        }
        self.frames.sync = saved;
        Ok((out, chosen?))
    }

    /// Time per run (µs) of a frame's dispatch under `sync` followed by member `member`, `runs`
    /// of them queued back to back per sample (as consecutive frames would be): the member's
    /// time plus what dispatch adds to it. Run a frame first (lagged selection needs one).
    pub fn time_dispatched(&mut self, op: usize, member: &str, sync: CountsSync, samples: usize, runs: usize) -> Result<Vec<f64>> {
        Ok(self.time_dispatched_queueing(op, member, sync, samples, runs)?.into_iter().map(|(all, _)| all).collect())
    }

    /// `time_dispatched`'s samples, each with the host's share: µs per run the host spent
    /// queueing the runs, before it waited for the queue. Where the two are equal the device
    /// waited for the host, and what the host does per frame sets the pace.
    pub fn time_dispatched_queueing(
        &mut self,
        op: usize,
        member: &str,
        sync: CountsSync,
        samples: usize,
        runs: usize,
    ) -> Result<Vec<(f64, f64)>> {
        let saved = std::mem::replace(&mut self.frames.sync, sync);
        let r = (|| {
            self.dev.finish()?;
            let mut out = Vec::with_capacity(samples);
            let per_run = |t: Instant| t.elapsed().as_secs_f64() * 1e6 / runs.max(1) as f64;
            for _ in 0..samples {
                let t = Instant::now();
                for _ in 0..runs.max(1) {
                    self.frames.dispatch_member(&*self.dev, &self.bufs, op, member)?;
                }
                let queued = per_run(t);
                self.dev.finish()?;
                out.push((per_run(t), queued));
            }
            // Collects the copies in flight, as the end of a frame would.
            self.frames.end_frame(&*self.dev, &self.bufs, &mut [])?;
            Ok(out)
        })();
        self.frames.sync = saved;
        r
    }

    /// Time per frame (µs) of the whole executable's work, `runs` frames queued back to back
    /// per sample (no inputs uploaded or outputs read), with sparse op `op` running member
    /// `member` in every frame: from one recorded graph per frame where `graphs` and the device
    /// records them (`set_frame_graphs`), else launch by launch, as `run` queues them. Run a
    /// frame first (lagged selection needs one).
    pub fn time_frames(&mut self, op: usize, member: &str, graphs: bool, samples: usize, runs: usize) -> Result<Vec<f64>> {
        let at = self.frames.member_index(op, member).ok_or_else(|| Error::Other(format!("sparse op {op} has no member '{member}'")))?;
        let (pin, enabled) = (self.frames.ops[op].pin.replace(at), self.frame_graphs.enabled);
        self.frame_graphs.enabled = graphs;
        let dev = self.dev.clone();
        let r = (|| {
            // The picks are seen, then recorded, before the timed frames.
            for _ in 0..3 {
                self.queue_frame()?;
            }
            let t = time_runs(&*dev, samples, runs, || self.queue_frame().map(drop));
            self.frames.end_frame(&*dev, &self.bufs, &mut [])?;
            t
        })();
        self.frames.ops[op].pin = pin;
        self.frame_graphs.enabled = enabled;
        r
    }

    /// The token-sparse ops, in plan order.
    pub fn token_ops(&self) -> Vec<TokenOpInfo> {
        self.tokens.ops.clone()
    }

    /// Time per run (µs) of node `node`'s launches as a frame replays them (`part`: all of
    /// them, only its mask's compaction, or all but that), timed as `time_member` does. Run a
    /// frame first.
    pub fn time_node(&mut self, node: &str, part: NodePart, samples: usize, runs: usize) -> Result<Vec<f64>> {
        let step = self.steps.iter().find(|s| s.node == node).ok_or_else(|| Error::Other(format!("no step runs node '{node}'")))?;
        let compaction = self.tokens.compaction_of(node);
        let first = self.tokens.ops.iter().any(|o| o.node == node && o.compacts);
        let is_compaction =
            |l: &Launch<D::Kernel>| first && compaction.is_some_and(|c| std::ptr::eq(&*c.kernel, &*l.kernel) && c.args == l.args);
        // A PolyKernel op's step: its mask's compaction (or bitmask) launch when it is the
        // mask's first reader, then the member the last frame ran.
        let own: Vec<&Launch<D::Kernel>> = match step.sparse {
            Some(i) => {
                let op = &self.frames.ops[i];
                let member = op
                    .last_pick
                    .and_then(|p| op.members.get(p))
                    .ok_or_else(|| Error::Other(format!("node '{node}' has not run a frame")))?;
                let reads_first = self.frames.ops.iter().position(|o| o.mask == op.mask) == Some(i);
                // A member that counts the mask itself runs without the launch (step.rs).
                let counts_itself =
                    op.residual_fill.is_empty() && op.last_pick.and_then(|p| op.reports_counts.get(p).copied()).unwrap_or(false);
                (reads_first && !counts_itself).then_some(&self.frames.masks[op.mask].bitmask).into_iter().chain(member).collect()
            }
            None => step.launches.iter().collect(),
        };
        let launches: Vec<&Launch<D::Kernel>> = match part {
            NodePart::All => own,
            NodePart::Compaction => own.into_iter().filter(|l| is_compaction(l)).collect(),
            NodePart::WithoutCompaction => own.into_iter().filter(|l| !is_compaction(l)).collect(),
        };
        if launches.is_empty() {
            return Err(Error::Other(format!("node '{node}' has no launches of that part")));
        }
        time_launches(&*self.dev, &self.bufs, &launches, samples, runs)
    }

    /// DISTiles of `gran` in op `op`'s mask in the last frame or dispatch.
    pub fn last_tiles(&self, op: usize, gran: Option<Granularity>) -> usize {
        self.frames.last_tiles(op, gran)
    }
}

/// Time per run (µs) of `launches`, as `time_runs`.
fn time_launches<D: GpuDevice>(
    dev: &D,
    bufs: &[D::Buffer],
    launches: &[&Launch<D::Kernel>],
    samples: usize,
    runs: usize,
) -> Result<Vec<f64>> {
    time_runs(dev, samples, runs, || replay_launches_refs(dev, bufs, launches))
}

/// Time per run (µs) of what `queue` queues: `samples` samples of `runs` calls back to back,
/// bracketed by a queue finish (shared by the runs), from an idle queue.
fn time_runs<D: GpuDevice>(dev: &D, samples: usize, runs: usize, mut queue: impl FnMut() -> Result<()>) -> Result<Vec<f64>> {
    dev.finish()?;
    let mut out = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t = Instant::now();
        for _ in 0..runs.max(1) {
            queue()?;
        }
        dev.finish()?;
        out.push(t.elapsed().as_secs_f64() * 1e6 / runs.max(1) as f64);
    }
    Ok(out)
}
