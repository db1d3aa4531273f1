/* The sparse conv as an implicit GEMM (sparse_conv_common.h says over which columns): TM x TN
 * outputs (channels x columns) per work-group, the reduction (input channels x taps) in stages
 * of TK through local memory, or at once (SPARSE_CONV_ONE_STAGE), optionally split over KS
 * work-groups whose partial sums sparse_conv_finish_f32 adds up (or the last of them,
 * FUSED_FINISH). Its knobs, stages and self-listing scan are sparse_conv_knobs.h,
 * sparse_conv_stage.h and sparse_conv_list.h, compiled before it in that order after
 * sparse_conv_common.h (gpu/kernels.rs). */

/* Channel and column (within the tile) of accumulator a of work-item tid. */
FUNC int sparse_conv_acc_m(int a, int tid) {
    int i = a / WN;
    return (i / VWM) * (TY * VWM) + (tid / TX) * VWM + i % VWM;
}

FUNC int sparse_conv_acc_c(int a, int tid) {
    int j = a % WN;
    return (j / VWN) * (TX * VWN) + (tid % TX) * VWN + j % VWN;
}

/* VENDOR_RAW = 1 (the vendor epilogue, KS = 1): `part` is a vendor library's bare conv output,
 * stored as the model's float tensors are (FLT), not the f32 partial sums of our GEMM. */
#ifndef VENDOR_RAW
#define VENDOR_RAW 0
#endif

/* Sum of the KS partial sums of a split reduction for (channel m, column c) of image n. */
FUNC float sparse_conv_split_sum(GLOBAL const float* part, int n, int m, int c, int cout, int cap) {
#if VENDOR_RAW
    return LDF((GLOBAL const FLT*)part, (n * cout + m) * cap + c);
#else
    float v = 0.0f;
    for (int s = 0; s < KS; ++s) v += part[((n * KS + s) * cout + m) * cap + c];
    return v;
#endif
}

/* Stores output (channel m, position p) of image n from its reduction v as the unsplit GEMM
 * stores: bias b, residual, activation; nothing at a phantom (p < 0) or where `masked` says
 * the fill policy owns the position. Callers issue the loads of v and b before it, so the
 * checks here do not delay them: as a chain of dependent loads the split-K finish spent most
 * of its time waiting. */
FUNC void sparse_conv_store_output(float v, float b, GLOBAL FLT* Y, GLOBAL const FLT* res, int has_res,
                             GLOBAL const int* meta, int base, int masked, int n, int m, int p, int cout, int P,
                             int act, float p0, float p1) {
    if (p < 0 || (SPARSE_CONV_MAY_SKIP && masked && !mask_bit(meta, base, p))) return;
    int at = (n * cout + m) * P + p;
    STF(Y, at, sparse_conv_epilogue(v, b, res, has_res, at, act, p0, p1));
}

/* Stages in flight in the GEMM's reduction loop: 1 (registers for the next stage while this
 * one computes) or 2 (one more register set; see the loop and
 * `SparseConvFeatures::two_stages_in_flight`). */
#ifndef SPARSE_CONV_DEPTH
#define SPARSE_CONV_DEPTH 1
#endif

#if KS > 1 && FUSED_FINISH
/* Per output tile (column tile, channel tile, image: the grid without its splits), how many of
 * its KS work-groups have stored their partial sums. Zero between launches: the last arrival
 * resets it, and work-groups past the frame's columns never touch theirs. */
#define SPARSE_CONV_FUSED_ARGS , GLOBAL int *tile_count
#else
#define SPARSE_CONV_FUSED_ARGS
#endif
#if SPARSE_CONV_CSLOW
/* Column tiles slowest, then images x splits, then channel tiles. */
#define SPARSE_CONV_CTILE GROUP_ID(2)
#define SPARSE_CONV_NCTILES NUM_GROUPS(2)
#define SPARSE_CONV_MTILE GROUP_ID(0)
#define SPARSE_CONV_NMTILES NUM_GROUPS(0)
#define SPARSE_CONV_NKS GROUP_ID(1)
#else
#define SPARSE_CONV_CTILE GROUP_ID(0)
#define SPARSE_CONV_NCTILES NUM_GROUPS(0)
#define SPARSE_CONV_MTILE GROUP_ID(1)
#define SPARSE_CONV_NMTILES NUM_GROUPS(1)
#define SPARSE_CONV_NKS GROUP_ID(2)
#endif

