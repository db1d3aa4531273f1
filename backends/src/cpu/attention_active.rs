//! Attention over the active tokens of a binary token mask (A-ViT's halting mask).
//!
//! The graph adds `(M - 1) * c` to the scores (0 on active keys, `-c` on halted ones, c = 1e4
//! in A-ViT). After the softmax subtracts the row maximum, a halted key's weight is
//! `exp(x_j - max)` with `x_j - max` around `-c`: that underflows to exactly 0 in f32 once it is
//! below about -103.97. So for an active query, softmax over all keys equals softmax over the
//! active keys, and the output row is the same up to summation order. The kernel therefore
//! gathers the active rows of q, k and v of each head, runs dense attention on the compacted
//! `[Ta, d]` blocks and scatters the rows back.
//!
//! "Exactly 0" needs the scores of halted keys to sit far enough below the row maximum. The
//! kernel proves it per query row from a cheap bound (|q_i| times the largest halted-key
//! norm) before trusting the compacted row; a row it cannot prove (huge activations, NaN,
//! a small `c`) is recomputed over all keys with the graph's bias, so the result never
//! depends on the claim. In A-ViT halted keys are zero vectors (qkv is multiplied by the mask),
//! so the proof reduces to `max_i > -c + 110` and always holds.

use super::attention::{exp_normalise, query_block, run_items, scale_bias_max, AttnShape, RowBias};
use super::gemm_util::{sgemm, with_scratch, with_scratch2, Layout, SendPtr};
use super::input;
use super::kernel_util::{err, f32_data, multiversion};
use dynaspa_runtime::backend::TensorSpec;
use dynaspa_runtime::graph::{Attention, ScoreScale};
use dynaspa_runtime::{Result, Tensor};
use std::sync::atomic::{AtomicUsize, Ordering};

/// How far below the row maximum (in the exponent) every halted key must be for its weight to
/// be exactly 0: f32 exp underflows to 0 below about -103.97; the rest is slack for rounding.
const UNDERFLOW_MARGIN: f64 = 110.0;

/// The active tokens (mask value 1) of each batch item of a `[batch, tokens]` mask, in
/// increasing order, ready for [`attention_active`]. Values other than 0 and 1 are an error:
/// the kernel's equivalence with the dense graph holds only for a binary mask.
pub fn active_tokens(mask: &[f32], batch: usize, tokens: usize) -> Result<Vec<Vec<u32>>> {
    if Some(mask.len()) != batch.checked_mul(tokens) {
        return err(format!("token mask has {} values, expected {batch} x {tokens}", mask.len()));
    }
    if tokens > u32::MAX as usize {
        return err(format!("{tokens} tokens do not fit the u32 token indices"));
    }
    let mut lists = Vec::with_capacity(batch);
    for (b, row) in mask.chunks(tokens.max(1)).take(batch).enumerate() {
        let mut l = Vec::new();
        for (t, &m) in row.iter().enumerate() {
            if m == 1.0 {
                l.push(t as u32);
            } else if m != 0.0 {
                return err(format!("token mask value {m} at [{b}, {t}] is not 0 or 1"));
            }
        }
        lists.push(l);
    }
    lists.resize(batch, Vec::new());
    Ok(lists)
}

fn check_lists(active: &[&[u32]], batch: usize, t: usize) -> Result<()> {
    if active.len() != batch {
        return err(format!("attention_active: {} active-token lists for a batch of {batch}", active.len()));
    }
    for (b, l) in active.iter().enumerate() {
        if let Some(w) = l.windows(2).find(|w| w[0] >= w[1]) {
            return err(format!("attention_active: active tokens of batch {b} are not strictly increasing ({} then {})", w[0], w[1]));
        }
        if let Some(&last) = l.last() {
            if last as usize >= t {
                return err(format!("attention_active: active token {last} of batch {b} is out of range for {t} tokens"));
            }
        }
    }
    Ok(())
}

