/* Token sparsity (A-ViT's halting masks) on the device, with no host readback: a binary token
 * mask is compacted once per frame into an active count and a token order per image
 * (token_compact); the token-sparse projections (token_gemm_f32) and attention
 * (token_key_norms, token_attention_f32 or its tiled twin) read that order. Their grids cover every token, and
 * work-groups past the image's count only write the zeros inactive rows hold (the CPU backend's
 * Zero fill), so nothing is sized on the host per frame.
 *
 * Layout of `meta` (ints), for `images` images of `tokens` tokens: meta[n] is image n's active
 * count; meta[images + n * tokens + r] is the token at compacted position r: the active tokens
 * in increasing order at r < count, then the inactive ones (in decreasing order from the end).
 * Defines: BLOCK (token_compact), TM TN TK WM WN (token_gemm_f32, as matmul.cl), WG and TK_MAX
 * (attention, as attention.cl), QB KC DMAX (token_attention_tiled_f32), EARLY_EXIT.
 *
 * EARLY_EXIT 1: a work-group with nothing to compute returns once it has written its zeros,
 * and barriers may sit in branches the whole work-group takes alike. 0: no barrier is ever
 * skipped (dead work-groups run on with empty loops). PoCL 3.1 corrupts the host heap when a
 * work-group of 32 or more work-items returns before, or branches around, a barrier (seen
 * with these kernels), so the executor asks for 0 on OpenCL CPU devices. Both give the same
 * results. */

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef TM
#define TM 32
#endif
#ifndef TN
#define TN 32
#endif
#ifndef TK
#define TK 16
#endif
#ifndef WM
#define WM 2
#endif
#ifndef WN
#define WN 2
#endif
#ifndef WG
#define WG 128
#endif
#ifndef TK_MAX
#define TK_MAX 256
#endif
#ifndef EARLY_EXIT
#define EARLY_EXIT 1
#endif
#define TX (TN / WN)
#define TY (TM / WM)
#define NT (TX * TY)

/* mask: per image `tokens` floats at n * mask_stride (0: one mask for the whole batch); a token
 * is active where its value is exactly 1 (the masks this runs on are proven binary).
 * Grid: (images, 1, 1), local (BLOCK, 1, 1). */
KERNEL token_compact(GLOBAL const FLT* mask, GLOBAL int* meta, int tokens, int mask_stride, int images) {
    PDL_ENTRY();
    LOCAL int s[BLOCK];
    int tid = LOCAL_ID(0), n = GROUP_ID(0);
    GLOBAL const FLT* m = mask + n * mask_stride;
    GLOBAL int* order = meta + images + n * tokens;
    int found = 0;
    for (int t0 = 0; t0 < tokens; t0 += BLOCK) {
        int t = t0 + tid;
        int on = (t < tokens && LDF(m, t) == 1.0f) ? 1 : 0;
        /* Inclusive scan of the flags (Hillis-Steele; BLOCK is small). */
        s[tid] = on;
        LOCAL_BARRIER();
        for (int off = 1; off < BLOCK; off <<= 1) {
            int v = tid >= off ? s[tid - off] : 0;
            LOCAL_BARRIER();
            s[tid] += v;
            LOCAL_BARRIER();
        }
        if (t < tokens) {
            int before = found + s[tid] - on;
            if (on) order[before] = t;
            else order[tokens - 1 - (t - before)] = t;
        }
        found += s[BLOCK - 1];
        /* s is rewritten by the next chunk. */
        LOCAL_BARRIER();
    }
    if (tid == 0) meta[n] = found;
}

