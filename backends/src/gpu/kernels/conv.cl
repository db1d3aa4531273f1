/* Convolutions over NCDHW (1-D and 2-D maps run with leading extents of 1): Conv as an
 * implicit GEMM (output channels x output positions x (input channels of the group x taps)),
 * tiled like matmul.cl, with bias, a residual input and an activation fused into the store;
 * a direct kernel for depthwise and other thin convolutions; ConvTranspose as a GEMM per
 * output phase, or as a gather.
 *
 * Geometry arguments, in this order everywhere: channels in and out per group, groups, input
 * extents (d, h, w), output extents (d, h, w), kernel (d, h, w), strides, begin pads, dilations. */

#ifndef TM
#define TM 64
#endif
#ifndef TN
#define TN 64
#endif
#ifndef TK
#define TK 16
#endif
#ifndef WM
#define WM 4
#endif
#ifndef WN
#define WN 4
#endif
#define TX (TN / WN)
#define TY (TM / WM)
#define NT (TX * TY)

#define CONV_GEOMETRY                                                                                         \
    int cin_g, int cout_g, int groups, int id, int ih, int iw, int od, int oh, int ow, int kd, int kh, int kw, \
        int sd, int sh, int sw, int pd, int ph, int pw, int dd, int dh, int dw

FUNC float conv_epilogue(float v, int co, GLOBAL const FLT* bias, int has_bias, GLOBAL const FLT* res,
                         int has_res, int at, int act, float p0, float p1) {
    if (has_bias) v += LDF(bias, co);
    if (has_res) v += LDF(res, at);
    return activate(act, v, p0, p1);
}