/// Attention of the active queries over the active keys, for the bias `(M - 1) * c` of a binary
/// token mask `M` whose ones are `active[b]` (strictly increasing token indices per batch item;
/// see [`active_tokens`]).
///
/// Contract:
/// - `s.tq == s.tk` (queries and keys are the same tokens) and the graph's bias is exactly
///   `(M - 1) * c` broadcast over heads and queries: the kernel does not read the bias, it
///   rebuilds it from `active` and `c` where it needs it.
/// - Writes exactly the output rows `out[b, h, t, :]` of active tokens `t`, each equal (within
///   rounding) to the dense graph's row. Rows of inactive tokens are **not written**: the caller
///   zero-fills them or knows they are don't-care (in A-ViT they reach `proj`, whose output is
///   multiplied by the mask).
/// - A batch item with no active token writes nothing.
///
/// Returns how many rows could not be proven equal on the compacted keys and were recomputed
/// over all keys (0 on A-ViT's data).
#[allow(clippy::too_many_arguments)]
pub fn attention_active(
    s: &AttnShape,
    scale: ScoreScale,
    c: f32,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    active: &[&[u32]],
    out: &mut [f32],
) -> Result<usize> {
    s.check("attention_active", q, k, v, out)?;
    if s.tq != s.tk {
        return err(format!("attention_active: needs as many queries as keys, has {} and {}", s.tq, s.tk));
    }
    if !(c.is_finite() && c > 0.0) {
        return err(format!("attention_active: key mask factor {c} must be finite and positive"));
    }
    let &AttnShape { batch, heads, tk: t, dk, dv, .. } = s;
    check_lists(active, batch, t)?;
    let bh_n = batch * heads;
    // Compacted k then v of every head, batch items in order.
    let mut offs = Vec::with_capacity(batch + 1);
    offs.push(0usize);
    for l in active {
        offs.push(offs.last().unwrap() + heads * l.len() * (dk + dv));
    }
    let total = offs[batch];
    let max_ta = active.iter().map(|l| l.len()).max().unwrap_or(0);
    if max_ta == 0 || dv == 0 {
        return Ok(0);
    }
    if active.iter().all(|l| l.len() == t) {
        // Nothing to compact: the dense kernel with the all-zero bias of a full mask.
        let zero = super::attention::ScoreBias { data: &[0.0], dims: [1; 4] };
        super::attention::attention_dense(s, scale, q, k, v, Some(zero), out)?;
        return Ok(0);
    }
    let qb = query_block(max_ta, bh_n);
    let items: Vec<(usize, usize)> =
        (0..bh_n).flat_map(|bh| (0..active[bh / heads].len().div_ceil(qb)).map(move |blk| (bh, blk * qb))).collect();
    let macs: usize = active.iter().map(|l| heads * l.len() * l.len() * (dk + dv)).sum();
    let fallbacks = AtomicUsize::new(0);
    with_scratch2(total + bh_n, |buf| {
        let (compact, kin) = buf.split_at_mut(total);
        let (cp, kp) = (SendPtr::new(compact), SendPtr::new(kin));
        // Gathering is cheap next to the products: it follows their choice of threading.
        run_items(bh_n, macs, |bh| {
            let l = active[bh / heads];
            let ta = l.len();
            let at = offs[bh / heads] + (bh % heads) * ta * (dk + dv);
            // SAFETY: each head owns its region of `compact` and its slot of `kin`.
            let (kc, vc, ks) = unsafe {
                let r = std::slice::from_raw_parts_mut(cp.get().add(at), ta * (dk + dv));
                let (kc, vc) = r.split_at_mut(ta * dk);
                (kc, vc, &mut *kp.get().add(bh))
            };
            *ks = gather_keys(s, l, &k[bh * t * dk..(bh + 1) * t * dk], kc);
            let vh = &v[bh * t * dv..];
            for (dst, &tok) in vc.chunks_exact_mut(dv).zip(l) {
                dst.copy_from_slice(&vh[tok as usize * dv..(tok as usize + 1) * dv]);
            }
        });
        let (compact, kin): (&[f32], &[f32]) = (compact, kin);
        let outp = SendPtr::new(out);
        run_items(items.len(), macs, |it| {
            let (bh, r0) = items[it];
            let l = active[bh / heads];
            let ta = l.len();
            let rows = qb.min(ta - r0);
            let at = offs[bh / heads] + (bh % heads) * ta * (dk + dv);
            let (kc, vc) = compact[at..at + ta * (dk + dv)].split_at(ta * dk);
            let qh = &q[bh * t * dk..(bh + 1) * t * dk];
            let toks = &l[r0..r0 + rows];
            with_scratch(rows * (dk + ta + dv), |sc| {
                let (qc, rest) = sc.split_at_mut(rows * dk);
                let (sco, o) = rest.split_at_mut(rows * ta);
                for (dst, &tok) in qc.chunks_exact_mut(dk.max(1)).zip(toks) {
                    dst.copy_from_slice(&qh[tok as usize * dk..(tok as usize + 1) * dk]);
                }
                if dk == 0 {
                    sco.fill(0.0);
                } else {
                    // SAFETY: `sco` is this task's rows x ta buffer.
                    unsafe { sgemm(rows, ta, dk, 1.0, qc, Layout::row_major(dk), kc, Layout::col_major(dk), sco.as_mut_ptr(), ta, false) };
                }
                let mut redo = Vec::new();
                for (i, row) in sco.chunks_exact_mut(ta).enumerate() {
                    // The graph adds the bias (1 - 1) * c = 0 to active keys; adding it keeps
                    // the expression the same.
                    let max = scale_bias_max(row, scale, RowBias::Same(0.0));
                    if !halted_keys_vanish(max, &qc[i * dk..(i + 1) * dk], kin[bh], scale, c) {
                        redo.push(i);
                    }
                    exp_normalise(row, max);
                }
                // SAFETY: `o` is this task's rows x dv buffer.
                unsafe { sgemm(rows, dv, ta, 1.0, sco, Layout::row_major(ta), vc, Layout::row_major(dv), o.as_mut_ptr(), dv, false) };
                for (i, (src, &tok)) in o.chunks_exact(dv).zip(toks).enumerate() {
                    // SAFETY: the row of token `tok` in head `bh` is written by this item alone.
                    let dst = unsafe { std::slice::from_raw_parts_mut(outp.get().add((bh * t + tok as usize) * dv), dv) };
                    if redo.contains(&i) {
                        dense_row(s, scale, c, l, &qh[tok as usize * dk..], &k[bh * t * dk..], &v[bh * t * dv..], dst);
                    } else {
                        dst.copy_from_slice(src);
                    }
                }
                fallbacks.fetch_add(redo.len(), Ordering::Relaxed);
            });
        });
    });
    Ok(fallbacks.into_inner())
}