/* Y[n, t, :] = act(X[n, t, :] . W + bias) for the active tokens t of image n, 0 for the others.
 * X [images, T, K], W [K, N], Y [images, T, N], all row-major; bias [N] when has_bias.
 * Rows are taken in compacted order, so a work-group's TM rows are active tokens (or, past the
 * count, inactive ones it only zeroes). Grid: (ceil(N/TN), ceil(T/TM), images), local (TX, TY).
 *
 * DENSE = 1: the PolyKernel's dense member. Every row is computed, in token order (contiguous
 * loads, no gather, a cost that does not depend on the mask); a token's row is stored where it
 * is among the count first entries of the order, which are increasing, and 0 elsewhere. */
#ifndef DENSE
#define DENSE 0
#endif

/* Whether token t is among order[0 .. count) (increasing): a binary search. */
FUNC int tok_listed(GLOBAL const int* order, int count, int t) {
    int lo = 0, hi = count;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (order[mid] < t) lo = mid + 1;
        else hi = mid;
    }
    return lo < count && order[lo] == t;
}

KERNEL token_gemm_f32(GLOBAL const FLT* X, GLOBAL const FLT* W, GLOBAL FLT* Y, GLOBAL const int* meta,
                      GLOBAL const FLT* bias, int T, int N, int K, int images, int has_bias, int act, float p0,
                      float p1) {
    PDL_ENTRY();
    LOCAL float As[TK][TM];
    LOCAL float Bs[TK][TN];
    LOCAL int rows[TM];
    /* Per row: whether its token is active. */
    LOCAL int on[TM];
    int tx = LOCAL_ID(0), ty = LOCAL_ID(1);
    int tid = ty * TX + tx;
    int n0 = GROUP_ID(0) * TN, m0 = GROUP_ID(1) * TM, img = GROUP_ID(2);
    int count = meta[img];
    GLOBAL const int* order = meta + images + img * T;
    GLOBAL const FLT* Xb = X + img * T * K;
    GLOBAL FLT* Yb = Y + img * T * N;
#if DENSE
    int live = 1;
    int rows_in = T;
#else
    int live = m0 < count;
    int rows_in = count;
#endif
    if (!live) {
        for (int e = tid; e < TM * TN; e += NT) {
            int r = m0 + e / TN, c = n0 + e % TN;
            if (r < T && c < N) STF(Yb, order[r] * N + c, 0.0f);
        }
    }
    /* The same for the whole work-group, so returning skips no barrier another work-item of
     * the group reaches. */
    if (EARLY_EXIT && !live) return;
    for (int e = tid; e < TM; e += NT) {
#if DENSE
        rows[e] = m0 + e < T ? m0 + e : 0;
        on[e] = m0 + e < T && tok_listed(order, count, m0 + e);
#else
        rows[e] = m0 + e < T ? order[m0 + e] : 0;
        on[e] = m0 + e < count;
#endif
    }
    LOCAL_BARRIER();
    float acc[WM][WN];
    for (int i = 0; i < WM; ++i)
        for (int j = 0; j < WN; ++j) acc[i][j] = 0.0f;
    int kend = live ? K : 0;
    for (int k0 = 0; k0 < kend; k0 += TK) {
        for (int e = tid; e < TM * TK; e += NT) {
            int k = e % TK, m = e / TK;
            int gk = k0 + k;
            As[k][m] = (m0 + m < rows_in && gk < K) ? LDF(Xb, rows[m] * K + gk) : 0.0f;
        }
        for (int e = tid; e < TN * TK; e += NT) {
            int n = e % TN, k = e / TN;
            int gn = n0 + n, gk = k0 + k;
            Bs[k][n] = (gn < N && gk < K) ? LDF(W, gk * N + gn) : 0.0f;
        }
        LOCAL_BARRIER();
        for (int kk = 0; kk < TK; ++kk) {
            float a[WM], b[WN];
            for (int i = 0; i < WM; ++i) a[i] = As[kk][ty + i * TY];
            for (int j = 0; j < WN; ++j) b[j] = Bs[kk][tx + j * TX];
            for (int i = 0; i < WM; ++i)
                for (int j = 0; j < WN; ++j) acc[i][j] += a[i] * b[j];
        }
        LOCAL_BARRIER();
    }
    for (int i = 0; i < WM && live; ++i) {
        int m = ty + i * TY;
        if (m0 + m >= T) continue;
        int row_live = on[m];
        for (int j = 0; j < WN; ++j) {
            int n = n0 + tx + j * TX;
            if (n >= N) continue;
            float v = 0.0f;
            if (row_live) {
                v = acc[i][j];
                if (has_bias) v += LDF(bias, n);
                v = activate(act, v, p0, p1);
            }
            STF(Yb, rows[m] * N + n, v);
        }
    }
}

