//! Token-sparse ops (kernels/token.cl): projections and attention over the active tokens of
//! an in-graph token mask. The first such op reading a mask (per view root, image count and
//! token count) launches the compaction that later ops of the frame reuse, and every launch is
//! sized by the token count, the kernels skipping (and zeroing) what lies past the device-side
//! active count. Projections are PolyKernel ops (`token::poly`): the frame picks a
//! member from the active counts, read back behind the previous frame like DISTile counts.

use super::knobs as token_knobs;
use super::launches::{compaction_launch, early_exit, TokenGemm};
use super::poly::lower_token_linear;
use super::select::{keys_proven_zero, TokenActs};
use crate::gpu::device::{GpuDevice, KernelDialect};
use crate::gpu::kernels::{Src, ATTENTION_WG};
use crate::gpu::lower::ctx::{int, limit, unsupported, BufId, Ctx, LArg, Launch};
use crate::gpu::sparse::step::Frames;
use crate::gpu::sparse_conv::knobs::GpuLimits;
use crate::SparseConfig;
use dynaspa_runtime::dispatch::PolyKernel;
use dynaspa_runtime::graph::{Attention, Op, ScoreScale, SparseSpec, ValueId};
use dynaspa_runtime::{Error, Result, Tensor, TensorData};

/// token.cl's KN_LANES: work-items per key in its key-norm pass.
const KEY_NORM_LANES: usize = 8;

/// Work-groups per head of the key-norm pass over `tokens` keys (token.cl's token_key_norms:
/// one per KN_KEYS keys); one on wgpu, whose twin walks a head's keys in one work-group.
pub(crate) fn key_norm_parts(info: &crate::gpu::device::DeviceInfo, tokens: usize) -> usize {
    if info.dialect() == KernelDialect::Wgsl {
        1
    } else {
        tokens.div_ceil(ATTENTION_WG as usize / KEY_NORM_LANES).max(1)
    }
}

/// token.cl's QB and KC for token_attention_tiled_f32: query rows per work-group, keys per
/// staged chunk. DeiT-S (197 tokens, dk = dv = 64) takes 19,744 bytes of local memory, within
/// the 32 KiB of Adreno GPUs.
pub(crate) const TILED_QB: usize = 8;
const TILED_KC: usize = 32;

/// TK_MAX of both attention kernels for `tokens` keys: a power of two, at least 64.
fn attention_tk_max(tokens: usize) -> usize {
    tokens.next_power_of_two().max(64)
}

/// The extents token_attention_tiled_f32 is built for: TK_MAX (as the row kernel's) and DMAX,
/// the wider of dk and dv rounded up to a power of two, at least 16 (so the work-group covers
/// its QB rows) and at most the work-group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TiledAttention {
    pub tk_max: usize,
    pub dmax: usize,
}

impl TiledAttention {
    /// For `tokens` keys and widths `dk`, `dv`; None where DMAX would exceed the work-group.
    pub(crate) fn new(tokens: usize, dk: usize, dv: usize) -> Option<TiledAttention> {
        let dmax = dk.max(dv).next_power_of_two().max(16);
        (dmax <= ATTENTION_WG as usize).then(|| TiledAttention { tk_max: attention_tk_max(tokens), dmax })
    }

