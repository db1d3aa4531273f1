//! Dense convs through the device's vendor library (cuDNN on CUDA) where it is faster than our
//! kernels. Per conv shape and device the two are timed once at compile time (interleaved,
//! median of several samples) and the decision is remembered for the process, so a model with
//! repeated shapes (ResNet-50) times each shape once; with a cache directory
//! (`SparseConfig::cache_dir`) it is remembered on disk too, so a later start neither races
//! nor, where our kernels won, plans the vendor's convs. `VendorPolicy::Always` skips the race.
//!
//! The vendor computes either the whole op (bias, residual and ReLU fused, where it fuses them)
//! or the bare conv into a scratch buffer, after which `sparse_conv_finish_f32` as a one-split pass
//! adds what the vendor did not: bias, residual, activation and, for a sparse op's dense
//! member, the masked store that leaves inactive positions to the fill policy.

use super::ctx::replay_launches;
use super::ctx::{int, BufId, Ctx, LArg, Launch};
use super::elementwise::activation_code;
use super::geom::geom;
use crate::gpu::device::{GpuDevice, VendorConvDesc, VendorFused, VendorPolicy};
use crate::gpu::kernels::Src;
use crate::gpu::sparse::meta::MetaLayout;
use crate::gpu::sparse_conv::schedule::SparseConvSchedule;
use dynaspa_runtime::graph::{Activation, Conv};
use dynaspa_runtime::{DType, Result, Tensor};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// Work-items per group of the epilogue pass (sparse_conv_finish_f32's).
const EPILOGUE_WG: u32 = 64;
/// Timing of one candidate: warm-up runs, then samples of `RUNS` launches each, interleaved
/// with the other candidates' samples.
const WARMUP: usize = 2;
const SAMPLES: usize = 7;
const RUNS: usize = 4;

/// The mask metadata of a sparse op's dense member: its store skips inactive positions.
pub(crate) type Mask<'a> = Option<(BufId, &'a MetaLayout)>;

/// Per (device, conv, policy): the label of the vendor candidate that won, or `None` for ours.
static DECISIONS: Mutex<Option<HashMap<String, Option<String>>>> = Mutex::new(None);

/// The disk memo's kind for these decisions (`disk_memo`).
const MEMO: &str = "vendor-race";

/// The decision for `key`: this process's, else one an earlier process left in `dir`.
fn remembered(key: &str, dir: Option<&std::path::Path>) -> Option<Option<String>> {
    if let Some(d) = DECISIONS.lock().ok().and_then(|d| d.as_ref()?.get(key).cloned()) {
        return Some(d);
    }
    let answer = crate::disk_memo::read(dir?, MEMO, key)?;
    let choice = match answer.as_str() {
        "ours" => None,
        other => Some(other.strip_prefix("vendor ")?.to_string()),
    };
    if let Ok(mut d) = DECISIONS.lock() {
        d.get_or_insert_with(HashMap::new).insert(key.to_string(), choice.clone());
    }
    Some(choice)
}

fn remember(key: String, choice: Option<String>, dir: Option<&std::path::Path>) {
    if let Some(dir) = dir {
        let answer = choice.as_ref().map_or_else(|| "ours".to_string(), |l| format!("vendor {l}"));
        crate::disk_memo::write(dir, MEMO, &key, &answer);
    }
    if let Ok(mut d) = DECISIONS.lock() {
        d.get_or_insert_with(HashMap::new).insert(key, choice);
    }
}

/// Our kernels' sources as one hash, part of a race's key: a race remembered on disk is void
/// once they change (a build with faster kernels races again).
fn kernels_hash() -> u64 {
    static HASH: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *HASH.get_or_init(|| {
        use crate::cache_dir::{fnv1a, FNV_OFFSET};
        Src::ALL.iter().fold(FNV_OFFSET, |h, s| fnv1a(h, s.source().as_bytes()))
    })
}

/// Forgets this process's decisions for the device of `fingerprint`, as a new process would
/// not know them (tests of the disk memo; other devices' decisions stay for tests beside).
#[cfg(test)]
pub(crate) fn forget_in_memory(fingerprint: &str) {
    if let Some(d) = DECISIONS.lock().ok().as_mut().and_then(|d| d.as_mut()) {
        d.retain(|k, _| !k.starts_with(fingerprint));
    }
}

/// One way to compute the op: its label (`None`: our kernels), launches and the vendor
/// workspace bytes they use.
struct Candidate<K> {
    label: Option<String>,
    launches: Vec<Launch<K>>,
    workspace: usize,
}

