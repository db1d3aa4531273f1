//! A cuDNN backend-API execution plan and what it was made from: made by `cudnn_graph`, kept
//! per geometry by the handle (`cudnn_handle`), run by the convs planned on it (`cudnn`).

use super::cudnn_lib::{Api, Desc};
use std::ffi::c_int;
use std::fmt;
use std::str::FromStr;

/// Where a plan's engine configuration came from: the heuristics mode queried, its position in
/// that mode's answer, and the engine's global index (checked when the plan is rebuilt from
/// these in a later process). Written and read as three numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EngineOrigin {
    pub(crate) mode: c_int,
    pub(crate) position: usize,
    pub(crate) engine: i64,
}

impl fmt::Display for EngineOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.mode, self.position, self.engine)
    }
}

impl FromStr for EngineOrigin {
    type Err = ();
    fn from_str(s: &str) -> Result<EngineOrigin, ()> {
        let mut it = s.split(' ');
        let mut next = || it.next().ok_or(());
        let origin = EngineOrigin {
            mode: next()?.parse().map_err(|_| ())?,
            position: next()?.parse().map_err(|_| ())?,
            engine: next()?.parse().map_err(|_| ())?,
        };
        if it.next().is_some() {
            return Err(());
        }
        Ok(origin)
    }
}

/// A finalized execution plan and every descriptor it was made from (kept alive with it: the
/// API does not say a plan copies what it refers to). Owned by the handle, which destroys them
/// (`destroy`) before itself.
pub(crate) struct EnginePlan {
    pub(crate) plan: Desc,
    pub(crate) parts: Vec<Desc>,
    pub(crate) workspace: usize,
    pub(crate) label: String,
    pub(crate) origin: EngineOrigin,
}

// SAFETY: a finalized plan is immutable; executions go through the handle's mutex.
unsafe impl Send for EnginePlan {}
unsafe impl Sync for EnginePlan {}

impl EnginePlan {
    /// Destroys the plan, then what it refers to; once, by the handle that keeps it.
    pub(crate) fn destroy(&self, api: &Api) {
        // SAFETY: made by cudnn_graph (search or rebuild), destroyed once, the plan before what it refers to.
        unsafe {
            (api.backend_destroy)(self.plan);
            for &p in self.parts.iter().rev() {
                (api.backend_destroy)(p);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::EngineOrigin;

    #[test]
    fn an_origin_reads_back_as_written_and_nothing_else_reads() {
        let o = EngineOrigin { mode: 2, position: 17, engine: 45 };
        assert_eq!(o.to_string().parse::<EngineOrigin>(), Ok(o));
        for bad in ["", "2 17", "2 17 45 1", "a 17 45", "2 -1 45", "2  17 45"] {
            assert!(bad.parse::<EngineOrigin>().is_err(), "{bad:?}");
        }
    }
}
