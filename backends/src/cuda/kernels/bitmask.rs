//! Host side of `bitmask.cu`: buffer layout for one mask size and set of granularities, the
//! launch, and reading the results back as the host types.

use super::bitmask_spec;
use crate::cuda::error::err;
use crate::gpu::{Arg, GpuDevice};
use dynaspa_runtime::sparsity::{DisTile, Granularity, TileSet};
use dynaspa_runtime::Result;

/// Value of the "first bad position" word when every mask value is 0 or 1.
const ALL_BINARY: u32 = u32::MAX;

/// Sizes and offsets for one mask shape and granularity list (fixed per sparse op).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BitmaskPlan {
    pub height: usize,
    pub width: usize,
    /// As given (repeats allowed); the kernel and the results use each one's effective size.
    pub granularities: Vec<Granularity>,
    /// The kernel's `grans` argument: (tile height, tile width, list offset) per granularity.
    pub params: Vec<u32>,
    /// Tiles each granularity's grid has (the room its list gets).
    pub capacity: Vec<usize>,
    /// u32 words of the packed mask.
    pub words: usize,
    /// u32 words of all tile lists together.
    pub tile_words: usize,
    /// Threads of the one block.
    pub block: u32,
}

impl BitmaskPlan {
    pub fn new(height: usize, width: usize, granularities: &[Granularity]) -> Result<BitmaskPlan> {
        let n = height.checked_mul(width).filter(|&n| n < (1usize << 31));
        let Some(n) = n else {
            return Err(err(format!("bitmask kernel: a {height}x{width} mask is too large (2^31 positions at most)")));
        };
        if granularities.is_empty() {
            return Err(err("bitmask kernel: no granularities"));
        }
        let mut params = Vec::with_capacity(3 * granularities.len());
        let mut capacity = Vec::with_capacity(granularities.len());
        let mut offset = 0usize;
        for g in granularities {
            let e = g.effective();
            let cap = height.div_ceil(e.h as usize) * width.div_ceil(e.w as usize);
            params.extend([e.h as u32, e.w as u32, offset as u32]);
            capacity.push(cap);
            offset += 2 * cap;
        }
        if offset >= u32::MAX as usize {
            return Err(err(format!("bitmask kernel: tile lists of {offset} words do not fit u32 offsets")));
        }
        // One warp per word: a small mask does not need 32 idle warps.
        let words = n.div_ceil(32);
        let block = if words <= 8 * 256 / 32 { 256 } else { 1024 };
        Ok(BitmaskPlan { height, width, granularities: granularities.to_vec(), params, capacity, words, tile_words: offset, block })
    }

    pub fn kernel_spec(&self) -> crate::gpu::KernelSpec {
        bitmask_spec(self.block)
    }
}

/// What one launch produced, read back to the host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BitmaskOutput {
    /// The packed mask, as `BitMask::to_u32_words`.
    pub words: Vec<u32>,
    /// Tile count per granularity, as `BitMask::count_tiles_many`.
    pub counts: Vec<usize>,
    /// Tiles per granularity, as `BitMask::aligned_tiles`.
    pub tiles: Vec<TileSet>,
}

/// The kernel with its buffers for one plan. The mask buffer is the caller's (it is the output
/// of the op that computes the mask).
pub struct BitmaskRunner<D: GpuDevice> {
    pub plan: BitmaskPlan,
    kernel: D::Kernel,
    params: D::Buffer,
    pub words: D::Buffer,
    /// n_gran counts, then the first non-binary position (or u32::MAX).
    pub counts: D::Buffer,
    pub tiles: D::Buffer,
}

