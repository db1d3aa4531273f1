//! Elementwise ops over a change map (delta mode): the plane inputs gathered at the map's
//! positions, the op evaluated on the gathered values alone, the results written into the op's
//! last output, which keeps every other position.

use super::DenseEval;
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::sparsity::BitMask;
use dynaspa_runtime::{DType, Result, Tensor};

/// Work per gathered position against per position of the whole op, as the dispatch tables
/// weigh them: gathering each plane input and scattering the result about doubles the memory
/// traffic of a position (measured on GauGAN's SPADE blocks, `run --reference --nodes`).
pub(crate) const GATHERED_COST: f64 = 2.0;

/// `[start, end)` runs of the set positions of `mask` (one image's plane).
pub(crate) fn runs(mask: &BitMask) -> Vec<(usize, usize)> {
    let mut r = Vec::new();
    mask.for_each_run(|s, e| r.push((s, e)));
    r
}

/// The op on the positions of `runs` only: `ins` whose plane is `plane` positions are gathered
/// to `[1, C, 1, K]`, the others (per-channel operands, parameters, scalars) pass as they are;
/// the results are written at those positions of `out` (`[1, C, plane]`, the last output).
pub(crate) fn eval_on_runs(
    ins: &[Option<&Tensor>],
    runs: &[(usize, usize)],
    plane: usize,
    out: &mut [f32],
    dense: DenseEval,
) -> Result<()> {
    let k: usize = runs.iter().map(|(s, e)| e - s).sum();
    if k == 0 {
        return Ok(());
    }
    let gather = |t: &Tensor| -> Result<Tensor> {
        let x = t.as_f32()?;
        let c = x.len() / plane;
        let mut g = Vec::with_capacity(c * k);
        for ch in x.chunks_exact(plane) {
            for &(s, e) in runs {
                g.extend_from_slice(&ch[s..e]);
            }
        }
        Tensor::from_f32(vec![1, c, 1, k], g)
    };
    let is_plane = |t: &Tensor| t.rank() == 4 && t.dtype() == DType::F32 && t.shape()[2] * t.shape()[3] == plane && t.shape()[0] == 1;
    let gathered: Vec<Option<Tensor>> = ins.iter().map(|t| t.filter(|t| is_plane(t)).map(gather).transpose()).collect::<Result<_>>()?;
    let args: Vec<Option<&Tensor>> = ins.iter().zip(&gathered).map(|(t, g)| g.as_ref().or(*t)).collect();
    let c = out.len() / plane;
    let spec = TensorSpec { dtype: DType::F32, shape: vec![1, c, 1, k] };
    let y = dense(&args, Some(&spec))?;
    let y = y.as_f32()?;
    for (ch, dst) in y.chunks_exact(k).zip(out.chunks_exact_mut(plane)) {
        let mut at = 0;
        for &(s, e) in runs {
            dst[s..e].copy_from_slice(&ch[at..at + e - s]);
            at += e - s;
        }
    }
    Ok(())
}