    pub(crate) fn defines(self) -> [(&'static str, i64); 5] {
        [
            ("WG", ATTENTION_WG as i64),
            ("TK_MAX", self.tk_max as i64),
            ("QB", TILED_QB as i64),
            ("KC", TILED_KC as i64),
            ("DMAX", self.dmax as i64),
        ]
    }

    /// Bytes of local memory the kernel takes (the sum in token.cl).
    pub(crate) fn local_bytes(self) -> u64 {
        let wg = ATTENTION_WG as usize;
        4 * (TILED_QB * (self.tk_max + 1) + TILED_QB * self.dmax + TILED_KC * (self.dmax + 1) + 2 * wg + 4 * TILED_QB) as u64
    }
}

/// The tiled kernel where `info`'s device runs it for these extents; None where the row kernel
/// serves: on wgpu (its WGSL twin is the row kernel), or where the tiled kernel's local memory
/// does not fit (16 KiB assumed where the device does not say). Tiled, DeiT-S's attention ran
/// 2.9x faster than with a work-group per query row at batch 4 and density 0.5 on an H200, and
/// within 1 µs of it at batch 1 (RESULTS.md, "A-ViT's attention, a tiled kernel").
pub(crate) fn tiled_attention(info: &crate::gpu::device::DeviceInfo, tokens: usize, dk: usize, dv: usize) -> Option<TiledAttention> {
    if info.dialect() == KernelDialect::Wgsl {
        return None;
    }
    let tiled = TiledAttention::new(tokens, dk, dv)?;
    let have = if info.local_mem_bytes > 0 { info.local_mem_bytes } else { 16384 };
    (tiled.local_bytes() <= have).then_some(tiled)
}

/// One compaction: the token order and counts of one mask reading.
struct Compaction<K> {
    root: ValueId,
    images: usize,
    tokens: usize,
    stride: usize,
    meta: BufId,
    launch: Launch<K>,
}

/// A lowered token op (benchmarks and tests).
#[derive(Clone, Debug)]
pub struct TokenOpInfo {
    pub node: String,
    /// "linear" or "attention".
    pub kind: &'static str,
    /// An attention launched as token_attention_tiled_f32 (QB query rows per work-group)
    /// rather than the row kernel.
    pub tiled: bool,
    /// Whether this op's launches begin with its mask's compaction (it is the mask's first reader).
    pub compacts: bool,
    /// The attention's inactive keys are proven zero by the graph: no key-norm pass.
    pub keys_zero: bool,
    /// What a projection's launch applies after the product: "" (nothing; the graph's own
    /// nodes follow), "bias, mask" or "bias, gelu, mask" (folded by `fold_epilogues`).
    pub epilogue: &'static str,
}

/// The compactions of an executable and its token ops, in plan order.
pub(crate) struct TokenPlans<K> {
    /// View root of every value (views share their root's buffer and contents).
    roots: Vec<ValueId>,
    /// Activations folded into token projections, by output value.
    acts: TokenActs,
    compactions: Vec<Compaction<K>>,
    pub ops: Vec<TokenOpInfo>,
    /// Per op: its compaction.
    op_compaction: Vec<usize>,
}

impl<K> TokenPlans<K> {
    pub(crate) fn new(roots: Vec<ValueId>, acts: TokenActs) -> TokenPlans<K> {
        TokenPlans { roots, acts, compactions: Vec::new(), ops: Vec::new(), op_compaction: Vec::new() }
    }

    /// The compaction launch of token op `node`'s mask.
    pub(crate) fn compaction_of(&self, node: &str) -> Option<&Launch<K>> {
        let i = self.ops.iter().position(|o| o.node == node)?;
        Some(&self.compactions[self.op_compaction[i]].launch)
    }