/* Grid: (ceil(cap / TN), ceil(cout / TM), N * KS), local (TX, TY); cap = columns the map can
 * have (SPARSE_CONV_CSLOW: (ceil(cout / TM), N * KS, ceil(cap / TN))). Wt is the weight transposed to
 * [cin * kh * kw][cout]; ktab per reduction index k the input offset ci * ih * iw + ky * dh *
 * iw + kx * dw, ky * dh and kx * dw. */
/* SPARSE_CONV_MIN_BLOCKS: work-groups per SM the registers must leave room for (CUDA only), from the
 * host (sparse_conv/schedule.rs, register_bound): two of 256, whose 8 x 4 float4 variant needed 129
 * registers, one more than two groups fit, and at density 0.1 a split reduction launches
 * more work-groups than one wave holds (conv3x3 at KS 32: 31.6 µs against 22.2 with 122). */
#ifndef SPARSE_CONV_MIN_BLOCKS
#define SPARSE_CONV_MIN_BLOCKS 1
#endif
/* SL_PREWAIT = 1 (CUDA; the host asks only where the launch before this one does not write
 * the mask, sparse_conv/lower.rs `MaskColumns::prewait`): a self-listing group reads the mask
 * and lists its columns before its PDL wait, so under a programmatic launch that work overlaps
 * the kernel ahead (the split finish, which lets the next grid go at its start: FIN_TRIGGER).
 * Nothing global is written, and nothing but the mask read, before PDL_WAIT(). */
#ifndef SL_PREWAIT
#define SL_PREWAIT 0
#endif
/* SPARSE_CONV_EARLY_TRIGGER = 1 (CUDA, one-stage members whose knobs ask for it, `ET`): the next grid may launch at this one's entry
 * rather than before its stores, so its own prologue (a one-stage member's weights and
 * listing) overlaps this grid's work. */
#ifndef SPARSE_CONV_EARLY_TRIGGER
#define SPARSE_CONV_EARLY_TRIGGER 0
#endif
/* SPARSE_CONV_ONE_STAGE (without SL_PREWAIT) waits after loading its weights instead (SPARSE_CONV_WEIGHTS_WAIT):
 * constants, which no grid writes. */
