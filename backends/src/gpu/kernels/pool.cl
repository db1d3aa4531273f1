/* MaxPool / AveragePool over NCDHW (1-D and 2-D maps with leading extents of 1), one work-item
 * per output. Averages divide by the taps inside the input (or inside input + pads with
 * count_include_pad), counted per axis as the CPU backend does. */

FUNC int taps_inside(int o, int s, int pb, int k, int d, int lo, int hi) {
    int c = 0;
    for (int j = 0; j < k; ++j) {
        int x = o * s - pb + j * d;
        if (x >= lo && x < hi) ++c;
    }
    return c;
}

/* kind: 0 max, 1 average without pads, 2 average counting pads. pe*: end pads. */
KERNEL pool_f32(GLOBAL const FLT* X, GLOBAL FLT* Y, int total, int id, int ih, int iw, int od, int oh, int ow,
                int kd, int kh, int kw, int sd, int sh, int sw, int pd, int ph, int pw, int dd, int dh, int dw, int ped,
                int peh, int pew, int kind) {
    PDL_ENTRY();
    int i = GLOBAL_ID(0);
    if (i >= total) return;
    int P = od * oh * ow, ohw = oh * ow;
    int p = i % P, plane = i / P;
    int oz = p / ohw, q = p - oz * ohw;
    int oy = q / ow, ox = q - oy * ow;
    GLOBAL const FLT* Xp = X + plane * id * ih * iw;
    float acc = kind == 0 ? -F32_INF : 0.0f;
    for (int kz = 0; kz < kd; ++kz) {
        int iz = oz * sd - pd + kz * dd;
        if (iz < 0 || iz >= id) continue;
        for (int ky = 0; ky < kh; ++ky) {
            int iy = oy * sh - ph + ky * dh;
            if (iy < 0 || iy >= ih) continue;
            for (int kx = 0; kx < kw; ++kx) {
                int ix = ox * sw - pw + kx * dw;
                if (ix < 0 || ix >= iw) continue;
                float v = LDF(Xp, (iz * ih + iy) * iw + ix);
                if (kind == 0) acc = v > acc ? v : acc;
                else acc += v;
            }
        }
    }
    if (kind != 0) {
        int inc = kind == 2;
        float c = (float)taps_inside(oz, sd, pd, kd, dd, inc ? -pd : 0, inc ? id + ped : id) *
                  (float)taps_inside(oy, sh, ph, kh, dh, inc ? -ph : 0, inc ? ih + peh : ih);
        acc /= c * (float)taps_inside(ox, sw, pw, kw, dw, inc ? -pw : 0, inc ? iw + pew : iw);
    }
    STF(Y, i, acc);
}
