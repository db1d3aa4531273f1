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

#ifndef TM
#define TM 64
#endif
#ifndef TN
#define TN 32
#endif
#ifndef TK
#define TK 16
#endif
#ifndef WM
#define WM 4
#endif
#ifndef WN
#define WN 2
#endif
#ifndef GH
#define GH 1
#endif
#ifndef GW
#define GW 1
#endif
#ifndef TILED
#define TILED 1
#endif
/* Split of the reduction (input channels x taps) over KS work-groups; KS > 1 writes partial
 * sums that sconv_finish_f32 adds up, so few columns still fill the device. */
#ifndef KS
#define KS 1
#endif
/* FUSED_FINISH = 1: the last of a tile's KS work-groups to finish adds the partial sums itself
 * (sconv_gemm_f32 then takes tile_count, see there), saving the second launch, which costs
 * about as much as a sparse frame's GEMM on NVIDIA. It needs one work-group's stores to be
 * visible to another once a fence and an atomic order them: CUDA's memory model promises it;
 * OpenCL 1.2 leaves it to the device: NVIDIA's gives it with PTX's device-wide fence
 * (prelude_opencl.h; its mem_fence is the work-group's only), PoCL's (a coherent CPU) with
 * any; WGSL does not promise it, so its twin never fuses. */
#ifndef FUSED_FINISH
#define FUSED_FINISH 0
#endif
/* SELF_LIST = 1 (1x1 columns only): each work-group finds its columns in the float mask itself
 * instead of reading bitmask.cl's list, so the member does not wait for the mask launch, which
 * on an H100 cost ~6 µs in front of a 25-50 µs member, 2 µs of it the price of any dependent
 * launch (RESULTS.md, session 11). The mask is read as bitmask.cl reads it (set where exactly
 * 1.0), and `masked` is 0: every column is a set position. The grid then runs column tiles
 * slowest (see SC_CTILE), so the work-groups past the frame's columns, which read the mask
 * before they know, queue behind the ones with work instead of between them. With KS > 1 and
 * no fused finish, the GEMM publishes the count and list at `meta`, a buffer of the op's laid
 * out as sconv_finish_f32 reads a list (count of image n at n, its list at data0 + n *
 * img_stride), for the finish launched after it. */
#ifndef SELF_LIST
#define SELF_LIST 0
#endif
/* SELF_LIST with FUSED_FINISH: the host asks for it only where it was seen computing right and
 * only when told to (CUDA, `DYNASPA_SL_FUSED=1`; PoCL 3.1 miscompiled it; schedules.rs
 * `self_list_fused`). */
/* SELF_COUNT = 1 (with SELF_LIST): the work-group of channel tile 0, split 0 and column tile 0 of
 * each image also stores what the mask's bitmask launch stores for the host's selection, the
 * image's count of set values and its first position holding neither 0 nor 1 (-1 for none), at
 * rep[n * rep_stride] and rep[n * rep_stride + rep_stride - 1] (a mask planned with 1x1 tiles
 * only, whose counts are those two). Where every reader of the mask does, the frame makes no
 * bitmask launch at all (step.rs). */
#ifndef SELF_COUNT
#define SELF_COUNT 0
#endif
#if SELF_COUNT && !SELF_LIST
#error "only self-listing members count the mask"
#endif
/* SC_CSLOW = 1 (sparse members unless the host says 0): column tiles are the grid's slowest
 * dimension, in the GEMM and in sconv_finish_f32. Both grids are sized for every column the map
 * could have; a sparse frame's columns are the first few tiles, so with column tiles fastest the
 * few working work-groups were strewn among the many that only read the count and leave, and
 * the last of them started only once the empty ones ahead had drained through the GPU. Slowest,
 * the working groups come first and the empty ones queue behind them. SELF_LIST needs it (see
 * there). */
#ifndef SC_CSLOW
#define SC_CSLOW (TILED || SELF_LIST)
#endif
#if SELF_LIST && !SC_CSLOW
#error "self-listing members run column tiles slowest"
#endif
/* MMA = 1 (CUDA on sm_80 and later only; the host sets it, `DYNASPA_MMA=1`): the tile's
 * products run on the tensor cores as three TF32 products per pair of operands split into a
 * TF32 head and the TF32 rest (a_hi*b_hi + a_hi*b_lo + a_lo*b_hi, the lo*lo term dropped),
 * which keeps about 22 of fp32's 24 bits per product, accumulated in fp32: fp32 results within
 * the 1e-4 the backends are held to, where plain TF32 keeps 11 bits. The work-group's warps
 * split the tile MMA_WGM ways along channels and the rest along columns; each work-item then
 * owns the accumulators the fragment layout gives it (sconv_acc_m/_c), as many as WM x WN, so
 * stores and the split-K finish are the FMA path's. */
#ifndef MMA
#define MMA 0
#endif
#define TX (TN / WN)
#define TY (TM / WM)
#define NT (TX * TY)
#define GV (GH * GW)
#define NACC (WM * WN)
#if MMA
#if !defined(DSP_HAS_MMA_TF32)
#error "MMA needs the CUDA prelude on sm_80 or later"
#endif
#define MMA_WGN (NT / 32 / MMA_WGM)
#define MMA_FM (TM / 16 / MMA_WGM)
#define MMA_FN (TN / 8 / MMA_WGN)
/* Rows of the staged operands padded to 8 mod 32 words, so a fragment's 32 loads (4 rows x
 * 8 consecutive words) hit 32 banks. */
#define SC_PAD 8
#else
#define SC_PAD 0
#endif