/* Grid: (ceil(P / TN), ceil(cout_g / TM), N * groups), local (TX, TY); P = od * oh * ow. */
KERNEL conv_gemm_f32(GLOBAL const FLT* X, GLOBAL const FLT* W, GLOBAL const FLT* bias,
                     GLOBAL const FLT* res, GLOBAL FLT* Y, CONV_GEOMETRY, int has_bias, int has_res, int act,
                     float p0, float p1) {
    PDL_ENTRY();
    LOCAL float As[TK][TM];
    LOCAL float Bs[TK][TN];
    int tx = LOCAL_ID(0), ty = LOCAL_ID(1);
    int tid = ty * TX + tx;
    int p0_ = GROUP_ID(0) * TN, m0 = GROUP_ID(1) * TM;
    int ng = GROUP_ID(2);
    int g = ng % groups, n = ng / groups;
    int kvol = kd * kh * kw, khw = kh * kw;
    int K = cin_g * kvol;
    int P = od * oh * ow, ohw = oh * ow;
    int ivol = id * ih * iw;
    GLOBAL const FLT* Wg = W + g * cout_g * K;
    GLOBAL const FLT* Xg = X + (n * groups + g) * cin_g * ivol;
    float acc[WM][WN];
    for (int i = 0; i < WM; ++i)
        for (int j = 0; j < WN; ++j) acc[i][j] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TK) {
        for (int e = tid; e < TM * TK; e += NT) {
            int k = e % TK, m = e / TK;
            int gm = m0 + m, gk = k0 + k;
            As[k][m] = (gm < cout_g && gk < K) ? LDF(Wg, gm * K + gk) : 0.0f;
        }
        for (int e = tid; e < TN * TK; e += NT) {
            int pp = e % TN, k = e / TN;
            int gp = p0_ + pp, gk = k0 + k;
            float v = 0.0f;
            if (gp < P && gk < K) {
                int ci = gk / kvol, r = gk - ci * kvol;
                int kz = r / khw;
                r -= kz * khw;
                int ky = r / kw, kx = r - ky * kw;
                int oz = gp / ohw, q = gp - oz * ohw;
                int oy = q / ow, ox = q - oy * ow;
                int iz = oz * sd - pd + kz * dd, iy = oy * sh - ph + ky * dh, ix = ox * sw - pw + kx * dw;
                if (iz >= 0 && iz < id && iy >= 0 && iy < ih && ix >= 0 && ix < iw)
                    v = LDF(Xg, ci * ivol + (iz * ih + iy) * iw + ix);
            }
            Bs[k][pp] = v;
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
    for (int i = 0; i < WM; ++i) {
        int m = m0 + ty + i * TY;
        if (m >= cout_g) continue;
        int co = g * cout_g + m;
        int row = (n * groups * cout_g + co) * P;
        for (int j = 0; j < WN; ++j) {
            int p = p0_ + tx + j * TX;
            if (p >= P) continue;
            STF(Y, row + p, conv_epilogue(acc[i][j], co, bias, has_bias, res, has_res, row + p, act, p0, p1));
        }
    }
}

/* One work-item per output element; for convolutions whose GEMM is too thin to tile (depthwise). */
KERNEL conv_direct_f32(GLOBAL const FLT* X, GLOBAL const FLT* W, GLOBAL const FLT* bias,
                       GLOBAL const FLT* res, GLOBAL FLT* Y, CONV_GEOMETRY, int has_bias, int has_res, int act,
                       float p0, float p1, int total) {
    PDL_ENTRY();
    int i = GLOBAL_ID(0);
    if (i >= total) return;
    int P = od * oh * ow, ohw = oh * ow;
    int p = i % P;
    int nc = i / P;
    int cout = groups * cout_g;
    int co = nc % cout, n = nc / cout;
    int g = co / cout_g;
    int oz = p / ohw, q = p - oz * ohw;
    int oy = q / ow, ox = q - oy * ow;
    int ivol = id * ih * iw;
    GLOBAL const FLT* Xg = X + (n * groups + g) * cin_g * ivol;
    GLOBAL const FLT* Wc = W + co * cin_g * kd * kh * kw;
    float acc = 0.0f;
    for (int ci = 0; ci < cin_g; ++ci) {
        for (int kz = 0; kz < kd; ++kz) {
            int iz = oz * sd - pd + kz * dd;
            if (iz < 0 || iz >= id) continue;
            for (int ky = 0; ky < kh; ++ky) {
                int iy = oy * sh - ph + ky * dh;
                if (iy < 0 || iy >= ih) continue;
                for (int kx = 0; kx < kw; ++kx) {
                    int ix = ox * sw - pw + kx * dw;
                    if (ix < 0 || ix >= iw) continue;
                    acc += LDF(Wc, ((ci * kd + kz) * kh + ky) * kw + kx) * LDF(Xg, ci * ivol + (iz * ih + iy) * iw + ix);
                }
            }
        }
    }
    STF(Y, i, conv_epilogue(acc, co, bias, has_bias, res, has_res, i, act, p0, p1));
}

/* One work-group of RBLOCK work-items per output element, striding over the reduction (cin_g x
 * taps) and summing in a tree: for thin convs with a long reduction (a 1-channel mask unit over
 * 2048 channels), which one work-item per output would run alone, thousands of steps deep.
 * Grid: (min(total, 65535), ceil(total / 65535)), local (RBLOCK, 1, 1). */
#define RBLOCK 128
KERNEL conv_reduce_f32(GLOBAL const FLT* X, GLOBAL const FLT* W, GLOBAL const FLT* bias,
                       GLOBAL const FLT* res, GLOBAL FLT* Y, CONV_GEOMETRY, int has_bias, int has_res, int act,
                       float p0, float p1, int total) {
    PDL_ENTRY();
    LOCAL float s[RBLOCK];
    int i = GROUP_ID(0) + GROUP_ID(1) * NUM_GROUPS(0), tid = LOCAL_ID(0);
    if (i >= total) return;
    int P = od * oh * ow, ohw = oh * ow;
    int p = i % P;
    int nc = i / P;
    int cout = groups * cout_g;
    int co = nc % cout, n = nc / cout;
    int g = co / cout_g;
    int oz = p / ohw, q = p - oz * ohw;
    int oy = q / ow, ox = q - oy * ow;
    int ivol = id * ih * iw, taps = kd * kh * kw, khw = kh * kw;
    GLOBAL const FLT* Xg = X + (n * groups + g) * cin_g * ivol;
    GLOBAL const FLT* Wc = W + co * cin_g * taps;
    float acc = 0.0f;
    for (int r = tid; r < cin_g * taps; r += RBLOCK) {
        int ci = r / taps, t = r - ci * taps;
        int kz = t / khw, t2 = t - kz * khw;
        int ky = t2 / kw, kx = t2 - ky * kw;
        int iz = oz * sd - pd + kz * dd, iy = oy * sh - ph + ky * dh, ix = ox * sw - pw + kx * dw;
        if (iz >= 0 && iz < id && iy >= 0 && iy < ih && ix >= 0 && ix < iw)
            acc += LDF(Wc, r) * LDF(Xg, ci * ivol + (iz * ih + iy) * iw + ix);
    }
    acc = group_sum(s, acc, RBLOCK);
    if (tid == 0) STF(Y, i, conv_epilogue(acc, co, bias, has_bias, res, has_res, i, act, p0, p1));
}

/* Thin convs (fewer than 8 output channels per group) with a long reduction, e.g. a mask unit's
 * 3x3 conv from 1024 channels to one: a work-group of TP consecutive output positions x
 * (256 / TP) lanes. Neighbouring work-items read neighbouring positions (coalesced loads, the
 * weight a broadcast); the lanes split the input channels and sum in local memory at the end.
 * Grid: (ceil(P / TP), N x cout), local (TP, 256 / TP). */
#ifndef TP
#define TP 32
#endif
#define THIN_LANES (256 / TP)
KERNEL conv_thin_f32(GLOBAL const FLT* X, GLOBAL const FLT* W, GLOBAL const FLT* bias,
                     GLOBAL const FLT* res, GLOBAL FLT* Y, CONV_GEOMETRY, int has_bias, int has_res, int act,
                     float p0, float p1) {
    PDL_ENTRY();
    LOCAL float s[256];
    int lx = LOCAL_ID(0), ly = LOCAL_ID(1);
    int P = od * oh * ow, ohw = oh * ow;
    int p = GROUP_ID(0) * TP + lx;
    int nc = GROUP_ID(1);
    int cout = groups * cout_g;
    int co = nc % cout, n = nc / cout;
    int g = co / cout_g;
    int live = p < P;
    int pp = live ? p : 0;
    int oz = pp / ohw, q = pp - oz * ohw;
    int oy = q / ow, ox = q - oy * ow;
    int ivol = id * ih * iw, taps = kd * kh * kw;
    GLOBAL const FLT* Xg = X + (n * groups + g) * cin_g * ivol;
    GLOBAL const FLT* Wc = W + co * cin_g * taps;
    float acc = 0.0f;
    for (int ci = live ? ly : cin_g; ci < cin_g; ci += THIN_LANES) {
        GLOBAL const FLT* Xc = Xg + ci * ivol;
        GLOBAL const FLT* Wk = Wc + ci * taps;
        for (int kz = 0; kz < kd; ++kz) {
            int iz = oz * sd - pd + kz * dd;
            if (iz < 0 || iz >= id) continue;
            for (int ky = 0; ky < kh; ++ky) {
                int iy = oy * sh - ph + ky * dh;
                if (iy < 0 || iy >= ih) continue;
                for (int kx = 0; kx < kw; ++kx) {
                    int ix = ox * sw - pw + kx * dw;
                    if (ix < 0 || ix >= iw) continue;
                    acc += LDF(Wk, (kz * kh + ky) * kw + kx) * LDF(Xc, (iz * ih + iy) * iw + ix);
                }
            }
        }
    }
    s[ly * TP + lx] = acc;
    LOCAL_BARRIER();
    for (int h = THIN_LANES / 2; h > 0; h >>= 1) {
        if (ly < h) s[ly * TP + lx] += s[(ly + h) * TP + lx];
        LOCAL_BARRIER();
    }
    if (ly == 0 && live) {
        int i = nc * P + p;
        STF(Y, i, conv_epilogue(s[lx], co, bias, has_bias, res, has_res, i, act, p0, p1));
    }
}

/* ConvTranspose as a gather: output (n, co, z, y, x) sums every (ci, tap) whose scattered
 * position lands on it. W is [Cin, cout_g, kd, kh, kw]; here cin_g/cout_g are per group. */
KERNEL conv_transpose_f32(GLOBAL const FLT* X, GLOBAL const FLT* W, GLOBAL const FLT* bias,
                          GLOBAL FLT* Y, CONV_GEOMETRY, int has_bias, int total) {
    PDL_ENTRY();
    int i = GLOBAL_ID(0);
    if (i >= total) return;
    int P = od * oh * ow, ohw = oh * ow;
    int p = i % P;
    int nc = i / P;
    int cout = groups * cout_g;
    int co = nc % cout, n = nc / cout;
    int g = co / cout_g, cg = co - g * cout_g;
    int oz = p / ohw, q = p - oz * ohw;
    int oy = q / ow, ox = q - oy * ow;
    int ivol = id * ih * iw, kvol = kd * kh * kw;
    float acc = 0.0f;
    for (int kz = 0; kz < kd; ++kz) {
        int tz = oz + pd - kz * dd;
        if (tz < 0 || tz % sd != 0 || tz / sd >= id) continue;
        int iz = tz / sd;
        for (int ky = 0; ky < kh; ++ky) {
            int ty = oy + ph - ky * dh;
            if (ty < 0 || ty % sh != 0 || ty / sh >= ih) continue;
            int iy = ty / sh;
            for (int kx = 0; kx < kw; ++kx) {
                int tx = ox + pw - kx * dw;
                if (tx < 0 || tx % sw != 0 || tx / sw >= iw) continue;
                int ix = tx / sw;
                int tap = (kz * kh + ky) * kw + kx;
                for (int ci = 0; ci < cin_g; ++ci) {
                    int c = g * cin_g + ci;
                    acc += LDF(X, (n * groups * cin_g + c) * ivol + (iz * ih + iy) * iw + ix) *
                           LDF(W, (c * cout_g + cg) * kvol + tap);
                }
            }
        }
    }
    STF(Y, i, has_bias ? acc + LDF(bias, co) : acc);
}

/* ConvTranspose with unit dilations as an implicit GEMM per output phase. Along a dimension of
 * stride s and begin pad p, output o takes tap k from input i = (o + p - k) / s where that
 * divides, so outputs of one residue r = (o + p) mod s take the same taps k = r + s * u and
 * form a regular grid o = o0 + s * j, reading i = base + j - u: per phase, a dense stride-1
 * correlation, with none of the gather's per-tap tests and no zero products. */
typedef struct {
    int o0;   /* first output of the residue */
    int cnt;  /* outputs of the residue */
    int taps; /* taps of the residue */
    int base; /* input of output o0's first tap */
} ConvtDim;

FUNC ConvtDim convt_dim(int r, int s, int pad, int out, int ker) {
    ConvtDim d;
    d.o0 = ((r - pad) % s + s) % s;
    d.cnt = d.o0 < out ? (out - d.o0 + s - 1) / s : 0;
    d.taps = r < ker ? (ker - r + s - 1) / s : 0;
    /* o0 + pad - r is a multiple of s above -s: 0 or more. */
    d.base = (d.o0 + pad - r) / s;
    return d;
}

/* Loads per work-item of a stage: TM x TK of A, TN x TK of B over NT work-items. */
#define CT_AL ((TM * TK + NT - 1) / NT)
#define CT_BL ((TN * TK + NT - 1) / NT)

/* Tap u of a phase (its index into W's taps), and each of a work-item's columns (phase
 * coordinates cd / ch / cw, cd -1 for none) its input for that tap in boff, -1 outside. */
FUNC_INLINE int convt_tap(int u, const int* cd, const int* ch, const int* cw, int* boff, ConvtDim Dd, ConvtDim Dh,
                          ConvtDim Dw, int rd, int rh, int rw, int sd, int sh, int sw, int kh, int kw, int id, int ih,
                          int iw) {
    int thw = Dh.taps * Dw.taps;
    int ud = u / thw, uh = (u / Dw.taps) % Dh.taps, uw = u % Dw.taps;
    for (int l = 0; l < CT_BL; ++l) {
        int iz = Dd.base + cd[l] - ud, iy = Dh.base + ch[l] - uh, ix = Dw.base + cw[l] - uw;
        boff[l] = (cd[l] >= 0 && iz >= 0 && iz < id && iy >= 0 && iy < ih && ix >= 0 && ix < iw) ? (iz * ih + iy) * iw + ix : -1;
    }
    return ((rd + sd * ud) * kh + rh + sh * uh) * kw + rw + sw * uw;
}

/* One stage's operands into registers: W's tap `tap` for TM channels from m0 and TK input
 * channels from c0 (ra), the columns' inputs boff of those input channels (rb); 0 outside. */
FUNC_INLINE void convt_load(GLOBAL const FLT* Wg, GLOBAL const FLT* Xg, float* ra, float* rb, const int* boff, int tap,
                            int tid, int m0, int c0, int cin_g, int cout_g, int kvol, int ivol) {
    for (int l = 0; l < CT_AL; ++l) {
        int e = tid + l * NT;
        int gm = m0 + e % TM, ci = c0 + e / TM;
        ra[l] = (e < TM * TK && gm < cout_g && ci < cin_g) ? LDF(Wg, (ci * cout_g + gm) * kvol + tap) : 0.0f;
    }
    for (int l = 0; l < CT_BL; ++l) {
        int e = tid + l * NT;
        int ci = c0 + e / TN;
        rb[l] = (e < TN * TK && boff[l] >= 0 && ci < cin_g) ? LDF(Xg, ci * ivol + boff[l]) : 0.0f;
    }
}

/* Columns are the phase's outputs, rows the group's output channels, the reduction the phase's
 * taps, each over every input channel: per tap a work-item finds its columns' inputs once, and
 * each stage's loads are then a product and a sum away (per element, index divisions cost this
 * kernel's first version four times its FMAs). A phase no tap reaches (kernel under the
 * stride) stores the bias. W is [Cin, cout_g, kd, kh, kw]. Work-items own WM consecutive
 * channels and WN consecutive columns, read from local memory as vectors. Work-groups past
 * their phase's outputs run no reduction step and store nothing (no early return: see
 * token.cl's EARLY_EXIT).
 * Grid: (ceil(Pmax / TN), ceil(cout_g / TM), N * groups * sd * sh * sw), local (TX, TY), where
 * Pmax = ceil(od / sd) * ceil(oh / sh) * ceil(ow / sw) bounds every phase's outputs. */
KERNEL convt_gemm_f32(GLOBAL const FLT* X, GLOBAL const FLT* W, GLOBAL const FLT* bias,
                      GLOBAL FLT* Y, CONV_GEOMETRY, int has_bias) {
    PDL_ENTRY();
    LOCAL float As[TK][TM] ALIGN16;
    LOCAL float Bs[TK][TN] ALIGN16;
    int tx = LOCAL_ID(0), ty = LOCAL_ID(1);
    int tid = ty * TX + tx;
    int j0 = GROUP_ID(0) * TN, m0 = GROUP_ID(1) * TM;
    int phases = sd * sh * sw;
    int z = GROUP_ID(2);
    int phase = z % phases, ng = z / phases;
    int g = ng % groups, n = ng / groups;
    int rd = phase / (sh * sw), rh = (phase / sw) % sh, rw = phase % sw;
    ConvtDim Dd = convt_dim(rd, sd, pd, od, kd);
    ConvtDim Dh = convt_dim(rh, sh, ph, oh, kh);
    ConvtDim Dw = convt_dim(rw, sw, pw, ow, kw);
    int P = Dd.cnt * Dh.cnt * Dw.cnt, chw = Dh.cnt * Dw.cnt;
    int tv = Dd.taps * Dh.taps * Dw.taps;
    int kvol = kd * kh * kw, ivol = id * ih * iw;
    int ntaps = j0 < P ? tv : 0;
    GLOBAL const FLT* Xg = X + (n * groups + g) * cin_g * ivol;
    GLOBAL const FLT* Wg = W + g * cin_g * cout_g * kvol;
    /* This work-item's B columns (the same in every stage) as phase coordinates; -1: none. */
    int cd[CT_BL], ch[CT_BL], cw[CT_BL];
    for (int l = 0; l < CT_BL; ++l) {
        int e = tid + l * NT, gj = j0 + e % TN;
        cd[l] = -1;
        ch[l] = 0;
        cw[l] = 0;
        if (e < TN * TK && gj < P) {
            int q = gj % chw;
            cd[l] = gj / chw;
            ch[l] = q / Dw.cnt;
            cw[l] = q % Dw.cnt;
        }
    }
    float acc[WM * WN];
    for (int i = 0; i < WM * WN; ++i) acc[i] = 0.0f;
    /* Stage s reads tap s / nc over input channels (s % nc) * TK ..; the next stage's loads are
     * issued before this one's products, so their latency hides behind them. */
    int nc = (cin_g + TK - 1) / TK, stages = ntaps * nc;
    int tap = 0, boff[CT_BL];
    float ra[CT_AL], rb[CT_BL];
    if (stages > 0) {
        tap = convt_tap(0, cd, ch, cw, boff, Dd, Dh, Dw, rd, rh, rw, sd, sh, sw, kh, kw, id, ih, iw);
        convt_load(Wg, Xg, ra, rb, boff, tap, tid, m0, 0, cin_g, cout_g, kvol, ivol);
    }
    for (int st = 0; st < stages; ++st) {
        for (int l = 0; l < CT_AL; ++l) {
            int e = tid + l * NT;
            if (e < TM * TK) As[e / TM][e % TM] = ra[l];
        }
        for (int l = 0; l < CT_BL; ++l) {
            int e = tid + l * NT;
            if (e < TN * TK) Bs[e / TN][e % TN] = rb[l];
        }
        LOCAL_BARRIER();
        int nx = st + 1;
        if (nx < stages) {
            if (nx % nc == 0) tap = convt_tap(nx / nc, cd, ch, cw, boff, Dd, Dh, Dw, rd, rh, rw, sd, sh, sw, kh, kw, id, ih, iw);
            convt_load(Wg, Xg, ra, rb, boff, tap, tid, m0, (nx % nc) * TK, cin_g, cout_g, kvol, ivol);
        }
        for (int kk = 0; kk < TK; ++kk) {
            float a[WM], b[WN];
            LDS_RUN(a, &As[kk][ty * WM], WM);
            LDS_RUN(b, &Bs[kk][tx * WN], WN);
            for (int i = 0; i < WM; ++i)
                for (int j = 0; j < WN; ++j) acc[i * WN + j] += a[i] * b[j];
        }
        LOCAL_BARRIER();
    }
    for (int i = 0; i < WM; ++i) {
        int m = m0 + ty * WM + i;
        if (m >= cout_g) continue;
        int co = g * cout_g + m;
        GLOBAL FLT* Yc = Y + (n * groups * cout_g + co) * od * oh * ow;
        float b = has_bias ? LDF(bias, co) : 0.0f;
        for (int j = 0; j < WN; ++j) {
            int gj = j0 + tx * WN + j;
            if (gj >= P) continue;
            int jd = gj / chw, q = gj - jd * chw;
            int jh = q / Dw.cnt, jw = q - jh * Dw.cnt;
            int oz = Dd.o0 + sd * jd, oy = Dh.o0 + sh * jh, ox = Dw.o0 + sw * jw;
            STF(Yc, (oz * oh + oy) * ow + ox, acc[i * WN + j] + b);
        }
    }
}