/* max(a, b) that keeps NaN (fmax drops it): a NaN key must not pass the proof below. */
FUNC float tok_nanmax(float a, float b) {
    return (ISNAN(a) || ISNAN(b)) ? F32_NAN : FMAXF(a, b);
}

/* A work-group reduction over WG values: is_max 1 max (NaN-keeping), 0 sum. */
FUNC float tok_reduce(LOCAL_PTR float* s, float v, int is_max) {
    int t = LOCAL_ID(0);
    s[t] = v;
    LOCAL_BARRIER();
    for (int k = WG / 2; k > 0; k >>= 1) {
        if (t < k) s[t] = is_max ? tok_nanmax(s[t], s[t + k]) : s[t] + s[t + k];
        LOCAL_BARRIER();
    }
    float r = s[0];
    LOCAL_BARRIER();
    return r;
}

/* Work-items per key in token_key_norms, each summing every KN_LANES-th element: one work-item
 * per key walked its dk elements as a chain of loads, 8-9 µs of a 16 µs attention op at density
 * 0.1 on an H200 (RESULTS.md, "the key-norm pass over several work-groups per head"), where
 * most keys are inactive. */
#define KN_LANES 8
#define KN_KEYS (WG / KN_LANES)

/* kin[bh * parts + s]: the largest Euclidean norm of the inactive keys at compacted positions
 * count + s * KN_KEYS .. + KN_KEYS - 1 of head bh (-inf for none, NaN when one holds NaN); the
 * head's largest is the max over its `parts` (tok_kin), for token_attention_f32's proof. The
 * host launches parts = ceil(T / KN_KEYS), so every key has a group. k as in attention.cl:
 * element (bh, j, d) at bh*T*dk + j*skj + d*skd. Grid: (BH, parts, 1), local (WG, 1, 1). */
KERNEL token_key_norms(GLOBAL const FLT* k, GLOBAL const int* meta, GLOBAL float* kin, int heads, int T, int dk,
                       int skj, int skd, int images) {
    PDL_ENTRY();
    LOCAL float red[WG];
    int bh = GROUP_ID(0), part = GROUP_ID(1), t = LOCAL_ID(0);
    int b = bh / heads;
    int count = meta[b];
    int lane = t % KN_LANES, jj = count + part * KN_KEYS + t / KN_LANES;
    GLOBAL const FLT* kb = k + bh * T * dk;
    float n2 = 0.0f;
    if (jj < T) {
        int j = meta[images + b * T + jj];
        for (int d = lane; d < dk; d += KN_LANES) {
            float x = LDF(kb, j * skj + d * skd);
            n2 += x * x;
        }
    }
    red[t] = n2;
    LOCAL_BARRIER();
    float w = -F32_INF;
    if (lane == 0 && jj < T) {
        w = 0.0f;
        for (int i = 0; i < KN_LANES; ++i) w += red[t + i];
    }
    /* tok_reduce writes red. */
    LOCAL_BARRIER();
    w = tok_reduce(red, w, 1);
    if (t == 0) kin[bh * NUM_GROUPS(1) + part] = w == -F32_INF ? w : SQRTF(w);
}

/* The largest norm of head bh's inactive keys from token_key_norms' parts. */
FUNC float tok_kin(GLOBAL const float* kin, int bh, int parts) {
    float w = -F32_INF;
    for (int s = 0; s < parts; ++s) w = tok_nanmax(w, kin[bh * parts + s]);
    return w;
}

