//! Measuring on the real backend, behind a trait so GPU backends plug in beside the CPU, and
//! the measurement log that lets an interrupted tune resume: every measurement is appended as
//! one JSON line; a restarted tune with the same header replays them instead of measuring, and
//! since the search is seeded, it retraces its steps up to where it stopped.

use crate::space::OpGeometry;
use dynaspa_backends::cpu::SparseOpTimer;
use dynaspa_backends::gpu::{self, DeviceInfo};
use dynaspa_runtime::dispatch::Schedule;
use dynaspa_runtime::graph::Graph;
use dynaspa_runtime::profile::{DeviceId, OpSignature};
use dynaspa_runtime::sparsity::BitMask;
use dynaspa_runtime::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A sparse op as the measurer offers it.
#[derive(Clone, Debug)]
pub struct TunableOp {
    pub node: String,
    pub signature: OpSignature,
    /// `None`: no sparse kernel on this backend (the op keeps its dense member).
    pub geometry: Option<OpGeometry>,
    pub plane: (usize, usize),
}

/// What the tuner needs from a backend: its device identity, its sparse ops, and the time of
/// one schedule (`None`: the dense member) of an op on one mask, in seconds, measured as the
/// backend sees fit (the CPU: one warm-up, then the minimum of a few runs).
pub trait Measurer {
    fn device(&self) -> DeviceId;
    fn ops(&self) -> &[TunableOp];
    fn measure(&mut self, op: usize, schedule: Option<&Schedule>, mask: &BitMask) -> Result<f64>;
}

/// The CPU backend through its `SparseOpTimer`s.
pub struct CpuMeasurer {
    timers: Vec<SparseOpTimer>,
    ops: Vec<TunableOp>,
    device: DeviceId,
    reps: usize,
    /// Written through before every run when set (see [`CpuMeasurer::flush_caches`]).
    flush: Option<Vec<u8>>,
}

/// Bytes written between runs to push the op's data out of the private caches: twice the
/// per-core L2 of current server parts (2 MiB) times two cores.
const FLUSH_BYTES: usize = 8 << 20;

impl CpuMeasurer {
    /// `reps` timed runs after one warm-up; the minimum is kept (on a shared machine noise
    /// only ever adds time).
    pub fn new(
        backend: &dynaspa_backends::cpu::CpuBackend,
        graph: std::sync::Arc<dynaspa_runtime::graph::Graph>,
        reps: usize,
    ) -> Result<CpuMeasurer> {
        let timers = backend.sparse_op_timers(graph)?;
        let ops = timers
            .iter()
            .map(|t| TunableOp {
                node: t.node_name().to_string(),
                signature: t.signature().clone(),
                geometry: if t.has_sparse_kernel() { OpGeometry::of(t.graph(), t.node()) } else { None },
                plane: t.mask_size(),
            })
            .collect();
        Ok(CpuMeasurer { timers, ops, device: dynaspa_backends::cpu::cpu_device_id(backend.threads()), reps: reps.max(1), flush: None })
    }

    /// Runs each timed run with cold private caches. In a frame, an op's weights and inputs
    /// were pushed out of L1/L2 by the ops before it; timed back to back with hot caches, the
    /// tile-list kernels looked as fast as the positions kernel and lost to it in the model
    /// (measured with `dynaspa profile`, see benches/RESULTS.md, "Offline tuner").
    pub fn flush_caches(mut self, on: bool) -> CpuMeasurer {
        self.flush = on.then(|| vec![0u8; FLUSH_BYTES]);
        self
    }
}

impl Measurer for CpuMeasurer {
    fn device(&self) -> DeviceId {
        self.device.clone()
    }
    fn ops(&self) -> &[TunableOp] {
        &self.ops
    }
    fn measure(&mut self, op: usize, schedule: Option<&Schedule>, mask: &BitMask) -> Result<f64> {
        let t = self.timers.get_mut(op).ok_or_else(|| Error::Other(format!("no sparse op {op}")))?;
        let g = schedule.and_then(|s| s.granularity);
        let flush = &mut self.flush;
        let mut run = || {
            if let Some(buf) = flush.as_mut() {
                for (i, b) in buf.iter_mut().enumerate().step_by(64) {
                    *b = b.wrapping_add(i as u8 | 1);
                }
                std::hint::black_box(&buf);
            }
            match g {
                None => t.time_dense(mask),
                Some(g) => t.time_sparse(mask, g),
            }
        };
        run()?;
        let mut best = f64::INFINITY;
        for _ in 0..self.reps {
            best = best.min(run()?.as_secs_f64());
        }
        Ok(best)
    }
}

