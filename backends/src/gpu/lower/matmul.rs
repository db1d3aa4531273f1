//! MatMul (numpy semantics: 1-D operands, broadcast batch dims) and Gemm on the tiled GEMM kernel.

use super::ctx::{int, limit, unsupported, Ctx, LArg};
use super::shapes::broadcast_strides;
use crate::gpu::device::GpuDevice;
use crate::gpu::kernels::{Src, Tile};
use dynaspa_runtime::{DType, Result};

/// One strided GEMM: `C[b] = alpha * A[b] . B[b] (+ beta * bias)`.
pub(crate) struct GemmCall {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub sam: usize,
    pub sak: usize,
    pub sbk: usize,
    pub sbn: usize,
    /// Per batch: element offsets of A, B and C.
    pub offsets: Vec<i32>,
    pub alpha: f32,
    /// (buffer, beta, stride along m, stride along n).
    pub bias: Option<(usize, f32, usize, usize)>,
}

/// Rows (M) up to which, with a reduction of at least `REDUCE_MIN_K`, a GEMM gets a work-group
/// per output (gemm_reduce_f32): the tiled kernel would leave most of each tile's rows empty
/// and run the whole K loop in a few work-groups (a classifier at batch 1).
const REDUCE_MAX_M: usize = 8;
const REDUCE_MIN_K: usize = 256;
/// gemm_reduce_f32's work-group (its GRB).
const REDUCE_BLOCK: u32 = 128;

pub(crate) fn launch_gemm<D: GpuDevice>(cx: &mut Ctx<D>, a: usize, b: usize, c: usize, call: &GemmCall) -> Result<()> {
    let batch = call.offsets.len() / 3;
    if batch == 0 || call.m == 0 || call.n == 0 {
        return Ok(());
    }
    let max_wg = cx.dev.info().max_work_group_size;
    let reduce = call.m <= REDUCE_MAX_M && call.k >= REDUCE_MIN_K && (max_wg == 0 || max_wg >= REDUCE_BLOCK);
    let tile = Tile::for_output(call.m, call.n);
    if !reduce && tile.local_bytes() > cx.dev.info().local_mem_bytes && cx.dev.info().local_mem_bytes > 0 {
        return limit(format!("GEMM tiles need {} bytes of local memory", tile.local_bytes()));
    }
    let kern = if reduce { cx.kernel(Src::Matmul, "gemm_reduce_f32", &[])? } else { cx.kernel(Src::Matmul, "gemm_f32", &tile.defines())? };
    let offs = cx.meta(&call.offsets)?;
    let (bias, has_bias, beta, sbm, sbn) = match call.bias {
        Some((buf, beta, sm, sn)) => (buf, 1, beta, sm, sn),
        None => (cx.dummy()?, 0, 0.0, 0, 0),
    };
    let args = vec![
        LArg::Buf(a),
        LArg::Buf(b),
        LArg::Buf(c),
        LArg::I32(int(call.m, "M")?),
        LArg::I32(int(call.n, "N")?),
        LArg::I32(int(call.k, "K")?),
        LArg::I32(int(call.sam, "stride")?),
        LArg::I32(int(call.sak, "stride")?),
        LArg::I32(int(call.sbk, "stride")?),
        LArg::I32(int(call.sbn, "stride")?),
        LArg::I32(int(call.n, "stride")?),
        LArg::Buf(offs),
        LArg::F32(call.alpha),
        LArg::Buf(bias),
        LArg::I32(has_bias),
        LArg::F32(beta),
        LArg::I32(int(sbm, "stride")?),
        LArg::I32(int(sbn, "stride")?),
        LArg::I32(-1),
        LArg::F32(0.0),
        LArg::F32(0.0),
    ];
    if reduce {
        return cx.launch(kern, [call.n, call.m, batch], [REDUCE_BLOCK, 1, 1], args);
    }
    let groups = [call.n.div_ceil(tile.tn as usize), call.m.div_ceil(tile.tm as usize), batch];
    cx.launch(kern, groups, tile.local(), args)
}

fn check_float<D: GpuDevice>(cx: &Ctx<D>, inputs: usize) -> Result<()> {
    for i in 0..inputs {
        if cx.has_input(i) && cx.in_dtype(i)? != DType::F32 {
            return unsupported(format!("{} on {}", cx.node.op.name(), cx.in_dtype(i)?));
        }
    }
    Ok(())
}