/* Whether every inactive key of a query row gets softmax weight exactly 0 in the dense op,
 * whose bias is (M - 1) * c: f32 exp underflows to 0 below about -103.97, and every inactive
 * score is at most smag |q| kin - c (Cauchy-Schwarz); 110 and the relative slack cover the
 * rounding of the dot products, norms and bias. NaN anywhere answers 0 (as the CPU's
 * attention_active does). */
FUNC int tok_keys_vanish(float mx, float qn, float kin, float smag, float c, int dk) {
    if (kin == -F32_INF) return 1;
    float slack = 1e-3f + 4.0f * (float)dk * 1.1920929e-7f;
    float halted = smag * qn * kin * (1.0f + slack) + 1e-3f - c * (1.0f - 1e-6f);
    return (mx - halted >= 110.0f) ? 1 : 0;
}

/* Attention of the active queries over the active keys of a key-mask attention (bias
 * (M - 1) * c, M binary, Tq = Tk = T): for an active query, softmax over all keys equals
 * softmax over the active ones once every inactive weight underflows, which tok_keys_vanish
 * proves per row from kin (token_key_norms), or from kin = 0 where the graph proves inactive
 * keys zero (keys_zero: kin is not read); a row it cannot prove is computed over all keys with
 * the op's bias, as attention_f32 does. Rows of inactive queries are 0. q [BH, T, dk]; k, v,
 * bias and out as attention_f32. Grid: (T, BH), local (WG, 1, 1); the work-group of row r
 * of a head takes the token at compacted position r. Local memory: the row's scores and the
 * tokens they belong to (TK_MAX >= T each), and the reduction scratch. */
/* The arguments of both attention kernels (the lowering passes the same list to either). */
#define TOK_ATTENTION_ARGS                                                                         \
    GLOBAL const FLT *q, GLOBAL const FLT *k, GLOBAL const FLT *v, GLOBAL const FLT *bias, \
        GLOBAL FLT *out, GLOBAL const int *meta, GLOBAL const float *kin, int heads, int T,     \
        int dk, int dv, int skj, int skd, int scale_mode, float scale, float smag, float c,        \
        int keys_zero, int sb0, int sb1, int sb2, int sb3, int images, int kin_parts