/// Lowers the dense conv `cx.node` (a sparse op's dense member with `mask`) into `cx.launches`:
/// `ours` appends our kernels' launches; the vendor's replace them where the policy and the
/// timing say so. Returns the vendor label when the vendor's run.
pub(crate) fn lower_dense<D: GpuDevice>(
    cx: &mut Ctx<D>,
    p: &Conv,
    mask: Mask,
    ours: &mut dyn FnMut(&mut Ctx<D>) -> Result<()>,
) -> Result<Option<String>> {
    let policy = cx.res.vendor_policy;
    let desc = match policy {
        VendorPolicy::Never => None,
        _ => describe(cx, p)?,
    };
    let Some(desc) = desc else {
        ours(cx)?;
        return Ok(None);
    };
    let (act, _, _) = activation_code(p.activation);
    let key = format!(
        "{}|{}|kernels {:016x}|{desc:?}|bias {}|residual {}|act {act}|masked {}|{policy:?}",
        cx.dev.info().fingerprint(),
        cx.dev.vendor_library().unwrap_or_default(),
        kernels_hash(),
        cx.has_input(2),
        p.fused_add,
        mask.is_some()
    );
    let before = cx.launches.len();
    let memo = cx.res.memo_dir.clone();
    let known = remembered(&key, memo.as_deref());
    if let Some(None) = known {
        ours(cx)?;
        return Ok(None);
    }
    let mut cands = vendor_candidates(cx, p, &desc, mask)?;
    if let Some(Some(label)) = &known {
        if let Some(i) = cands.iter().position(|c| c.label.as_ref() == Some(label)) {
            let c = cands.swap_remove(i);
            cx.res.need_workspace(c.workspace);
            cx.launches.extend(c.launches);
            return Ok(c.label);
        }
    }
    if policy == VendorPolicy::Timed {
        let ours_result = ours(cx);
        let launches = cx.launches.split_off(before);
        match ours_result {
            Ok(()) => cands.push(Candidate { label: None, launches, workspace: 0 }),
            // Where only the vendor runs the conv, it runs it.
            Err(e) if cands.is_empty() => return Err(e),
            Err(e) => tracing::debug!(node = %cx.node.name, "our kernels cannot run this conv ({e}); the vendor's can"),
        }
    }
    if cands.is_empty() {
        remember(key, None, memo.as_deref());
        ours(cx)?;
        return Ok(None);
    }
    let pick = if cands.len() == 1 { 0 } else { fastest(cx, p, mask, &cands)? };
    let c = cands.swap_remove(pick);
    tracing::debug!(node = %cx.node.name, choice = c.label.as_deref().unwrap_or("ours"), "dense conv implementation chosen");
    remember(key, c.label.clone(), memo.as_deref());
    cx.res.need_workspace(c.workspace);
    cx.launches.extend(c.launches);
    Ok(c.label)
}

/// The conv as the vendor takes it, or `None` for one it is not asked about (not 2-D, not
/// float, grouping that does not divide, a size past 32-bit ints).
fn describe<D: GpuDevice>(cx: &Ctx<D>, p: &Conv) -> Result<Option<VendorConvDesc>> {
    for i in 0..cx.node.inputs.len() {
        if cx.has_input(i) && cx.in_dtype(i)? != DType::F32 {
            return Ok(None);
        }
    }
    let (xs, ws, os) = (cx.in_shape(0)?, cx.in_shape(1)?, cx.out_shape(0));
    if xs.len() != 4 || ws.len() != 4 || os.len() != 4 || xs[0] != os[0] {
        return Ok(None);
    }
    let Ok(g) = geom("Conv", &p.window, xs, os, &ws[2..]) else { return Ok(None) };
    let groups = p.group;
    if groups == 0 || xs[1] % groups != 0 || os[1] % groups != 0 || ws[1] * groups != xs[1] || ws[0] != os[1] {
        return Ok(None);
    }
    if cx.has_input(2) && cx.in_shape(2)?.iter().product::<usize>() != os[1] {
        return Ok(None);
    }
    if p.fused_add && cx.in_shape(3)? != os {
        return Ok(None);
    }
    let elems = |s: &[usize]| s.iter().product::<usize>();
    if elems(os) == 0 || [elems(xs), elems(ws), elems(os)].iter().any(|&e| e > i32::MAX as usize) {
        return Ok(None);
    }
    Ok(Some(VendorConvDesc {
        n: xs[0],
        cin: xs[1],
        h: g.input[1],
        w: g.input[2],
        cout: os[1],
        oh: g.output[1],
        ow: g.output[2],
        kernel: [g.kernel[1], g.kernel[2]],
        stride: [g.stride[1], g.stride[2]],
        pad: [g.pad[1], g.pad[2]],
        dilation: [g.dil[1], g.dil[2]],
        groups,
        fused: None,
        precision: cx.res.precision,
    }))
}