/// A GPU backend through its sparse op timers (`GpuBackend::sparse_op_timers`): the
/// schedule's kernels are built on first use and timed as calibration times members (several
/// runs per sync); one warm-up, then the minimum of `reps` calls.
pub struct GpuMeasurer {
    timers: Vec<Box<dyn gpu::SparseOpTimer>>,
    ops: Vec<TunableOp>,
    device: DeviceId,
    reps: usize,
    failures: usize,
}

/// Schedules that fail to build or launch before a tune gives up: one is a schedule the
/// limits did not foresee (it is recorded as never winning); many are a broken device.
const MAX_FAILURES: usize = 32;

impl GpuMeasurer {
    /// `graph`: the graph the timers were made from (for the ops' signatures and geometry).
    pub fn new(info: &DeviceInfo, graph: &Graph, timers: Vec<Box<dyn gpu::SparseOpTimer>>, reps: usize) -> Result<GpuMeasurer> {
        let mut ops = Vec::with_capacity(timers.len());
        for t in &timers {
            let n = graph
                .nodes
                .iter()
                .find(|n| n.name == t.node())
                .ok_or_else(|| Error::Other(format!("timer for unknown node '{}'", t.node())))?;
            ops.push(TunableOp {
                node: n.name.clone(),
                signature: OpSignature::of(graph, n),
                geometry: OpGeometry::of(graph, n),
                plane: t.plane(),
            });
        }
        let device = DeviceId { backend: info.backend.clone(), name: info.name.clone(), fingerprint: info.fingerprint() };
        Ok(GpuMeasurer { timers, ops, device, reps: reps.max(1), failures: 0 })
    }

    /// The fingerprint the measurements are filed under, where the timers run at another
    /// precision than f32 (`dynaspa_backends::gpu::fingerprint_at`).
    pub fn with_fingerprint(mut self, fingerprint: String) -> GpuMeasurer {
        self.device.fingerprint = fingerprint;
        self
    }
}

impl Measurer for GpuMeasurer {
    fn device(&self) -> DeviceId {
        self.device.clone()
    }
    fn ops(&self) -> &[TunableOp] {
        &self.ops
    }
    fn measure(&mut self, op: usize, schedule: Option<&Schedule>, mask: &BitMask) -> Result<f64> {
        let t = self.timers.get_mut(op).ok_or_else(|| Error::Other(format!("no sparse op {op}")))?;
        if let Err(e) = t.time(schedule, mask) {
            let Some(s) = schedule else { return Err(e) };
            self.failures += 1;
            if self.failures > MAX_FAILURES {
                return Err(Error::Other(format!(
                    "{MAX_FAILURES} schedules failed on this device; the last, '{}' of '{}': {e}",
                    s.name,
                    t.node()
                )));
            }
            tracing::warn!(node = %t.node(), schedule = %s.name, "schedule failed, recorded as never winning: {e}");
            return Ok(f64::INFINITY);
        }
        let mut best = f64::INFINITY;
        for _ in 0..self.reps {
            best = best.min(t.time(schedule, mask)?);
        }
        Ok(best)
    }
}

/// First line of a measurement log: a log is replayed only into the same tune.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogHeader {
    pub log: String,
    pub version: u32,
    pub fingerprint: String,
    pub model: String,
    pub masks: String,
    pub seed: u64,
}

#[derive(Serialize, Deserialize)]
struct LogLine {
    op: String,
    schedule: String,
    frame: usize,
    /// `null`: the schedule failed to run (read back as infinitely slow).
    seconds: Option<f64>,
}

/// Measurements keyed by (op, schedule name, frame), backed by an append-only JSON-lines file.
pub struct MeasureLog {
    file: Option<std::fs::File>,
    path: Option<PathBuf>,
    seen: HashMap<(String, String, usize), f64>,
    pub replayed: usize,
}

impl MeasureLog {
    /// A log that only lives in memory (experiments, tests).
    pub fn memory() -> MeasureLog {
        MeasureLog { file: None, path: None, seen: HashMap::new(), replayed: 0 }
    }

