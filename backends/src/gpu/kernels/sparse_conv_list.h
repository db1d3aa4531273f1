/* How a SELF_LIST member of sparse_conv_gemm.cl finds its columns in the float mask: its extra
 * arguments and the work-group's scan of the mask. Compiled after sparse_conv_stage.h. */

#if SELF_LIST && SELF_COUNT
/* The mask tensor (floats, mk_stride per image: 0 when one mask serves every image), and where
 * SELF_COUNT stores the counts. */
#define SPARSE_CONV_SELF_ARGS , GLOBAL const FLT *mk, int mk_stride, GLOBAL int *rep, int rep_stride
#elif SELF_LIST
#define SPARSE_CONV_SELF_ARGS , GLOBAL const FLT *mk, int mk_stride
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
/* SL_EARLY = 1 (CUDA; the host asks, `SparseConvFeatures::self_list_early`): the group adds up
 * the mask's count first (a local atomic, two barriers) and leaves when it has no column, before
 * the scan. A grid sized for every column the map could have leaves most of a self-listing
 * member's work-groups without one at density 0.1 (conv1x1's default member: 1440 of 1600, six
 * waves on an H200), and a grid launched for the columns a frame expects still some; each ran
 * the scan's log2(NT) barriers before it could tell: on an H200 members with whole grids got up
 * to 16% faster with it (RESULTS.md, "Self-listing work-groups without a column leave before
 * the scan"). PoCL 3.1 crashed (SIGSEGV) running it on maps of long segments, so elsewhere it
 * stays 0. */
#ifndef SL_EARLY
#define SL_EARLY 0
#endif
/* A work-item's segment of the mask between sparse_conv_self_count and sparse_conv_self_scan. */
typedef struct {
    int lo, hi, rb, cnt, bad;
    uint w0, w1;
} SlSeg;

/* sparse_conv_self_list's first half: the work-item's segment counted into *s. Under SL_EARLY it
 * returns the image's column count (the same in every work-item), and a group whose c0 is past
 * it is done; else 0x7fffffff, and sparse_conv_self_scan counts. */
FUNC_INLINE int sparse_conv_self_count(GLOBAL const FLT* mk, LOCAL_PTR int* scan, LOCAL_PTR int* cpos, LOCAL_PTR int* lbad, int tid,
                                 int P, SlSeg* s) {
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
            float v = LDF(mk, IMIN(b + i, rb - 1));
            x |= (uint)(v == 1.0f && b + i < rb) << i;
            if (b + i < rb) SL_BAD(v, b + i);
        }
        /* Chunks start 8-aligned within the segment, so none straddles the two words. */
        if (b - lo < 32) w0 |= x << (b - lo);
        else w1 |= x << (b - lo - 32);
    }
    int cnt = POPCOUNT(w0) + POPCOUNT(w1);
    for (int p = rb; p < hi; ++p) {
        float v = LDF(mk, p);
        cnt += (int)(v == 1.0f);
        SL_BAD(v, p);
    }
    s->lo = lo, s->hi = hi, s->rb = rb, s->cnt = cnt, s->bad = bad, s->w0 = w0, s->w1 = w1;
#if SL_EARLY
    /* The first barrier orders the initialisations above before the additions and minimum, the
     * second those before the total's reads (and the caller's of the minimum). */
    LOCAL_BARRIER();
    if (cnt > 0) ATOMIC_ADD_LOCAL(&scan[2 * NT], cnt);
    if (SELF_COUNT && bad != 0x7fffffff) ATOMIC_MIN_LOCAL(lbad, bad);
    LOCAL_BARRIER();
    return scan[2 * NT];
#else
    return 0x7fffffff;
#endif
}

/* sparse_conv_self_list's second half, for a group sparse_conv_self_count left with columns: the scan of
 * the segments' counts and the group's columns into cpos; returns the image's column count. */
FUNC_INLINE int sparse_conv_self_scan(GLOBAL const FLT* mk, LOCAL_PTR int* scan, LOCAL_PTR int* cpos, LOCAL_PTR int* lbad, int tid,
                                int c0, const SlSeg* s) {
    int lo = s->lo, hi = s->hi, rb = s->rb, cnt = s->cnt;
    uint w0 = s->w0, w1 = s->w1;
    /* Inclusive scan, ping-pong, one barrier per step (its first barrier also orders the
     * cpos and lbad initialisations before the listing and minimum below; the steps'
     * barriers, at least one, the minimum before the caller's read). */
    int cur = 0;
    scan[tid] = cnt;
    LOCAL_BARRIER();
    if (!SL_EARLY && SELF_COUNT && s->bad != 0x7fffffff) ATOMIC_MIN_LOCAL(lbad, s->bad);
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
            if (LDF(mk, q) == 1.0f) {
                if (r >= c0 && r < c0 + TN) cpos[r - c0] = q;
                ++r;
            }
        }
    }
    return total;
}

/* The work-group's columns (see the top of the listing): both halves. */
FUNC_INLINE int sparse_conv_self_list(GLOBAL const FLT* mk, LOCAL_PTR int* scan, LOCAL_PTR int* cpos, LOCAL_PTR int* lbad, int tid, int c0, int P) {
    SlSeg s;
    int early = sparse_conv_self_count(mk, scan, cpos, lbad, tid, P, &s);
    /* The same for the whole work-group: no barrier is skipped. */
    if (c0 >= early) return early;
    return sparse_conv_self_scan(mk, scan, cpos, lbad, tid, c0, &s);
}
#else
#define SPARSE_CONV_SELF_ARGS
#endif
