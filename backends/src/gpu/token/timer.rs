//! One token projection of a model (A-ViT's qkv, proj, fc1, fc2) run outside a frame, at
//! whatever token GEMM schedule the tuner asks for: the token twin of `sparse_conv::timer`. The op is
//! lowered as the executor lowers it (same operands, same epilogue, same launches from the same
//! knobs) on random rows; a 1 x tokens mask is uploaded and compacted once, then the member is
//! replayed and timed the way calibration times members.

use super::knobs as token_knobs;
use super::launches::{compaction_launch, TokenGemm};
use super::select::TokenActs;
use crate::cpu::sparse_exec::calibrate::random_tensor;
use crate::gpu::device::GpuDevice;
use crate::gpu::dtype::Precision;
use crate::gpu::lower::ctx::{replay_launches, BufId, Ctx, Launch, Resources};
use crate::gpu::sparse::bitmask::mask_floats;
use crate::gpu::sparse::timer::{SparseOpTimer, RUNS_PER_CALL};
use crate::gpu::sparse_conv::knobs::{GemmKnobs, GpuLimits};
use dynaspa_runtime::dispatch::Schedule;
use dynaspa_runtime::graph::Graph;
use dynaspa_runtime::sparsity::BitMask;
use dynaspa_runtime::{DType, Error, Result, Tensor, TensorData};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

pub(crate) struct TokenTimer<D: GpuDevice> {
    dev: Arc<D>,
    graph: Arc<Graph>,
    node: usize,
    res: Resources<D>,
    gemm: TokenGemm,
    limits: GpuLimits,
    mask_buf: BufId,
    compact: Launch<D::Kernel>,
    loaded: Option<BitMask>,
    built: HashMap<(GemmKnobs, bool), Vec<Launch<D::Kernel>>>,
}

impl<D: GpuDevice + 'static> TokenTimer<D> {
    /// The timer of token projection `node` of `graph` (the split graph, with `acts` folded).
    pub(crate) fn new(dev: Arc<D>, graph: Arc<Graph>, acts: &TokenActs, node: usize, precision: Precision) -> Result<TokenTimer<D>> {
        let g = graph.clone();
        let n = &g.nodes[node];
        let shape = |i: usize| n.inputs.get(i).copied().flatten().map(|v| g.values[v].shape.clone());
        let (Some(xs), Some(ws)) = (shape(0), shape(1)) else {
            return Err(Error::Other("a token projection needs rows and a weight".into()));
        };
        let r = xs.len();
        if !(2..=3).contains(&r) || ws.len() != 2 {
            return Err(Error::Other(format!("a token projection of {xs:?} and {ws:?}")));
        }
        let (images, t, k, nout) = (if r == 3 { xs[0] } else { 1 }, xs[r - 2], ws[0], ws[1]);
        let features = crate::gpu::sparse_conv::features::SparseConvFeatures::defaults(dev.info());
        let mut res = Resources::<D>::new(g.values.len(), features, precision);
        let x_val = n.inputs[0].ok_or_else(|| Error::Other("no rows".into()))?;
        // Random rows: timing on zeros or on whatever a fresh buffer holds could take shortcuts
        // real frames do not.
        let xt = random_tensor(DType::F32, &xs, 0x70c5);
        let xb = res.alloc_own(&*dev, xt.len().max(1) * 4)?;
        res.overwrite(&*dev, xb, &xt, "random rows")?;
        res.slot[x_val] = Some(xb);
        let y = res.alloc_own(&*dev, images * t * nout * 4)?;
        res.slot[n.outputs[0]] = Some(y);
        let mask_buf = res.alloc_own(&*dev, t * 4)?;
        let words = images * (t + 1);
        let mut cx = Ctx { dev: &*dev, graph: &g, node: n, res: &mut res, launches: Vec::new(), scratch: Vec::new() };
        let meta = cx.res.upload(cx.dev, &Tensor::new(vec![words], TensorData::I32(vec![0; words]))?, "token order")?;
        let (bias, has_bias) = if cx.has_input(2) { (cx.x(2)?, 1) } else { (cx.dummy()?, 0) };
        let gemm = TokenGemm {
            x: xb,
            w: cx.x(1)?,
            y,
            meta,
            bias,
            has_bias,
            act: acts.get(&n.outputs[0]).copied().unwrap_or(-1),
            images,
            t,
            k,
            n: nout,
        };
        // One mask for every image (stride 0), as calibration and the CPU's timer use.
        let compact = compaction_launch(&mut cx, mask_buf, meta, t, 0, images)?;
        let limits = GpuLimits::of(dev.info());
        Ok(TokenTimer { dev, graph, node, res, gemm, limits, mask_buf, compact, loaded: None, built: HashMap::new() })
    }

    /// The launches of `knobs` (`dense`: the dense member), built on first use.
    fn launches(&mut self, knobs: GemmKnobs, dense: bool) -> Result<&[Launch<D::Kernel>]> {
        if !self.built.contains_key(&(knobs, dense)) {
            let g = self.graph.clone();
            let n = &g.nodes[self.node];
            let mut cx = Ctx { dev: &*self.dev, graph: &g, node: n, res: &mut self.res, launches: Vec::new(), scratch: Vec::new() };
            self.gemm.launch(&mut cx, &knobs, dense)?;
            let l = std::mem::take(&mut cx.launches);
            self.built.insert((knobs, dense), l);
        }
        Ok(&self.built[&(knobs, dense)])
    }
}

impl<D: GpuDevice + 'static> SparseOpTimer for TokenTimer<D> {
    fn node(&self) -> &str {
        &self.graph.nodes[self.node].name
    }

    fn plane(&self) -> (usize, usize) {
        (1, self.gemm.t)
    }

    fn time(&mut self, schedule: Option<&Schedule>, mask: &BitMask) -> Result<f64> {
        if (mask.height(), mask.width()) != (1, self.gemm.t) {
            return Err(Error::Other(format!(
                "node '{}': mask is {}x{}, the op has 1 x {} tokens",
                self.node(),
                mask.height(),
                mask.width(),
                self.gemm.t
            )));
        }
        let (knobs, dense) = match schedule {
            None => (token_knobs::default_knobs(self.gemm.t, self.gemm.n), true),
            Some(s) => (token_knobs::member_knobs(s, self.gemm.t, self.gemm.n, &self.limits).map_err(Error::Other)?, s.is_dense()),
        };
        if self.loaded.as_ref() != Some(mask) {
            self.dev.upload(&self.res.bufs[self.mask_buf], 0, &mask_floats(mask, self.res.precision)?)?;
            replay_launches(&*self.dev, &self.res.bufs, std::slice::from_ref(&self.compact))?;
            self.dev.finish()?;
            self.loaded = Some(mask.clone());
        }
        self.launches(knobs, dense)?;
        let (dev, bufs) = (&*self.dev, &self.res.bufs);
        let member = &self.built[&(knobs, dense)];
        dev.finish()?;
        let t = Instant::now();
        for _ in 0..RUNS_PER_CALL {
            replay_launches(dev, bufs, member)?;
        }
        dev.finish()?;
        Ok(t.elapsed().as_secs_f64() / RUNS_PER_CALL as f64)
    }
}