    fn push(&mut self, op: TokenOpInfo, compaction: usize) {
        self.ops.push(op);
        self.op_compaction.push(compaction);
    }
}

/// Geometry of a token mask reading: images, tokens, floats per image (0: one mask shared by
/// the batch).
fn mask_geometry<D: GpuDevice>(cx: &Ctx<D>, mask: ValueId, images: usize, tokens: usize) -> Result<usize> {
    let ms = &cx.graph.values[mask].shape;
    let per: usize = ms.iter().product();
    if per == tokens {
        Ok(0)
    } else if per == images * tokens {
        Ok(tokens)
    } else {
        Err(Error::Other(format!("token mask of shape {ms:?} for {images} images of {tokens} tokens")))
    }
}

/// The compaction buffer of `mask` read as images x tokens, launching the compaction first when
/// this op is the mask's first reader.
fn compaction<D: GpuDevice>(
    cx: &mut Ctx<D>,
    plans: &mut TokenPlans<D::Kernel>,
    mask: ValueId,
    images: usize,
    tokens: usize,
) -> Result<(BufId, bool, usize)> {
    let stride = mask_geometry(cx, mask, images, tokens)?;
    let root = plans.roots[mask];
    if let Some(i) = plans.compactions.iter().position(|c| (c.root, c.images, c.tokens, c.stride) == (root, images, tokens, stride)) {
        return Ok((plans.compactions[i].meta, false, i));
    }
    let name = &cx.graph.values[mask].name;
    let mask_buf = cx.res.slot[mask].ok_or_else(|| Error::Other(format!("token mask '{name}' has no buffer")))?;
    let words = images * (tokens + 1);
    // Its own buffer: later ops of the frame read it, so the pool must not hand it out.
    let meta = cx.res.upload(cx.dev, &Tensor::new(vec![words], TensorData::I32(vec![0; words]))?, "token order")?;
    let launch = compaction_launch(cx, mask_buf, meta, tokens, stride, images)?;
    cx.launches.push(launch.clone());
    plans.compactions.push(Compaction { root, images, tokens, stride, meta, launch });
    Ok((meta, true, plans.compactions.len() - 1))
}

/// Lowers the token-sparse `cx.node` (see `token::select::runs_token_sparse`): attention as
/// ordinary launches, projections as PolyKernel ops of `frames` (`tuned`: a profile's).
pub(crate) fn lower_token<D: GpuDevice>(
    cx: &mut Ctx<D>,
    plans: &mut TokenPlans<D::Kernel>,
    frames: &mut Frames<D>,
    spec: &SparseSpec,
    cfg: &SparseConfig,
    tuned: Option<&PolyKernel>,
) -> Result<()> {
    match &cx.node.op {
        Op::MatMul => linear(cx, plans, frames, spec, cfg, tuned),
        Op::Attention(a) => attention(cx, plans, spec, a),
        op => unsupported(format!("token sparsity on {}", op.name())),
    }
}

/// `y[t] = act(x[t] . W (+ bias))` on active rows, 0 on the others.
fn linear<D: GpuDevice>(
    cx: &mut Ctx<D>,
    plans: &mut TokenPlans<D::Kernel>,
    frames: &mut Frames<D>,
    spec: &SparseSpec,
    cfg: &SparseConfig,
    tuned: Option<&PolyKernel>,
) -> Result<()> {
    let xs = cx.in_shape(0)?;
    let ws = cx.in_shape(1)?;
    let r = xs.len();
    if !(2..=3).contains(&r) || ws.len() != 2 || xs[r - 1] != ws[0] {
        return unsupported(format!("a token-sparse MatMul of {xs:?} and {ws:?}"));
    }
    let (images, t, k, n) = (if r == 3 { xs[0] } else { 1 }, xs[r - 2], ws[0], ws[1]);
    let defaults = token_knobs::default_knobs(t, n);
    if let Err(e) = defaults.check(&GpuLimits::of(cx.dev.info())) {
        return limit(format!("the token GEMM's default tile: {e}"));
    }
    int(images * t * k.max(n), "token GEMM extent")?;
    let launches_before = cx.launches.len();
    let (meta, compacts, ci) = compaction(cx, plans, spec.mask, images, t)?;
    // The PolyKernel op's step launches the compaction itself (its counts pick the member).
    let compaction = plans.compactions[ci].launch.clone();
    cx.launches.truncate(launches_before);
    let (bias, has_bias) = if cx.has_input(2) { (cx.x(2)?, 1) } else { (cx.dummy()?, 0) };
    let act = plans.acts.get(&cx.node.outputs[0]).copied().unwrap_or(-1);
    let gemm = TokenGemm { x: cx.x(0)?, w: cx.x(1)?, y: cx.y(0)?, meta, bias, has_bias, act, images, t, k, n };
    lower_token_linear(cx, frames, spec, compaction, &gemm, cfg, tuned)?;
    let epilogue = match (has_bias, act) {
        (0, _) => "",
        (_, -1) => "bias, mask",
        _ => "bias, gelu, mask",
    };
    plans.push(TokenOpInfo { node: cx.node.name.clone(), kind: "linear", tiled: false, compacts, keys_zero: false, epilogue }, ci);
    Ok(())
}

/// Attention of the active queries over the active keys; rows of inactive queries are 0.
fn attention<D: GpuDevice>(cx: &mut Ctx<D>, plans: &mut TokenPlans<D::Kernel>, spec: &SparseSpec, a: &Attention) -> Result<()> {
    let km = a.key_mask.ok_or_else(|| Error::Other("token-sparse attention without a key mask".into()))?;
    let (qs, ks, vs) = (cx.in_shape(0)?, cx.in_shape(1)?, cx.in_shape(2)?);
    if qs.len() != 4 || ks.len() != 4 || vs.len() != 4 {
        return unsupported(format!("token-sparse Attention of q {qs:?}, k {ks:?}, v {vs:?}"));
    }
    let (b, h, t, dk, dv) = (qs[0], qs[1], qs[2], qs[3], vs[3]);
    let tk_max = attention_tk_max(t);
    // Scores and their tokens (TK_MAX each) and the reduction scratch.
    let local = 4 * (2 * tk_max + ATTENTION_WG as usize) as u64;
    let have = cx.dev.info().local_mem_bytes;
    if have > 0 && local > have {
        return limit(format!("Attention over {t} keys needs {local} bytes of local memory, the device has {have}"));
    }
    let (skj, skd) = if a.k_transposed { (1, t) } else { (dk, 1) };
    let (mode, scale) = match a.scale {
        ScoreScale::Mul(s) => (0, s),
        ScoreScale::Div(d) => (1, d),
    };
    // The op's bias is [B, 1, 1, T] (checked by runs_token_sparse): strides along b and j.
    let (sb0, sb3) = (t, 1);
    let (meta, compacts, ci) = compaction(cx, plans, spec.mask, b, t)?;
    let (q, k, v, bias, y) = (cx.x(0)?, cx.x(1)?, cx.x(2)?, cx.x(3)?, cx.y(0)?);
    let keys_zero = keys_proven_zero(cx.graph, cx.node, &plans.roots);
    let defines = [("WG", ATTENTION_WG as i64), ("TK_MAX", tk_max as i64), ("EARLY_EXIT", early_exit(cx.dev.info()))];
    let dims = [(h, "heads"), (t, "tokens"), (dk, "key width")];
    let parts = key_norm_parts(cx.dev.info(), t);
    let kin = if keys_zero {
        cx.dummy()?
    } else {
        let kin = cx.scratch(b * h * parts)?;
        let kern = cx.kernel(Src::Token, "token_key_norms", &defines)?;
        let mut args = vec![LArg::Buf(k), LArg::Buf(meta), LArg::Buf(kin)];
        for (x, what) in dims.into_iter().chain([(skj, "stride"), (skd, "stride"), (b, "images")]) {
            args.push(LArg::I32(int(x, what)?));
        }
        cx.launch(kern, [b * h, parts, 1], [ATTENTION_WG, 1, 1], args)?;
        kin
    };
    let mut args = vec![LArg::Buf(q), LArg::Buf(k), LArg::Buf(v), LArg::Buf(bias), LArg::Buf(y), LArg::Buf(meta), LArg::Buf(kin)];
    for (x, what) in dims.into_iter().chain([(dv, "value width"), (skj, "stride"), (skd, "stride")]) {
        args.push(LArg::I32(int(x, what)?));
    }
    args.extend([
        LArg::I32(mode),
        LArg::F32(scale),
        LArg::F32(a.scale.magnitude() as f32),
        LArg::F32(km.c),
        LArg::I32(keys_zero as i32),
        LArg::I32(int(sb0, "bias stride")?),
        LArg::I32(0),
        LArg::I32(0),
        LArg::I32(sb3),
        LArg::I32(int(b, "images")?),
        LArg::I32(int(parts, "key-norm parts")?),
    ]);
    int(b * h * t * dk.max(dv).max(t), "attention extent")?;
    let tiled = tiled_attention(cx.dev.info(), t, dk, dv);
    if let Some(ta) = tiled {
        let kern = cx.kernel(Src::Token, "token_attention_tiled_f32", &ta.defines())?;
        cx.launch(kern, [t.div_ceil(TILED_QB), b * h, 1], [ATTENTION_WG, 1, 1], args)?;
    } else {
        let kern = cx.kernel(Src::Token, "token_attention_f32", &defines)?;
        cx.launch(kern, [t, b * h, 1], [ATTENTION_WG, 1, 1], args)?;
    }
    let op = TokenOpInfo { node: cx.node.name.clone(), kind: "attention", tiled: tiled.is_some(), compacts, keys_zero, epilogue: "" };
    plans.push(op, ci);
    Ok(())
}
