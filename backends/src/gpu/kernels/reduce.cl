/* Reductions and normalisations: ReduceSum/Mean/Max, GlobalAveragePool, Softmax,
 * LayerNormalization, GroupNormalization (InstanceNormalization is GroupNorm with one channel
 * per group), CumSum. Work-group reductions use WG work-items (a power of two, -D WG=...). */

#ifndef WG
#define WG 256
#endif

/* Tree reductions over the work-group; every work-item gets the result. */
FUNC float wg_sum(LOCAL_PTR float* s, float v) {
    return group_sum(s, v, WG);
}

/* NaN wins, as in numpy's maximum.reduce. */
FUNC float max_nan(float a, float x) {
    return (x > a || ISNAN(x)) ? x : a;
}

FUNC float wg_max(LOCAL_PTR float* s, float v) {
    int t = LOCAL_ID(0);
    s[t] = v;
    LOCAL_BARRIER();
    for (int k = WG / 2; k > 0; k >>= 1) {
        if (t < k) s[t] = max_nan(s[t], s[t + k]);
        LOCAL_BARRIER();
    }
    float r = s[0];
    LOCAL_BARRIER();
    return r;
}

/* A reduction as kept dims x reduced dims. meta: kept dims [orank], their input strides
 * [orank], reduced dims [rrank], their input strides [rrank]. kind: 0 sum, 1 mean, 2 max. */
FUNC float reduce_one(GLOBAL const FLT* x, int base, int r0, int step, int nred, int rrank,
                      GLOBAL const int* rdims, GLOBAL const int* rstrides, int kind) {
    float acc = kind == 2 ? -F32_INF : 0.0f;
    for (int r = r0; r < nred; r += step) {
        float v = LDF(x, base + strided_offset(r, rrank, rdims, rstrides));
        acc = kind == 2 ? max_nan(acc, v) : acc + v;
    }
    return acc;
}

FUNC float reduce_finish(float acc, int kind, int nred) {
    if (kind == 1) return nred == 0 ? F32_NAN : acc / (float)nred;
    return acc;
}

/* One work-item per output: for short reductions. */
KERNEL reduce_f32_item(GLOBAL const FLT* x, GLOBAL FLT* y, int nout, int nred, int kind, int orank, int rrank,
                       GLOBAL const int* meta) {
    PDL_ENTRY();
    int o = GLOBAL_ID(0);
    if (o >= nout) return;
    int base = strided_offset(o, orank, meta, meta + orank);
    float acc = reduce_one(x, base, 0, 1, nred, rrank, meta + 2 * orank, meta + 2 * orank + rrank, kind);
    STF(y, o, reduce_finish(acc, kind, nred));
}

/* One work-group per output: for long reductions. */
KERNEL reduce_f32_group(GLOBAL const FLT* x, GLOBAL FLT* y, int nout, int nred, int kind, int orank, int rrank,
                        GLOBAL const int* meta) {
    PDL_ENTRY();
    LOCAL float s[WG];
    int o = GROUP_ID(0);
    int base = strided_offset(o, orank, meta, meta + orank);
    float acc = reduce_one(x, base, LOCAL_ID(0), WG, nred, rrank, meta + 2 * orank, meta + 2 * orank + rrank, kind);
    acc = kind == 2 ? wg_max(s, acc) : wg_sum(s, acc);
    if (LOCAL_ID(0) == 0) STF(y, o, reduce_finish(acc, kind, nred));
}

/* Integers (and bool for max): sums wrap in 32 bits, mean truncates, max of nothing is INT_MIN. */
KERNEL reduce_i32_item(GLOBAL const int* x, GLOBAL int* y, int nout, int nred, int kind, int narrow, int orank,
                       int rrank, GLOBAL const int* meta) {
    PDL_ENTRY();
    int o = GLOBAL_ID(0);
    if (o >= nout) return;
    int base = strided_offset(o, orank, meta, meta + orank);
    GLOBAL const int* rdims = meta + 2 * orank;
    GLOBAL const int* rstrides = rdims + rrank;
    unsigned int sum = 0u;
    int mx = narrow == 3 ? 0 : (-2147483647 - 1);
    for (int r = 0; r < nred; ++r) {
        int v = x[base + strided_offset(r, rrank, rdims, rstrides)];
        sum += (unsigned int)v;
        mx = v > mx ? v : mx;
    }
    int res = kind == 2 ? mx : (kind == 1 ? (nred == 0 ? 0 : (int)sum / nred) : (int)sum);
    y[o] = narrow_int(res, narrow);
}

/* Softmax along contiguous rows of `len`, one work-group per row. */
KERNEL softmax_rows(GLOBAL const FLT* x, GLOBAL FLT* y, int len) {
    PDL_ENTRY();
    LOCAL float s[WG];
    int row = GROUP_ID(0), t = LOCAL_ID(0);
    GLOBAL const FLT* xr = x + row * len;
    GLOBAL FLT* yr = y + row * len;
    float m = -F32_INF;
    for (int i = t; i < len; i += WG) m = FMAXF(m, LDF(xr, i));
    m = wg_max(s, m);
    float sum = 0.0f;
    for (int i = t; i < len; i += WG) sum += EXPF(LDF(xr, i) - m);
    sum = wg_sum(s, sum);
    float inv = 1.0f / sum;
    /* The exponentials again rather than read back: one rounding into storage, not two. */
    for (int i = t; i < len; i += WG) STF(yr, i, EXPF(LDF(xr, i) - m) * inv);
}