/// The vendor's ways to compute the op: the bare conv (then our epilogue pass where the op
/// has bias, residual, activation or a mask), and the conv with bias, residual and ReLU or
/// identity fused (unmasked ops only). Each is run once here; one that fails is dropped.
fn vendor_candidates<D: GpuDevice>(cx: &mut Ctx<D>, p: &Conv, desc: &VendorConvDesc, mask: Mask) -> Result<Vec<Candidate<D::Kernel>>> {
    let (has_bias, has_res) = (cx.has_input(2), p.fused_add);
    let needs_epilogue = has_bias || has_res || p.activation.is_some();
    let (x, w, y) = (cx.x(0)?, cx.x(1)?, cx.y(0)?);
    let mut out = Vec::new();
    let raw = if needs_epilogue || mask.is_some() { cx.scratch(desc.n * desc.cout * desc.oh * desc.ow)? } else { y };
    for v in cx.dev.vendor_convs(desc, &cx.res.bufs[x], &cx.res.bufs[w], &cx.res.bufs[raw])? {
        let dummy = cx.dummy()?;
        let ws = cx.res.workspace(cx.dev, v.workspace)?.unwrap_or(dummy);
        let args = vec![LArg::Buf(x), LArg::Buf(w), LArg::Buf(dummy), LArg::Buf(dummy), LArg::Buf(raw), LArg::Buf(ws)];
        let at = cx.launches.len();
        cx.launch(std::sync::Arc::new(v.kernel), [1, 1, 1], [1, 1, 1], args)?;
        let mut label = v.label;
        if raw != y {
            launch_epilogue(cx, p, desc, raw, y, mask)?;
            label.push_str(" + epilogue");
        }
        let launches = cx.launches.split_off(at);
        out.push(Candidate { label: Some(label), launches, workspace: v.workspace });
    }
    let relu = match p.activation {
        None => false,
        Some(Activation::Relu) => true,
        Some(_) => return Ok(keep_working(cx, out)),
    };
    if mask.is_none() && needs_epilogue {
        let fused = VendorConvDesc { fused: Some(VendorFused { residual: has_res, relu }), ..desc.clone() };
        let vs = cx.dev.vendor_convs(&fused, &cx.res.bufs[x], &cx.res.bufs[w], &cx.res.bufs[y])?;
        if !vs.is_empty() {
            let bias = if has_bias { cx.x(2)? } else { cx.float_data(&vec![0.0; desc.cout], "zero bias")? };
            let z = if has_res { cx.x(3)? } else { y };
            for v in vs {
                let dummy = cx.dummy()?;
                let ws = cx.res.workspace(cx.dev, v.workspace)?.unwrap_or(dummy);
                let args = vec![LArg::Buf(x), LArg::Buf(w), LArg::Buf(bias), LArg::Buf(z), LArg::Buf(y), LArg::Buf(ws)];
                let at = cx.launches.len();
                cx.launch(std::sync::Arc::new(v.kernel), [1, 1, 1], [1, 1, 1], args)?;
                let launches = cx.launches.split_off(at);
                out.push(Candidate { label: Some(v.label), launches, workspace: v.workspace });
            }
        }
    }
    Ok(keep_working(cx, out))
}

/// The candidates that run: each is launched once, and one the vendor refuses at run time
/// (an algorithm that does not take the fused form, say) is dropped with a note.
fn keep_working<D: GpuDevice>(cx: &Ctx<D>, cands: Vec<Candidate<D::Kernel>>) -> Vec<Candidate<D::Kernel>> {
    cands
        .into_iter()
        .filter(|c| match replay_launches(cx.dev, &cx.res.bufs, &c.launches).and_then(|_| cx.dev.finish()) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(node = %cx.node.name, "{} does not run here, left out: {e}", c.label.as_deref().unwrap_or("ours"));
                false
            }
        })
        .collect()
}

