//! Progress lines on stderr for runs long enough to look stuck, at most one every few seconds
//! so short runs print nothing extra.

use std::time::{Duration, Instant};

const EVERY: Duration = Duration::from_secs(3);

pub struct Progress {
    what: &'static str,
    last: Instant,
}

impl Progress {
    pub fn new(what: &'static str) -> Progress {
        Progress { what, last: Instant::now() }
    }

    /// Reports `msg` if the last report is long enough ago.
    pub fn tick(&mut self, msg: impl FnOnce() -> String) {
        if self.last.elapsed() >= EVERY {
            self.last = Instant::now();
            eprintln!("{}: {}", self.what, msg());
        }
    }
}
