//! Compile time: a `SparseStep` for every sparse node, with its kernel prepared and its
//! PolyKernel calibrated (or read from the cache).

use super::calibrate::{self, Subject};
use super::op_timer::{self, Operands};
use super::{new_step, Kernel, SparseConfig, SparseStep};
use crate::cpu::sparse::{SparseConv, SparseLinear};
use dynaspa_runtime::dispatch::{DispatchTable, Member, PolyKernel, Schedule};
use dynaspa_runtime::graph::delta::region_elementwise;
use dynaspa_runtime::graph::{Graph, MaskKind, Node, Op, SparseSpec};
use dynaspa_runtime::profile::OpSignature;
use dynaspa_runtime::sparsity::{BitMask, Granularity};
use dynaspa_runtime::{Error, Result, Tensor};

/// Granularities the CPU conv members use. Measured with `sparse_ops_bench` on 40x40 maps
/// (benches/RESULTS.md): gathering single positions (1x1) wins at every density from 0.1 to
/// 0.5 for 3x3, 1x1, strided and depthwise convs; 2x8 and 4x4 stay as members for masks whose
/// blobs fill whole tiles, where fewer, longer runs can pay.
const CONV_GRANULARITIES: [Granularity; 3] = [Granularity::new(1, 1), Granularity::new(2, 8), Granularity::new(4, 4)];
/// Token ops gather single rows: a token is the unit of work.
const TOKEN_GRANULARITY: Granularity = Granularity::new(1, 1);

/// Evaluates one node densely on given inputs, as the executor would.
pub(crate) type NodeEval<'a> = &'a dyn Fn(usize, &[Option<&Tensor>]) -> Result<Tensor>;

pub(crate) fn build_steps(g: &Graph, cfg: &SparseConfig, threads: usize, dense: NodeEval) -> Result<Vec<Option<SparseStep>>> {
    let unchecked;
    let cfg = match cfg.profile.as_deref() {
        Some(p) => match p.check_device("cpu", &calibrate::fingerprint(threads), &calibrate::cpu_name()) {
            Ok(()) => cfg,
            Err(e) => {
                tracing::warn!("{e}; ignoring the profile and calibrating instead");
                unchecked = SparseConfig { profile: None, ..cfg.clone() };
                &unchecked
            }
        },
        None => cfg,
    };
    let mut steps = Vec::with_capacity(g.nodes.len());
    let n_sparse = g.nodes.iter().filter(|n| n.sparse.is_some()).count();
    if n_sparse > 0 {
        tracing::info!("preparing {n_sparse} sparse ops");
    }
    for (ni, n) in g.nodes.iter().enumerate() {
        let spec = n.sparse.clone();
        let step = match spec {
            Some(spec) => Some(build(g, ni, n, spec, cfg, threads, dense).map_err(|e| Error::node(&n.name, n.op.name(), e.to_string()))?),
            None => None,
        };
        steps.push(step);
    }
    Ok(steps)
}

fn constant<'a>(g: &'a Graph, n: &Node, i: usize) -> Option<&'a Tensor> {
    n.inputs.get(i).copied().flatten().and_then(|v| g.values[v].constant.as_deref())
}

fn build(g: &Graph, ni: usize, n: &Node, spec: SparseSpec, cfg: &SparseConfig, threads: usize, dense: NodeEval) -> Result<SparseStep> {
    let (kernel, geom) = kernel_for(g, n, spec.kind)?;
    let mask_name = g.values[spec.mask].name.clone();
    let poly = poly_for(g, ni, n, &kernel, geom, cfg, threads, dense)?;
    Ok(new_step(spec, mask_name, kernel, poly, geom, cfg.force))
}

/// The op's sparse kernel (prepared) and its geometry `(images, h, w)` of the mask plane.
pub(crate) fn kernel_for(g: &Graph, n: &Node, kind: MaskKind) -> Result<(Kernel, (usize, usize, usize))> {
    let out = &g.values[n.outputs[0]].shape;
    let in_shape = |i: usize| n.inputs.get(i).copied().flatten().map(|v| g.values[v].shape.clone());
    let x_shape = in_shape(0).ok_or_else(|| Error::Other("sparse op without an input".into()))?;
    Ok(match (&n.op, kind) {
        // Held statistics: the mask is the plane of their input.
        (Op::NormScaleShift { .. }, MaskKind::Spatial) if x_shape.len() == 4 => (Kernel::DenseOnly, (x_shape[0], x_shape[2], x_shape[3])),
        (Op::Conv(p), MaskKind::Spatial) if out.len() == 4 => {
            let k = match constant(g, n, 1) {
                Some(w) => SparseConv::new(p, &x_shape, w, constant(g, n, 2)).map(Kernel::Conv).unwrap_or_else(|e| {
                    tracing::debug!(node = %n.name, "no sparse kernel: {e}");
                    Kernel::DenseOnly
                }),
                None => Kernel::DenseOnly,
            };
            (k, (out[0], out[2], out[3]))
        }
        (Op::MatMul, MaskKind::Token) if (2..=3).contains(&out.len()) && x_shape.len() == out.len() => {
            let k = match constant(g, n, 1) {
                Some(w) if w.rank() == 2 => SparseLinear::new(w, None, None).map(Kernel::Linear).unwrap_or(Kernel::DenseOnly),
                _ => Kernel::DenseOnly,
            };
            let images = if out.len() == 3 { out[0] } else { 1 };
            (k, (images, 1, out[out.len() - 2]))
        }
        (Op::Attention(a), MaskKind::Token) if out.len() == 4 => (Kernel::Attention(a.clone()), (out[0], 1, out[2])),
        (op, MaskKind::Spatial) if out.len() == 4 && out[0] == 1 && region_elementwise(op) => (Kernel::Elementwise, (1, out[2], out[3])),
        (_, MaskKind::Spatial) if out.len() == 4 => (Kernel::DenseOnly, (out[0], out[2], out[3])),
        (_, MaskKind::Token) if out.len() >= 2 => (Kernel::DenseOnly, (if out.len() == 3 { out[0] } else { 1 }, 1, out[out.len() - 2])),
        _ => return Err(Error::Other(format!("sparse annotation on an output of shape {out:?} is not supported"))),
    })
}