/* A work-item's WM x WN outputs are runs of VWM consecutive channels and VWN consecutive
 * columns, the runs TY * VWM channels and TX * VWN columns apart, so each reduction step reads
 * a run from As / Bs in one vector load. Read one float at a time, a step's WM + WN loads of
 * local memory took longer to issue than its WM x WN FMAs (w8x4: 12 loads for 32 FMAs), which
 * bounded the compute-bound members. Runs of 4 are 16 bytes apart between neighbouring
 * work-items, so a quarter-warp's loads cover 32 banks once. SC_VEC=0 (`DYNASPA_SC_VEC=0`)
 * keeps runs of 1, the layout before; MMA has its own. */
#ifndef SC_VEC
#define SC_VEC 1
#endif
#if MMA || !SC_VEC
#define VWM 1
#define VWN 1
#else
#define VWM (WM % 4 == 0 ? 4 : WM % 2 == 0 ? 2 : 1)
#define VWN (WN % 4 == 0 ? 4 : WN % 2 == 0 ? 2 : 1)
#endif
#define SC_LDS_A(d, s) LDS_RUN(d, s, VWM)
#define SC_LDS_B(d, s) LDS_RUN(d, s, VWN)

/* Channel and column (within the tile) of accumulator a of work-item tid. */
FUNC int sconv_acc_m(int a, int tid) {
#if MMA
    int lane = tid & 31, warp = tid >> 5, r = a & 3;
    return (warp % MMA_WGM) * (TM / MMA_WGM) + ((a >> 2) / MMA_FN) * 16 + (lane >> 2) + ((r >> 1) << 3);
#else
    int i = a / WN;
    return (i / VWM) * (TY * VWM) + (tid / TX) * VWM + i % VWM;
#endif
}

FUNC int sconv_acc_c(int a, int tid) {
#if MMA
    int lane = tid & 31, warp = tid >> 5, r = a & 3;
    return (warp / MMA_WGM) * (TN / MMA_WGN) + ((a >> 2) % MMA_FN) * 8 + ((lane & 3) << 1) + (r & 1);
#else
    int j = a % WN;
    return (j / VWN) * (TX * VWN) + (tid % TX) * VWN + j % VWN;
#endif
}

/* Every kernel of this file takes the same arguments (unused ones are placeholders), so the
 * WGSL twin binds one set of buffers and one uniform struct for all of them. */
#define SCONV_ARGS                                                                                            \
    GLOBAL const float *X, GLOBAL const float *W, GLOBAL const float *bias, GLOBAL const float *res, GLOBAL float *Y, \
        GLOBAL int *meta, GLOBAL float *part, GLOBAL const int *ktab, int cin, int cout, int ih, int iw, int oh, \
        int ow, int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw, int cstride, int gi, int data0,       \
        int img_stride, int tiles_at, int cap, int masked, int has_bias, int has_res, int act, float p0, float p1

/* Columns image n computes: tiles x positions per tile, or the whole map. */
FUNC int sconv_columns(GLOBAL const int* meta, int n, int cstride, int gi, int oh, int ow) {
#if TILED
    return meta[n * cstride + gi] * GV;
#else
    return oh * ow;
#endif
}

