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
 * work-group takes. Words: a work-item packs whole words, 32 independent loads each (in flight
 * together; no barrier chain, no atomics). Tiles: tested on the packed words (a row of a tile
 * is one or two word reads), each work-item takes TPT consecutive tiles, and a work-group scan
 * of the per-item hit counts gives every tile its slot, so lists come out row-major. With
 * LWORDS (the mask's word count, when it fits) the tile tests read a copy of the words in local
 * memory instead of chains of dependent L2 round trips (an 8x8 tile's rows read one after
 * another). Both changes took an H100's kernel from 10.4 to 9.4 us for a 40x40 mask (ncu); the
 * rest is the group's serial chain of scan steps and barriers (RESULTS, session 10).
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
/* Words of the local copy of the packed mask (its exact word count), 0 for none. */
#ifndef LWORDS
#define LWORDS 0
#endif
#if LWORDS > 0
#define WORDS_SPACE LOCAL_PTR
#else
#define WORDS_SPACE GLOBAL
#endif
/* Tiles a work-item tests per chunk. */
#define TPT 4

/* Whether any bit of positions lo..hi-1 (lo < hi) is set in the packed words. */
FUNC int bits_any(WORDS_SPACE const int* words, int lo, int hi) {
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
#if LWORDS > 0
    LOCAL int lw[LWORDS];
#endif
    int tid = LOCAL_ID(0), n = GROUP_ID(0);
    GLOBAL const float* m = mask + n * mask_stride;
    GLOBAL int* counts = meta + n * (n_gran + 1);
    GLOBAL int* out = meta + data0 + n * img_stride;
    int P = h * w, n_words = (P + 31) / 32;
    int bad = 0x7fffffff;
    for (int wi = tid; wi < n_words; wi += BLOCK) {
        int i0 = wi * 32;
        uint bits = 0u;
        for (int j = 0; j < 32; ++j) {
            if (i0 + j < P) {
                float v = m[i0 + j];
                if (v == 1.0f) {
                    bits |= 1u << (uint)j;
                } else if (!(v == 0.0f) && i0 + j < bad) {
                    bad = i0 + j;
                }
            }
        }
        out[wi] = (int)bits;
#if LWORDS > 0
        lw[wi] = (int)bits;
#endif
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
#if LWORDS > 0
    LOCAL_BARRIER();
    LOCAL_PTR const int* words = lw;
#else
    GLOBAL_BARRIER();
    GLOBAL const int* words = out;
#endif

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
                    for (int y = y0; y < y1 && !hit; ++y) hit = bits_any(words, y * w + x0, y * w + x1);
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