    /// Opens `path`: with the same header its measurements are loaded for replay; a log of
    /// another tune (other device, model, masks or seed) is set aside as `<path>.old`. A line
    /// cut short by an interruption is ignored.
    pub fn open(path: &Path, header: &LogHeader) -> Result<MeasureLog> {
        let mut seen = HashMap::new();
        let mut keep = false;
        if let Ok(text) = std::fs::read_to_string(path) {
            let mut lines = text.lines();
            match lines.next().map(serde_json::from_str::<LogHeader>) {
                Some(Ok(h)) if &h == header => {
                    keep = true;
                    for l in lines {
                        if let Ok(m) = serde_json::from_str::<LogLine>(l) {
                            seen.insert((m.op, m.schedule, m.frame), m.seconds.unwrap_or(f64::INFINITY));
                        }
                    }
                }
                _ => {
                    let old = path.with_extension("old");
                    tracing::warn!("{} belongs to another tune; moved to {}", path.display(), old.display());
                    std::fs::rename(path, &old).map_err(|e| Error::io(path, e))?;
                }
            }
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(|e| Error::io(path, e))?;
        if !keep {
            let h = serde_json::to_string(header).map_err(|e| Error::Other(e.to_string()))?;
            writeln!(file, "{h}").map_err(|e| Error::io(path, e))?;
        } else {
            // A torn last line (killed mid-write) must not glue onto the next record.
            writeln!(file).map_err(|e| Error::io(path, e))?;
        }
        let replayed = seen.len();
        Ok(MeasureLog { file: Some(file), path: Some(path.to_path_buf()), seen, replayed })
    }

    pub fn get(&self, op: &str, schedule: &str, frame: usize) -> Option<f64> {
        self.seen.get(&(op.to_string(), schedule.to_string(), frame)).copied()
    }

    pub fn record(&mut self, op: &str, schedule: &str, frame: usize, seconds: f64) -> Result<()> {
        self.seen.insert((op.to_string(), schedule.to_string(), frame), seconds);
        if let (Some(f), Some(p)) = (self.file.as_mut(), self.path.as_ref()) {
            let line = serde_json::to_string(&LogLine {
                op: op.into(),
                schedule: schedule.into(),
                frame,
                seconds: seconds.is_finite().then_some(seconds),
            })
            .map_err(|e| Error::Other(e.to_string()))?;
            writeln!(f, "{line}").map_err(|e| Error::io(p, e))?;
        }
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.seen.len()
    }
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(seed: u64) -> LogHeader {
        LogHeader { log: "dynaspa-tune".into(), version: 1, fingerprint: "fp".into(), model: "m".into(), masks: "abc".into(), seed }
    }

    #[test]
    fn log_replays_the_same_tune_and_sets_aside_another() {
        let dir = std::env::temp_dir().join(format!("dynaspa-measure-log-{}", std::process::id()));
        let p = dir.join("m.json.log");
        let _ = std::fs::remove_dir_all(&dir);
        let mut l = MeasureLog::open(&p, &header(1)).unwrap();
        l.record("/a", "tiles1x1", 3, 1.5e-5).unwrap();
        l.record("/a", "dense", 3, 9e-5).unwrap();
        l.record("/a", "tiles2x2_failed", 3, f64::INFINITY).unwrap();
        drop(l);
        // A torn line from a kill in mid-write.
        std::fs::OpenOptions::new().append(true).open(&p).unwrap().write_all(b"{\"op\":\"/a\",\"sched").unwrap();
        let mut l = MeasureLog::open(&p, &header(1)).unwrap();
        assert_eq!(l.replayed, 3);
        assert_eq!(l.get("/a", "tiles1x1", 3), Some(1.5e-5));
        assert_eq!(l.get("/a", "tiles2x2_failed", 3), Some(f64::INFINITY), "a failed schedule replays as failed");
        assert_eq!(l.get("/a", "tiles1x1", 4), None);
        l.record("/b", "dense", 0, 2e-5).unwrap();
        drop(l);
        let l = MeasureLog::open(&p, &header(1)).unwrap();
        assert_eq!(l.replayed, 4, "the record after the torn line is read back");
        drop(l);
        let l = MeasureLog::open(&p, &header(2)).unwrap();
        assert_eq!(l.replayed, 0);
        assert!(p.with_extension("old").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
