//! Dense scaled dot-product attention, the kernel of the fused `Attention` op:
//! `out = softmax(scale(q . k^T) + bias) . v` per (batch, head), the softmax over keys with the
//! row maximum subtracted first, as the unfused graph's Softmax does.
//!
//! Work is split over (batch, head, block of query rows). Each block computes its scores with
//! one GEMM into a per-thread buffer, turns them into probabilities in place and multiplies by
//! `v` with a second GEMM straight into its rows of the output, so the `[T, T]` score matrix of
//! a head never exists in full and blocks never share an output element.

use super::gemm_util::{sgemm, threads, with_scratch, Layout, SendPtr};
use super::input;
use super::kernel_util::{err, f32_data, multiversion};
use super::mathf::exp_f32;
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::graph::shape_attention;
use dynaspa_runtime::graph::{Attention, ScoreScale};
use dynaspa_runtime::{Result, Tensor};
use rayon::prelude::*;

/// Geometry of one attention call. Tensors are contiguous row-major:
/// q `[batch, heads, tq, dk]`, k `[batch, heads, tk, dk]` (`[batch, heads, dk, tk]` when
/// `k_transposed`), v `[batch, heads, tk, dv]`, out `[batch, heads, tq, dv]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttnShape {
    pub batch: usize,
    pub heads: usize,
    pub tq: usize,
    pub tk: usize,
    pub dk: usize,
    pub dv: usize,
    pub k_transposed: bool,
}

impl AttnShape {
    /// Checks the operand lengths against the geometry (with overflow-safe products).
    pub(crate) fn check(&self, what: &str, q: &[f32], k: &[f32], v: &[f32], out: &[f32]) -> Result<()> {
        let bh = self.batch.checked_mul(self.heads);
        let len = |a: usize, b: usize| bh.and_then(|x| x.checked_mul(a)).and_then(|x| x.checked_mul(b));
        for (name, got, want) in [
            ("q", q.len(), len(self.tq, self.dk)),
            ("k", k.len(), len(self.tk, self.dk)),
            ("v", v.len(), len(self.tk, self.dv)),
            ("out", out.len(), len(self.tq, self.dv)),
        ] {
            if Some(got) != want {
                return err(format!("{what}: {name} has {got} elements, {self:?} needs {want:?}"));
            }
        }
        Ok(())
    }

    /// Layout of head `bh`'s `k^T` (`dk x tk`) inside its slice of k.
    pub(crate) fn kt_layout(&self) -> Layout {
        if self.k_transposed {
            Layout::row_major(self.tk)
        } else {
            Layout::col_major(self.dk)
        }
    }
}

/// An additive bias broadcast over the scores `[batch, heads, tq, tk]`: `dims` is its shape
/// padded with leading ones to rank 4; every dim is 1 or the scores' size.
#[derive(Clone, Copy, Debug)]
pub struct ScoreBias<'a> {
    pub data: &'a [f32],
    pub dims: [usize; 4],
}

/// The bias of one score row: a row of `tk` values, or one value for every key.
#[derive(Clone, Copy)]
pub(crate) enum RowBias<'a> {
    None,
    Row(&'a [f32]),
    Same(f32),
}

/// Element strides of a validated bias, 0 along broadcast dims.
#[derive(Clone, Copy)]
struct BiasIndex<'a> {
    data: &'a [f32],
    strides: [usize; 4],
}

impl<'a> BiasIndex<'a> {
    fn new(b: &ScoreBias<'a>, s: &AttnShape) -> Result<BiasIndex<'a>> {
        let full = [s.batch, s.heads, s.tq, s.tk];
        if b.dims.iter().zip(&full).any(|(&d, &f)| d != 1 && d != f) {
            return err(format!("Attention: bias of shape {:?} does not broadcast to the scores {full:?}", b.dims));
        }
        let n = b.dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        if n != Some(b.data.len()) {
            return err(format!("Attention: bias has {} elements, its shape {:?} needs {n:?}", b.data.len(), b.dims));
        }
        let mut strides = [0; 4];
        let mut acc = 1;
        for i in (0..4).rev() {
            strides[i] = if b.dims[i] == 1 { 0 } else { acc };
            acc *= b.dims[i];
        }
        Ok(BiasIndex { data: b.data, strides })
    }

    fn row(&self, b: usize, h: usize, i: usize, tk: usize) -> RowBias<'a> {
        let at = b * self.strides[0] + h * self.strides[1] + i * self.strides[2];
        if self.strides[3] == 0 {
            RowBias::Same(self.data[at])
        } else {
            RowBias::Row(&self.data[at..at + tk])
        }
    }
}

