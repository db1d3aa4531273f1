//! `Schedule`: every knob of one kernel variant.

use crate::sparsity::Granularity;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One kernel variant of an op: its DISTile granularity (`None` for the dense kernel, which
/// ignores the mask) and the backend's other knobs (work per block/thread, channel tiling,
/// staging, unroll, vector width, ...) by name. Knobs are a sorted map so that a schedule's
/// serialised form, and anything keyed by it, is the same whatever order they were set in.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Schedule {
    pub name: String,
    pub granularity: Option<Granularity>,
    #[serde(default)]
    pub knobs: BTreeMap<String, i64>,
}

impl Schedule {
    /// The dense member: computes every position, whatever the mask.
    pub fn dense(name: impl Into<String>) -> Schedule {
        Schedule { name: name.into(), granularity: None, knobs: BTreeMap::new() }
    }

    /// A sparse member computing aligned DISTiles of `g`.
    pub fn sparse(name: impl Into<String>, g: Granularity) -> Schedule {
        Schedule { name: name.into(), granularity: Some(g), knobs: BTreeMap::new() }
    }

    pub fn with_knob(mut self, knob: impl Into<String>, value: i64) -> Schedule {
        self.knobs.insert(knob.into(), value);
        self
    }

    pub fn is_dense(&self) -> bool {
        self.granularity.is_none()
    }
}