/* Softmax along a strided axis: one work-item per (outer, inner) column of [outer, len, inner]. */
KERNEL softmax_cols(GLOBAL const FLT* x, GLOBAL FLT* y, int outer, int len, int inner) {
    PDL_ENTRY();
    int c = GLOBAL_ID(0);
    if (c >= outer * inner) return;
    int o = c / inner, i = c - o * inner;
    int base = o * len * inner + i;
    float m = -F32_INF;
    for (int k = 0; k < len; ++k) m = FMAXF(m, LDF(x, base + k * inner));
    float sum = 0.0f;
    for (int k = 0; k < len; ++k) sum += EXPF(LDF(x, base + k * inner) - m);
    float inv = 1.0f / sum;
    for (int k = 0; k < len; ++k) STF(y, base + k * inner, EXPF(LDF(x, base + k * inner) - m) * inv);
}

/* Mean and 1/sqrt(var + eps) of x[base .. base + len), two passes, over the work-group. */
FUNC void wg_stats(LOCAL_PTR float* s, GLOBAL const FLT* x, int len, float eps, float* mean, float* inv) {
    int t = LOCAL_ID(0);
    float acc = 0.0f;
    for (int i = t; i < len; i += WG) acc += LDF(x, i);
    float m = wg_sum(s, acc) / (float)(len > 0 ? len : 1);
    acc = 0.0f;
    for (int i = t; i < len; i += WG) {
        float d = LDF(x, i) - m;
        acc += d * d;
    }
    float var = wg_sum(s, acc) / (float)(len > 0 ? len : 1);
    *mean = m;
    *inv = 1.0f / SQRTF(var + eps);
}

/* LayerNormalization over rows of `len`; scale/bias broadcast over the row through meta
 * (dims [prank], scale strides [prank], bias strides [prank]); prank 0: both hold `len` values. */
KERNEL layer_norm(GLOBAL const FLT* x, GLOBAL const FLT* scale, GLOBAL const FLT* bias, GLOBAL FLT* y, int len,
                  float eps, int has_bias, int prank, GLOBAL const int* meta) {
    PDL_ENTRY();
    LOCAL float s[WG];
    int row = GROUP_ID(0), t = LOCAL_ID(0);
    GLOBAL const FLT* xr = x + row * len;
    float mean, inv;
    wg_stats(s, xr, len, eps, &mean, &inv);
    for (int i = t; i < len; i += WG) {
        int is = prank == 0 ? i : strided_offset(i, prank, meta, meta + prank);
        float v = (LDF(xr, i) - mean) * inv * LDF(scale, is);
        if (has_bias) v += LDF(bias, prank == 0 ? i : strided_offset(i, prank, meta, meta + 2 * prank));
        STF(y, row * len + i, v);
    }
}

/* GroupNormalization over [N, groups, cpg * plane] blocks; scale/bias per channel
 * (per_channel) or per group. shift_at > 0: y is [2 N, C] instead, the factor per image and
 * channel at n C + ch and the offset at shift_at + n C + ch (NormScaleShift). */
KERNEL group_norm(GLOBAL const FLT* x, GLOBAL const FLT* scale, GLOBAL const FLT* bias, GLOBAL FLT* y,
                  int groups, int cpg, int plane, float eps, int per_channel, int shift_at) {
    PDL_ENTRY();
    LOCAL float s[WG];
    int blk = GROUP_ID(0), t = LOCAL_ID(0);
    int len = cpg * plane;
    GLOBAL const FLT* xb = x + blk * len;
    float mean, inv;
    wg_stats(s, xb, len, eps, &mean, &inv);
    int g = blk % groups;
    if (shift_at > 0) {
        int at = (blk / groups) * groups * cpg;
        for (int j = t; j < cpg; j += WG) {
            int ch = g * cpg + j;
            int p = per_channel ? ch : g;
            float a = inv * LDF(scale, p);
            STF(y, at + ch, a);
            STF(y, shift_at + at + ch, LDF(bias, p) - mean * a);
        }
        return;
    }
    for (int i = t; i < len; i += WG) {
        int ch = g * cpg + i / plane;
        int p = per_channel ? ch : g;
        float a = inv * LDF(scale, p);
        STF(y, blk * len + i, LDF(xb, i) * a + (LDF(bias, p) - mean * a));
    }
}

/* CumSum along the middle axis of [outer, len, inner]; one work-item per column. */
KERNEL cumsum_f32(GLOBAL const FLT* x, GLOBAL FLT* y, int outer, int len, int inner, int exclusive, int reverse) {
    PDL_ENTRY();
    int c = GLOBAL_ID(0);
    if (c >= outer * inner) return;
    int o = c / inner, i = c - o * inner;
    int base = o * len * inner + i;
    float acc = 0.0f;
    for (int s = 0; s < len; ++s) {
        int k = reverse ? len - 1 - s : s;
        float v = LDF(x, base + k * inner);
        if (exclusive) {
            STF(y, base + k * inner, acc);
            acc += v;
        } else {
            acc += v;
            STF(y, base + k * inner, acc);
        }
    }
}

KERNEL cumsum_i32(GLOBAL const int* x, GLOBAL int* y, int outer, int len, int inner, int exclusive, int reverse,
                  int narrow) {
    PDL_ENTRY();
    int c = GLOBAL_ID(0);
    if (c >= outer * inner) return;
    int o = c / inner, i = c - o * inner;
    int base = o * len * inner + i;
    unsigned int acc = 0u;
    for (int s = 0; s < len; ++s) {
        int k = reverse ? len - 1 - s : s;
        unsigned int v = (unsigned int)x[base + k * inner];
        if (exclusive) {
            y[base + k * inner] = narrow_int((int)acc, narrow);
            acc += v;
        } else {
            acc += v;
            y[base + k * inner] = narrow_int((int)acc, narrow);
        }
    }
}
