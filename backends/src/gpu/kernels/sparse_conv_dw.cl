/* The depthwise sparse conv, after sparse_conv_common.h (gpu/kernels.rs). */

/* Depthwise (one input and one output channel per group): one work-item per (column, channel).
 * Grid: (ceil(cap / 64), channels, N), local (64, 1, 1). W is [C, kh * kw]. */
KERNEL sparse_conv_dw_f32(SPARSE_CONV_ARGS) {
    PDL_ENTRY();
    int c = GLOBAL_ID(0), ch = GROUP_ID(1), n = GROUP_ID(2);
    if (c >= IMIN(cap, sparse_conv_columns(meta, n, cstride, gi, oh, ow))) return;
    int base = data0 + n * img_stride;
    int p = sparse_conv_position(meta, base, tiles_at, c, oh, ow);
    if (p < 0 || (SPARSE_CONV_MAY_SKIP && masked && !mask_bit(meta, base, p))) return;
    int oy = p / ow, ox = p - (p / ow) * ow;
    int y0 = oy * sh - ph, x0 = ox * sw - pw;
    GLOBAL const FLT* Xc = X + (n * cin + ch) * ih * iw;
    GLOBAL const FLT* Wc = W + ch * kh * kw;
    float acc = 0.0f;
    for (int ky = 0; ky < kh; ++ky) {
        int iy = y0 + ky * dh;
        if (iy < 0 || iy >= ih) continue;
        for (int kx = 0; kx < kw; ++kx) {
            int ix = x0 + kx * dw;
            if (ix < 0 || ix >= iw) continue;
            acc += LDF(Wc, ky * kw + kx) * LDF(Xc, iy * iw + ix);
        }
    }
    int at = (n * cout + ch) * oh * ow + p;
    STF(Y, at, sparse_conv_epilogue(acc, has_bias ? LDF(bias, ch) : 0.0f, res, has_res, at, act, p0, p1));
}