KERNEL token_attention_f32(TOK_ATTENTION_ARGS) {
    PDL_ENTRY();
    LOCAL float sc[TK_MAX];
    LOCAL int keys[TK_MAX];
    LOCAL float red[WG];
    int r = GROUP_ID(0), bh = GROUP_ID(1), t = LOCAL_ID(0);
    int b = bh / heads, h = bh - b * heads;
    int count = meta[b];
    GLOBAL const int* order = meta + images + b * T;
    int i = order[r];
    GLOBAL FLT* orow = out + (bh * T + i) * dv;
    int live = r < count;
    if (!live) {
        for (int d = t; d < dv; d += WG) STF(orow, d, 0.0f);
    }
    /* The same for the whole work-group: no barrier is skipped by part of it. */
    if (EARLY_EXIT && !live) return;
    /* Without the return, a dead work-group's loops below are empty. */
    int na = live ? count : 0;
    /* Loaded here so that its loads overlap the scores below. */
    float kinv = (live && !keys_zero) ? tok_kin(kin, bh, kin_parts) : 0.0f;
    GLOBAL const FLT* qr = q + (bh * T + i) * dk;
    GLOBAL const FLT* kb = k + bh * T * dk;
    GLOBAL const FLT* vb = v + bh * T * dv;
    float mx = -F32_INF;
    for (int jj = t; jj < na; jj += WG) {
        int j = order[jj];
        float acc = 0.0f;
        for (int d = 0; d < dk; ++d) acc += LDF(qr, d) * LDF(kb, j * skj + d * skd);
        /* The op adds (1 - 1) * c = 0 to active keys. */
        float x = (scale_mode == 0 ? acc * scale : acc / scale) + 0.0f;
        sc[jj] = x;
        keys[jj] = j;
        mx = FMAXF(mx, x);
    }
    mx = tok_reduce(red, mx, 1);
    /* |q| by every work-item alike (a reduction would cost barriers), so `ok` is the group's. */
    float qq = 0.0f;
    for (int d = 0; d < (live ? dk : 0); ++d) qq += LDF(qr, d) * LDF(qr, d);
    int ok = !live || tok_keys_vanish(mx, SQRTF(qq), kinv, smag, c, dk);
    /* A row the proof fails for takes every key, with the op's bias: the dense kernel's row.
     * The same work-items as above write sc and keys, so no barrier is needed first. */
    float mx_all = -F32_INF;
    if (!ok) {
        for (int j = t; j < T; j += WG) {
            float acc = 0.0f;
            for (int d = 0; d < dk; ++d) acc += LDF(qr, d) * LDF(kb, j * skj + d * skd);
            float x = (scale_mode == 0 ? acc * scale : acc / scale) + LDF(bias, b * sb0 + h * sb1 + i * sb2 + j * sb3);
            sc[j] = x;
            keys[j] = j;
            mx_all = FMAXF(mx_all, x);
        }
    }
#if EARLY_EXIT
    /* `ok` is the same for the whole work-group. */
    if (!ok) mx = tok_reduce(red, mx_all, 1);
#else
    /* Barriers stay out of conditional code here (see EARLY_EXIT). */
    mx_all = tok_reduce(red, mx_all, 1);
    if (!ok) mx = mx_all;
#endif
    int n = ok ? na : T;
    float sum = 0.0f;
    for (int jj = t; jj < n; jj += WG) {
        float e = EXPF(sc[jj] - mx);
        sc[jj] = e;
        sum += e;
    }
    sum = tok_reduce(red, sum, 0);
    float inv = 1.0f / sum;
    for (int jj = t; jj < n; jj += WG) sc[jj] *= inv;
    LOCAL_BARRIER();
    for (int d = t; d < (live ? dv : 0); d += WG) {
        float acc = 0.0f;
        for (int jj = 0; jj < n; ++jj) acc += sc[jj] * LDF(vb, keys[jj] * dv + d);
        STF(orow, d, acc);
    }
}

/* token_attention_tiled_f32: token_attention_f32's result with QB query rows (compacted
 * positions) per work-group. Every row of an image attends to the same active keys, so the
 * group stages each chunk of KC keys (then values) in local memory once for its QB rows, with
 * loads that run along contiguous memory, instead of each row reading every key from global
 * memory with loads dk floats apart. The QB x (count) scores stay in local memory (TK_MAX >= T
 * per row) for the softmax and the product with V. Where a row's proof fails, the whole group
 * takes every key with the op's bias (a passing row's inactive weights are exactly 0 there, and
 * its maximum is unchanged: its inactive scores lie 110 below it).
 *
 * Defines: WG, TK_MAX, QB, KC and DMAX (max(dk, dv) rounded up; local rows are DMAX wide and
 * zero past dk / dv, so the dot products run to a compile-time bound). No work-item ever returns
 * early or skips a barrier (loop bounds are the same for the whole group), so EARLY_EXIT is not
 * read. Grid: (ceil(T / QB), BH), local (WG, 1, 1). Local memory, in floats:
 * QB * (TK_MAX + 1) + QB * DMAX + KC * (DMAX + 1) + 2 * WG + 4 * QB (token/lower.rs repeats it).
 *
 * Built only where the defines name its tile (QB): the programs built for the other entries of
 * this file take TK_MAX up to 4096, where its scores would overflow local memory (a CUDA block's
 * 48 KiB of static shared memory fails the whole program's build). */
