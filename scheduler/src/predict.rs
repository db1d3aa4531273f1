//! Predicted profiles for devices we cannot measure on: the same spaces and greedy selection,
//! with the roofline's estimates in place of measurements. The profile is marked `predicted`
//! and its fingerprint says so; a backend on a device of that name may use it until the device
//! is tuned for real.

use crate::devices::DeviceDesc;
use crate::masks::MaskSet;
use crate::measure::TunableOp;
use crate::polykernel::{dispatch_table, greedy};
use crate::roofline::estimate_dense;
use crate::search::Candidates;
use crate::tune::{pruned_points, space_for, spread, OpReport, TuneConfig};
use dynaspa_runtime::dispatch::{DispatchTable, Member, PolyKernel, Schedule};
use dynaspa_runtime::graph::Graph;
use dynaspa_runtime::profile::{DeviceId, MaskSetInfo, OpProfile, OpSignature, OpStats, Profile};
use dynaspa_runtime::{Error, Result};

/// The sparse ops of `g` with a tunable geometry, as a measurer of `dev`'s backend would list
/// them: on a GPU only its PolyKernel ops (sparse convs and token projections; the others
/// have no schedule to choose there).
pub fn graph_ops(g: &Graph, dev: &DeviceDesc) -> Vec<TunableOp> {
    let gpu = !dev.cpu_kernels();
    g.nodes
        .iter()
        .filter(|n| n.sparse.is_some() && (!gpu || dynaspa_backends::gpu::runs_polykernel(g, n)))
        .filter_map(|n| {
            Some(TunableOp {
                node: n.name.clone(),
                signature: OpSignature::of(g, n),
                geometry: crate::space::OpGeometry::of(g, n),
                plane: crate::masks::plane(g, n)?,
            })
        })
        .collect()
}

pub fn predict(
    dev: &DeviceDesc,
    ops: &[TunableOp],
    masks: &MaskSet,
    model_name: &str,
    cfg: &TuneConfig,
) -> Result<(Profile, Vec<OpReport>)> {
    let (train, _) = masks.split(cfg.held_out);
    if train.is_empty() {
        return Err(Error::Other(format!("mask set {} has no frames", masks.source)));
    }
    let device = DeviceId { backend: dev.backend.clone(), name: dev.name.clone(), fingerprint: format!("predicted:{}", dev.id) };
    let info = MaskSetInfo { source: masks.source.clone(), frames: masks.frames, tuned_on: train.len(), checksum: masks.checksum() };
    let mut profile = Profile::new(device, model_name, true, "roofline", info);
    let k = cfg.search.k.clamp(1, dynaspa_runtime::dispatch::MAX_MEMBERS);
    let mut reports = vec![];
    for o in ops {
        let (Some(geo), Some(op_masks)) = (o.geometry.clone(), masks.ops.get(&o.node)) else { continue };
        let space = space_for(geo.clone(), dev);
        let raw = space.points().len();
        // Prediction is cheap: keep more than a measured tune would (at least 64).
        let points = pruned_points(&space, dev, op_masks, &train, cfg.prune_fraction, cfg.min_keep.max(64));
        let frames = spread(&train, 32);
        let mut c = Candidates::new(&space, points.clone(), dev, op_masks);
        let times: Vec<Vec<f64>> = (0..points.len()).map(|i| frames.iter().map(|&f| c.estimate(i, f).1.total * 1e6).collect()).collect();
        let dense_us = estimate_dense(&geo, dev).total * 1e6;
        let dense = vec![dense_us; frames.len()];
        let sel = greedy(&times, &dense, k - 1);
        let mut members =
            vec![Member { schedule: Schedule::dense("dense"), table: DispatchTable::constant((dense_us * 1e3).round() / 1e3)? }];
        for &s in &sel {
            let g = space.granularity(&points[s]);
            let pts = frames.iter().enumerate().map(|(fi, &f)| (op_masks[f].count_aligned_tiles(g) as u32, times[s][fi])).collect();
            members.push(Member { schedule: space.schedule(&points[s]), table: dispatch_table(pts, 6)? });
        }
        let poly = PolyKernel::new(members)?;
        let poly_mean_us = crate::polykernel::objective(&sel, &times, &dense);
        reports.push(OpReport {
            node: o.node.clone(),
            signature: o.signature.short(),
            space: raw,
            candidates: points.len(),
            schedules_measured: 0,
            measurements: 0,
            dense_us,
            poly_mean_us,
            members: poly.members().iter().map(|m| m.schedule.name.clone()).collect(),
        });
        profile.ops.push(OpProfile {
            node: o.node.clone(),
            signature: o.signature.clone(),
            poly,
            stats: Some(OpStats { dense_us, poly_mean_us, schedules_measured: 0, measurements: 0 }),
        });
    }
    Ok((profile, reports))
}
