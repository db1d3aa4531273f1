//! `FillPolicy::Residual`: a sparse conv with a fused residual join, whose inactive outputs are
//! the residual through the conv's activation.

use dynaspa_runtime::graph::{Activation, Op};
use dynaspa_runtime::sparsity::BitMask;
use dynaspa_runtime::{Error, Result};

fn act_of(op: &Op) -> Option<Activation> {
    match op {
        Op::Conv(c) => c.activation,
        _ => None,
    }
}

/// The output buffer a sparse member starts from: `act(r)` everywhere (the kernel then
/// overwrites the active positions).
pub(crate) fn start_buffer(op: &Op, r: &[f32]) -> Result<Vec<f32>> {
    let mut out = Vec::new();
    out.try_reserve_exact(r.len()).map_err(|_| Error::Other(format!("cannot allocate {} floats for a residual fill", r.len())))?;
    // A copy and an in-place pass with the activation chosen once: a per-element match on the
    // activation did not vectorise and cost ~1 ns per value (25 µs on a 64x18x24 map).
    out.extend_from_slice(r);
    if let Some(a) = act_of(op) {
        crate::cpu::kernel_util::epilogue(&mut out, 0.0, None, Some(a));
    }
    Ok(out)
}

/// After the dense member (which computed `act(conv + r)` everywhere): inactive positions of
/// each `[C, h, w]` image become `act(r)`.
pub(crate) fn fill_inactive(op: &Op, out: &mut [f32], r: &[f32], masks: &[BitMask]) -> Result<()> {
    if out.len() != r.len() || masks.is_empty() || !out.len().is_multiple_of(masks.len()) {
        return Err(Error::Other(format!("residual fill: output {} and residual {} values disagree", out.len(), r.len())));
    }
    let act = act_of(op);
    let per = out.len() / masks.len();
    for (img, m) in masks.iter().enumerate() {
        let plane = m.len();
        if plane == 0 || !per.is_multiple_of(plane) {
            return Err(Error::Other(format!("residual fill: mask of {plane} positions for an image of {per} values")));
        }
        let inactive: Vec<usize> = (0..plane).filter(|&i| !m.get(i / m.width(), i % m.width())).collect();
        let (o, r) = (&mut out[img * per..][..per], &r[img * per..][..per]);
        for (oc, rc) in o.chunks_exact_mut(plane).zip(r.chunks_exact(plane)) {
            for &i in &inactive {
                oc[i] = act.map_or(rc[i], |a| a.apply(rc[i]));
            }
        }
    }
    Ok(())
}
