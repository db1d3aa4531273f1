//! The fused Attention op on one work-group per query row (kernels/attention.cl).

use super::ctx::{int, limit, unsupported, Ctx, LArg};
use super::shapes::broadcast_strides;
use crate::gpu::device::GpuDevice;
use crate::gpu::kernels::{Src, ATTENTION_WG};
use dynaspa_runtime::graph::{Attention, ScoreScale};
use dynaspa_runtime::{DType, Result};

pub(crate) fn attention<D: GpuDevice>(cx: &mut Ctx<D>, a: &Attention) -> Result<()> {
    for i in 0..4 {
        if cx.has_input(i) && cx.in_dtype(i)? != DType::F32 {
            return unsupported(format!("Attention on {}", cx.in_dtype(i)?));
        }
    }
    let (qs, ks, vs) = (cx.in_shape(0)?, cx.in_shape(1)?, cx.in_shape(2)?);
    if qs.len() != 4 || ks.len() != 4 || vs.len() != 4 {
        return unsupported(format!("Attention of q {qs:?}, k {ks:?}, v {vs:?}"));
    }
    let (b, h, tq, dk) = (qs[0], qs[1], qs[2], qs[3]);
    let (tk, kdk) = if a.k_transposed { (ks[3], ks[2]) } else { (ks[2], ks[3]) };
    let dv = vs[3];
    if ks[..2] != qs[..2] || vs[..2] != qs[..2] || kdk != dk || vs[2] != tk || cx.out_shape(0) != [b, h, tq, dv] {
        return unsupported(format!("Attention of q {qs:?}, k {ks:?}, v {vs:?}"));
    }
    if b * h * tq * dv == 0 {
        return Ok(());
    }
    // The scores of one row stay in local memory, next to the reduction scratch.
    let tk_max = tk.next_power_of_two().max(64);
    let local = 4 * (tk_max + ATTENTION_WG as usize) as u64;
    let have = cx.dev.info().local_mem_bytes;
    if have > 0 && local > have {
        return limit(format!("Attention over {tk} keys needs {local} bytes of local memory, the device has {have}"));
    }
    let (skj, skd) = if a.k_transposed { (1, tk) } else { (dk, 1) };
    let (mode, scale) = match a.scale {
        ScoreScale::Mul(s) => (0, s),
        ScoreScale::Div(d) => (1, d),
    };
    let (has_bias, sb) = if cx.has_input(3) {
        let bs = cx.in_shape(3)?;
        let full = [b, h, tq, tk];
        if bs.len() > 4 || bs.iter().rev().zip(full.iter().rev()).any(|(&d, &f)| d != 1 && d != f) {
            return unsupported(format!("Attention bias of shape {bs:?} for scores {full:?}"));
        }
        (1, broadcast_strides(bs, 4))
    } else {
        (0, vec![0; 4])
    };
    let (q, k, v, y) = (cx.x(0)?, cx.x(1)?, cx.x(2)?, cx.y(0)?);
    let bias = cx.x_or_dummy(3)?;
    let mut args = vec![LArg::Buf(q), LArg::Buf(k), LArg::Buf(v), LArg::Buf(bias), LArg::Buf(y)];
    for (x, what) in [(h, "heads"), (tq, "queries"), (tk, "keys"), (dk, "key width"), (dv, "value width"), (skj, "stride"), (skd, "stride")]
    {
        args.push(LArg::I32(int(x, what)?));
    }
    args.extend([LArg::I32(mode), LArg::F32(scale), LArg::I32(has_bias)]);
    for s in sb {
        args.push(LArg::I32(int(s as usize, "bias stride")?));
    }
    let kern = cx.kernel(Src::Attention, "attention_f32", &[("WG", ATTENTION_WG as i64), ("TK_MAX", tk_max as i64)])?;
    cx.launch(kern, [tq, b * h, 1], [ATTENTION_WG, 1, 1], args)
}