fn u32_bytes(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn bytes_u32(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

impl<D: GpuDevice> BitmaskRunner<D> {
    pub fn new(dev: &D, plan: BitmaskPlan) -> Result<BitmaskRunner<D>> {
        let kernel = dev.kernel(&plan.kernel_spec())?;
        let params = dev.alloc(4 * plan.params.len())?;
        dev.upload(&params, 0, &u32_bytes(&plan.params))?;
        let words = dev.alloc(4 * plan.words)?;
        let counts = dev.alloc(4 * (plan.granularities.len() + 1))?;
        let tiles = dev.alloc(4 * plan.tile_words)?;
        Ok(BitmaskRunner { plan, kernel, params, words, counts, tiles })
    }

    /// Queues the kernel on `mask` (height * width f32) on the device's main queue.
    pub fn launch(&self, dev: &D, mask: &D::Buffer) -> Result<()> {
        let p = &self.plan;
        if p.height * p.width == 0 {
            // Nothing to pack and no tiles: zero counts, every value binary.
            let mut c = vec![0u32; p.granularities.len()];
            c.push(ALL_BINARY);
            return dev.upload(&self.counts, 0, &u32_bytes(&c));
        }
        dev.launch(
            &self.kernel,
            [1, 1, 1],
            [p.block, 1, 1],
            &[
                Arg::Buf(mask),
                Arg::U32(p.height as u32),
                Arg::U32(p.width as u32),
                Arg::Buf(&self.words),
                Arg::Buf(&self.params),
                Arg::U32(p.granularities.len() as u32),
                Arg::Buf(&self.counts),
                Arg::Buf(&self.tiles),
            ],
        )
    }

    /// The counts after `launch`, or the error `BitMask::from_f32` gives for a non-binary
    /// value (`values` only to quote it; pass `None` when the host does not have them).
    pub fn counts(&self, dev: &D, values: Option<&[f32]>) -> Result<Vec<usize>> {
        let mut raw = vec![0u8; 4 * (self.plan.granularities.len() + 1)];
        dev.download(&self.counts, 0, &mut raw)?;
        self.plan.decode_counts(&bytes_u32(&raw), values)
    }

    /// Everything after `launch`: counts (checked as in `counts`), words and tile lists.
    pub fn read(&self, dev: &D, values: Option<&[f32]>) -> Result<BitmaskOutput> {
        let mut counts = vec![0u8; 4 * (self.plan.granularities.len() + 1)];
        dev.download(&self.counts, 0, &mut counts)?;
        let mut words = vec![0u8; 4 * self.plan.words];
        dev.download(&self.words, 0, &mut words)?;
        let mut tiles = vec![0u8; 4 * self.plan.tile_words];
        dev.download(&self.tiles, 0, &mut tiles)?;
        self.plan.decode(bytes_u32(&words), &bytes_u32(&counts), &bytes_u32(&tiles), values)
    }
}

impl BitmaskPlan {
    /// The kernel's `counts` output as tile counts, or the error for a non-binary mask value.
    pub fn decode_counts(&self, raw: &[u32], values: Option<&[f32]>) -> Result<Vec<usize>> {
        if raw.len() != self.granularities.len() + 1 {
            return Err(err(format!("bitmask kernel: {} count words for {} granularities", raw.len(), self.granularities.len())));
        }
        let (counts, bad) = raw.split_at(raw.len() - 1);
        if bad[0] != ALL_BINARY {
            let (i, w) = (bad[0] as usize, self.width.max(1));
            let v = values.and_then(|v| v.get(i)).map(|v| format!(" is {v:?}")).unwrap_or_default();
            return Err(err(format!(
                "BitMask {}x{} from f32: value at (y {}, x {}) (index {i}){v}; a mask holds only 0.0 and 1.0",
                self.height,
                self.width,
                i / w,
                i % w
            )));
        }
        for (i, (&n, g)) in counts.iter().zip(&self.granularities).enumerate() {
            if n as usize > self.capacity[i] {
                return Err(err(format!("bitmask kernel: {n} tiles at {g}, the grid has {}", self.capacity[i])));
            }
        }
        Ok(counts.iter().map(|&c| c as usize).collect())
    }

    /// All three outputs of one launch as host types.
    pub fn decode(&self, words: Vec<u32>, raw_counts: &[u32], tiles: &[u32], values: Option<&[f32]>) -> Result<BitmaskOutput> {
        let counts = self.decode_counts(raw_counts, values)?;
        if words.len() != self.words || tiles.len() != self.tile_words {
            return Err(err(format!(
                "bitmask kernel: got {} words and {} tile words, the plan has {} and {}",
                words.len(),
                tiles.len(),
                self.words,
                self.tile_words
            )));
        }
        let sets = counts
            .iter()
            .zip(&self.granularities)
            .enumerate()
            .map(|(i, (&n, g))| {
                let off = self.params[3 * i + 2] as usize;
                let list = tiles[off..off + 2 * n].chunks_exact(2).map(|p| DisTile { y: p[0], x: p[1] }).collect();
                TileSet { granularity: g.effective(), height: self.height, width: self.width, tiles: list }
            })
            .collect();
        Ok(BitmaskOutput { words, counts, tiles: sets })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_lays_out_one_list_per_granularity_with_room_for_every_tile() {
        let p = BitmaskPlan::new(10, 13, &[Granularity::new(4, 8), Granularity::new(0, 3), Granularity::new(1, 1)]).unwrap();
        // 4x8: 3 x 2 tiles; 0x3 counts as 1x3: 10 x 5; 1x1: 130.
        assert_eq!(p.capacity, [6, 50, 130]);
        assert_eq!(p.params, [4, 8, 0, 1, 3, 12, 1, 1, 112]);
        assert_eq!(p.tile_words, 2 * (6 + 50 + 130));
        assert_eq!(p.words, 5);
        assert!(BitmaskPlan::new(1 << 16, 1 << 15, &[Granularity::new(1, 1)]).is_err());
        assert!(BitmaskPlan::new(4, 4, &[]).is_err());
    }
}