pub(crate) fn matmul<D: GpuDevice>(cx: &mut Ctx<D>) -> Result<()> {
    check_float(cx, 2)?;
    let (sa, sb) = (cx.in_shape(0)?, cx.in_shape(1)?);
    if sa.is_empty() || sb.is_empty() {
        return unsupported("MatMul of a scalar");
    }
    let (m, k, a_batch) = if sa.len() == 1 { (1, sa[0], &sa[..0]) } else { (sa[sa.len() - 2], sa[sa.len() - 1], &sa[..sa.len() - 2]) };
    let (kb, n, b_batch) = if sb.len() == 1 { (sb[0], 1, &sb[..0]) } else { (sb[sb.len() - 2], sb[sb.len() - 1], &sb[..sb.len() - 2]) };
    if k != kb {
        return unsupported(format!("MatMul of {sa:?} and {sb:?}"));
    }
    let rank = a_batch.len().max(b_batch.len());
    let batch: Vec<usize> = (0..rank)
        .map(|d| {
            let pick = |s: &[usize]| if d + s.len() >= rank { s[d + s.len() - rank] } else { 1 };
            pick(a_batch).max(pick(b_batch))
        })
        .collect();
    let nb: usize = batch.iter().product();
    let (ast, bst) = (broadcast_strides(a_batch, rank), broadcast_strides(b_batch, rank));
    let mut offsets = Vec::with_capacity(3 * nb);
    for bi in 0..nb {
        let (mut rem, mut oa, mut ob) = (bi, 0i64, 0i64);
        for d in (0..rank).rev() {
            let j = (rem % batch[d]) as i64;
            rem /= batch[d];
            oa += j * ast[d];
            ob += j * bst[d];
        }
        offsets.push(int(oa as usize * m * k, "offset")?);
        offsets.push(int(ob as usize * k * n, "offset")?);
        offsets.push(int(bi * m * n, "offset")?);
    }
    if nb * m * n != cx.out_len(0) {
        return unsupported(format!("MatMul of {sa:?} and {sb:?} into {:?}", cx.out_shape(0)));
    }
    let (a, b, c) = (cx.x(0)?, cx.x(1)?, cx.y(0)?);
    let call = GemmCall { m, n, k, sam: k, sak: 1, sbk: n, sbn: 1, offsets, alpha: 1.0, bias: None };
    launch_gemm(cx, a, b, c, &call)
}

pub(crate) fn gemm<D: GpuDevice>(cx: &mut Ctx<D>, alpha: f32, beta: f32, trans_a: bool, trans_b: bool) -> Result<()> {
    check_float(cx, 3)?;
    let (sa, sb) = (cx.in_shape(0)?, cx.in_shape(1)?);
    if sa.len() != 2 || sb.len() != 2 {
        return unsupported(format!("Gemm of non-2-D operands {sa:?} and {sb:?}"));
    }
    let (m, k) = if trans_a { (sa[1], sa[0]) } else { (sa[0], sa[1]) };
    let (kb, n) = if trans_b { (sb[1], sb[0]) } else { (sb[0], sb[1]) };
    if k != kb {
        return unsupported(format!("Gemm of {sa:?} and {sb:?}"));
    }
    let (sam, sak) = if trans_a { (1, m) } else { (k, 1) };
    let (sbk, sbn) = if trans_b { (1, k) } else { (n, 1) };
    let bias = if cx.has_input(2) && beta != 0.0 {
        let sc = cx.in_shape(2)?;
        if sc.len() > 2 || sc.iter().rev().zip([n, m]).any(|(&d, full)| d != 1 && d != full) {
            return unsupported(format!("Gemm with C of shape {sc:?} for a [{m}, {n}] output"));
        }
        let st = broadcast_strides(sc, 2);
        Some((cx.x(2)?, beta, st[0] as usize, st[1] as usize))
    } else {
        None
    };
    let (a, b, c) = (cx.x(0)?, cx.x(1)?, cx.y(0)?);
    let call = GemmCall { m, n, k, sam, sak, sbk, sbn, offsets: vec![0, 0, 0], alpha, bias };
    launch_gemm(cx, a, b, c, &call)
}