multiversion! {
/// `row = scale(row) + bias` in place; returns the row's maximum. Like the unfused Softmax the
/// maximum skips NaN (`f32::max`); a NaN score still poisons its row through exp.
pub(crate) fn scale_bias_max(row: &mut [f32], scale: ScoreScale, bias: RowBias) -> f32 {
    match (scale, bias) {
        (ScoreScale::Mul(s), RowBias::Row(b)) => row.iter_mut().zip(b).for_each(|(x, &c)| *x = *x * s + c),
        (ScoreScale::Div(d), RowBias::Row(b)) => row.iter_mut().zip(b).for_each(|(x, &c)| *x = *x / d + c),
        (ScoreScale::Mul(s), RowBias::Same(c)) => row.iter_mut().for_each(|x| *x = *x * s + c),
        (ScoreScale::Div(d), RowBias::Same(c)) => row.iter_mut().for_each(|x| *x = *x / d + c),
        // Multiplying by 1.0 is exact, so the unscaled chain needs no special case.
        (ScoreScale::Mul(s), RowBias::None) => row.iter_mut().for_each(|x| *x *= s),
        (ScoreScale::Div(d), RowBias::None) => row.iter_mut().for_each(|x| *x /= d),
    }
    max_lanes(row)
}
}

#[inline(always)]
fn max_lanes(row: &[f32]) -> f32 {
    let mut m = [f32::NEG_INFINITY; 16];
    let mut chunks = row.chunks_exact(16);
    for c in &mut chunks {
        for (a, &x) in m.iter_mut().zip(c) {
            *a = a.max(x);
        }
    }
    let tail = chunks.remainder().iter().copied().fold(f32::NEG_INFINITY, f32::max);
    m.iter().copied().fold(tail, f32::max)
}

/// Exponents below this give weights under f32's smallest normal (e^-87.3 = 1.2e-38); they are
/// flushed to 0. The polynomial exp would reach them through denormal arithmetic, which costs
/// ~100x on x86: with A-ViT's -1e4 on halted keys that made the dense kernel 5x slower.
const EXP_FLUSH: f32 = -87.0;

#[inline(always)]
fn weight(x: f32, max: f32) -> f32 {
    let d = x - max;
    let e = exp_f32(d.max(EXP_FLUSH));
    if d < EXP_FLUSH {
        0.0
    } else if d.is_nan() {
        d
    } else {
        e
    }
}

multiversion! {
/// `row = exp(row - max) / sum`, the second half of a max-subtracted softmax.
pub(crate) fn exp_normalise(row: &mut [f32], max: f32) {
    let mut s = [0.0f32; 16];
    let mut chunks = row.chunks_exact_mut(16);
    for c in &mut chunks {
        for (a, x) in s.iter_mut().zip(c.iter_mut()) {
            *x = weight(*x, max);
            *a += *x;
        }
    }
    let mut sum = 0.0f32;
    for x in chunks.into_remainder() {
        *x = weight(*x, max);
        sum += *x;
    }
    let sum = s.iter().sum::<f32>() + sum;
    let inv = 1.0 / sum;
    row.iter_mut().for_each(|x| *x *= inv);
}
}

/// Below this many multiply-adds one call runs on the calling thread: waking the pool costs
/// about as much as the whole computation.
pub(crate) const PAR_MIN_MACS: usize = 1 << 17;

/// Query rows per work item: enough items for every thread (4 per thread when the heads
/// allow), rows in multiples of 8 for the GEMM microkernel, at most 128 so a block's scores
/// stay in L2.
pub(crate) fn query_block(rows: usize, groups: usize) -> usize {
    let per_group = (4 * threads()).div_ceil(groups.max(1));
    rows.div_ceil(per_group).next_multiple_of(8).clamp(8, 128)
}

/// Runs `f(item)` for every item, on the pool when the work is large enough.
pub(crate) fn run_items(items: usize, macs: usize, f: impl Fn(usize) + Sync) {
    if threads() == 1 || items <= 1 || macs < PAR_MIN_MACS {
        (0..items).for_each(f);
    } else {
        (0..items).into_par_iter().with_max_len(1).for_each(&f);
    }
}

