/* 2-D convolutions (NCHW) over DISTiles: the columns of an implicit GEMM are the output
 * positions of the tiles bitmask.cl listed for one granularity (GH x GW), or every position
 * (TILED = 0: the dense member, and dense convs). Only positions that exist are written:
 * phantom positions of edge tiles are skipped, and with `masked` so are positions whose mask
 * bit is 0 (the fill policy owns them: pre-zeroed, residual-filled or cached).
 *
 * The grid is sized for every tile the map could have; work-groups past the frame's tile
 * count return at once, so launches need no host readback to be sized.
 *
 * Mask metadata (`meta`, made by bitmask.cl): image n's tile count for this granularity at
 * meta[n * cstride + gi]; its packed mask words at data0 + n * img_stride, its tile list (the
 * top-left position y * ow + x of each tile) tiles_at words further. */

/* What every sparse conv program (sparse_conv_gemm.cl, sparse_conv_dw.cl, sparse_conv_fill.cl)
 * shares: the granularity defines, the one argument list, and where a column's output lies.
 * Compiled first of each, after common.h (gpu/kernels.rs). */

/* The granularity of the columns: GH x GW tiles of the mask's lists, or every position
 * (TILED = 0). */
#ifndef GH
#define GH 1
#endif
#ifndef GW
#define GW 1
#endif
#ifndef TILED
#define TILED 1
#endif
#define GV (GH * GW)

/* Every sparse conv kernel takes the same arguments (unused ones are placeholders), so the
 * WGSL twin binds one set of buffers and one uniform struct for all of them. */
#define SPARSE_CONV_ARGS                                                                                            \
    GLOBAL const FLT *X, GLOBAL const FLT *W, GLOBAL const FLT *bias, GLOBAL const FLT *res, GLOBAL FLT *Y, \
        GLOBAL int *meta, GLOBAL float *part, GLOBAL const int *ktab, int cin, int cout, int ih, int iw, int oh, \
        int ow, int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw, int cstride, int gi, int data0,       \
        int img_stride, int tiles_at, int cap, int masked, int has_bias, int has_res, int act, float p0, float p1

/* Columns image n computes: tiles x positions per tile, or the whole map. */
FUNC int sparse_conv_columns(GLOBAL const int* meta, int n, int cstride, int gi, int oh, int ow) {
#if TILED
    return meta[n * cstride + gi] * GV;
#else
    return oh * ow;
#endif
}

/* Output position (y * ow + x) of column j of image n, or -1 for a phantom. */
FUNC int sparse_conv_position(GLOBAL const int* meta, int base, int tiles_at, int j, int oh, int ow) {
#if TILED
    int t = j / GV, r = j - (j / GV) * GV;
    int o = meta[base + tiles_at + t];
    int oy = o / ow, ox = o - (o / ow) * ow;
    int y = oy + r / GW, x = ox + r % GW;
    return (y < oh && x < ow) ? y * ow + x : -1;
#else
    return j;
#endif
}

FUNC int mask_bit(GLOBAL const int* meta, int base, int p) {
    return (((uint)meta[base + (p >> 5)]) >> (uint)(p & 31)) & 1u;
}

/* b: the output channel's bias (0 without), loaded where the caller can overlap it. */
FUNC float sparse_conv_epilogue(float v, float b, GLOBAL const FLT* res, int has_res, int at, int act, float p0, float p1) {
    v += b;
    if (has_res) v += LDF(res, at);
    return activate(act, v, p0, p1);
}

/* Whether a listed column can be a position whose mask bit is 0: not where each tile is one
 * position (the lists hold only set ones), so 1x1 members skip that load. */
#define SPARSE_CONV_MAY_SKIP (!TILED || GV > 1)
