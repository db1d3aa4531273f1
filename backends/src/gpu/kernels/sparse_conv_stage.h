/* The stages of sparse_conv_gemm.cl: the tap table, a stage's global loads into registers
 * (per element, or hoisted), their store into local memory and the products of a staged
 * slice. Compiled after sparse_conv_knobs.h. */

/* Elements of one stage each work-item loads: TM x TK of A and TN x TK of B over NT items. */
#define SPARSE_CONV_AL ((TM * TK + NT - 1) / NT)
#define SPARSE_CONV_BL ((TN * TK + NT - 1) / NT)
/* Taps (kh x kw) up to which the reduction offsets come from a table in local memory instead of
 * ktab: reduction index gk is input channel gk / taps and tap gk % taps, and the tap's offsets
 * (ky * dh * iw + kx * dw, ky * dh, kx * dw) are the table's. A ktab load sat in front of
 * every gathered input element, so each stage's loads were two round trips to L2 in a row,
 * and with few columns a work-group's stages are a serial chain of them: the table made members
 * with long chains of stages 14-31% faster on CUDA and OpenCL (RESULTS.md, "the tap table on and
 * off"). Kernels of more taps read ktab. */
#define SPARSE_CONV_TAPS 64

/* The tap table for sparse_conv_load_stage, filled by the work-group (the caller barriers before it
 * is read). */
FUNC_INLINE void sparse_conv_tap_table(LOCAL_PTR int* tapt, int tid, int taps, int kw, int dh, int dw, int iw) {
    for (int r = tid; r < IMIN(taps, SPARSE_CONV_TAPS); r += NT) {
        int ky = r / kw, kx = r - (r / kw) * kw;
        tapt[3 * r] = ky * dh * iw + kx * dw;
        tapt[3 * r + 1] = ky * dh;
        tapt[3 * r + 2] = kx * dw;
    }
}

/* Input channel of reduction index gk, its tap into *r: gk / taps through the reciprocal (gk <
 * 2^24 is exact in a float, and the product is off by at most one, which the remainder's range
 * corrects). */
FUNC_INLINE int sparse_conv_channel_of(int gk, int taps, float rtaps, int* r) {
    int ci = (int)((float)gk * rtaps), t = gk - ci * taps;
    if (t < 0) { --ci; t += taps; }
    else if (t >= taps) { ++ci; t -= taps; }
    *r = t;
    return ci;
}

/* Where the input of column c (origin cy[c], cxs[c]) at reduction index gk lies from Xn, -1
 * outside the input. */
FUNC_INLINE int sparse_conv_gather_at(GLOBAL const int* ktab, LOCAL_PTR int* cy, LOCAL_PTR int* cxs, LOCAL_PTR const int* tapt, int c,
                                int gk, int ih, int iw, int taps, float rtaps) {
    int off, dy, dx;
    if (taps <= SPARSE_CONV_TAPS) {
        int r;
        int ci = sparse_conv_channel_of(gk, taps, rtaps, &r);
        off = ci * ih * iw + tapt[3 * r];
        dy = tapt[3 * r + 1];
        dx = tapt[3 * r + 2];
    } else {
        off = ktab[3 * gk];
        dy = ktab[3 * gk + 1];
        dx = ktab[3 * gk + 2];
    }
    int iy = cy[c] + dy, ix = cxs[c] + dx;
    return (iy >= 0 && iy < ih && ix >= 0 && ix < iw) ? off + cy[c] * iw + cxs[c] : -1;
}

/* The input of column c at reduction index gk, 0 outside the input. */
FUNC_INLINE float sparse_conv_gather_elem(GLOBAL const FLT* Xn, GLOBAL const int* ktab, LOCAL_PTR int* cy, LOCAL_PTR int* cxs,
                                    LOCAL_PTR const int* tapt, int c, int gk, int ih, int iw, int taps, float rtaps) {
    int at = sparse_conv_gather_at(ktab, cy, cxs, tapt, c, gk, ih, iw, taps, rtaps);
    return at >= 0 ? LDF(Xn, at) : 0.0f;
}

/* Loads stage k0 (TK reduction indices, clipped at ke) of the transposed weight (ra) and of
 * the gathered input columns (rb) into registers; element e of a stage is tid + l * NT, laid
 * out [k][m] and [k][c] as As and Bs. Out-of-range elements are 0.
 *
 * Always inlined: it reads the kernel's LOCAL arrays cy and cxs. Where clang declines to
 * inline it (two call sites and a body that grows with SPARSE_CONV_AL + SPARSE_CONV_BL: on PoCL with KS > 1
 * and work-groups under 256 items), IPSCCP replaces its cy/cxs
 * parameters with direct references to the kernel's LOCAL globals. PoCL (3.1, LLVM 15) then
 * turns the kernel's automatic LOCAL arrays into hidden arguments but rewrites only the
 * kernel's own uses: the helper still reads the old global, which nothing writes any more,
 * so LLVM folds every B (input) element to 0 and each split's partial sums come out 0.
 * NVRTC and NVIDIA's OpenCL computed these members right without the attribute (on an H100);
 * the forced inlining there is expected to change nothing but has not been timed. */
