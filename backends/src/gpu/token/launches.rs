//! The token kernels' launches that the lowering, the projections' PolyKernel members and their
//! timer share: the mask's compaction (token_compact) and the token GEMM (token_gemm_f32).

use super::knobs as token_knobs;
use crate::gpu::device::{DeviceInfo, GpuDevice, KernelDialect};
use crate::gpu::kernels::Src;
use crate::gpu::lower::ctx::{int, BufId, Ctx, LArg, Launch};
use crate::gpu::sparse::bitmask::bitmask_block;
use crate::gpu::sparse_conv::knobs::GemmKnobs;
use dynaspa_runtime::{Error, Result};

/// token.cl's EARLY_EXIT for `info`'s device: 0 on OpenCL CPU devices (PoCL 3.1 corrupts the
/// host heap when a work-group returns before a barrier; see token.cl), 1 elsewhere.
pub(crate) fn early_exit(info: &DeviceInfo) -> i64 {
    (info.dialect() != KernelDialect::OpenCl || info.kind != "cpu") as i64
}

/// The launch of token_compact reading `mask` (`stride` floats per image, 0: one mask for all)
/// into `meta` (not queued in `cx`).
pub(crate) fn compaction_launch<D: GpuDevice>(
    cx: &mut Ctx<D>,
    mask: BufId,
    meta: BufId,
    tokens: usize,
    stride: usize,
    images: usize,
) -> Result<Launch<D::Kernel>> {
    // The bitmask kernel's work-group: a power of two within the device's limit.
    let block = bitmask_block(cx.dev.info().max_work_group_size);
    let kern = cx.kernel(Src::Token, "token_compact", &[("BLOCK", block as i64)])?;
    let args = vec![
        LArg::Buf(mask),
        LArg::Buf(meta),
        LArg::I32(int(tokens, "tokens")?),
        LArg::I32(int(stride, "mask stride")?),
        LArg::I32(int(images, "images")?),
    ];
    cx.launch(kern, [images, 1, 1], [block, 1, 1], args)?;
    cx.launches.pop().ok_or_else(|| Error::Other("token compaction: the launch was not recorded".into()))
}

/// The operands and extents of one token projection (`token_gemm_f32`'s arguments).
pub(crate) struct TokenGemm {
    pub x: BufId,
    pub w: BufId,
    pub y: BufId,
    pub meta: BufId,
    pub bias: BufId,
    pub has_bias: i32,
    pub act: i32,
    pub images: usize,
    pub t: usize,
    pub k: usize,
    pub n: usize,
}

impl TokenGemm {
    /// Queues token_gemm_f32 with the tile of `knobs` (see `token::knobs`), as the dense
    /// member (every row) or over the active tokens.
    pub(crate) fn launch<D: GpuDevice>(&self, cx: &mut Ctx<D>, knobs: &GemmKnobs, dense: bool) -> Result<()> {
        let args = vec![
            LArg::Buf(self.x),
            LArg::Buf(self.w),
            LArg::Buf(self.y),
            LArg::Buf(self.meta),
            LArg::Buf(self.bias),
            LArg::I32(int(self.t, "tokens")?),
            LArg::I32(int(self.n, "N")?),
            LArg::I32(int(self.k, "K")?),
            LArg::I32(int(self.images, "images")?),
            LArg::I32(self.has_bias),
            LArg::I32(self.act),
            LArg::F32(0.0),
            LArg::F32(0.0),
        ];
        let mut defines = token_knobs::defines(knobs, dense).to_vec();
        defines.push(("EARLY_EXIT", early_exit(cx.dev.info())));
        let kern = cx.kernel(Src::Token, "token_gemm_f32", &defines)?;
        // The kernel's tile is the knobs' transposed: TN tokens down, TM features across.
        let groups = [self.n.div_ceil(knobs.tm as usize), self.t.div_ceil(knobs.tn as usize), self.images];
        cx.launch(kern, groups, [knobs.tm / knobs.wm, knobs.tn / knobs.wn, 1], args)
    }
}
