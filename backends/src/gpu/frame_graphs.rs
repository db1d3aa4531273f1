//! Whole frames recorded as one graph and replayed with one call (CUDA graphs): every step's
//! launches, the zero fills on the second queue and the event waits between the two queues.
//! A frame's work is fixed by the members its sparse ops pick, which under lagged counts the
//! host knows before the frame starts (`Frames::frame_key`): a graph per set of picks, recorded
//! the second time that set comes (a camera's picks repeat frame after frame; a set seen once
//! would cost a recording and never pay for it), replayed every time after.
//!
//! Off unless `DYNASPA_FRAME_GRAPHS=1` or `GpuExecutable::set_frame_graphs`. Not where steps are
//! timed (a sync per step) or the counts are read exactly (a sync per mask).

use super::{GpuExecutable, StepRecords};
use crate::gpu::device::GpuDevice;
use dynaspa_runtime::report::PhaseTimes;
use dynaspa_runtime::Result;
use std::collections::HashMap;

/// Recorded graphs kept per executable; the least recently replayed goes first beyond this.
const MAX_GRAPHS: usize = 64;
/// Recordings the device may refuse (something in the frame cannot be recorded) before the
/// executable stops trying.
const MAX_REFUSALS: usize = 3;

/// Whether frames are recorded: `$DYNASPA_FRAME_GRAPHS` is 1.
pub(crate) fn enabled_by_env() -> bool {
    crate::gpu::sparse::schedules::env_switch("DYNASPA_FRAME_GRAPHS") == Some(true)
}

/// How an executable's frames ran since it was compiled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameGraphStats {
    /// Frames queued as one recorded graph.
    pub replayed: usize,
    /// Graphs recorded (each then replayed at once for its frame, counted in `replayed`).
    pub recorded: usize,
    /// Recordings the device refused; those frames ran launch by launch.
    pub refused: usize,
    /// Frames run launch by launch (off, not eligible, or a set of picks seen for the first time).
    pub plain: usize,
}

enum Entry<G> {
    Seen,
    Ready { graph: G, used: u64, records: StepRecords },
    Refused,
}

pub(crate) struct FrameGraphs<G> {
    pub enabled: bool,
    entries: HashMap<Vec<u16>, Entry<G>>,
    clock: u64,
    pub stats: FrameGraphStats,
}

impl<G> FrameGraphs<G> {
    pub(crate) fn new(enabled: bool) -> FrameGraphs<G> {
        FrameGraphs { enabled, entries: HashMap::new(), clock: 0, stats: FrameGraphStats::default() }
    }

    fn ready(&self) -> usize {
        self.entries.values().filter(|e| matches!(e, Entry::Ready { .. })).count()
    }

    /// Makes room for one more graph: the least recently replayed one goes.
    fn evict(&mut self) {
        while self.ready() >= MAX_GRAPHS {
            let oldest = self
                .entries
                .iter()
                .filter_map(|(k, e)| match e {
                    Entry::Ready { used, .. } => Some((*used, k.clone())),
                    _ => None,
                })
                .min();
            match oldest {
                Some((_, k)) => self.entries.insert(k, Entry::Seen),
                None => break,
            };
        }
    }
}

/// What to do with one frame.
enum Plan {
    Plain,
    Record,
    Replay,
}

impl<D: GpuDevice> GpuExecutable<D> {
    /// Records whole frames into graphs and replays them where the device has graphs (`on`),
    /// or runs every frame launch by launch.
    pub fn set_frame_graphs(&mut self, on: bool) {
        self.frame_graphs.enabled = on;
    }

    /// How this executable's frames ran so far (`set_frame_graphs`).
    pub fn frame_graph_stats(&self) -> FrameGraphStats {
        self.frame_graphs.stats
    }

    /// Queues one frame: from its recorded graph where there is one, recording it where its
    /// picks come the second time, else launch by launch (`replay`).
    pub(super) fn queue_frame(&mut self) -> Result<StepRecords> {
        let fg = &mut self.frame_graphs;
        let eligible = fg.enabled && self.dev.records_graphs() && !self.step_times && fg.stats.refused < MAX_REFUSALS;
        let key = if eligible { self.frames.frame_key() } else { None };
        let Some(key) = key else {
            self.frame_graphs.stats.plain += 1;
            return self.replay();
        };
        fg.clock += 1;
        let plan = match fg.entries.get(&key) {
            None => {
                fg.entries.insert(key.clone(), Entry::Seen);
                Plan::Plain
            }
            Some(Entry::Seen) => Plan::Record,
            Some(Entry::Refused) => Plan::Plain,
            Some(Entry::Ready { .. }) => Plan::Replay,
        };
        match plan {
            Plan::Plain => {
                self.frame_graphs.stats.plain += 1;
                self.replay()
            }
            Plan::Replay => {
                let clock = self.frame_graphs.clock;
                let Some(Entry::Ready { graph, used, records }) = self.frame_graphs.entries.get_mut(&key) else { unreachable!("planned from this entry") };
                *used = clock;
                self.dev.launch_graph(graph)?;
                let records = records.clone();
                self.frames.after_frame_graph(&*self.dev, &self.bufs, &key)?;
                self.frame_graphs.stats.replayed += 1;
                Ok(records)
            }
            Plan::Record => self.record_frame(key),
        }
    }

    /// Records this frame's work as a graph and queues it, or runs it launch by launch where
    /// the device records none or refuses.
    fn record_frame(&mut self, key: Vec<u16>) -> Result<StepRecords> {
        let dev = self.dev.clone();
        let mut records = None;
        self.frames.recording_frame = true;
        let graph = dev.capture_frame(&mut || {
            let r = self.replay()?;
            // Every bitmask launch on the second queue joins the main queue inside the graph.
            self.frames.settle_all(&*dev)?;
            records = Some(r);
            Ok(())
        });
        self.frames.recording_frame = false;
        let fg = &mut self.frame_graphs;
        match (graph?, records) {
            (Some(graph), Some(mut records)) => {
                dev.launch_graph(&graph)?;
                self.frames.after_frame_graph(&*dev, &self.bufs, &key)?;
                // Replays queue no phase on the host: their records carry none.
                records.0.iter_mut().for_each(|(_, r)| r.phases = PhaseTimes::default());
                fg.evict();
                fg.entries.insert(key, Entry::Ready { graph, used: fg.clock, records: records.clone() });
                fg.stats.recorded += 1;
                fg.stats.replayed += 1;
                Ok(records)
            }
            _ => {
                fg.entries.insert(key, Entry::Refused);
                fg.stats.refused += 1;
                if fg.stats.refused == MAX_REFUSALS {
                    tracing::warn!("{} frame recordings refused; frames run launch by launch (RUST_LOG=debug says why)", MAX_REFUSALS);
                }
                fg.stats.plain += 1;
                self.frames.forget_recorded_events();
                self.replay()
            }
        }
    }
}