FUNC_INLINE void sparse_conv_load_stage(GLOBAL const FLT* Wt, GLOBAL const FLT* Xn, GLOBAL const int* ktab, LOCAL_PTR int* cy,
                           LOCAL_PTR int* cxs, LOCAL_PTR const int* tapt, float* ra, float* rb, int tid, int m0, int k0,
                           int ke, int cout, int ih, int iw, int taps, float rtaps) {
    for (int l = 0; l < SPARSE_CONV_AL; ++l) {
        int e = tid + l * NT;
        int m = e % TM, k = e / TM;
        int gm = m0 + m, gk = k0 + k;
        ra[l] = (e < TM * TK && gm < cout && gk < ke) ? LDF(Wt, gk * cout + gm) : 0.0f;
    }
    for (int l = 0; l < SPARSE_CONV_BL; ++l) {
        int e = tid + l * NT;
        int c = e % TN, k = e / TN;
        int gk = k0 + k;
        rb[l] = (e < TN * TK && gk < ke) ? sparse_conv_gather_elem(Xn, ktab, cy, cxs, tapt, c, gk, ih, iw, taps, rtaps) : 0.0f;
    }
}

/* SPARSE_CONV_HOIST = 1 (unless the host sets 0: `SparseConvFeatures::hoisted_gather` says where and
 * why): where NT is a multiple of TM and of TN, each
 * work-item loads the same weight channel and the same input column in every stage, at rows
 * NT / TM (NT / TN) apart, so what sparse_conv_load_stage works out per element from scratch (the
 * column's origin from local memory, the tap's three offsets, four bounds checks) is worked
 * out once per kernel: the column's base offset, and which taps fall inside the input as one
 * bit each. A stage then costs a B element one decomposition step and one tap-table read. At
 * density 0.1 a work-group's stages are a serial chain, and this index work sat between each
 * stage's barrier and its FMAs (RESULTS.md, "hoisted against per element"). Taps past 32 (one word of
 * bits) or past the tap table take sparse_conv_load_stage. */
#ifndef SPARSE_CONV_HOIST
#define SPARSE_CONV_HOIST 1
#endif
#define SPARSE_CONV_HOISTED (SPARSE_CONV_HOIST && !SPARSE_CONV_ONE_STAGE && NT % TM == 0 && NT % TN == 0)
#define SPARSE_CONV_HSA (NT / TM)
#define SPARSE_CONV_HSB (NT / TN)

/* sparse_conv_load_stage for hoisted members: Wa is the weight at (row 0, this item's channel), Xc the
 * input at this item's column's origin, aok whether that channel exists, hv its taps inside the
 * input (0 for a phantom), hsc and hsr SPARSE_CONV_HSB as whole input channels and taps. */
FUNC_INLINE void sparse_conv_load_stage_h(GLOBAL const FLT* Wa, GLOBAL const FLT* Xc, LOCAL_PTR const int* tapt, float* ra,
                                    float* rb, int tid, int k0, int ke, int cout, int aok, uint hv, int taps, float rtaps,
                                    int ihw, int hsc, int hsr) {
    int ka = tid / TM;
    for (int l = 0; l < SPARSE_CONV_AL; ++l) {
        int k = ka + l * SPARSE_CONV_HSA, gk = k0 + k;
        ra[l] = (k < TK && aok && gk < ke) ? LDF(Wa, gk * cout) : 0.0f;
    }
    int kb = tid / TN, gk = k0 + kb, r;
    int ci = sparse_conv_channel_of(gk, taps, rtaps, &r);
    for (int l = 0; l < SPARSE_CONV_BL; ++l) {
        float v = 0.0f;
        if (kb + l * SPARSE_CONV_HSB < TK && gk < ke && ((hv >> (uint)r) & 1u)) v = LDF(Xc, ci * ihw + tapt[3 * r]);
        rb[l] = v;
        gk += SPARSE_CONV_HSB;
        ci += hsc;
        r += hsr;
        if (r >= taps) { r -= taps; ++ci; }
    }
}

#if SPARSE_CONV_ONE_STAGE
/* SPARSE_CONV_ONE_STAGE's weights: the tile's [K][TM] weights into As as float4 runs, every load issued
 * before the first store. Channels past cout and indices past K are 0; rows of cout not a
 * multiple of 4 go one float at a time. (Copied with cp.async instead, which holds no registers,
 * they were slower on an H200: RESULTS.md, "How the one-stage members take their operands".) */