/// sparse_conv_finish_f32 over the vendor's raw output `raw` into `y`: bias, residual, activation,
/// and the masked store of a dense member.
fn launch_epilogue<D: GpuDevice>(cx: &mut Ctx<D>, p: &Conv, d: &VendorConvDesc, raw: BufId, y: BufId, mask: Mask) -> Result<()> {
    let dummy = cx.dummy()?;
    let bias = cx.x_or_dummy(2)?;
    let res = if p.fused_add { cx.x(3)? } else { dummy };
    let (meta, cstride, data0, img_stride) = match mask {
        Some((m, l)) => (m, l.cstride, l.data0, l.img_stride),
        None => (dummy, 0, 0, 0),
    };
    let cap = d.oh * d.ow;
    let mut a = vec![
        LArg::Buf(dummy),
        LArg::Buf(dummy),
        LArg::Buf(bias),
        LArg::Buf(res),
        LArg::Buf(y),
        LArg::Buf(meta),
        LArg::Buf(raw),
        LArg::Buf(dummy),
    ];
    // cin, cout, ih, iw, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw (only cout, oh, ow are read),
    // then the metadata offsets and the column count.
    for v in [0, d.cout, 0, 0, d.oh, d.ow, 0, 0, 0, 0, 0, 0, 0, 0, cstride, 0, data0, img_stride, 0, cap] {
        a.push(LArg::I32(int(v, "epilogue geometry")?));
    }
    let (act, p0, p1) = activation_code(p.activation);
    a.extend([
        LArg::I32(mask.is_some() as i32),
        LArg::I32(cx.has_input(2) as i32),
        LArg::I32(p.fused_add as i32),
        LArg::I32(act),
        LArg::F32(p0),
        LArg::F32(p1),
    ]);
    let kern = cx.kernel(Src::SparseConvGemm, "sparse_conv_finish_f32", &SparseConvSchedule::epilogue_defines())?;
    cx.launch(kern, [cap.div_ceil(EPILOGUE_WG as usize), d.cout, d.n], [EPILOGUE_WG, 1, 1], a)
}

/// Index of the fastest candidate, timed on random inputs (every store of a masked member
/// active): samples of the candidates interleaved, median per candidate.
fn fastest<D: GpuDevice>(cx: &mut Ctx<D>, p: &Conv, mask: Mask, cands: &[Candidate<D::Kernel>]) -> Result<usize> {
    let inputs = if p.fused_add { vec![0usize, 3] } else { vec![0] };
    for i in inputs {
        if cx.constant(i).is_some() {
            continue;
        }
        let b = cx.x(i)?;
        let shape = cx.in_shape(i)?.to_vec();
        let t = crate::cpu::sparse_exec::calibrate::random_tensor(DType::F32, &shape, 0xc0de + i as u64);
        upload_f32(cx, b, &t)?;
    }
    if let Some((meta, l)) = mask {
        // Every mask bit 1: a dense member at density 1, the case it exists for.
        for img in 0..l.images {
            let words = vec![0xffu8; l.words * 4];
            cx.dev.upload(&cx.res.bufs[meta], (l.data0 + img * l.img_stride) * 4, &words)?;
        }
    }
    let (dev, bufs) = (cx.dev, &cx.res.bufs);
    for c in cands {
        for _ in 0..WARMUP {
            replay_launches(dev, bufs, &c.launches)?;
        }
    }
    dev.finish()?;
    let mut times = vec![Vec::with_capacity(SAMPLES); cands.len()];
    for _ in 0..SAMPLES {
        for (c, t) in cands.iter().zip(times.iter_mut()) {
            let t0 = Instant::now();
            for _ in 0..RUNS {
                replay_launches(dev, bufs, &c.launches)?;
            }
            dev.finish()?;
            t.push(t0.elapsed().as_secs_f64() * 1e6 / RUNS as f64);
        }
    }
    let medians: Vec<f64> = times
        .iter_mut()
        .map(|t| {
            t.sort_by(f64::total_cmp);
            t[t.len() / 2]
        })
        .collect();
    let report: Vec<String> =
        cands.iter().zip(&medians).map(|(c, m)| format!("{} {m:.1} us", c.label.as_deref().unwrap_or("ours"))).collect();
    tracing::debug!(node = %cx.node.name, "dense conv timed: {}", report.join(", "));
    Ok(medians.iter().enumerate().min_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i))
}

fn upload_f32<D: GpuDevice>(cx: &Ctx<D>, b: BufId, t: &Tensor) -> Result<()> {
    cx.res.overwrite(cx.dev, b, t, "random operand")
}
