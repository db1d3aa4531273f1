/* The fills of inactive positions that need a kernel (sparse_conv_common.h gives the mask's
 * layout): the residual fill, and the blend keeping a Cached op's last activations. */

/* Residual fill: where image n's mask bit is 0, Y = act(res) over the [N, cout, oh, ow] output.
 * Grid: (ceil(oh * ow / 64), cout, N), local (64, 1, 1). */
KERNEL sparse_conv_fill_residual_f32(SPARSE_CONV_ARGS) {
    PDL_ENTRY();
    int p = GLOBAL_ID(0), m = GROUP_ID(1), n = GROUP_ID(2);
    if (p >= oh * ow || mask_bit(meta, data0 + n * img_stride, p)) return;
    int at = (n * cout + m) * oh * ow + p;
    STF(Y, at, activate(act, LDF(res, at), p0, p1));
}

/* Cached fill of an op without sparse kernels: Y (the cached activations) takes the freshly
 * computed X where the mask bit is 1, or everywhere without `masked` (the first frame).
 * Grid: (ceil(oh * ow / 64), cout, N), local (64, 1, 1). */
KERNEL sparse_conv_blend_cached_f32(SPARSE_CONV_ARGS) {
    PDL_ENTRY();
    int p = GLOBAL_ID(0), m = GROUP_ID(1), n = GROUP_ID(2);
    if (p >= oh * ow || (masked && !mask_bit(meta, data0 + n * img_stride, p))) return;
    int at = (n * cout + m) * oh * ow + p;
    STF(Y, at, LDF(X, at));
}