#define SPARSE_CONV_W4 ((TK * TM / 4 + NT - 1) / NT)
FUNC_INLINE void sparse_conv_weights_load(LOCAL_PTR float (*As)[TM], GLOBAL const FLT* Wt, int tid, int m0, int K, int cout) {
    float wr[4 * SPARSE_CONV_W4];
    for (int l = 0; l < SPARSE_CONV_W4; ++l) {
        int e = tid + l * NT, k = e / (TM / 4), m = m0 + (e - k * (TM / 4)) * 4;
        int ok = e < TK * TM / 4 && k < K, whole = cout % 4 == 0 && m + 3 < cout;
        GLOBAL const FLT* p = Wt + k * cout + m;
        if (ok && whole) {
            LDF4(wr + 4 * l, p);
        } else {
            for (int q = 0; q < 4; ++q) wr[4 * l + q] = (ok && m + q < cout) ? LDF(p, q) : 0.0f;
        }
    }
    for (int l = 0; l < SPARSE_CONV_W4; ++l) {
        int e = tid + l * NT, k = e / (TM / 4), m = (e - k * (TM / 4)) * 4;
        if (e < TK * TM / 4) LOCAL_STORE_VEC4(&As[k][m], wr[4 * l], wr[4 * l + 1], wr[4 * l + 2], wr[4 * l + 3]);
    }
}

/* SPARSE_CONV_ONE_STAGE's gather: every column's inputs for the whole reduction into Bs, all loads issued
 * before the first store. A work-item keeps one column (NT is a
 * multiple of TN) and takes rows NT / TN apart. 1x1 convs index the input directly; others as
 * sparse_conv_load_stage. */
FUNC_INLINE void sparse_conv_gather_all(LOCAL_PTR float (*Bs)[TN], GLOBAL const FLT* Xn, GLOBAL const int* ktab,
                                  LOCAL_PTR int* cy, LOCAL_PTR int* cxs, LOCAL_PTR const int* tapt, int tid, int K, int ih,
                                  int iw, int taps, float rtaps) {
    int c = tid % TN, k0 = tid / TN;
    int iy = cy[c], ix = cxs[c];
    int org = (iy >= 0 && iy < ih && ix >= 0 && ix < iw) ? iy * iw + ix : -1;
    float rb[SPARSE_CONV_BL];
    for (int l = 0; l < SPARSE_CONV_BL; ++l) {
        int k = k0 + l * (NT / TN);
        int at = k >= K ? -1
                 : taps == 1 ? (org >= 0 ? k * ih * iw + org : -1)
                             : sparse_conv_gather_at(ktab, cy, cxs, tapt, c, k, ih, iw, taps, rtaps);
        rb[l] = at >= 0 ? LDF(Xn, at) : 0.0f;
    }
    for (int l = 0; l < SPARSE_CONV_BL; ++l) {
        int k = k0 + l * (NT / TN);
        if (k < TK) Bs[k][c] = rb[l];
    }
}
#endif

/* One stage's registers (sparse_conv_load_stage) into As / Bs; the caller barriers after. */
FUNC_INLINE void sparse_conv_store_stage(LOCAL_PTR float (*As)[TM], LOCAL_PTR float (*Bs)[TN], const float* ra,
                                   const float* rb, int tid) {
    for (int l = 0; l < SPARSE_CONV_AL; ++l) {
        int e = tid + l * NT;
        if (e < TM * TK) As[e / TM][e % TM] = ra[l];
    }
    for (int l = 0; l < SPARSE_CONV_BL; ++l) {
        int e = tid + l * NT;
        if (e < TN * TK) Bs[e / TN][e % TN] = rb[l];
    }
}

/* The products of one staged TK-deep slice into the work-item's accumulators: of its TK / WK
 * indices from sl * TK / WK on, for the work-item of slice sl (see WK). */
FUNC_INLINE void sparse_conv_product_stage(LOCAL_PTR float (*As)[TM], LOCAL_PTR float (*Bs)[TN], float* acc, int tid,
                                     int tx, int ty, int sl) {
    /* A trip count the compiler sees as constant, so it unrolls as for WK = 1. */
    for (int q = 0; q < TK / WK; ++q) {
        int kk = sl * (TK / WK) + q;
        float a[WM], b[WN];
        for (int i = 0; i < WM; i += VWM) SPARSE_CONV_LDS_A(a + i, &As[kk][(i / VWM) * (TY * VWM) + ty * VWM]);
        for (int j = 0; j < WN; j += VWN) SPARSE_CONV_LDS_B(b + j, &Bs[kk][(j / VWN) * (TX * VWN) + tx * VWN]);
        for (int i = 0; i < WM; ++i)
            for (int j = 0; j < WN; ++j) acc[i * WN + j] += a[i] * b[j];
    }
}
