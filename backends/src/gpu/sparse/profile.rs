//! The PolyKernels a tuned profile gives the GPU's PolyKernel ops (sparse convs and token
//! projections), checked against what this device's kernels run.

use crate::gpu::device::DeviceInfo;
use crate::gpu::dtype::Precision;
use crate::gpu::sparse_conv::knobs::GpuLimits;
use crate::gpu::sparse_conv::schedule::{member_schedule, SparseConvSchedule};
use crate::gpu::sparse_conv::select::{runs_sparse, sparse_conv_dims};
use crate::gpu::token::poly::member_knobs;
use crate::gpu::token::select::runs_token_projection;
use crate::SparseConfig;
use dynaspa_runtime::dispatch::PolyKernel;
use dynaspa_runtime::graph::Graph;
use dynaspa_runtime::profile::OpSignature;
use std::collections::HashMap;

/// What a profile gives the sparse convs of one executable: per node, the PolyKernel to use
/// instead of calibrating, and why the whole profile was refused, if it was.
#[derive(Default)]
pub(crate) struct ProfileUse {
    pub polys: HashMap<String, PolyKernel>,
    pub refused: Option<String>,
}

/// The PolyKernels `cfg.profile` holds for the sparse convs and token projections of `g` on
/// this device: none when
/// the profile was made for another device or backend (refused with a warning naming both),
/// none with a member forced; per op, only when every member is a schedule this device's
/// kernels run (else that op is calibrated, with a warning naming the member and the reason).
pub(crate) fn profile_polys(info: &DeviceInfo, backend: &str, g: &Graph, cfg: &SparseConfig, precision: Precision) -> ProfileUse {
    let mut out = ProfileUse::default();
    let Some(p) = cfg.profile.as_deref() else { return out };
    if cfg.force.is_some() {
        tracing::info!("a member is forced: the profile's PolyKernels are not used");
        return out;
    }
    if let Err(e) = p.check_device(backend, &crate::gpu::dtype::fingerprint_at(info, precision), &info.name) {
        tracing::warn!("{e}; ignoring the profile and calibrating instead");
        out.refused = Some(e.to_string());
        return out;
    }
    let limits = GpuLimits::of(info);
    for n in &g.nodes {
        let (conv, token) = (runs_sparse(g, n).then(|| sparse_conv_dims(g, n)).flatten(), token_projection(g, n));
        if conv.is_none() && token.is_none() {
            continue;
        }
        let mut sig = OpSignature::of(g, n);
        if token.is_some() {
            // The tuner signs the graph's MatMul (rows and weight); the bias folded in here is
            // not part of it.
            sig.inputs.truncate(2);
        }
        let Some(poly) = p.poly_for(&n.name, &sig) else {
            tracing::info!(node = %n.name, "not in the profile; calibrating");
            continue;
        };
        let runs = match (conv, token) {
            (Some((kind, cout, k)), _) => {
                // The dense member's defaults need the launch (its split depends on the grid);
                // any schedule stands in for the check of the sparse members and explicit dense
                // knobs.
                let dense = SparseConvSchedule::for_op(cout, k, None);
                poly.members().iter().try_for_each(|m| member_schedule(kind, cout, k, dense, &m.schedule, &limits).map(|_| ()))
            }
            (None, Some((t, f))) => member_knobs(poly, t, f, &limits).map(|_| ()),
            (None, None) => continue,
        };
        match runs {
            Ok(()) => {
                tracing::debug!(node = %n.name, "PolyKernel from the profile");
                out.polys.insert(n.name.clone(), poly.clone());
            }
            Err(e) => tracing::warn!(node = %n.name, "profile's PolyKernel cannot run here ({e}); calibrating"),
        }
    }
    out
}

/// Tokens and output features of `n` when it is a token projection the GPU runs as a
/// PolyKernel op (`token/lower.rs`).
fn token_projection(g: &Graph, n: &dynaspa_runtime::graph::Node) -> Option<(usize, usize)> {
    if !runs_token_projection(g, n) {
        return None;
    }
    let y = &g.values[*n.outputs.first()?].shape;
    (y.len() >= 2).then(|| (y[y.len() - 2], y[y.len() - 1]))
}
