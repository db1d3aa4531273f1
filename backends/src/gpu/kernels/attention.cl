/* Fused scaled dot-product attention (Op::Attention): out = softmax(scale(q . k^T) + bias) . v
 * per (batch, head), one work-group of WG work-items per query row. The row's scores live in
 * local memory (TK_MAX >= Tk floats), so the [Tq, Tk] matrix never exists. */

#ifndef WG
#define WG 128
#endif
#ifndef TK_MAX
#define TK_MAX 256
#endif

FUNC float att_reduce(LOCAL_PTR float* s, float v, int is_max) {
    int t = LOCAL_ID(0);
    s[t] = v;
    LOCAL_BARRIER();
    for (int k = WG / 2; k > 0; k >>= 1) {
        if (t < k) s[t] = is_max ? FMAXF(s[t], s[t + k]) : s[t] + s[t + k];
        LOCAL_BARRIER();
    }
    float r = s[0];
    LOCAL_BARRIER();
    return r;
}

/* q [BH, Tq, dk]; k element (bh, j, d) at bh*Tk*dk + j*skj + d*skd (transposed or not);
 * v [BH, Tk, dv]; out [BH, Tq, dv]. bias (b, h, i, j) at b*sb0 + h*sb1 + i*sb2 + j*sb3 (zero
 * strides broadcast). scale_mode 0: scores * scale, 1: scores / scale. Grid: (Tq, BH). */
KERNEL attention_f32(GLOBAL const FLT* q, GLOBAL const FLT* k, GLOBAL const FLT* v, GLOBAL const FLT* bias,
                     GLOBAL FLT* out, int heads, int tq, int tk, int dk, int dv, int skj, int skd, int scale_mode,
                     float scale, int has_bias, int sb0, int sb1, int sb2, int sb3) {
    PDL_ENTRY();
    LOCAL float sc[TK_MAX];
    LOCAL float red[WG];
    int i = GROUP_ID(0), bh = GROUP_ID(1), t = LOCAL_ID(0);
    int b = bh / heads, h = bh - b * heads;
    GLOBAL const FLT* qr = q + (bh * tq + i) * dk;
    GLOBAL const FLT* kb = k + bh * tk * dk;
    GLOBAL const FLT* vb = v + bh * tk * dv;
    float m = -F32_INF;
    for (int j = t; j < tk; j += WG) {
        float acc = 0.0f;
        for (int d = 0; d < dk; ++d) acc += LDF(qr, d) * LDF(kb, j * skj + d * skd);
        float x = scale_mode == 0 ? acc * scale : acc / scale;
        if (has_bias) x += LDF(bias, b * sb0 + h * sb1 + i * sb2 + j * sb3);
        sc[j] = x;
        m = FMAXF(m, x);
    }
    m = att_reduce(red, m, 1);
    float sum = 0.0f;
    for (int j = t; j < tk; j += WG) {
        float e = EXPF(sc[j] - m);
        sc[j] = e;
        sum += e;
    }
    sum = att_reduce(red, sum, 0);
    float inv = 1.0f / sum;
    for (int j = t; j < tk; j += WG) sc[j] *= inv;
    LOCAL_BARRIER();
    GLOBAL FLT* orow = out + (bh * tq + i) * dv;
    for (int d = t; d < dv; d += WG) {
        float acc = 0.0f;
        for (int j = 0; j < tk; ++j) acc += sc[j] * LDF(vb, j * dv + d);
        STF(orow, d, acc);
    }
}