/// Copies the active keys of one head into `kc` (`[ta, dk]`) and returns the largest Euclidean
/// norm of an inactive key, or -inf when every key is active.
fn gather_keys(s: &AttnShape, active: &[u32], kh: &[f32], kc: &mut [f32]) -> f32 {
    let (t, dk) = (s.tk, s.dk);
    for (i, &tok) in active.iter().enumerate() {
        let dst = &mut kc[i * dk..(i + 1) * dk];
        if s.k_transposed {
            dst.iter_mut().enumerate().for_each(|(p, d)| *d = kh[p * t + tok as usize]);
        } else {
            dst.copy_from_slice(&kh[tok as usize * dk..(tok as usize + 1) * dk]);
        }
    }
    let mut next = active.iter().peekable();
    let mut worst = f32::NEG_INFINITY;
    let mut col = Vec::new();
    for tok in 0..t {
        if next.peek().is_some_and(|&&a| a as usize == tok) {
            next.next();
            continue;
        }
        let n2 = if s.k_transposed {
            col.clear();
            col.extend((0..dk).map(|p| kh[p * t + tok]));
            sq_norm(&col)
        } else {
            sq_norm(&kh[tok * dk..(tok + 1) * dk])
        };
        // NaN must stay visible: `f32::max` would drop it.
        worst = if n2.is_nan() || worst.is_nan() { f32::NAN } else { worst.max(n2) };
    }
    if worst == f32::NEG_INFINITY {
        return f32::NEG_INFINITY;
    }
    worst.sqrt()
}

multiversion! {
/// Sum of squares in f32 lanes: overflow gives inf and NaN stays NaN, both of which send the
/// row to the all-keys path; the rounding (dk ulps at most) is inside the bound's slack.
fn sq_norm(x: &[f32]) -> f32 {
    let mut acc = [0.0f32; 16];
    let mut chunks = x.chunks_exact(16);
    for c in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += v * v;
        }
    }
    let tail: f32 = chunks.remainder().iter().map(|v| v * v).sum();
    acc.iter().sum::<f32>() + tail
}
}

