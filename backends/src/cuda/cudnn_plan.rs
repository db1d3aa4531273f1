//! A cuDNN backend-API execution plan and what it was made from: made by `cudnn_graph`, kept
//! per geometry by the handle (`cudnn_handle`), run by the convs planned on it (`cudnn`).

use super::cudnn_lib::{Api, Desc};

/// A finalized execution plan and every descriptor it was made from (kept alive with it: the
/// API does not say a plan copies what it refers to). Owned by the handle, which destroys them
/// (`destroy`) before itself.
pub(crate) struct EnginePlan {
    pub(crate) plan: Desc,
    pub(crate) parts: Vec<Desc>,
    pub(crate) workspace: usize,
    pub(crate) label: String,
}

// SAFETY: a finalized plan is immutable; executions go through the handle's mutex.
unsafe impl Send for EnginePlan {}
unsafe impl Sync for EnginePlan {}

impl EnginePlan {
    /// Destroys the plan, then what it refers to; once, by the handle that keeps it.
    pub(crate) fn destroy(&self, api: &Api) {
        // SAFETY: made by cudnn_graph::search, destroyed once, the plan before what it refers to.
        unsafe {
            (api.backend_destroy)(self.plan);
            for &p in self.parts.iter().rev() {
                (api.backend_destroy)(p);
            }
        }
    }
}
