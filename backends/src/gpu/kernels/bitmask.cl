/* Mask -> packed BitMask words -> aligned DISTile counts and lists for several granularities,
 * one work-group per image: what dispatch needs per frame and mask (the counts choose the
 * PolyKernel member, the lists feed its launch). Same results as the host's BitMask::from_f32
 * (bit i of word i / 32 is position i, LSB first; tail bits zero), count_tiles_many and
 * aligned_tiles (row-major; an edge tile reaching past the map exists when any in-bounds
 * position is set). The CUDA-only bitmask.cu does the same with warp ballots; this one uses only
 * OpenCL C 1.2 work-group barriers so every backend shares it.
 *
 * Tile tests read the float mask, not the words: words written by other work-items are only
 * guaranteed visible to a later launch, and reading floats costs one pass per granularity.
 * Lists come out in row-major order without atomics: a work-group scan of the "tile exists"
 * flags gives every tile its slot.
 *
 * Layout of `meta` (all ints): counts first, image n's at n * (n_gran + 1): one count per
 * granularity, then the first position whose value is not 0 or 1 (-1 when all are binary); then
 * per image, from data0 + n * img_stride, the packed words and, at grans[3 g + 2] words further,
 * granularity g's list of tile origins (y * w + x). grans holds (tile height, tile width, list
 * offset) per granularity. Define: BLOCK, the work-items of the group (a power of two).
 * Grid: (N, 1, 1), local (BLOCK, 1, 1). */

#ifndef BLOCK
#define BLOCK 256
#endif

KERNEL bitmask_tiles(GLOBAL const float* mask, GLOBAL int* meta, GLOBAL const int* grans, int h, int w,
                     int mask_stride, int n_gran, int data0, int img_stride) {
    LOCAL int s[BLOCK];
    int tid = LOCAL_ID(0), n = GROUP_ID(0);
    GLOBAL const float* m = mask + n * mask_stride;
    GLOBAL int* counts = meta + n * (n_gran + 1);
    GLOBAL int* out = meta + data0 + n * img_stride;
    int P = h * w, n_words = (P + 31) / 32;
    int bad = 0x7fffffff;
    for (int wi = tid; wi < n_words; wi += BLOCK) {
        uint word = 0u;
        for (int b = 0; b < 32; ++b) {
            int i = wi * 32 + b;
            if (i >= P) break;
            float v = m[i];
            if (v == 1.0f) {
                word |= 1u << (uint)b;
            } else if (!(v == 0.0f) && i < bad) {
                bad = i;
            }
        }
        out[wi] = (int)word;
    }
    /* First non-binary position: a minimum over the group. */
    s[tid] = bad;
    LOCAL_BARRIER();
    for (int off = BLOCK / 2; off > 0; off >>= 1) {
        if (tid < off) s[tid] = IMIN(s[tid], s[tid + off]);
        LOCAL_BARRIER();
    }
    if (tid == 0) counts[n_gran] = s[0] == 0x7fffffff ? -1 : s[0];
    LOCAL_BARRIER();

    for (int g = 0; g < n_gran; ++g) {
        int gh = IMAX(grans[3 * g], 1), gw = IMAX(grans[3 * g + 1], 1), at = grans[3 * g + 2];
        int tiles_x = (w + gw - 1) / gw;
        int n_tiles = ((h + gh - 1) / gh) * tiles_x;
        int found = 0;
        for (int t0 = 0; t0 < n_tiles; t0 += BLOCK) {
            int t = t0 + tid;
            int hit = 0, origin = 0;
            if (t < n_tiles) {
                int y0 = (t / tiles_x) * gh, x0 = (t - (t / tiles_x) * tiles_x) * gw;
                int y1 = IMIN(y0 + gh, h), x1 = IMIN(x0 + gw, w);
                origin = y0 * w + x0;
                for (int y = y0; y < y1 && !hit; ++y)
                    for (int x = x0; x < x1; ++x)
                        if (m[y * w + x] == 1.0f) {
                            hit = 1;
                            break;
                        }
            }
            /* Inclusive scan of the flags (Hillis-Steele; BLOCK is small). */
            s[tid] = hit;
            LOCAL_BARRIER();
            for (int off = 1; off < BLOCK; off <<= 1) {
                int v = tid >= off ? s[tid - off] : 0;
                LOCAL_BARRIER();
                s[tid] += v;
                LOCAL_BARRIER();
            }
            if (hit) out[at + found + s[tid] - 1] = origin;
            found += s[BLOCK - 1];
            /* s is rewritten by the next chunk. */
            LOCAL_BARRIER();
        }
        if (tid == 0) counts[g] = found;
    }
}