/// Whether every halted key of a query row gets softmax weight exactly 0 in the dense graph,
/// given the row's maximum over active keys: every halted score is at most
/// `|scale| |q| max|k_halted| - c` (Cauchy-Schwarz), with slack for the rounding of the dot
/// product, of the norms and of the bias addition. NaN anywhere answers false.
fn halted_keys_vanish(max: f32, q: &[f32], kin: f32, scale: ScoreScale, c: f32) -> bool {
    if kin == f32::NEG_INFINITY {
        return true;
    }
    let qn = (sq_norm(q) as f64).sqrt();
    let bound = scale.magnitude() * qn * kin as f64;
    // Dot products and norms in f32 are off by at most ~len ulps, relatively.
    let slack = 1e-3 + 4.0 * q.len() as f64 * f32::EPSILON as f64;
    let halted_max = bound * (1.0 + slack) + 1e-3 - c as f64 * (1.0 - 1e-6);
    (max as f64) - halted_max >= UNDERFLOW_MARGIN
}

/// One query row over all keys with the graph's bias (0 on active keys, -c on the others):
/// what the dense graph computes, for rows the compacted kernel cannot prove equal.
#[allow(clippy::too_many_arguments)]
fn dense_row(s: &AttnShape, scale: ScoreScale, c: f32, active: &[u32], q: &[f32], kh: &[f32], vh: &[f32], out: &mut [f32]) {
    let (t, dk, dv) = (s.tk, s.dk, s.dv);
    let mut row = vec![0.0f32; t];
    if dk > 0 {
        // SAFETY: `row` is a private 1 x t buffer.
        unsafe { sgemm(1, t, dk, 1.0, &q[..dk], Layout::row_major(dk), kh, s.kt_layout(), row.as_mut_ptr(), t, false) };
    }
    // (m - 1) * c exactly as the graph rounds it: 0 * c and -1 * c.
    let bias: Vec<f32> = (0..t as u32).map(|j| if active.binary_search(&j).is_ok() { 0.0 } else { -c }).collect();
    let max = scale_bias_max(&mut row, scale, RowBias::Row(&bias));
    exp_normalise(&mut row, max);
    // SAFETY: `out` is this row's own dv elements.
    unsafe { sgemm(1, dv, t, 1.0, &row, Layout::row_major(t), vh, Layout::row_major(dv), out.as_mut_ptr(), dv, false) };
}

/// Runs an `Attention` node that carries a key mask (`op.key_mask`, token mask as input 4) over
/// its active tokens only. Checks that the bias (input 3) really is `(M - 1) * c` and that `M`
/// is binary, then returns the output with the rows of inactive tokens set to 0 (the dense
/// node computes them, but they are don't-care wherever the graph multiplies the next op's
/// output by `M`, which is for the caller to know), and the count of rows recomputed densely.
pub fn attention_node_active(op: &Attention, ins: &[Option<&Tensor>], out: &TensorSpec) -> Result<(Tensor, usize)> {
    const OP: &str = "Attention (active tokens)";
    let Some(km) = op.key_mask else {
        return err(format!("{OP}: the op has no key mask; run the dense kernel"));
    };
    let o = super::attention::node_operands(op, ins, out)?;
    let (b, t) = (o.shape.batch, o.shape.tk);
    let m = f32_data(input(ins, 4, OP)?, OP, "token mask")?;
    let lists = active_tokens(m, b, t)?;
    let bias = o.bias.ok_or_else(|| dynaspa_runtime::Error::Other(format!("{OP}: bias (input 3) is missing")))?;
    if bias.dims != [b, 1, 1, t] {
        return err(format!("{OP}: bias has shape {:?}, a key-mask bias is [{b}, 1, 1, {t}]", bias.dims));
    }
    if let Some((i, (&x, &mv))) = bias.data.iter().zip(m).enumerate().find(|(_, (&x, &mv))| x != (mv - 1.0) * km.c) {
        return err(format!("{OP}: bias value {x} at token {i} is not (M - 1) * {} for M = {mv}", km.c));
    }
    let refs: Vec<&[u32]> = lists.iter().map(|l| l.as_slice()).collect();
    let mut y = super::par::alloc(b * o.shape.heads * o.shape.tq * o.shape.dv, 0.0f32)?;
    let redone = attention_active(&o.shape, op.scale, km.c, o.q, o.k, o.v, &refs, &mut y)?;
    Ok((Tensor::from_f32(out.shape.clone(), y)?, redone))
}
