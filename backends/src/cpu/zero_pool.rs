//! Zeroed output buffers for `Zero`-fill sparse ops, re-zeroed on a background thread while the
//! graph runs: DynaSpa's triple buffering, generalised to any graph. A sparse op's buffer comes
//! back when the executor frees its value (after its last reader), is zeroed off the critical
//! path, and serves the next op or frame that needs that size.
//!
//! Only what a kernel wrote needs zeroing again, so a returned buffer carries the positions it
//! wrote: at density d the background work is d of a full clear.

use dynaspa_runtime::sparsity::BitMask;
use std::collections::HashMap;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

/// Which elements of a returned buffer may be non-zero.
pub(crate) enum Dirty {
    All,
    /// The buffer is `images` x `channels` planes of `mask.len()` positions and only the set
    /// positions of each image's mask were written, in every channel.
    Positions {
        masks: std::sync::Arc<[BitMask]>,
        channels: usize,
    },
}

struct Returned {
    buf: Vec<f32>,
    dirty: Dirty,
}

pub(crate) struct ZeroPool {
    to_worker: Option<Sender<Returned>>,
    from_worker: Receiver<Vec<f32>>,
    ready: HashMap<usize, Vec<Vec<f32>>>,
    /// Buffers handed to the worker and not yet back.
    in_flight: usize,
    worker: Option<JoinHandle<()>>,
}

impl ZeroPool {
    pub fn new() -> ZeroPool {
        let (to_worker, work) = channel::<Returned>();
        let (done, from_worker) = channel();
        let worker = std::thread::Builder::new()
            .name("dynaspa-zero".into())
            .spawn(move || {
                for mut r in work {
                    clear(&mut r.buf, &r.dirty);
                    if done.send(r.buf).is_err() {
                        break;
                    }
                }
            })
            .ok();
        ZeroPool { to_worker: worker.as_ref().map(|_| to_worker), from_worker, ready: HashMap::new(), in_flight: 0, worker }
    }

    /// A zeroed buffer of `len` elements and whether it came from the pool. A miss allocates
    /// with `vec![0.0; len]` (calloc: fresh pages are zero, paid for as page faults on the first
    /// write, so a sparse kernel only faults in the pages it touches). The pool settles at the
    /// number of buffers of each size live at once, so misses stop after the first frame.
    pub fn take(&mut self, len: usize) -> (Vec<f32>, bool) {
        self.collect();
        if let Some(b) = self.ready.get_mut(&len).and_then(|v| v.pop()) {
            return (b, true);
        }
        (vec![0.0; len], false)
    }

    /// Hands a buffer back for zeroing: in the background when that is much work, here when it
    /// is little (or when the worker could not start). Waking the worker costs a context switch
    /// that, on a machine whose cores the compute threads keep busy, delays the graph more than
    /// clearing a few kilobytes does.
    pub fn give_back(&mut self, mut buf: Vec<f32>, dirty: Dirty) {
        if dirty_len(&buf, &dirty) <= INLINE_CLEAR {
            clear(&mut buf, &dirty);
            self.ready.entry(buf.len()).or_default().push(buf);
            return;
        }
        match &self.to_worker {
            Some(tx) => {
                let len = buf.len();
                match tx.send(Returned { buf, dirty }) {
                    Ok(()) => self.in_flight += 1,
                    Err(e) => {
                        let mut r = e.0;
                        clear(&mut r.buf, &r.dirty);
                        self.ready.entry(len).or_default().push(r.buf);
                    }
                }
            }
            None => {
                clear(&mut buf, &dirty);
                self.ready.entry(buf.len()).or_default().push(buf);
            }
        }
    }

    fn collect(&mut self) {
        while let Ok(b) = self.from_worker.try_recv() {
            self.in_flight -= 1;
            self.ready.entry(b.len()).or_default().push(b);
        }
    }

    /// Number of buffers zeroed and waiting.
    #[cfg(test)]
    pub fn ready_count(&mut self) -> usize {
        self.collect();
        self.ready.values().map(Vec::len).sum()
    }

    /// Blocks until every returned buffer is zeroed.
    #[cfg(test)]
    pub fn drain(&mut self) {
        while self.in_flight > 0 {
            match self.from_worker.recv() {
                Ok(b) => {
                    self.in_flight -= 1;
                    self.ready.entry(b.len()).or_default().push(b);
                }
                Err(_) => break,
            }
        }
    }
}

impl Drop for ZeroPool {
    fn drop(&mut self) {
        self.to_worker = None; // closes the channel so the worker's loop ends
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

/// Elements up to which a returned buffer is cleared on the spot (256 KiB of writes).
const INLINE_CLEAR: usize = 64 * 1024;

/// How many elements `clear` will write.
fn dirty_len(buf: &[f32], dirty: &Dirty) -> usize {
    match dirty {
        Dirty::All => buf.len(),
        Dirty::Positions { masks, channels } => masks.iter().map(BitMask::count_ones).sum::<usize>() * channels,
    }
}

fn clear(buf: &mut [f32], dirty: &Dirty) {
    match dirty {
        Dirty::All => buf.fill(0.0),
        Dirty::Positions { masks, channels } => {
            let plane = masks.first().map_or(0, BitMask::len);
            if plane == 0 || masks.len() * channels * plane != buf.len() {
                buf.fill(0.0);
                return;
            }
            for (img, m) in buf.chunks_mut(channels * plane).zip(masks.iter()) {
                // Runs of written positions are runs of each channel plane too.
                m.for_each_run(|a, b| {
                    for ch in img.chunks_mut(plane) {
                        ch[a..b].fill(0.0);
                    }
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returned_buffers_come_back_zeroed() {
        let mut p = ZeroPool::new();
        // Small buffers are cleared on the spot, large ones by the worker: both come back zero.
        for n in [24, 3 * INLINE_CLEAR] {
            let (mut a, ready) = p.take(n);
            assert!(!ready);
            assert!(a.iter().all(|&v| v == 0.0));
            a.iter_mut().enumerate().for_each(|(i, v)| *v = i as f32 + 1.0);
            p.give_back(a, Dirty::All);
            p.drain();
            assert_eq!(p.ready_count(), 1);
            let (b, ready) = p.take(n);
            assert!(ready);
            assert!(b.iter().all(|&v| v == 0.0));
            // A different size is not served from the pool.
            assert!(!p.take(n + 1).1);
        }
    }

    #[test]
    fn positions_clear_only_what_was_written_and_all_of_it() {
        let masks = vec![BitMask::from_fn(3, 5, |y, x| (y * 5 + x) % 3 == 0), BitMask::from_fn(3, 5, |y, x| y == 1 || x == 4)];
        let channels = 2;
        let mut buf = vec![0.0f32; 2 * channels * 15];
        for (img, m) in buf.chunks_mut(channels * 15).zip(&masks) {
            for ch in img.chunks_mut(15) {
                for i in 0..15 {
                    if m.get(i / 5, i % 5) {
                        ch[i] = 7.5;
                    }
                }
            }
        }
        assert!(buf.iter().any(|&v| v != 0.0));
        let mut p = ZeroPool::new();
        p.give_back(buf, Dirty::Positions { masks: masks.into(), channels });
        p.drain();
        let (b, ready) = p.take(60);
        assert!(ready && b.iter().all(|&v| v == 0.0));
    }
}
