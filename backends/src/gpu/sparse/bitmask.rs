//! Host side of bitmask.cl, the kernel every spatially masked op's frame starts from: its
//! work-group size and defines on a device, its launch over one mask reading, and calibration's
//! way of putting a mask on the device and through it (or through a token compaction).

use super::meta::MetaLayout;
use crate::gpu::device::{DeviceInfo, GpuDevice, KernelDialect};
use crate::gpu::dtype::Precision;
use crate::gpu::kernels::Src;
use crate::gpu::lower::ctx::{int, replay_launches, BufId, Ctx, LArg, Launch};
use dynaspa_runtime::sparsity::BitMask;
use dynaspa_runtime::{Error, Result};
use std::cell::RefCell;

/// Work-items of bitmask.cl's one work-group per image (fewer where the device allows fewer).
pub(crate) const BITMASK_BLOCK: u32 = 256;

/// The work-group size of bitmask.cl on this device: a power of two within its limit.
pub(crate) fn bitmask_block(max_work_group: u32) -> u32 {
    let cap = if max_work_group == 0 { BITMASK_BLOCK } else { BITMASK_BLOCK.min(max_work_group) };
    1 << (31 - cap.max(1).leading_zeros())
}

/// Most bytes of local memory bitmask.cl's copy of a mask's packed words may take (a 256x256
/// mask's words); larger masks' tile tests read the words from global memory.
const BITMASK_LOCAL_WORDS_BYTES: u64 = 8192;
/// Local memory bitmask.cl takes per work-item besides the words: two scan ints and
/// PER_ITEM (8) flag bytes.
const BITMASK_LOCAL_BYTES_PER_ITEM: u64 = 16;

/// The defines of bitmask.cl for an h x w mask on `info`'s device: the group size (halved until
/// its scan and flag arrays fit the local memory) and, where the words fit beside
/// them in half the local memory, `LWORDS` (not on wgpu: the WGSL twin has no local copy).
pub(crate) fn bitmask_defines(info: &DeviceInfo, h: usize, w: usize) -> Vec<(&'static str, i64)> {
    let local = info.local_mem_bytes;
    let mut block = bitmask_block(info.max_work_group_size);
    while local > 0 && BITMASK_LOCAL_BYTES_PER_ITEM * block as u64 > local && block > 32 {
        block /= 2;
    }
    let fixed = BITMASK_LOCAL_BYTES_PER_ITEM * block as u64;
    let words = (h * w).div_ceil(32) as u64;
    let room = if local == 0 { BITMASK_LOCAL_WORDS_BYTES } else { (local / 2).saturating_sub(fixed).min(BITMASK_LOCAL_WORDS_BYTES) };
    // BLOCK first: bitmask_launch reads the group size from it.
    let mut d = vec![("BLOCK", block as i64)];
    if info.dialect() != KernelDialect::Wgsl && words > 0 && words * 4 <= room {
        d.push(("LWORDS", words as i64));
    }
    d
}

/// The launch of bitmask.cl reading `mask` (`mask_stride` floats per image) into `meta`, and
/// its counts into `host` too (mapped host memory, `GpuDevice::host_mapped`) where given.
pub(crate) fn bitmask_launch<D: GpuDevice>(
    cx: &mut Ctx<D>,
    mask: usize,
    mask_stride: usize,
    meta: usize,
    grans: usize,
    l: &MetaLayout,
    host: Option<BufId>,
) -> Result<Launch<D::Kernel>> {
    let mut defines = bitmask_defines(cx.dev.info(), l.h, l.w);
    if host.is_some() {
        defines.push(("HOST_COUNTS", 1));
    }
    let block = defines[0].1 as u32;
    if block < 32 {
        return Err(Error::Unsupported(vec![format!("the bitmask kernel needs work-groups of 32 work-items; the device allows {block}")]));
    }
    let kern = cx.kernel(Src::Bitmask, "bitmask_tiles", &defines)?;
    let mut args = vec![LArg::Buf(mask), LArg::Buf(meta), LArg::Buf(grans)];
    for v in [l.h, l.w, mask_stride, l.grans.len(), l.data0, l.img_stride] {
        args.push(LArg::I32(int(v, "mask geometry")?));
    }
    args.extend(host.map(LArg::Buf));
    // A work-group per image and granularity: they run side by side (see bitmask.cl).
    cx.launch(kern, [l.images, l.grans.len().max(1), 1], [block, 1, 1], args)?;
    Ok(cx.launches.pop().expect("just pushed"))
}

/// `mask` as the floats a mask tensor holds (1 where set, 0 elsewhere), as bytes to upload at
/// precision `p`.
pub(crate) fn mask_floats(mask: &BitMask, p: Precision) -> Result<Vec<u8>> {
    let v: Vec<f32> = mask.to_bools().into_iter().map(|b| b as u8 as f32).collect();
    crate::gpu::dtype::to_words(&dynaspa_runtime::Tensor::from_f32(vec![v.len()], v)?, "mask", p)
}

/// Calibration's masks on the device: each is uploaded into `scratch`, then `launch` (the
/// bitmask kernel, or a token compaction) turns it into the op's metadata; loading the mask
/// already loaded does nothing.
pub(crate) struct MaskLoader<'a, D: GpuDevice> {
    dev: &'a D,
    bufs: &'a [D::Buffer],
    scratch: BufId,
    launch: &'a Launch<D::Kernel>,
    precision: Precision,
    loaded: RefCell<Option<BitMask>>,
}

impl<'a, D: GpuDevice> MaskLoader<'a, D> {
    pub(crate) fn new(dev: &'a D, bufs: &'a [D::Buffer], scratch: BufId, launch: &'a Launch<D::Kernel>, precision: Precision) -> Self {
        MaskLoader { dev, bufs, scratch, launch, precision, loaded: RefCell::new(None) }
    }

    pub(crate) fn load(&self, mask: &BitMask) -> Result<()> {
        if self.loaded.borrow().as_ref() == Some(mask) {
            return Ok(());
        }
        self.dev.upload(&self.bufs[self.scratch], 0, &mask_floats(mask, self.precision)?)?;
        replay_launches(self.dev, self.bufs, std::slice::from_ref(self.launch))?;
        self.dev.finish()?;
        *self.loaded.borrow_mut() = Some(mask.clone());
        Ok(())
    }
}