/* Output position (y * ow + x) of column j of image n, or -1 for a phantom. */
FUNC int sconv_position(GLOBAL const int* meta, int base, int tiles_at, int j, int oh, int ow) {
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
FUNC float sconv_epilogue(float v, float b, GLOBAL const float* res, int has_res, int at, int act, float p0, float p1) {
    v += b;
    if (has_res) v += res[at];
    return activate(act, v, p0, p1);
}

/* Sum of the KS partial sums of a split reduction for (channel m, column c) of image n. */
FUNC float sconv_split_sum(GLOBAL const float* part, int n, int m, int c, int cout, int cap) {
    float v = 0.0f;
    for (int s = 0; s < KS; ++s) v += part[((n * KS + s) * cout + m) * cap + c];
    return v;
}

/* Whether a listed column can be a position whose mask bit is 0: not where each tile is one
 * position (the lists hold only set ones), so 1x1 members skip that load. */
#define SC_MAY_SKIP (!TILED || GV > 1)

/* Stores output (channel m, position p) of image n from its reduction v as the unsplit GEMM
 * stores: bias b, residual, activation; nothing at a phantom (p < 0) or where `masked` says
 * the fill policy owns the position. Callers issue the loads of v and b before it, so the
 * checks here do not delay them: as a chain of dependent loads the split-K finish spent most
 * of its time waiting. */
FUNC void sconv_store_output(float v, float b, GLOBAL float* Y, GLOBAL const float* res, int has_res,
                             GLOBAL const int* meta, int base, int masked, int n, int m, int p, int cout, int P,
                             int act, float p0, float p1) {
    if (p < 0 || (SC_MAY_SKIP && masked && !mask_bit(meta, base, p))) return;
    int at = (n * cout + m) * P + p;
    Y[at] = sconv_epilogue(v, b, res, has_res, at, act, p0, p1);
}

/* Elements of one stage each work-item loads: TM x TK of A and TN x TK of B over NT items. */
#define SC_AL ((TM * TK + NT - 1) / NT)
#define SC_BL ((TN * TK + NT - 1) / NT)
/* Taps (kh x kw) up to which the reduction offsets come from a table in local memory instead of
 * ktab: reduction index gk is input channel gk / taps and tap gk % taps, and the tap's offsets
 * (ky * dh * iw + kx * dw, ky * dh, kx * dw) are the table's. A ktab load sat in front of
 * every gathered input element, so each stage's loads were two round trips to L2 in a row,
 * and with few columns a work-group's stages are a serial chain of them. The host sets it to 0
 * (every offset from ktab) for A/B measurements (`DYNASPA_TAP_TABLE=0`). */
#ifndef SC_TAPS
#define SC_TAPS 64
#endif

/* The tap table for sconv_load_stage, filled by the work-group (the caller barriers before it
 * is read). */
FUNC_INLINE void sconv_tap_table(LOCAL_PTR int* tapt, int tid, int taps, int kw, int dh, int dw, int iw) {
    for (int r = tid; r < IMIN(taps, SC_TAPS); r += NT) {
        int ky = r / kw, kx = r - (r / kw) * kw;
        tapt[3 * r] = ky * dh * iw + kx * dw;
        tapt[3 * r + 1] = ky * dh;
        tapt[3 * r + 2] = kx * dw;
    }
}

/* Input channel of reduction index gk, its tap into *r: gk / taps through the reciprocal (gk <
 * 2^24 is exact in a float, and the product is off by at most one, which the remainder's range
 * corrects). */
FUNC_INLINE int sconv_channel_of(int gk, int taps, float rtaps, int* r) {
    int ci = (int)((float)gk * rtaps), t = gk - ci * taps;
    if (t < 0) { --ci; t += taps; }
    else if (t >= taps) { ++ci; t -= taps; }
    *r = t;
    return ci;
}

/* Loads stage k0 (TK reduction indices, clipped at ke) of the transposed weight (ra) and of
 * the gathered input columns (rb) into registers; element e of a stage is tid + l * NT, laid
 * out [k][m] and [k][c] as As and Bs. Out-of-range elements are 0.
 *
 * Always inlined: it reads the kernel's LOCAL arrays cy and cxs. Where clang declines to
 * inline it (two call sites and a body that grows with SC_AL + SC_BL: on PoCL with KS > 1
 * and work-groups under 256 items), IPSCCP replaces its cy/cxs
 * parameters with direct references to the kernel's LOCAL globals. PoCL (3.1, LLVM 15) then
 * turns the kernel's automatic LOCAL arrays into hidden arguments but rewrites only the
 * kernel's own uses: the helper still reads the old global, which nothing writes any more,
 * so LLVM folds every B (input) element to 0 and each split's partial sums come out 0.
 * NVRTC and NVIDIA's OpenCL computed these members right without the attribute (on an H100);
 * the forced inlining there is expected to change nothing but has not been timed. */
FUNC_INLINE void sconv_load_stage(GLOBAL const float* Wt, GLOBAL const float* Xn, GLOBAL const int* ktab, LOCAL_PTR int* cy,
                           LOCAL_PTR int* cxs, LOCAL_PTR const int* tapt, float* ra, float* rb, int tid, int m0, int k0,
                           int ke, int cout, int ih, int iw, int taps, float rtaps) {
    for (int l = 0; l < SC_AL; ++l) {
        int e = tid + l * NT;
        int m = e % TM, k = e / TM;
        int gm = m0 + m, gk = k0 + k;
        ra[l] = (e < TM * TK && gm < cout && gk < ke) ? Wt[gk * cout + gm] : 0.0f;
    }
    for (int l = 0; l < SC_BL; ++l) {
        int e = tid + l * NT;
        int c = e % TN, k = e / TN;
        int gk = k0 + k;
        float v = 0.0f;
        if (e < TN * TK && gk < ke) {
            int off, dy, dx;
            if (taps <= SC_TAPS) {
                int r;
                int ci = sconv_channel_of(gk, taps, rtaps, &r);
                off = ci * ih * iw + tapt[3 * r];
                dy = tapt[3 * r + 1];
                dx = tapt[3 * r + 2];
            } else {
                off = ktab[3 * gk];
                dy = ktab[3 * gk + 1];
                dx = ktab[3 * gk + 2];
            }
            int iy = cy[c] + dy, ix = cxs[c] + dx;
            if (iy >= 0 && iy < ih && ix >= 0 && ix < iw) v = Xn[off + cy[c] * iw + cxs[c]];
        }
        rb[l] = v;
    }
}

/* SC_HOIST = 1 (the host sets 0 on NVIDIA's OpenCL and under `DYNASPA_SC_HOIST=0`;
 * schedules.rs, `hoisted_gather`, says why): where NT is a multiple of TM and of TN, each
 * work-item loads the same weight channel and the same input column in every stage, at rows
 * NT / TM (NT / TN) apart, so what sconv_load_stage works out per element from scratch (the
 * column's origin from local memory, the tap's three offsets, four bounds checks) is worked
 * out once per kernel: the column's base offset, and which taps fall inside the input as one
 * bit each. A stage then costs a B element one decomposition step and one tap-table read. At
 * density 0.1 a work-group's stages are a serial chain, and this index work sat between each
 * stage's barrier and its FMAs (RESULTS.md, sessions 24 and 25). Taps past 32 (one word of
 * bits) or past the tap table take sconv_load_stage. */
#ifndef SC_HOIST
#define SC_HOIST 1
#endif
#define SC_HOISTED (SC_HOIST && NT % TM == 0 && NT % TN == 0)
#define SC_HSA (NT / TM)
#define SC_HSB (NT / TN)

/* sconv_load_stage for hoisted members: Wa is the weight at (row 0, this item's channel), Xc the
 * input at this item's column's origin, aok whether that channel exists, hv its taps inside the
 * input (0 for a phantom), hsc and hsr SC_HSB as whole input channels and taps. */
FUNC_INLINE void sconv_load_stage_h(GLOBAL const float* Wa, GLOBAL const float* Xc, LOCAL_PTR const int* tapt, float* ra,
                                    float* rb, int tid, int k0, int ke, int cout, int aok, uint hv, int taps, float rtaps,
                                    int ihw, int hsc, int hsr) {
    int ka = tid / TM;
    for (int l = 0; l < SC_AL; ++l) {
        int k = ka + l * SC_HSA, gk = k0 + k;
        ra[l] = (k < TK && aok && gk < ke) ? Wa[gk * cout] : 0.0f;
    }
    int kb = tid / TN, gk = k0 + kb, r;
    int ci = sconv_channel_of(gk, taps, rtaps, &r);
    for (int l = 0; l < SC_BL; ++l) {
        float v = 0.0f;
        if (kb + l * SC_HSB < TK && gk < ke && ((hv >> (uint)r) & 1u)) v = Xc[ci * ihw + tapt[3 * r]];
        rb[l] = v;
        gk += SC_HSB;
        ci += hsc;
        r += hsr;
        if (r >= taps) { r -= taps; ++ci; }
    }
}

#if MMA
/* One staged TK-deep slice on the tensor cores: per 8 reduction indices, each warp loads its
 * fragments of A (weights, As[k][m]) and B (columns, Bs[k][c]), splits them into TF32 head and
 * rest, and accumulates the three products (smallest first) into its m16n8 tiles. */
FUNC_INLINE void sconv_mma_stage(LOCAL_PTR float (*As)[TM + SC_PAD], LOCAL_PTR float (*Bs)[TN + SC_PAD], float* acc, int tid) {
    int lane = tid & 31, warp = tid >> 5;
    int g = lane >> 2, t = lane & 3;
    int wm0 = (warp % MMA_WGM) * (TM / MMA_WGM), wn0 = (warp / MMA_WGM) * (TN / MMA_WGN);
    for (int kk = 0; kk < TK; kk += 8) {
        uint bh[MMA_FN][2], bl[MMA_FN][2];
        for (int f = 0; f < MMA_FN; ++f) {
            int c = wn0 + f * 8 + g;
            TF32_SPLIT(Bs[kk + t][c], bh[f][0], bl[f][0]);
            TF32_SPLIT(Bs[kk + t + 4][c], bh[f][1], bl[f][1]);
        }
        for (int e = 0; e < MMA_FM; ++e) {
            int r = wm0 + e * 16 + g;
            uint ah[4], al[4];
            TF32_SPLIT(As[kk + t][r], ah[0], al[0]);
            TF32_SPLIT(As[kk + t][r + 8], ah[1], al[1]);
            TF32_SPLIT(As[kk + t + 4][r], ah[2], al[2]);
            TF32_SPLIT(As[kk + t + 4][r + 8], ah[3], al[3]);
            for (int f = 0; f < MMA_FN; ++f) {
                float* d = acc + (e * MMA_FN + f) * 4;
                MMA_TF32(d, al, bh[f]);
                MMA_TF32(d, ah, bl[f]);
                MMA_TF32(d, ah, bh[f]);
            }
        }
    }
}
#endif

/* One stage's registers (sconv_load_stage) into As / Bs; the caller barriers after. */
FUNC_INLINE void sconv_store_stage(LOCAL_PTR float (*As)[TM + SC_PAD], LOCAL_PTR float (*Bs)[TN + SC_PAD], const float* ra,
                                   const float* rb, int tid) {
    for (int l = 0; l < SC_AL; ++l) {
        int e = tid + l * NT;
        if (e < TM * TK) As[e / TM][e % TM] = ra[l];
    }
    for (int l = 0; l < SC_BL; ++l) {
        int e = tid + l * NT;
        if (e < TN * TK) Bs[e / TN][e % TN] = rb[l];
    }
}

/* The products of one staged TK-deep slice into the work-item's accumulators. */
FUNC_INLINE void sconv_product_stage(LOCAL_PTR float (*As)[TM + SC_PAD], LOCAL_PTR float (*Bs)[TN + SC_PAD], float* acc, int tid,
                                     int tx, int ty) {
#if MMA
    sconv_mma_stage(As, Bs, acc, tid);
#else
    for (int kk = 0; kk < TK; ++kk) {
        float a[WM], b[WN];
        for (int i = 0; i < WM; i += VWM) SC_LDS_A(a + i, &As[kk][(i / VWM) * (TY * VWM) + ty * VWM]);
        for (int j = 0; j < WN; j += VWN) SC_LDS_B(b + j, &Bs[kk][(j / VWN) * (TX * VWN) + tx * VWN]);
        for (int i = 0; i < WM; ++i)
            for (int j = 0; j < WN; ++j) acc[i * WN + j] += a[i] * b[j];
    }
#endif
}

/* Stages in flight in the GEMM's reduction loop: 1 (registers for the next stage while this
 * one computes) or 2 (`DYNASPA_SC_DEPTH=2`, one more register set; see the loop). */
#ifndef SC_DEPTH
#define SC_DEPTH 1
#endif

#if KS > 1 && FUSED_FINISH
/* Per output tile (column tile, channel tile, image: the grid without its splits), how many of
 * its KS work-groups have stored their partial sums. Zero between launches: the last arrival
 * resets it, and work-groups past the frame's columns never touch theirs. */
#define SCONV_FUSED_ARGS , GLOBAL int *tile_count
#else
#define SCONV_FUSED_ARGS
#endif
#if SELF_LIST && SELF_COUNT
/* The mask tensor (floats, mk_stride per image: 0 when one mask serves every image), and where
 * SELF_COUNT stores the counts. */
#define SCONV_SELF_ARGS , GLOBAL const float *mk, int mk_stride, GLOBAL int *rep, int rep_stride
#elif SELF_LIST
#define SCONV_SELF_ARGS , GLOBAL const float *mk, int mk_stride
#endif
#if SELF_LIST
#if SELF_COUNT
/* Folds value v at position q into the work-item's first non-binary position. */
#define SL_BAD(v, q) bad = ((v) != 1.0f && !((v) == 0.0f)) ? IMIN(bad, (q)) : bad
#else
#define SL_BAD(v, q) (void)0
#endif

/* A SELF_LIST work-group's columns: the positions of image n's set mask values of rank c0 ..
 * c0 + TN - 1 (row-major) into cpos, -1 past the last; returns the image's column count, the
 * same in every work-item. Each work-item counts a contiguous segment of the mask, a scan of
 * those counts gives each segment's first rank, and the segments holding the group's ranks
 * list them. The caller barriers before reading cpos.
 *
 * The first SL_BITS positions of a segment are kept as bits in registers, so listing them reads
 * no memory again: every load here is on the GEMM's critical path, and a second pass over the
 * mask was one more round trip to L2 for each work-group. They are loaded 8 at a time, clamped
 * rather than branched, so the 8 are in flight together. Longer segments (maps over SL_BITS x
 * NT positions) read the rest twice. Under SELF_COUNT the first non-binary position goes to
 * *lbad (0x7fffffff for none), read after the return. */
#define SL_BITS 64
/* SL_EARLY = 1 (CUDA; the host asks, schedules.rs `self_list_early`): the group adds up the
 * mask's count first (a local atomic, two barriers) and leaves when it has no column, before the
 * scan. A grid sized for every column the map could have (DYNASPA_SL_GRID=0) leaves most of a
 * self-listing member's work-groups without one at density 0.1 (conv1x1's default member: 1440
 * of 1600, six waves on an H200), and a grid launched for the columns a frame expects still
 * some; each ran the scan's log2(NT) barriers before it could tell: on an H200 members with
 * whole grids got up to 16% faster with it (RESULTS.md, session 29). PoCL 3.1 crashed (SIGSEGV)
 * running it on maps of long segments, so elsewhere it stays 0. */
#ifndef SL_EARLY
#define SL_EARLY 0
#endif
FUNC_INLINE int sconv_self_list(GLOBAL const float* mk, LOCAL_PTR int* scan, LOCAL_PTR int* cpos, LOCAL_PTR int* lbad, int tid, int c0, int P) {
    for (int c = tid; c < TN; c += NT) cpos[c] = -1;
    if (SELF_COUNT && tid == 0) *lbad = 0x7fffffff;
#if SL_EARLY
    /* The total goes to scan[2 * NT], past the scan's two rows. */
    if (tid == 0) scan[2 * NT] = 0;
#endif
    int seg = (P + NT - 1) / NT;
    int lo = IMIN(P, tid * seg), hi = IMIN(P, lo + seg);
    int rb = IMIN(hi, lo + SL_BITS);
    uint w0 = 0u, w1 = 0u;
    int bad = 0x7fffffff;
    for (int b = lo; b < rb; b += 8) {
        uint x = 0u;
        for (int i = 0; i < 8; ++i) {
            float v = mk[IMIN(b + i, rb - 1)];
            x |= (uint)(v == 1.0f && b + i < rb) << i;
            if (b + i < rb) SL_BAD(v, b + i);
        }
        /* Chunks start 8-aligned within the segment, so none straddles the two words. */
        if (b - lo < 32) w0 |= x << (b - lo);
        else w1 |= x << (b - lo - 32);
    }
    int cnt = POPCOUNT(w0) + POPCOUNT(w1);
    for (int p = rb; p < hi; ++p) {
        float v = mk[p];
        cnt += (int)(v == 1.0f);
        SL_BAD(v, p);
    }
#if SL_EARLY
    /* The first barrier orders the initialisations above before the additions and minimum, the
     * second those before the total's reads (and the caller's of the minimum). */
    LOCAL_BARRIER();
    if (cnt > 0) ATOMIC_ADD_LOCAL(&scan[2 * NT], cnt);
    if (SELF_COUNT && bad != 0x7fffffff) ATOMIC_MIN_LOCAL(lbad, bad);
    LOCAL_BARRIER();
    int early = scan[2 * NT];
    /* The same for the whole work-group: no barrier is skipped. */
    if (c0 >= early) return early;
#endif
    /* Inclusive scan, ping-pong, one barrier per step (its first barrier also orders the
     * cpos and lbad initialisations above before the listing and minimum below; the steps'
     * barriers, at least one, the minimum before the caller's read). */
    int cur = 0;
    scan[tid] = cnt;
    LOCAL_BARRIER();
    if (!SL_EARLY && SELF_COUNT && bad != 0x7fffffff) ATOMIC_MIN_LOCAL(lbad, bad);
    for (int off = 1; off < NT; off <<= 1) {
        int v = scan[cur * NT + tid] + (tid >= off ? scan[cur * NT + tid - off] : 0);
        cur ^= 1;
        scan[cur * NT + tid] = v;
        LOCAL_BARRIER();
    }
    int total = scan[cur * NT + NT - 1];
    int r = scan[cur * NT + tid] - cnt;
    if (cnt > 0 && r < c0 + TN && r + cnt > c0) {
        for (int q = lo; q < rb; ++q) {
            uint bit = (q - lo < 32 ? w0 >> (q - lo) : w1 >> (q - lo - 32)) & 1u;
            if (bit) {
                if (r >= c0 && r < c0 + TN) cpos[r - c0] = q;
                ++r;
            }
        }
        for (int q = rb; q < hi; ++q) {
            if (mk[q] == 1.0f) {
                if (r >= c0 && r < c0 + TN) cpos[r - c0] = q;
                ++r;
            }
        }
    }
    return total;
}
#else
#define SCONV_SELF_ARGS
#endif
#if SC_CSLOW
/* Column tiles slowest, then images x splits, then channel tiles. */
#define SC_CTILE GROUP_ID(2)
#define SC_NCTILES NUM_GROUPS(2)
#define SC_MTILE GROUP_ID(0)
#define SC_NMTILES NUM_GROUPS(0)
#define SC_NKS GROUP_ID(1)
#else
#define SC_CTILE GROUP_ID(0)
#define SC_NCTILES NUM_GROUPS(0)
#define SC_MTILE GROUP_ID(1)
#define SC_NMTILES NUM_GROUPS(1)
#define SC_NKS GROUP_ID(2)
#endif

/* Grid: (ceil(cap / TN), ceil(cout / TM), N * KS), local (TX, TY); cap = columns the map can
 * have (SC_CSLOW: (ceil(cout / TM), N * KS, ceil(cap / TN))). Wt is the weight transposed to
 * [cin * kh * kw][cout]; ktab per reduction index k the input offset ci * ih * iw + ky * dh *
 * iw + kx * dw, ky * dh and kx * dw. */
/* SC_MIN_BLOCKS: work-groups per SM the registers must leave room for (CUDA only), from the
 * host (schedules.rs, register_bound): two of 256 under SC_VEC, whose 8 x 4 float4 variant needed
 * 129 registers, one more than two groups fit, and at density 0.1 a split reduction launches
 * more work-groups than one wave holds (conv3x3 at KS 32: 31.6 µs against 22.2 with 122). */
#ifndef SC_MIN_BLOCKS
#define SC_MIN_BLOCKS 1
#endif
KERNEL LAUNCH_BOUNDS(NT, SC_MIN_BLOCKS) sconv_gemm_f32(SCONV_ARGS SCONV_FUSED_ARGS SCONV_SELF_ARGS) {
    PDL_ENTRY();
    GLOBAL const float* Wt = W;
    LOCAL ALIGN16 float As[TK][TM + SC_PAD];
    LOCAL ALIGN16 float Bs[TK][TN + SC_PAD];
    LOCAL int cy[TN];
    LOCAL int cxs[TN];
    LOCAL int cpos[TN];
    LOCAL int tapt[SC_TAPS > 0 ? 3 * SC_TAPS : 3];
#if KS > 1 && FUSED_FINISH
    LOCAL int last_split;
#endif
    /* Read after the barrier in front of the first stage. */
    sconv_tap_table(tapt, LOCAL_ID(1) * TX + LOCAL_ID(0), kh * kw, kw, dh, dw, iw);
    int c0 = SC_CTILE * TN;
#if SELF_LIST
    LOCAL int sscan[2 * NT + SL_EARLY];
    LOCAL int sbad;
    /* A self-listing grid may hold fewer column tiles than the map can have (the host sizes it
     * from the columns it expects, lower/ctx.rs `ColumnGrid`): each work-group takes windows
     * c0, c0 + the grid's width, ... until one is past the map's columns, so any grid covers
     * any map, and a frame with the columns expected runs one window. The loop's body, not
     * indented, runs to the end of the kernel. */
    for (;; c0 += SC_NCTILES * TN) {
#endif
    int tx = LOCAL_ID(0), ty = LOCAL_ID(1), gk = SC_NKS, taps = kh * kw;
#if SELF_LIST
    /* Everything below is computed per window: held across the loop instead, 8 x 4 members
     * spilled 72 bytes where they had spilled none, and ran up to 35% slower (session 30). */
    NO_HOIST(tx);
    NO_HOIST(ty);
    NO_HOIST(gk);
    NO_HOIST(taps);
#endif
    int tid = ty * TX + tx;
    int m0 = SC_MTILE * TM;
    int n = gk / KS, ks = gk - (gk / KS) * KS;
    int base = data0 + n * img_stride;
#if SELF_LIST
    int cols = sconv_self_list(mk + n * mk_stride, sscan, cpos, &sbad, tid, c0, oh * ow);
#if SELF_COUNT
    if (SC_MTILE == 0 && ks == 0 && c0 == 0 && tid == 0) {
        rep[n * rep_stride] = cols;
        rep[n * rep_stride + rep_stride - 1] = sbad == 0x7fffffff ? -1 : sbad;
    }
#endif
    /* The same for the whole work-group, so returning here skips no barrier. For
     * sconv_finish_f32, the first column tile (there always is one) publishes the count, here
     * when the map has no columns, and each column tile its columns. (PoCL 6 computed wrong
     * columns when the count was stored before this branch for every map.) */
    if (c0 >= cols) {
#if KS > 1 && !FUSED_FINISH
        if (SC_MTILE == 0 && ks == 0 && c0 == 0 && tid == 0) meta[n * cstride + gi] = 0;
#endif
        return;
    }
    LOCAL_BARRIER();
#if KS > 1 && !FUSED_FINISH
    if (SC_MTILE == 0 && ks == 0) {
        for (int c = tid; c < TN && c0 + c < cols; c += NT) meta[base + tiles_at + c0 + c] = cpos[c];
        if (c0 == 0 && tid == 0) meta[n * cstride + gi] = cols;
    }
#endif
#else
    int cols = sconv_columns(meta, n, cstride, gi, oh, ow);
    /* The same for the whole work-group, so returning here skips no barrier. */
    if (c0 >= cols) return;
#endif
    for (int c = tid; c < TN; c += NT) {
#if SELF_LIST
        int p = cpos[c];
#else
        int p = c0 + c < cols ? sconv_position(meta, base, tiles_at, c0 + c, oh, ow) : -1;
        cpos[c] = p;
#endif
        /* A phantom column reads nothing: its origin lies far outside the input. */
        int oy = p < 0 ? -(1 << 24) : p / ow, ox = p < 0 ? 0 : p - (p / ow) * ow;
        cy[c] = oy * sh - ph;
        cxs[c] = ox * sw - pw;
    }
    int K = cin * taps;
    int ihw = ih * iw;
    float rtaps = 1.0f / (float)taps;
    int chunk = ((K + KS - 1) / KS + TK - 1) / TK * TK;
    int kb = ks * chunk, ke = IMIN(K, kb + chunk);
    GLOBAL const float* Xn = X + n * cin * ihw;
    float acc[NACC];
    for (int a = 0; a < NACC; ++a) acc[a] = 0.0f;
    LOCAL_BARRIER();
#if SC_HOISTED
    /* The same for the whole work-group (taps is the op's). */
    int hoist = taps <= IMIN(SC_TAPS, 32);
    int hc = tid % TN, hm = m0 + tid % TM;
    int aok = hm < cout;
    GLOBAL const float* Wa = Wt + (aok ? hm : 0);
    uint hv = 0u;
    for (int r = 0; hoist && r < taps; ++r) {
        int iy = cy[hc] + tapt[3 * r + 1], ix = cxs[hc] + tapt[3 * r + 2];
        hv |= (uint)(iy >= 0 && iy < ih && ix >= 0 && ix < iw) << (uint)r;
    }
    /* A phantom's origin is far outside the input: no tap is in, and no offset is formed. */
    GLOBAL const float* Xc = Xn + (hv ? cy[hc] * iw + cxs[hc] : 0);
    int hsc = SC_HSB / taps, hsr = SC_HSB - (SC_HSB / taps) * taps;
#endif
    /* Software pipeline: the global loads of stage k0 + TK are issued into registers before
     * the FMAs of stage k0 run from local memory, so their latency overlaps compute instead
     * of stalling every stage. With few columns a work-group's stages are a serial chain, and
     * this latency was most of its time. SC_LOAD: stage k into registers r_a / r_b. SC_STEP:
     * those registers into local memory, the load of stage `next` (where there is one) issued
     * into them, then the products of the staged slice. */
#if SC_HOISTED
#define SC_LOAD(r_a, r_b, k)                                                                                        \
    do {                                                                                                            \
        if (hoist) sconv_load_stage_h(Wa, Xc, tapt, r_a, r_b, tid, k, ke, cout, aok, hv, taps, rtaps, ihw, hsc, hsr); \
        else sconv_load_stage(Wt, Xn, ktab, cy, cxs, tapt, r_a, r_b, tid, m0, k, ke, cout, ih, iw, taps, rtaps);     \
    } while (0)
#else
#define SC_LOAD(r_a, r_b, k) sconv_load_stage(Wt, Xn, ktab, cy, cxs, tapt, r_a, r_b, tid, m0, k, ke, cout, ih, iw, taps, rtaps)
#endif
#define SC_STEP(r_a, r_b, next)                                                                          \
    do {                                                                                                 \
        sconv_store_stage(As, Bs, r_a, r_b, tid);                                                        \
        LOCAL_BARRIER();                                                                                 \
        if ((next) < ke) SC_LOAD(r_a, r_b, next);                                                        \
        sconv_product_stage(As, Bs, acc, tid, tx, ty);                                                   \
        LOCAL_BARRIER();                                                                                 \
    } while (0)
    float ra[SC_AL], rb[SC_BL];
    SC_LOAD(ra, rb, kb);
#if SC_DEPTH > 1
    /* Two stages in flight: a second register set takes stage k0 + 2 TK while k0 computes, so
     * a load has two stages' FMAs to arrive in, not one. The loop is unrolled by two because
     * registers cannot be indexed by a variable. */
    float ra2[SC_AL], rb2[SC_BL];
    if (kb + TK < ke) SC_LOAD(ra2, rb2, kb + TK);
    for (int k0 = kb; k0 < ke; k0 += 2 * TK) {
        SC_STEP(ra, rb, k0 + 2 * TK);
        /* k0 and ke are the work-group's: every work-item leaves here together. */
        if (k0 + TK >= ke) break;
        SC_STEP(ra2, rb2, k0 + 3 * TK);
    }
#else
    for (int k0 = kb; k0 < ke; k0 += TK) SC_STEP(ra, rb, k0 + TK);
#endif
    /* Only the stores are left: the next launch may start (where PDL_ENTRY did not let it). */
    PDL_TRIGGER();
    int P = oh * ow;
#if KS > 1 && VWN > 1
    /* A run of VWN columns goes out in one 8 or 16-byte store. One float per store, neighbouring
     * work-items' stores landed VWN floats apart, 1 / VWN of each 32-byte sector, and the 8 x 4
     * members with long splits lost 5% to it. Phantom columns in a run get partial sums too:
     * scratch no finish reads. Where rows are not aligned (cap not a multiple of VWN) or a run
     * reaches past cap, one float at a time. */
    for (int a = 0; a < NACC; a += VWN) {
        int m = m0 + sconv_acc_m(a, tid), c = sconv_acc_c(a, tid);
        if (m >= cout) continue;
        GLOBAL float* dst = part + ((n * KS + ks) * cout + m) * cap + c0 + c;
        if (cap % VWN == 0 && c0 + c + VWN <= cap) {
#if VWN == 4
            GLOBAL_STORE_VEC4(dst, acc[a], acc[a + 1], acc[a + 2], acc[a + 3]);
#else
            GLOBAL_STORE_VEC2(dst, acc[a], acc[a + 1]);
#endif
        } else {
            for (int q = 0; q < VWN; ++q)
                if (cpos[c + q] >= 0) dst[q] = acc[a + q];
        }
    }
#else
    for (int a = 0; a < NACC; ++a) {
        int m = m0 + sconv_acc_m(a, tid), c = sconv_acc_c(a, tid);
        int p = cpos[c];
        if (m >= cout || p < 0) continue;
#if KS > 1
        part[((n * KS + ks) * cout + m) * cap + c0 + c] = acc[a];
#else
        sconv_store_output(acc[a], has_bias ? bias[m] : 0.0f, Y, res, has_res, meta, base, masked, n, m, p, cout, P, act,
                           p0, p1);
#endif
    }
#endif
#if KS > 1 && FUSED_FINISH
    /* Release: every work-item's partial sums are visible device-wide before the group's
     * arrival is counted (the barrier makes tid 0 count after all of them fenced). */
    GLOBAL_FENCE();
    LOCAL_BARRIER();
    /* Per window of columns (c0 / TN), not per work-group: a self-listing grid may be narrower. */
    int tile = (n * SC_NMTILES + SC_MTILE) * ((cap + TN - 1) / TN) + c0 / TN;
    if (tid == 0) {
        last_split = ATOMIC_INC(&tile_count[tile]) == KS - 1;
        /* Every split has arrived, so nothing else touches the counter in this launch; the
         * next launch (the next frame) finds it at 0 without a memset. */
        if (last_split) tile_count[tile] = 0;
    }
    LOCAL_BARRIER();
    /* The same for the whole work-group. */
    if (last_split) {
        /* Acquire: the other splits' partial sums are read after their arrivals were seen. */
        GLOBAL_FENCE();
        for (int a = 0; a < NACC; ++a) {
            int m = m0 + sconv_acc_m(a, tid), c = sconv_acc_c(a, tid);
            if (m >= cout) continue;
            sconv_store_output(sconv_split_sum(part, n, m, c0 + c, cout, cap), has_bias ? bias[m] : 0.0f, Y, res, has_res,
                               meta, base, masked, n, m, cpos[c], cout, P, act, p0, p1);
        }
    }
#endif
#if SELF_LIST
    /* The next window's listing rewrites cpos, cy, cxs and the scan: every read of this one's
     * is done first. */
    LOCAL_BARRIER();
    }
#endif
}

/* Adds the KS partial sums of sconv_gemm_f32 and stores like it, a work-item per output.
 * Grid: (ceil(cap / 64), ceil(cout / CH), N), local (64, CH, 1): CH channels per work-group
 * (the vendor epilogue launches CH = 1), so a frame with few columns does not pay for a row of
 * mostly idle work-groups per channel. SC_CSLOW: (ceil(cout / CH), N, ceil(cap / 64)). */
KERNEL sconv_finish_f32(SCONV_ARGS) {
    PDL_ENTRY();
#if SC_CSLOW
    int c = GROUP_ID(2) * LOCAL_SIZE(0) + LOCAL_ID(0), m = GROUP_ID(0) * LOCAL_SIZE(1) + LOCAL_ID(1), n = GROUP_ID(1);
    int cstep = NUM_GROUPS(2) * LOCAL_SIZE(0);
#else
    int c = GLOBAL_ID(0), m = GROUP_ID(1) * LOCAL_SIZE(1) + LOCAL_ID(1), n = GROUP_ID(2);
    int cstep = NUM_GROUPS(0) * LOCAL_SIZE(0);
#endif
    if (m >= cout) return;
    /* Most work-items find no column: they read the count and leave, and nothing else, since
     * any further load of theirs cost more than it saved (session 15, call E). The column's
     * position, partial sums and bias are independent loads, issued together. A grid narrower
     * than cap (a self-listing member's, see sconv_gemm_f32) takes a column every cstep. */
    int cols = IMIN(cap, sconv_columns(meta, n, cstride, gi, oh, ow));
    int base = data0 + n * img_stride;
    for (; c < cols; c += cstep) {
        int p = sconv_position(meta, base, tiles_at, c, oh, ow);
        float v = sconv_split_sum(part, n, m, c, cout, cap);
        float b = has_bias ? bias[m] : 0.0f;
        sconv_store_output(v, b, Y, res, has_res, meta, base, masked, n, m, p, cout, oh * ow, act, p0, p1);
    }
}

/* Depthwise (one input and one output channel per group): one work-item per (column, channel).
 * Grid: (ceil(cap / 64), channels, N), local (64, 1, 1). W is [C, kh * kw]. */
KERNEL sconv_dw_f32(SCONV_ARGS) {
    PDL_ENTRY();
    int c = GLOBAL_ID(0), ch = GROUP_ID(1), n = GROUP_ID(2);
    if (c >= IMIN(cap, sconv_columns(meta, n, cstride, gi, oh, ow))) return;
    int base = data0 + n * img_stride;
    int p = sconv_position(meta, base, tiles_at, c, oh, ow);
    if (p < 0 || (SC_MAY_SKIP && masked && !mask_bit(meta, base, p))) return;
    int oy = p / ow, ox = p - (p / ow) * ow;
    int y0 = oy * sh - ph, x0 = ox * sw - pw;
    GLOBAL const float* Xc = X + (n * cin + ch) * ih * iw;
    GLOBAL const float* Wc = W + ch * kh * kw;
    float acc = 0.0f;
    for (int ky = 0; ky < kh; ++ky) {
        int iy = y0 + ky * dh;
        if (iy < 0 || iy >= ih) continue;
        for (int kx = 0; kx < kw; ++kx) {
            int ix = x0 + kx * dw;
            if (ix < 0 || ix >= iw) continue;
            acc += Wc[ky * kw + kx] * Xc[iy * iw + ix];
        }
    }
    int at = (n * cout + ch) * oh * ow + p;
    Y[at] = sconv_epilogue(acc, has_bias ? bias[ch] : 0.0f, res, has_res, at, act, p0, p1);
}

/* Residual fill: where image n's mask bit is 0, Y = act(res) over the [N, cout, oh, ow] output.
 * Grid: (ceil(oh * ow / 64), cout, N), local (64, 1, 1). */
KERNEL sconv_fill_residual_f32(SCONV_ARGS) {
    PDL_ENTRY();
    int p = GLOBAL_ID(0), m = GROUP_ID(1), n = GROUP_ID(2);
    if (p >= oh * ow || mask_bit(meta, data0 + n * img_stride, p)) return;
    int at = (n * cout + m) * oh * ow + p;
    Y[at] = activate(act, res[at], p0, p1);
}

/* Cached fill of an op without sparse kernels: Y (the cached activations) takes the freshly
 * computed X where the mask bit is 1, or everywhere without `masked` (the first frame).
 * Grid: (ceil(oh * ow / 64), cout, N), local (64, 1, 1). */
KERNEL sconv_blend_cached_f32(SCONV_ARGS) {
    PDL_ENTRY();
    int p = GLOBAL_ID(0), m = GROUP_ID(1), n = GROUP_ID(2);
    if (p >= oh * ow || (masked && !mask_bit(meta, data0 + n * img_stride, p))) return;
    int at = (n * cout + m) * oh * ow + p;
    Y[at] = X[at];
}