#if SELF_LIST && SL_PREWAIT
#define PDL_ENTRY_DEFERRED() do { } while (0)
#define SPARSE_CONV_WEIGHTS_WAIT() do { } while (0)
#define SPARSE_CONV_LISTED_WAIT() PDL_WAIT()
#elif SPARSE_CONV_ONE_STAGE
#define PDL_ENTRY_DEFERRED() do { } while (0)
#define SPARSE_CONV_WEIGHTS_WAIT() PDL_WAIT()
#define SPARSE_CONV_LISTED_WAIT() do { } while (0)
#else
#define PDL_ENTRY_DEFERRED() PDL_ENTRY()
#define SPARSE_CONV_WEIGHTS_WAIT() do { } while (0)
#define SPARSE_CONV_LISTED_WAIT() do { } while (0)
#endif
KERNEL LAUNCH_BOUNDS(NT, SPARSE_CONV_MIN_BLOCKS) sparse_conv_gemm_f32(SPARSE_CONV_ARGS SPARSE_CONV_FUSED_ARGS SPARSE_CONV_SELF_ARGS) {
    /* The first statement, as cuda/pdl.rs requires of a kernel it launches programmatically. */
    PDL_ENTRY_DEFERRED();
#if SPARSE_CONV_ONE_STAGE && SPARSE_CONV_EARLY_TRIGGER
    /* The next grid may launch now: this one's work-groups have all started by the time every
     * one has passed here, and its wait still waits for this grid's end. */
    PDL_TRIGGER();
#endif
    GLOBAL const FLT* Wt = W;
#ifdef DSP_DYN_SMEM
    /* Tiles past CUDA's static limit: the launch provides the weights' stage (the host sets it,
     * sparse_conv/schedule.rs `launch_local_bytes`). */
#if DSP_DYN_SMEM < TK * TM * 4
#error "DSP_DYN_SMEM must hold the weights' stage"
#endif
    LOCAL_FROM_LAUNCH(float, As, TM);
#else
    LOCAL ALIGN16 float As[TK][TM];
#endif
#if SPARSE_CONV_ONE_STAGE
    /* Before the wait: the weights are constants (see SPARSE_CONV_ONE_STAGE). Stored at once, so their
     * registers are free again before the listing: held across it, they took the work-group to
     * 93 registers per work-item, two groups per SM, and batches 2 and 4 to two waves. */
    sparse_conv_weights_load(As, Wt, SPARSE_CONV_TID(), SPARSE_CONV_MTILE * TM, cin * kh * kw, cout);
#endif
    SPARSE_CONV_WEIGHTS_WAIT();
    LOCAL ALIGN16 float Bs[TK][TN];
    LOCAL int cy[TN];
    LOCAL int cxs[TN];
    LOCAL int cpos[TN];
    LOCAL int tapt[3 * SPARSE_CONV_TAPS];
#if WK > 1
    /* Each slice's accumulators, [slice][accumulator][item of the slice]: in As, free after the
     * last stage's barrier, where they fit (deep stages need the room for themselves). */
#if WK * NACC * SPARSE_CONV_NS <= TK * TM
    LOCAL_PTR float* wred = &As[0][0];
#else
    LOCAL float wred[WK * NACC * SPARSE_CONV_NS];
#endif
#endif
#if KS > 1 && FUSED_FINISH
    LOCAL int last_split;
#endif
    /* Read after the barrier in front of the first stage. */
    sparse_conv_tap_table(tapt, SPARSE_CONV_TID(), kh * kw, kw, dh, dw, iw);
    int c0 = SPARSE_CONV_CTILE * TN;
#if SELF_LIST
    LOCAL int sscan[2 * NT + SL_EARLY];
    LOCAL int sbad;
    /* A self-listing grid may hold fewer column tiles than the map can have (the host sizes it
     * from the columns it expects, lower/ctx.rs `ColumnGrid`): each work-group takes windows
     * c0, c0 + the grid's width, ... until one is past the map's columns, so any grid covers
     * any map, and a frame with the columns expected runs one window. The loop's body, not
     * indented, runs to the end of the kernel. */
    for (;; c0 += SPARSE_CONV_NCTILES * TN) {
#endif
    int tx = LOCAL_ID(0), ty = LOCAL_ID(1), gk = SPARSE_CONV_NKS, taps = kh * kw;
#if SELF_LIST
    /* Everything below is computed per window: held across the loop instead, 8 x 4 members
     * spilled 72 bytes where they had spilled none, and ran up to 35% slower on an H200. */
    NO_HOIST(tx);
    NO_HOIST(ty);
    NO_HOIST(gk);
    NO_HOIST(taps);
#endif
    /* sid: the work-item within its slice; tid within the work-group. */
    int sl = WK > 1 ? LOCAL_ID(2) : 0, sid = ty * TX + tx;
    int tid = sl * SPARSE_CONV_NS + sid;
    int m0 = SPARSE_CONV_MTILE * TM;
    int n = gk / KS, ks = gk - (gk / KS) * KS;
    int base = data0 + n * img_stride;
#if SELF_LIST
    int cols = sparse_conv_self_list(mk + n * mk_stride, sscan, cpos, &sbad, tid, c0, oh * ow);
#endif
#if SELF_LIST
    /* Before any global store (a no-op after the first window). */
    SPARSE_CONV_LISTED_WAIT();
#if SELF_COUNT
    if (SPARSE_CONV_MTILE == 0 && ks == 0 && c0 == 0 && tid == 0) {
        rep[n * rep_stride] = cols;
        rep[n * rep_stride + rep_stride - 1] = sbad == 0x7fffffff ? -1 : sbad;
    }
#endif
    /* The same for the whole work-group, so returning here skips no barrier. For
     * sparse_conv_finish_f32, the first column tile (there always is one) publishes the count, here
     * when the map has no columns, and each column tile its columns. (PoCL 6 computed wrong
     * columns when the count was stored before this branch for every map.) */
    if (c0 >= cols) {
#if KS > 1
        if (SPARSE_CONV_MTILE == 0 && ks == 0 && c0 == 0 && tid == 0) meta[n * cstride + gi] = 0;
#endif
        return;
    }
    LOCAL_BARRIER();
#if KS > 1
    if (SPARSE_CONV_MTILE == 0 && ks == 0) {
        for (int c = tid; c < TN && c0 + c < cols; c += NT) meta[base + tiles_at + c0 + c] = cpos[c];
        if (c0 == 0 && tid == 0) meta[n * cstride + gi] = cols;
    }
#endif
#else
    int cols = sparse_conv_columns(meta, n, cstride, gi, oh, ow);
    /* The same for the whole work-group, so returning here skips no barrier. */
    if (c0 >= cols) return;
#endif
    for (int c = tid; c < TN; c += NT) {
#if SELF_LIST
        int p = cpos[c];
#else
        int p = c0 + c < cols ? sparse_conv_position(meta, base, tiles_at, c0 + c, oh, ow) : -1;
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
    GLOBAL const FLT* Xn = X + n * cin * ihw;
    float acc[NACC];
    for (int a = 0; a < NACC; ++a) acc[a] = 0.0f;
    LOCAL_BARRIER();
#if SPARSE_CONV_ONE_STAGE
    /* A later window reloads the weights: the slices' sums may have overwritten As. */
    if (c0 != SPARSE_CONV_CTILE * TN) sparse_conv_weights_load(As, Wt, tid, m0, K, cout);
    sparse_conv_gather_all(Bs, Xn, ktab, cy, cxs, tapt, tid, K, ih, iw, taps, rtaps);
    LOCAL_BARRIER();
    sparse_conv_product_stage(As, Bs, acc, tid, tx, ty, sl);
    LOCAL_BARRIER();
#else
#if SPARSE_CONV_HOISTED
    /* The same for the whole work-group (taps is the op's). */
    int hoist = taps <= IMIN(SPARSE_CONV_TAPS, 32);
    int hc = tid % TN, hm = m0 + tid % TM;
    int aok = hm < cout;
    GLOBAL const FLT* Wa = Wt + (aok ? hm : 0);
    uint hv = 0u;
    for (int r = 0; hoist && r < taps; ++r) {
        int iy = cy[hc] + tapt[3 * r + 1], ix = cxs[hc] + tapt[3 * r + 2];
        hv |= (uint)(iy >= 0 && iy < ih && ix >= 0 && ix < iw) << (uint)r;
    }
    /* A phantom's origin is far outside the input: no tap is in, and no offset is formed. */
    GLOBAL const FLT* Xc = Xn + (hv ? cy[hc] * iw + cxs[hc] : 0);
    int hsc = SPARSE_CONV_HSB / taps, hsr = SPARSE_CONV_HSB - (SPARSE_CONV_HSB / taps) * taps;
#endif
    /* Software pipeline: the global loads of stage k0 + TK are issued into registers before
     * the FMAs of stage k0 run from local memory, so their latency overlaps compute instead
     * of stalling every stage. With few columns a work-group's stages are a serial chain, and
     * this latency was most of its time. SPARSE_CONV_LOAD: stage k into registers r_a / r_b. SPARSE_CONV_STEP:
     * those registers into local memory, the load of stage `next` (where there is one) issued
     * into them, then the products of the staged slice. */
#if SPARSE_CONV_HOISTED
#define SPARSE_CONV_LOAD(r_a, r_b, k)                                                                                        \
    do {                                                                                                            \
        if (hoist) sparse_conv_load_stage_h(Wa, Xc, tapt, r_a, r_b, tid, k, ke, cout, aok, hv, taps, rtaps, ihw, hsc, hsr); \
        else sparse_conv_load_stage(Wt, Xn, ktab, cy, cxs, tapt, r_a, r_b, tid, m0, k, ke, cout, ih, iw, taps, rtaps);     \
    } while (0)
#else
#define SPARSE_CONV_LOAD(r_a, r_b, k) sparse_conv_load_stage(Wt, Xn, ktab, cy, cxs, tapt, r_a, r_b, tid, m0, k, ke, cout, ih, iw, taps, rtaps)
#endif
#define SPARSE_CONV_STEP(r_a, r_b, next)                                                                          \
    do {                                                                                                 \
        sparse_conv_store_stage(As, Bs, r_a, r_b, tid);                                                        \
        LOCAL_BARRIER();                                                                                 \
        if ((next) < ke) SPARSE_CONV_LOAD(r_a, r_b, next);                                                        \
        sparse_conv_product_stage(As, Bs, acc, tid, tx, ty, sl);                                               \
        LOCAL_BARRIER();                                                                                 \
    } while (0)
    float ra[SPARSE_CONV_AL], rb[SPARSE_CONV_BL];
    SPARSE_CONV_LOAD(ra, rb, kb);
#if SPARSE_CONV_DEPTH > 1
    /* Two stages in flight: a second register set takes stage k0 + 2 TK while k0 computes, so
     * a load has two stages' FMAs to arrive in, not one. The loop is unrolled by two because
     * registers cannot be indexed by a variable. */
    float ra2[SPARSE_CONV_AL], rb2[SPARSE_CONV_BL];
    if (kb + TK < ke) SPARSE_CONV_LOAD(ra2, rb2, kb + TK);
    for (int k0 = kb; k0 < ke; k0 += 2 * TK) {
        SPARSE_CONV_STEP(ra, rb, k0 + 2 * TK);
        /* k0 and ke are the work-group's: every work-item leaves here together. */
        if (k0 + TK >= ke) break;
        SPARSE_CONV_STEP(ra2, rb2, k0 + 3 * TK);
    }
#else
    for (int k0 = kb; k0 < ke; k0 += TK) SPARSE_CONV_STEP(ra, rb, k0 + TK);
#endif
#endif
    /* Only the stores are left: the next launch may start (where PDL_ENTRY did not let it). */
    PDL_TRIGGER();
    int P = oh * ow;
#if WK > 1
    /* Slice sl adds up and stores accumulators sl, sl + WK, ... of its place in the tile (in the
     * store loop below). */
    for (int a = 0; a < NACC; ++a) wred[(sl * NACC + a) * SPARSE_CONV_NS + sid] = acc[a];
    LOCAL_BARRIER();
#endif
#if KS > 1 && VWN > 1
    /* A run of VWN columns goes out in one 8 or 16-byte store. One float per store, neighbouring
     * work-items' stores landed VWN floats apart, 1 / VWN of each 32-byte sector, and the 8 x 4
     * members with long splits lost 5% to it. Phantom columns in a run get partial sums too:
     * scratch no finish reads. Where rows are not aligned (cap not a multiple of VWN) or a run
     * reaches past cap, one float at a time. */
    for (int a = 0; a < NACC; a += VWN) {
        int m = m0 + sparse_conv_acc_m(a, tid), c = sparse_conv_acc_c(a, tid);
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
        if (WK > 1 && a % WK != sl) continue;
        int m = m0 + sparse_conv_acc_m(a, sid), c = sparse_conv_acc_c(a, sid);
        int p = cpos[c];
        if (m >= cout || p < 0) continue;
#if WK > 1
        /* Added where stored: written back to acc[a] first, the loop (of 16 accumulators, not
         * unrolled) indexed acc by a variable, which put it in local memory. */
        float v = 0.0f;
        for (int s = 0; s < WK; ++s) v += wred[(s * NACC + a) * SPARSE_CONV_NS + sid];
#else
        float v = acc[a];
#endif
#if KS > 1
        part[((n * KS + ks) * cout + m) * cap + c0 + c] = v;
#else
        sparse_conv_store_output(v, has_bias ? LDF(bias, m) : 0.0f, Y, res, has_res, meta, base, masked, n, m, p, cout, P, act,
                           p0, p1);
#endif
    }
#endif
#if KS > 1 && FUSED_FINISH
    /* Release: every work-item's partial sums are visible device-wide before the group's
     * arrival is counted (the barrier makes tid 0 count after all of them fenced). */
    GLOBAL_FENCE();
    LOCAL_BARRIER();
    int tile = (n * SPARSE_CONV_NMTILES + SPARSE_CONV_MTILE) * ((cap + TN - 1) / TN) + c0 / TN;
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
            int m = m0 + sparse_conv_acc_m(a, tid), c = sparse_conv_acc_c(a, tid);
            if (m >= cout) continue;
            sparse_conv_store_output(sparse_conv_split_sum(part, n, m, c0 + c, cout, cap), has_bias ? LDF(bias, m) : 0.0f, Y, res, has_res,
                               meta, base, masked, n, m, cpos[c], cout, P, act, p0, p1);
        }
    }
#endif
#if SELF_LIST
    /* The image's count is every window's: past it the group is done. Listed again to learn
     * that, every working group read the mask once more and ran the count's two barriers at
     * its end, and the last of them is where the next grid's wait ends. The same for the
     * whole work-group. */
    if (c0 + SPARSE_CONV_NCTILES * TN >= cols) return;
    /* The next window's listing rewrites cpos, cy, cxs and the scan: every read of this one's
     * is done first. */
    LOCAL_BARRIER();
    }