/// Dense attention over every query and key. `out` is fully written.
#[allow(clippy::too_many_arguments)]
pub fn attention_dense(
    s: &AttnShape,
    scale: ScoreScale,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    bias: Option<ScoreBias>,
    out: &mut [f32],
) -> Result<()> {
    s.check("Attention", q, k, v, out)?;
    let bias = bias.map(|b| BiasIndex::new(&b, s)).transpose()?;
    let &AttnShape { batch, heads, tq, tk, dk, dv, .. } = s;
    if out.is_empty() {
        return Ok(());
    }
    if tk == 0 {
        // Probabilities over no keys times no values: an empty sum.
        out.fill(0.0);
        return Ok(());
    }
    let bh_n = batch * heads;
    let qb = query_block(tq, bh_n);
    let blocks = tq.div_ceil(qb);
    let kl = s.kt_layout();
    let outp = SendPtr::new(out);
    let macs = bh_n.saturating_mul(tq).saturating_mul(tk).saturating_mul(dk + dv);
    run_items(bh_n * blocks, macs, |it| {
        let (bh, r0) = (it / blocks, (it % blocks) * qb);
        let rows = qb.min(tq - r0);
        with_scratch(rows * tk, |sc| {
            if dk == 0 {
                sc.fill(0.0);
            } else {
                let qa = &q[(bh * tq + r0) * dk..];
                // SAFETY: `sc` is this task's own rows x tk buffer.
                unsafe { sgemm(rows, tk, dk, 1.0, qa, Layout::row_major(dk), &k[bh * tk * dk..], kl, sc.as_mut_ptr(), tk, false) };
            }
            for (i, row) in sc.chunks_exact_mut(tk).enumerate() {
                let rb = bias.map_or(RowBias::None, |b| b.row(bh / heads, bh % heads, r0 + i, tk));
                let max = scale_bias_max(row, scale, rb);
                exp_normalise(row, max);
            }
            // SAFETY: rows r0..r0+rows of head bh belong to this item alone.
            unsafe {
                let o = outp.get().add((bh * tq + r0) * dv);
                sgemm(rows, dv, tk, 1.0, sc, Layout::row_major(tk), &v[bh * tk * dv..], Layout::row_major(dv), o, dv, false)
            };
        });
    });
    Ok(())
}

/// The operands of an `Attention` node as slices, with the geometry checked against the op.
pub(crate) struct NodeOperands<'a> {
    pub shape: AttnShape,
    pub q: &'a [f32],
    pub k: &'a [f32],
    pub v: &'a [f32],
    pub bias: Option<ScoreBias<'a>>,
}

pub(crate) fn node_operands<'a>(op: &Attention, ins: &[Option<&'a Tensor>], out: &TensorSpec) -> Result<NodeOperands<'a>> {
    const OP: &str = "Attention";
    let (q, k, v) = (input(ins, 0, OP)?, input(ins, 1, OP)?, input(ins, 2, OP)?);
    let [batch, heads, tq, tk, dk, dv] =
        shape_attention::dims(op, q.shape(), k.shape(), v.shape()).map_err(|e| dynaspa_runtime::Error::Other(format!("{OP}: {e}")))?;
    if out.shape != [batch, heads, tq, dv] {
        return err(format!("{OP}: output shape {:?} must be [{batch}, {heads}, {tq}, {dv}]", out.shape));
    }
    let bias = match ins.get(3).copied().flatten() {
        None => None,
        Some(b) => {
            let bs = b.shape();
            if bs.len() > 4 {
                return err(format!("{OP}: bias (input 3) has rank {}, at most 4 is allowed", bs.len()));
            }
            let mut dims = [1; 4];
            dims[4 - bs.len()..].copy_from_slice(bs);
            Some(ScoreBias { data: f32_data(b, OP, "bias")?, dims })
        }
    };
    let shape = AttnShape { batch, heads, tq, tk, dk, dv, k_transposed: op.k_transposed };
    Ok(NodeOperands { shape, q: f32_data(q, OP, "q")?, k: f32_data(k, OP, "k")?, v: f32_data(v, OP, "v")?, bias })
}

/// `eval_op` for `Op::Attention`: the dense kernel (the token mask, input 4, is not needed:
/// the bias already holds it).
pub(crate) fn attention(op: &Attention, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<Tensor> {
    let o = node_operands(op, ins, out)?;
    let mut y = super::par::alloc(o.shape.batch * o.shape.heads * o.shape.tq * o.shape.dv, 0.0f32)?;
    attention_dense(&o.shape, op.scale, o.q, o.k, o.v, o.bias, &mut y)?;
    Tensor::from_f32(out.shape.clone(), y)
}
