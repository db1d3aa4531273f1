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
 * work-group takes, not its work. Every loop below therefore issues its loads independently
 * of each other's values (no branch on a loaded value between two loads), so they are in
 * flight together:
 * - Words: the group loads a chunk of PER_ITEM * BLOCK positions coalesced, PER_ITEM loads per
 *   work-item, into one byte per position in local memory; then a work-item per word gathers
 *   its 32 bytes. Loops step through tile rows and columns instead of dividing per tile. (A
 *   work-item loading its word's 32 floats itself put those loads behind branches on the
 *   values: an H100 took 9.4 us for a 40x40 mask; RESULTS.md, "bitmask.cl with a work-item per
 *   word".)
 * - Tiles: tested strided (tile u * BLOCK + item), so a coarse grid's few tiles spread over
 *   the group, each testing all its rows at once; the flags go to local memory, where each
 *   work-item counts PER_ITEM consecutive tiles, and a scan of those counts (one barrier per
 *   step, only as many steps as items hold tiles) gives every tile its slot, so lists come out
 *   row-major.
 * With LWORDS (the mask's word count, when it fits) the tile tests read a copy of the words in
 * local memory instead of global memory.
 *
 * Layout of `meta` (all ints): counts first, image n's at n * (n_gran + 1): one count per
 * granularity, then the first position whose value is not 0 or 1 (-1 when all are binary); then
 * per image, from data0 + n * img_stride, the packed words and, at grans[3 g + 2] words further,
 * granularity g's list of tile origins (y * w + x). grans holds (tile height, tile width, list
 * offset) per granularity. Define: BLOCK, the work-items of the group (a power of two, >= 32).
 * Local memory: 16 * BLOCK bytes, plus 4 * LWORDS (sparse/bitmask.rs's bitmask_defines budgets it).
 * Grid: (N, G, 1), local (BLOCK, 1, 1): the G work-groups of an image split its granularities
 * (G = n_gran takes one each, so they run side by side instead of one after another); each
 * packs the image's words itself (the same values, so their stores may overlap) and reads only
 * the words it stored or identical ones. */

#ifndef BLOCK
#define BLOCK 256
#endif
/* HOST_COUNTS = 1 (CUDA, where the host's memory can be mapped into the device's): the counts
 * are also stored at `host`, laid out as in `meta`, so the host reads them there with no copy
 * queued behind the launch. A copy is a second operation per frame on the second stream, which
 * fell behind short members (RESULTS.md, "the wait moved to where it is needed"). */
#ifndef HOST_COUNTS
#define HOST_COUNTS 0
#endif
#if HOST_COUNTS
#define BITMASK_HOST_ARGS , GLOBAL int *host
#define STORE_COUNT(i, v) (counts[i] = (v), host[n * (n_gran + 1) + (i)] = (v))
#else
#define BITMASK_HOST_ARGS
#define STORE_COUNT(i, v) (counts[i] = (v))
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
/* Positions a work-item loads per packing chunk, and tiles per listing chunk. */
#define PER_ITEM 8
#define CHUNK (PER_ITEM * BLOCK)

/* Whether any bit of positions lo..hi-1 (lo < hi) is set in the packed words. */
FUNC int bits_any(WORDS_SPACE const int* words, int lo, int hi) {
    int wl = lo >> 5, wh = (hi - 1) >> 5;
    uint ml = 0xffffffffu << (uint)(lo & 31);
    uint mh = 0xffffffffu >> (uint)(31 - ((hi - 1) & 31));
    if (wl == wh) return (((uint)words[wl]) & ml & mh) != 0u;
    uint any = (((uint)words[wl]) & ml) | (((uint)words[wh]) & mh);
    for (int k = wl + 1; k < wh; ++k) any |= (uint)words[k];
    return any != 0u;
}

KERNEL bitmask_tiles(GLOBAL const FLT* mask, GLOBAL int* meta, GLOBAL const int* grans, int h, int w,
                     int mask_stride, int n_gran, int data0, int img_stride BITMASK_HOST_ARGS) {
    PDL_ENTRY();
    /* Two scan buffers (ping-pong), and a byte per position (packing) or tile (listing). */
    LOCAL int s[2 * BLOCK];
    LOCAL uchar flag[CHUNK];
#if LWORDS > 0
    LOCAL int lw[LWORDS];
#endif
    int tid = LOCAL_ID(0), n = GROUP_ID(0);
    GLOBAL const FLT* m = mask + n * mask_stride;
    GLOBAL int* counts = meta + n * (n_gran + 1);
    GLOBAL int* out = meta + data0 + n * img_stride;
    int P = h * w, n_words = (P + 31) / 32;
    int bad = 0x7fffffff;
    for (int c0 = 0; c0 < P; c0 += CHUNK) {
        for (int u = 0; u < PER_ITEM; ++u) {
            int i = c0 + u * BLOCK + tid;
            /* Clamped rather than skipped, so no load waits on a branch. */
            float v = LDF(m, IMIN(i, P - 1));
            int in = i < P;
            int one = in && v == 1.0f;
            flag[u * BLOCK + tid] = (uchar)one;
            bad = (in && !one && !(v == 0.0f)) ? IMIN(bad, i) : bad;
        }
        LOCAL_BARRIER();
        int wi = c0 / 32 + tid;
        if (tid < CHUNK / 32 && wi < n_words) {
            LOCAL_PTR const uchar* f = flag + tid * 32;
            uint bits = 0u;
            /* Rotated by the item, so the items of a warp read different banks. */
            for (int j = 0; j < 32; ++j) {
                int k = (j + tid) & 31;
                bits |= ((uint)f[k]) << (uint)k;
            }
            out[wi] = (int)bits;
#if LWORDS > 0
            lw[wi] = (int)bits;
#endif
        }
        /* flag is rewritten by the next chunk. */
        LOCAL_BARRIER();
    }
    /* First non-binary position: a minimum over the group, by the image's last group only,
     * whose granularities are the coarsest (fewest tiles); the condition is the same for the
     * whole group, so its barriers are reached by all. */
    if (GROUP_ID(1) == NUM_GROUPS(1) - 1) {
        s[tid] = bad;
        LOCAL_BARRIER();
        for (int off = BLOCK / 2; off > 0; off >>= 1) {
            if (tid < off) s[tid] = IMIN(s[tid], s[tid + off]);
            LOCAL_BARRIER();
        }
        if (tid == 0) STORE_COUNT(n_gran, s[0] == 0x7fffffff ? -1 : s[0]);
        /* s is the scan's below. */
        LOCAL_BARRIER();
    }
    /* The words other work-items wrote are read below. */
#if LWORDS > 0
    LOCAL_PTR const int* words = lw;
#else
    GLOBAL_BARRIER();
    GLOBAL const int* words = out;
#endif

    for (int g = GROUP_ID(1); g < n_gran; g += NUM_GROUPS(1)) {
        int gh = IMAX(grans[3 * g], 1), gw = IMAX(grans[3 * g + 1], 1), at = grans[3 * g + 2];
        int tiles_x = (w + gw - 1) / gw;
        int n_tiles = ((h + gh - 1) / gh) * tiles_x;
        /* The strided walk's step in tile rows and columns: tiles are stepped to, not divided
         * out, once per chunk. */
        int dy = BLOCK / tiles_x, dx = BLOCK - dy * tiles_x;
        int found = 0;
        for (int t0 = 0; t0 < n_tiles; t0 += CHUNK) {
            int t = t0 + tid;
            int ty = t / tiles_x, tx = t - ty * tiles_x;
            for (int u = 0; u < PER_ITEM; ++u) {
                int hit = 0;
                if (t < n_tiles) {
                    int y0 = ty * gh, x0 = tx * gw;
                    int y1 = IMIN(y0 + gh, h), x1 = IMIN(x0 + gw, w);
                    for (int y = y0; y < y1; ++y) hit |= bits_any(words, y * w + x0, y * w + x1);
                }
                flag[u * BLOCK + tid] = (uchar)hit;
                t += BLOCK;
                tx += dx;
                ty += dy;
                if (tx >= tiles_x) {
                    tx -= tiles_x;
                    ++ty;
                }
            }
            LOCAL_BARRIER();
            int hits = 0;
            for (int j = 0; j < PER_ITEM; ++j) hits += flag[tid * PER_ITEM + j];
            /* Inclusive scan of the per-item counts over the items holding tiles of this chunk
             * (the same number for the whole group, so every barrier is reached by all). */
            int items = (IMIN(CHUNK, n_tiles - t0) + PER_ITEM - 1) / PER_ITEM;
            int cur = 0;
            s[tid] = hits;
            LOCAL_BARRIER();
            for (int off = 1; off < items; off <<= 1) {
                int v = s[cur * BLOCK + tid] + (tid >= off ? s[cur * BLOCK + tid - off] : 0);
                cur ^= 1;
                s[cur * BLOCK + tid] = v;
                LOCAL_BARRIER();
            }
            int slot = at + found + s[cur * BLOCK + tid] - hits;
            int total = s[cur * BLOCK + items - 1];
            int first = t0 + tid * PER_ITEM;
            int ry = first / tiles_x, rx = first - ry * tiles_x;
            for (int j = 0; j < PER_ITEM; ++j) {
                if (flag[tid * PER_ITEM + j]) out[slot++] = ry * gh * w + rx * gw;
                if (++rx == tiles_x) {
                    rx = 0;
                    ++ry;
                }
            }
            found += total;
            /* flag and s are rewritten by the next chunk. */
            LOCAL_BARRIER();
        }
        if (tid == 0) STORE_COUNT(g, found);
    }
}
