// Mask -> BitMask words -> aligned DISTiles for several granularities, in one launch of one
// block: what dispatch needs per frame and sparse op (the counts choose the PolyKernel member,
// the index lists feed its launch). Same results as the host's BitMask::from_f32 (bit i of
// word i / 32 is position i, LSB first; tail bits zero), count_tiles_many and aligned_tiles
// (row-major lists; edge tiles reaching past the mask exist when any in-bounds position is
// set).
//
// One block because tile generation reads words other warps packed: a block barrier is the
// cheapest global order there is, and sparse-layer masks (up to a few 100k positions) keep one
// block of 1024 threads busy for microseconds. Tile lists come out in row-major order with no
// atomics: a block-wide scan of the "tile exists" flags gives every tile its slot.
//
// Define: BLOCK, the threads of the block (a multiple of 32, at most 1024).
//
// Arguments:
//   mask    height * width floats, each exactly 1.0 or +-0.0;
//   words   ceil(height * width / 32) words, written;
//   grans   per granularity three words: tile height, tile width (0 counts as 1, as on the
//           host), and where its list starts in `tiles` (in words);
//   counts  n_gran tile counts, then one word: the first position whose value is not 0/1,
//           or 0xffffffff when every value is binary;
//   tiles   per granularity (y, x) origin pairs, row-major, at its offset; room for every
//           tile of the grid must be there.

#ifndef BLOCK
#define BLOCK 1024
#endif
#define WARPS (BLOCK / 32)
#define ALL_LANES 0xffffffffu
#define F32_ONE 0x3f800000u

// Any set bit among positions lo..hi-1 (lo < hi) of the packed words.
__device__ bool range_any(const uint *words, uint lo, uint hi) {
    uint wl = lo >> 5, wh = (hi - 1) >> 5;
    uint ml = ALL_LANES << (lo & 31);
    uint mh = ALL_LANES >> (31 - ((hi - 1) & 31));
    if (wl == wh) {
        return (words[wl] & ml & mh) != 0;
    }
    if (words[wl] & ml) {
        return true;
    }
    for (uint w = wl + 1; w < wh; ++w) {
        if (words[w]) {
            return true;
        }
    }
    return (words[wh] & mh) != 0;
}

// Launch bounds: the block size is fixed, so registers never cap it below BLOCK threads.
KERNEL __launch_bounds__(BLOCK) bitmask_tiles(GLOBAL const float *mask, uint height, uint width, GLOBAL uint *words,
                                                GLOBAL const uint *grans, uint n_gran, GLOBAL uint *counts,
                                                GLOBAL uint *tiles) {
    __shared__ uint s_bad;
    __shared__ uint s_warp[WARPS];
    __shared__ uint s_total;
    const uint tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const uint n = height * width;
    if (tid == 0) {
        s_bad = ALL_LANES;
    }
    __syncthreads();

    // Pack: one warp per word, each lane one position (coalesced 128-byte reads).
    const uint n_words = (n + 31) / 32;
    for (uint w = warp; w < n_words; w += WARPS) {
        uint i = w * 32 + lane;
        bool one = false;
        if (i < n) {
            uint v = __float_as_uint(mask[i]);
            one = v == F32_ONE;
            if (!one && (v << 1) != 0u) {
                atomicMin(&s_bad, i);
            }
        }
        uint word = __ballot_sync(ALL_LANES, one);
        if (lane == 0) {
            words[w] = word;
        }
    }
    // Makes this block's global writes of `words` visible to all its threads.
    __syncthreads();

    for (uint g = 0; g < n_gran; ++g) {
        const uint gh = max(grans[3 * g], 1u), gw = max(grans[3 * g + 1], 1u);
        const uint off = grans[3 * g + 2];
        const uint tiles_x = (width + gw - 1) / gw;
        const uint n_tiles = ((height + gh - 1) / gh) * tiles_x;
        uint base = 0;
        for (uint t0 = 0; t0 < n_tiles; t0 += BLOCK) {
            const uint t = t0 + tid;
            bool hit = false;
            uint y0 = 0, x0 = 0;
            if (t < n_tiles) {
                y0 = (t / tiles_x) * gh;
                x0 = (t % tiles_x) * gw;
                const uint y1 = min(y0 + gh, height), x1 = min(x0 + gw, width);
                for (uint y = y0; y < y1 && !hit; ++y) {
                    hit = range_any(words, y * width + x0, y * width + x1);
                }
            }
            // Block-wide exclusive scan of `hit`: rank within the warp, then warp offsets.
            const uint ballot = __ballot_sync(ALL_LANES, hit);
            const uint rank = __popc(ballot & ((1u << lane) - 1u));
            if (lane == 0) {
                s_warp[warp] = __popc(ballot);
            }
            __syncthreads();
            if (warp == 0) {
                uint v = lane < WARPS ? s_warp[lane] : 0u;
                uint incl = v;
                for (uint d = 1; d < 32; d <<= 1) {
                    uint up = __shfl_up_sync(ALL_LANES, incl, d);
                    if (lane >= d) {
                        incl += up;
                    }
                }
                if (lane < WARPS) {
                    s_warp[lane] = incl - v;
                }
                if (lane == 31) {
                    s_total = incl;
                }
            }
            __syncthreads();
            if (hit) {
                const uint slot = off + 2 * (base + s_warp[warp] + rank);
                tiles[slot] = y0;
                tiles[slot + 1] = x0;
            }
            base += s_total;
            // s_warp and s_total are rewritten by the next chunk.
            __syncthreads();
        }
        if (tid == 0) {
            counts[g] = base;
        }
    }
    if (tid == 0) {
        counts[n_gran] = s_bad;
    }
}
