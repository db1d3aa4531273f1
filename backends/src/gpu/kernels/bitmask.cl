/* Mask -> packed BitMask words -> aligned DISTile counts and lists for several granularities,
 * one work-group per image and granularity: what dispatch needs per frame and mask (the counts choose the
 * PolyKernel member, the lists feed its launch). Same results as the host's BitMask::from_f32
 * (bit i of word i / 32 is position i, LSB first; tail bits zero), count_tiles_many and
 * aligned_tiles (row-major; an edge tile reaching past the map exists when any in-bounds
 * position is set). The CUDA-only bitmask.cu does the same with warp ballots; this one uses only
 * OpenCL C 1.2 work-group barriers so every backend shares it.
 *
 * The kernel runs once per mask per frame ahead of every sparse op reading the mask, so its
 * latency is on the frame's critical path: what matters is how many dependent steps a
 * work-group takes. Words: every work-item reads PER positions a pass, all
 * loads coalesced and in flight together, and an OR tree over each 32 work-items packs a word
 * (no 32-step loop per word, no atomics). Tiles: tested on the packed words (a row of a tile is
 * one or two word reads), each work-item takes TPT consecutive tiles, and a work-group scan of
 * the per-item hit counts gives every tile its slot, so lists come out row-major.
 *
 * Layout of `meta` (all ints): counts first, image n's at n * (n_gran + 1): one count per
 * granularity, then the first position whose value is not 0 or 1 (-1 when all are binary); then
 * per image, from data0 + n * img_stride, the packed words and, at grans[3 g + 2] words further,
 * granularity g's list of tile origins (y * w + x). grans holds (tile height, tile width, list
 * offset) per granularity. Define: BLOCK, the work-items of the group (a power of two, >= 32).
 * Grid: (N, G, 1), local (BLOCK, 1, 1): the G work-groups of an image split its granularities
 * (G = n_gran takes one each, so they run side by side instead of one after another); each
 * packs the image's words itself (the same values, so their stores may overlap) and reads only
 * the words it stored or identical ones. */

#ifndef BLOCK
#define BLOCK 256
#endif
/* Positions a work-item reads per pass, tiles a work-item tests per chunk. */
#define PER 4
#define TPT 4

/* Whether any bit of positions lo..hi-1 (lo < hi) is set in the packed words. */
FUNC int bits_any(GLOBAL const int* words, int lo, int hi) {
    int wl = lo >> 5, wh = (hi - 1) >> 5;
    uint ml = 0xffffffffu << (uint)(lo & 31);
    uint mh = 0xffffffffu >> (uint)(31 - ((hi - 1) & 31));
    if (wl == wh) return (((uint)words[wl]) & ml & mh) != 0u;
    if ((((uint)words[wl]) & ml) != 0u) return 1;
    for (int k = wl + 1; k < wh; ++k)
        if (words[k] != 0) return 1;
    return (((uint)words[wh]) & mh) != 0u;
}

KERNEL bitmask_tiles(GLOBAL const float* mask, GLOBAL int* meta, GLOBAL const int* grans, int h, int w,
                     int mask_stride, int n_gran, int data0, int img_stride) {
    LOCAL int s[BLOCK];
    int tid = LOCAL_ID(0), n = GROUP_ID(0), lane = tid & 31;
    GLOBAL const float* m = mask + n * mask_stride;
    GLOBAL int* counts = meta + n * (n_gran + 1);
    GLOBAL int* out = meta + data0 + n * img_stride;
    int P = h * w, n_words = (P + 31) / 32;
    int bad = 0x7fffffff;
    for (int base = 0; base < P; base += PER * BLOCK) {
        uint bits[PER];
        for (int k = 0; k < PER; ++k) {
            int i = base + k * BLOCK + tid;
            bits[k] = 0u;
            if (i < P) {
                float v = m[i];
                if (v == 1.0f) {
                    bits[k] = 1u << (uint)lane;
                } else if (!(v == 0.0f) && i < bad) {
                    bad = i;
                }
            }
        }
        for (int k = 0; k < PER; ++k) {
            s[tid] = (int)bits[k];
            LOCAL_BARRIER();
            /* Lanes below `off` write; the lanes they read do not, so a step has no race. */
            for (int off = 16; off > 0; off >>= 1) {
                if (lane < off) s[tid] |= s[tid + off];
                LOCAL_BARRIER();
            }
            int wi = (base + k * BLOCK) / 32 + tid / 32;
            if (lane == 0 && wi < n_words) out[wi] = s[tid];
            LOCAL_BARRIER();
        }
    }
    /* First non-binary position: a minimum over the group, by the image's first group only
     * (the condition is the same for the whole group, so its barriers are reached by all). */
    if (GROUP_ID(1) == 0) {
        s[tid] = bad;
        LOCAL_BARRIER();
        for (int off = BLOCK / 2; off > 0; off >>= 1) {
            if (tid < off) s[tid] = IMIN(s[tid], s[tid + off]);
            LOCAL_BARRIER();
        }
        if (tid == 0) counts[n_gran] = s[0] == 0x7fffffff ? -1 : s[0];
    }
    /* The words other work-items wrote are read below. */
    GLOBAL_BARRIER();

    for (int g = GROUP_ID(1); g < n_gran; g += NUM_GROUPS(1)) {
        int gh = IMAX(grans[3 * g], 1), gw = IMAX(grans[3 * g + 1], 1), at = grans[3 * g + 2];
        int tiles_x = (w + gw - 1) / gw;
        int n_tiles = ((h + gh - 1) / gh) * tiles_x;
        int found = 0;
        for (int t0 = 0; t0 < n_tiles; t0 += TPT * BLOCK) {
            int hits = 0;
            int mine[TPT];
            for (int j = 0; j < TPT; ++j) {
                int t = t0 + tid * TPT + j;
                mine[j] = -1;
                if (t < n_tiles) {
                    int ty = t / tiles_x;
                    int y0 = ty * gh, x0 = (t - ty * tiles_x) * gw;
                    int y1 = IMIN(y0 + gh, h), x1 = IMIN(x0 + gw, w);
                    int hit = 0;
                    for (int y = y0; y < y1 && !hit; ++y) hit = bits_any(out, y * w + x0, y * w + x1);
                    if (hit) {
                        mine[j] = y0 * w + x0;
                        ++hits;
                    }
                }
            }
            /* Inclusive scan of the per-item counts (Hillis-Steele; BLOCK is small). */
            s[tid] = hits;
            LOCAL_BARRIER();
            for (int off = 1; off < BLOCK; off <<= 1) {
                int v = tid >= off ? s[tid - off] : 0;
                LOCAL_BARRIER();
                s[tid] += v;
                LOCAL_BARRIER();
            }
            int slot = at + found + s[tid] - hits;
            for (int j = 0; j < TPT; ++j)
                if (mine[j] >= 0) out[slot++] = mine[j];
            found += s[BLOCK - 1];
            /* s is rewritten by the next chunk. */
            LOCAL_BARRIER();
        }
        if (tid == 0) counts[g] = found;
    }
}