#endif
}

#ifndef SPARSE_CONV_FIN_SPEC
#define SPARSE_CONV_FIN_SPEC 0
#endif

/* Adds the KS partial sums of sparse_conv_gemm_f32 and stores like it, a work-item per output.
 * Grid: (ceil(cap / 64), ceil(cout / CH), N), local (64, CH, 1): CH channels per work-group
 * (the vendor epilogue launches CH = 1), so a frame with few columns does not pay for a row of
 * mostly idle work-groups per channel. SPARSE_CONV_CSLOW: (ceil(cout / CH), N, ceil(cap / 64)). */
/* FIN_TRIGGER = 1 (CUDA; sparse_conv/schedule.rs `finish_triggers`): the next grid may launch as soon as
 * every work-group has started, so its launch, and a self-listing GEMM's scan of its mask
 * (SL_PREWAIT), overlap this short kernel instead of following it. Its own wait comes first:
 * by the trigger, every grid before this one has finished. */
#ifndef FIN_TRIGGER
#define FIN_TRIGGER 0
#endif
KERNEL sparse_conv_finish_f32(SPARSE_CONV_ARGS) {
    PDL_ENTRY();
#if FIN_TRIGGER
    PDL_TRIGGER();
#endif
#if SPARSE_CONV_CSLOW
    int c = GROUP_ID(2) * LOCAL_SIZE(0) + LOCAL_ID(0), m = GROUP_ID(0) * LOCAL_SIZE(1) + LOCAL_ID(1), n = GROUP_ID(1);
    int cstep = NUM_GROUPS(2) * LOCAL_SIZE(0);
#else
    int c = GLOBAL_ID(0), m = GROUP_ID(1) * LOCAL_SIZE(1) + LOCAL_ID(1), n = GROUP_ID(2);
    int cstep = NUM_GROUPS(0) * LOCAL_SIZE(0);
#endif
    if (m >= cout) return;
    /* Most work-items find no column: they read the count and leave, and nothing else, since
     * any further load of theirs cost more than it saved (RESULTS.md, "the finish fixed"). The column's
     * position, partial sums and bias are independent loads, issued together. A grid narrower
     * than cap (a self-listing member's, see sparse_conv_gemm_f32) takes a column every cstep. */
    int base = data0 + n * img_stride;
#if SPARSE_CONV_FIN_SPEC
    /* The first column's loads go out beside the count's instead of after it: with grids
     * narrowed to the columns a frame expects most work-items have a column, and the count's
     * round trip was the chain's first link. A column past the count read stale scratch
     * (within cap) and stores nothing. */
    if (c >= cap) return;
    {
        int p = sparse_conv_position(meta, base, tiles_at, c, oh, ow);
        float v = sparse_conv_split_sum(part, n, m, c, cout, cap);
        float b = has_bias ? LDF(bias, m) : 0.0f;
        if (c >= IMIN(cap, sparse_conv_columns(meta, n, cstride, gi, oh, ow))) return;
        sparse_conv_store_output(v, b, Y, res, has_res, meta, base, masked, n, m, p, cout, oh * ow, act, p0, p1);
        c += cstep;
    }
#endif
    int cols = IMIN(cap, sparse_conv_columns(meta, n, cstride, gi, oh, ow));
    for (; c < cols; c += cstep) {
        int p = sparse_conv_position(meta, base, tiles_at, c, oh, ow);
        float v = sparse_conv_split_sum(part, n, m, c, cout, cap);
        float b = has_bias ? LDF(bias, m) : 0.0f;
        sparse_conv_store_output(v, b, Y, res, has_res, meta, base, masked, n, m, p, cout, oh * ow, act, p0, p1);
    }
}