/// The op's signature for the calibration cache: kind, attributes and every input shape.
fn signature(g: &Graph, n: &Node) -> String {
    let shapes: Vec<String> = n.inputs.iter().map(|i| i.map_or("-".into(), |v| format!("{:?}", g.values[v].shape))).collect();
    format!("{:?}|{}", n.op, shapes.join(","))
}

#[allow(clippy::too_many_arguments)]
fn poly_for(
    g: &Graph,
    ni: usize,
    n: &Node,
    kernel: &Kernel,
    (images, h, w): (usize, usize, usize),
    cfg: &SparseConfig,
    threads: usize,
    dense: NodeEval,
) -> Result<PolyKernel> {
    let granularities = match kernel {
        Kernel::Conv(_) => CONV_GRANULARITIES.to_vec(),
        Kernel::Linear(_) | Kernel::Attention(_) => vec![TOKEN_GRANULARITY],
        Kernel::DenseOnly => {
            return PolyKernel::new(vec![Member { schedule: Schedule::dense("dense"), table: DispatchTable::constant(1.0)? }]);
        }
        // Cost in positions: the whole plane densely, or each gathered position at a fixed weight.
        Kernel::Elementwise => {
            let plane = (h * w) as u32;
            let at = |n: u32| (n, n as f64 * super::region::GATHERED_COST);
            return PolyKernel::new(vec![
                Member { schedule: Schedule::dense("dense"), table: DispatchTable::constant(plane as f64)? },
                Member { schedule: Schedule::sparse("positions", Granularity::new(1, 1)), table: DispatchTable::new(vec![at(1), at(plane.max(2))])? },
            ]);
        }
    };
    // With a member forced, the tables are never read: skip the measuring.
    if cfg.force.is_some() {
        let mut members = vec![Member { schedule: Schedule::dense("dense"), table: DispatchTable::constant(1.0)? }];
        for gr in granularities {
            members.push(Member { schedule: Schedule::sparse(format!("tiles{gr}"), gr), table: DispatchTable::new(vec![(1, 1.0)])? });
        }
        return PolyKernel::new(members);
    }
    // A tuned profile made on this device replaces calibration for the ops it covers.
    if let Some(p) = cfg.profile.as_deref() {
        match p.poly_for(&n.name, &OpSignature::of(g, n)) {
            Some(poly) if poly.granularities().iter().all(|&gr| op_timer::kernel_supports(kernel, gr)) => {
                tracing::debug!(node = %n.name, "PolyKernel from the profile");
                return Ok(poly.clone());
            }
            Some(_) => {
                tracing::warn!(node = %n.name, "profile's PolyKernel has granularities this op's CPU kernel cannot run; calibrating")
            }
            None => tracing::info!(node = %n.name, "not in the profile; calibrating"),
        }
    }
    let operands = Operands::new(g, n);
    let ins = operands.ins(g, n);
    let out_len: usize = g.values[n.outputs[0]].shape.iter().product();
    let buf = std::cell::RefCell::new(vec![0.0f32; out_len]);
    // The dense member as it runs in a frame: the kernel, then the mask folded into the op.
    let masked = n.sparse.as_ref().is_some_and(|sp| sp.fused_mul);
    let half = calibrate::blob_mask(h, w, 0.5, 11);
    let half_masks = vec![half; images];
    let time_dense = || -> Result<()> {
        let mut out = dense(ni, &ins)?;
        if masked {
            super::apply_mask(&mut out, &half_masks, n.sparse.as_ref().map_or(MaskKind::Spatial, |sp| sp.kind), None)?;
        }
        Ok(())
    };
    let time_sparse = |m: &BitMask, gr: Granularity| -> Result<()> {
        op_timer::run_sparse_member(kernel, g, n, &ins, &mut buf.borrow_mut(), m, gr, (images, h, w))
    };
    let subject = Subject {
        signature: signature(g, n),
        height: h,
        width: w,
        granularities,
        time_dense: &time_dense,
        time_sparse: &time_sparse,
        runs_per_call: 1,
    };
    calibrate::poly_kernel(&subject, threads, cfg.cache_dir.as_deref())
}
