//! Whole frames recorded as one graph and replayed with one call (CUDA graphs): every step's
//! launches, the zero fills on the second queue and the event waits between the two queues.
//! A frame's work is fixed by the members its sparse ops pick, which under lagged counts the
//! host knows before the frame starts (`Frames::frame_key`): a graph per set of picks, recorded
//! the second time that set comes (a camera's picks repeat frame after frame; a set seen once
//! would cost a recording and never pay for it), replayed every time after.
//!
//! On where the device records graphs (CUDA) unless `GpuOptions::frame_graphs` or
//! `GpuExecutable::set_frame_graphs` turn it off: on 200 vtest frames in camera order the
//! full-size DynConv ran 9-10% and SIGE 2-6% faster on an H200, and the host's time to queue a
//! frame fell 3.3-4.4x (RESULTS.md, "whole frames recorded as one CUDA graph"). Not where steps
//! are timed (a sync per step) or the counts are read exactly (a sync per mask).

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
/// Graphs recorded before the executable judges whether recording pays: it stops recording
/// new sets of picks where its graphs were replayed, beyond the frame each was recorded in,
/// fewer times than it recorded (picks that change every frame, so a graph is seldom used
/// again); the graphs it has keep being replayed.
const JUDGE_AFTER: usize = 16;
/// Sets of picks remembered as seen once; beyond this they are forgotten (a long run whose picks
/// keep changing would otherwise grow the table without end).
const MAX_SEEN: usize = 4096;

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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Plan {
    Plain,
    Record,
    Replay,
}

impl<G> FrameGraphs<G> {
    /// What to do with a frame of picks `key`: replay its graph, record one (the second time
    /// the picks come, while recording pays), or run it launch by launch; replays and plain
    /// frames are counted here, recordings by `store` or `refuse`.
    fn plan(&mut self, key: &[u16]) -> Plan {
        self.clock += 1;
        let st = &self.stats;
        let paying = st.recorded < JUDGE_AFTER || st.replayed >= 2 * st.recorded;
        let plan = match self.entries.get_mut(key) {
            None => {
                if self.entries.len() >= MAX_SEEN {
                    self.entries.retain(|_, e| !matches!(e, Entry::Seen));
                }
                self.entries.insert(key.to_vec(), Entry::Seen);
                Plan::Plain
            }
            Some(Entry::Seen) if paying => Plan::Record,
            Some(Entry::Ready { used, .. }) => {
                *used = self.clock;
                Plan::Replay
            }
            Some(_) => Plan::Plain,
        };
        match plan {
            Plan::Replay => self.stats.replayed += 1,
            Plan::Plain => self.stats.plain += 1,
            Plan::Record => {}
        }
        plan
    }

    /// Keeps `graph` for `key`, making room first.
    fn store(&mut self, key: Vec<u16>, graph: G, records: StepRecords) {
        self.evict();
        self.entries.insert(key, Entry::Ready { graph, used: self.clock, records });
        self.stats.recorded += 1;
        self.stats.replayed += 1;
    }

    /// Marks `key` as one the device would not record.
    fn refuse(&mut self, key: Vec<u16>) {
        self.entries.insert(key, Entry::Refused);
        self.stats.refused += 1;
        self.stats.plain += 1;
        if self.stats.refused == MAX_REFUSALS {
            tracing::warn!("{MAX_REFUSALS} frame recordings refused; frames run launch by launch (RUST_LOG=debug says why)");
        }
    }
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
        match self.frame_graphs.plan(&key) {
            Plan::Plain => self.replay(),
            Plan::Replay => {
                let Some(Entry::Ready { graph, records, .. }) = self.frame_graphs.entries.get(&key) else {
                    unreachable!("planned from this entry")
                };
                self.dev.launch_graph(graph)?;
                let records = records.clone();
                self.frames.after_frame_graph(&*self.dev, &self.bufs, &key)?;
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
        match (graph?, records) {
            (Some(graph), Some(mut records)) => {
                dev.launch_graph(&graph)?;
                self.frames.after_frame_graph(&*dev, &self.bufs, &key)?;
                // Replays queue no phase on the host: their records carry none.
                records.0.iter_mut().for_each(|(_, r)| r.phases = PhaseTimes::default());
                self.frame_graphs.store(key, graph, records.clone());
                Ok(records)
            }
            _ => {
                self.frame_graphs.refuse(key);
                self.frames.forget_recorded_events();
                self.replay()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{FrameGraphs, Plan, JUDGE_AFTER, MAX_GRAPHS, MAX_SEEN};

    /// Plans `key`, storing a graph where it says record, as `queue_frame` does.
    fn frame(fg: &mut FrameGraphs<u32>, key: &[u16]) -> Plan {
        let p = fg.plan(key);
        if p == Plan::Record {
            fg.store(key.to_vec(), 0, Default::default());
        }
        p
    }

    #[test]
    fn records_the_second_time_and_replays_after() {
        let mut fg = FrameGraphs::new(true);
        let plans: Vec<Plan> = [[1u16, 0], [2, 0], [1, 0], [2, 0], [1, 0], [2, 0]].iter().map(|k| frame(&mut fg, k)).collect();
        use Plan::*;
        assert_eq!(plans, [Plain, Plain, Record, Record, Replay, Replay]);
        assert_eq!((fg.stats.recorded, fg.stats.replayed, fg.stats.plain), (2, 4, 2));
        fg.refuse(vec![3]);
        assert_eq!(frame(&mut fg, &[3]), Plain, "a refused set is not tried again");
    }

    #[test]
    fn keeps_the_most_recently_replayed_graphs() {
        let mut fg = FrameGraphs::new(true);
        let key = |i: usize| vec![(i % 1000) as u16, (i / 1000) as u16];
        // Every set twice, so each is recorded, with set 0 replayed between the others.
        for i in 0..MAX_GRAPHS + 8 {
            frame(&mut fg, &key(i));
            frame(&mut fg, &key(i));
            frame(&mut fg, &key(0));
        }
        assert_eq!(fg.ready(), MAX_GRAPHS);
        assert_eq!(frame(&mut fg, &key(0)), Plan::Replay, "the set replayed all along was evicted");
        assert_eq!(frame(&mut fg, &key(1)), Plan::Record, "the oldest set was kept, or is not recorded again when it comes back");
    }

    #[test]
    fn forgets_sets_seen_once_beyond_a_bound() {
        let mut fg = FrameGraphs::new(true);
        frame(&mut fg, &[0, 0]);
        assert_eq!(frame(&mut fg, &[0, 0]), Plan::Record);
        for i in 0..3 * MAX_SEEN {
            frame(&mut fg, &[1, i as u16]);
        }
        assert!(fg.entries.len() <= MAX_SEEN, "{} sets remembered", fg.entries.len());
        assert_eq!(frame(&mut fg, &[0, 0]), Plan::Replay, "a recorded graph was forgotten with the sets seen once");
    }

    #[test]
    fn stops_recording_where_graphs_are_not_used_again() {
        let mut fg = FrameGraphs::new(true);
        // Each set comes exactly twice: recorded, never replayed again.
        for i in 0..JUDGE_AFTER as u16 {
            frame(&mut fg, &[i]);
            assert_eq!(frame(&mut fg, &[i]), Plan::Record);
        }
        frame(&mut fg, &[999]);
        assert_eq!(frame(&mut fg, &[999]), Plan::Plain, "recording went on although no graph was used twice");
        assert_eq!(frame(&mut fg, &[0]), Plan::Replay, "graphs already recorded stop replaying");
    }
}