#ifdef QB
#ifndef KC
#define KC 32
#endif
#ifndef DMAX
#define DMAX 64
#endif
/* Work-items per row in the row reductions and the Q load. */
#define TA_RW (WG / QB)
/* Scores: a work-item takes one key of a chunk for TA_SR rows, TA_SS apart. */
#define TA_SS (WG / KC)
#define TA_SR (QB / TA_SS)
/* Outputs: a work-item takes one d for TA_OR rows, TA_OS apart. */
#define TA_OS (WG / DMAX)
#define TA_OR (QB / TA_OS)
/* Padded rows of staged keys / values and of scores: a warp's reads down a column of keys
 * fall in distinct banks. */
#define TA_KS (DMAX + 1)
#define TA_SCS (TK_MAX + 1)
#if KC > WG || DMAX > WG || QB > WG || WG % QB != 0 || WG % KC != 0 || WG % DMAX != 0
#error "token_attention_tiled_f32: KC, DMAX and QB must divide WG"
#elif QB % (WG / KC) != 0 || QB % (WG / DMAX) != 0
#error "token_attention_tiled_f32: QB must be a multiple of WG / KC and of WG / DMAX"
#endif

KERNEL token_attention_tiled_f32(TOK_ATTENTION_ARGS) {
    PDL_ENTRY();
    LOCAL float sc[QB * TA_SCS];
    LOCAL float qs[QB * DMAX];
    LOCAL float kv[KC * TA_KS];
    LOCAL float red[WG];
    LOCAL float red2[WG];
    /* Per row: the maximum score, 1 / the sum of weights, whether the proof holds, the token. */
    LOCAL float rmx[QB];
    LOCAL float rinv[QB];
    LOCAL int rok[QB];
    LOCAL int rtok[QB];
    int t = LOCAL_ID(0), r0 = GROUP_ID(0) * QB, bh = GROUP_ID(1);
    int b = bh / heads, h = bh - b * heads;
    int count = meta[b];
    GLOBAL const int* order = meta + images + b * T;
    /* Whether any row is active: the same for the whole group, as is every loop bound below. */
    int live = r0 < count;
    int na = live ? count : 0;
    GLOBAL const FLT* kb = k + bh * T * dk;
    GLOBAL const FLT* vb = v + bh * T * dv;
    /* Loaded here so that its loads overlap the scores below. */
    float kinv = (live && !keys_zero && t < QB) ? tok_kin(kin, bh, kin_parts) : 0.0f;
    /* The TA_RW work-items of row `qrow` load its q (0 for an inactive row) and sum its squares
     * for the proof; they take the row's share of every reduction below. */
    int qrow = t / TA_RW, lane = t - qrow * TA_RW;
    int qr = r0 + qrow;
    int qlive = qr < count;
    int qtok = qr < T ? order[qr] : 0;
    if (lane == 0) rtok[qrow] = qtok;
    float qq = 0.0f;
    for (int d = lane; d < DMAX; d += TA_RW) {
        float x = (qlive && d < dk) ? LDF(q, (bh * T + qtok) * dk + d) : 0.0f;
        qs[qrow * DMAX + d] = x;
        qq += x * x;
    }
    int skk = t % KC, srow = t / KC;
    /* Pass 0 scores the active keys and proves the rows; pass 1 (if a row's proof failed)
     * scores every key with the bias. Each pass ends with the row maxima over the n scores. */
    int all = 0, n = na;
    for (int pass = 0; pass < 2; ++pass) {
        int nl = pass == 0 ? na : (all ? T : 0);
        for (int j0 = 0; j0 < nl; j0 += KC) {
            /* Along d where k's rows are contiguous, along keys where k is transposed. */
            for (int e = t; e < KC * DMAX; e += WG) {
                int kk, d;
                if (skd == 1) {
                    kk = e / DMAX;
                    d = e - kk * DMAX;
                } else {
                    d = e / KC;
                    kk = e - d * KC;
                }
                int jj = j0 + kk;
                float x = 0.0f;
                if (jj < nl && d < dk) x = LDF(kb, (all ? jj : order[jj]) * skj + d * skd);
                kv[kk * TA_KS + d] = x;
            }
            LOCAL_BARRIER();
            float acc[TA_SR];
            for (int i = 0; i < TA_SR; ++i) acc[i] = 0.0f;
            for (int d = 0; d < DMAX; ++d) {
                float kd = kv[skk * TA_KS + d];
                for (int i = 0; i < TA_SR; ++i) acc[i] += qs[(srow + i * TA_SS) * DMAX + d] * kd;
            }
            int jj = j0 + skk;
            if (jj < nl) {
                for (int i = 0; i < TA_SR; ++i) {
                    int row = srow + i * TA_SS;
                    /* The op adds (1 - 1) * c = 0 to active keys. */
                    float add = all ? LDF(bias, b * sb0 + h * sb1 + rtok[row] * sb2 + jj * sb3) : 0.0f;
                    sc[row * TA_SCS + jj] = (scale_mode == 0 ? acc[i] * scale : acc[i] / scale) + add;
                }
            }
            /* kv is restaged next. */
            LOCAL_BARRIER();
        }
        if (all) n = T;
        float m = -F32_INF;
        for (int jj = lane; jj < n; jj += TA_RW) m = tok_nanmax(m, sc[qrow * TA_SCS + jj]);
        red[t] = m;
        red2[t] = qq;
        LOCAL_BARRIER();
        if (t < QB) {
            float mx = -F32_INF, s = 0.0f;
            for (int i = 0; i < TA_RW; ++i) {
                mx = tok_nanmax(mx, red[t * TA_RW + i]);
                s += red2[t * TA_RW + i];
            }
            rmx[t] = mx;
            if (pass == 0) rok[t] = r0 + t >= count || tok_keys_vanish(mx, SQRTF(s), kinv, smag, c, dk);
        }
        LOCAL_BARRIER();
        for (int i = 0; i < QB; ++i) all = all || !rok[i];
    }
    /* Weights and their sums per row. */
    float mrow = rmx[qrow], s = 0.0f;
    for (int jj = lane; jj < n; jj += TA_RW) {
        float e = EXPF(sc[qrow * TA_SCS + jj] - mrow);
        sc[qrow * TA_SCS + jj] = e;
        s += e;
    }
    red[t] = s;
    LOCAL_BARRIER();
    if (t < QB) {
        float sum = 0.0f;
        for (int i = 0; i < TA_RW; ++i) sum += red[t * TA_RW + i];
        rinv[t] = 1.0f / sum;
    }
    LOCAL_BARRIER();
    int od = t % DMAX, orow = t / DMAX;
    float o[TA_OR];
    for (int i = 0; i < TA_OR; ++i) o[i] = 0.0f;
    for (int j0 = 0; j0 < n; j0 += KC) {
        for (int e = t; e < KC * DMAX; e += WG) {
            int kk = e / DMAX, d = e - kk * DMAX;
            int jj = j0 + kk;
            kv[kk * TA_KS + d] = (jj < n && d < dv) ? LDF(vb, (all ? jj : order[jj]) * dv + d) : 0.0f;
        }
        LOCAL_BARRIER();
        int kn = IMIN(KC, n - j0);
        for (int kk = 0; kk < kn; ++kk) {
            float x = kv[kk * TA_KS + od];
            for (int i = 0; i < TA_OR; ++i) o[i] += sc[(orow + i * TA_OS) * TA_SCS + j0 + kk] * x;
        }
        LOCAL_BARRIER();
    }
    for (int i = 0; i < TA_OR; ++i) {
        int row = orow + i * TA_OS, r = r0 + row;
        if (r < T && od < dv) STF(out, (bh * T + rtok[row]) * dv + od, r < count ? o[i] * rinv[row] : 0.0f);
    }
}
#endif
