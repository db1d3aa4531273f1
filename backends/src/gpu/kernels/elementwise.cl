/* Elementwise kernels: unary maps, broadcasting binary ops, comparisons, Where, Clip, Cast, fills.
 * One work-item per output element, 1-D grid. Broadcasting: with `rank` > 0, `meta` holds the
 * output dims, then one stride array per operand (0 along broadcast dims); `rank` 0 means every
 * operand has the output's shape. */

KERNEL fill_words(GLOBAL MOVE_T* y, int off, int n, int bits) {
    PDL_ENTRY();
    int i = GLOBAL_ID(0);
    if (i < n) y[off + i] = (MOVE_T)bits;
}

/* fp16 precision: a float tensor from half storage into f32 storage and back, between the nodes
 * that keep a value in f32 and the others (gpu/wide.rs). */
KERNEL half_to_f32(GLOBAL const ushort* x, GLOBAL float* y, int n) {
    PDL_ENTRY();
    int i = GLOBAL_ID(0);
    if (i < n) y[i] = HALF_LOAD(x, i);
}

KERNEL f32_to_half(GLOBAL const float* x, GLOBAL ushort* y, int n) {
    PDL_ENTRY();
    int i = GLOBAL_ID(0);
    if (i < n) HALF_STORE(y, i, x[i]);
}

KERNEL unary_f32(GLOBAL const FLT* x, GLOBAL FLT* y, int n, int code, float p0, float p1) {
    PDL_ENTRY();
    int i = GLOBAL_ID(0);
    if (i < n) STF(y, i, activate(code, LDF(x, i), p0, p1));
}

/* Relu (0), Neg (11), Abs (12), Sign (14) on integers, wrapping like two's complement; Not (20)
 * on bool. */
KERNEL unary_i32(GLOBAL const int* x, GLOBAL int* y, int n, int code, int narrow) {
    PDL_ENTRY();
    int i = GLOBAL_ID(0);
    if (i >= n) return;
    int v = x[i];
    int r;
    if (code == 0) r = v < 0 ? 0 : v;
    else if (code == 11) r = (int)(0u - (unsigned int)v);
    else if (code == 12) r = v < 0 ? (int)(0u - (unsigned int)v) : v;
    else if (code == 14) r = (v > 0) - (v < 0);
    else r = v == 0;
    y[i] = narrow_int(r, narrow);
}

FUNC void operand_offsets(int i, int rank, GLOBAL const int* meta, int* ia, int* ib) {
    if (rank == 0) {
        *ia = i;
        *ib = i;
    } else {
        *ia = strided_offset(i, rank, meta, meta + rank);
        *ib = strided_offset(i, rank, meta, meta + 2 * rank);
    }
}

/* op: 0 Add, 1 Sub, 2 Mul, 3 Div, 4 Pow, 5 Pow with the exponent known to be 2 (x * x, exact). */
KERNEL binary_f32(GLOBAL const FLT* a, GLOBAL const FLT* b, GLOBAL FLT* y, int n, int op, int rank,
                  GLOBAL const int* meta) {
    PDL_ENTRY();
    int i = GLOBAL_ID(0);
    if (i >= n) return;
    int ia, ib;
    operand_offsets(i, rank, meta, &ia, &ib);
    float u = LDF(a, ia), v = LDF(b, ib), r;
    switch (op) {
    case 0: r = u + v; break;
    case 1: r = u - v; break;
    case 2: r = u * v; break;
    case 3: r = u / v; break;
    case 4: r = POWF(u, v); break;
    case 6: r = FMODF(u, v); break;
    /* Min (7) and Max (8): a NaN operand gives NaN, as numpy's minimum and maximum do. */
    case 7: r = (ISNAN(v) || v < u) ? v : u; break;
    case 8: r = (ISNAN(v) || v > u) ? v : u; break;
    default: r = u * u; break;
    }
    STF(y, i, r);
}

/* Integer arithmetic wraps (computed unsigned, then narrowed); division truncates, x / 0 = 0.
 * op 5 is Mod with the divisor's sign (Python's %), 6 with the dividend's (C's %); x mod 0 = 0. */
KERNEL binary_i32(GLOBAL const int* a, GLOBAL const int* b, GLOBAL int* y, int n, int op, int narrow, int rank,
                  GLOBAL const int* meta) {
    PDL_ENTRY();
    int i = GLOBAL_ID(0);
    if (i >= n) return;
    int ia, ib;
    operand_offsets(i, rank, meta, &ia, &ib);
    int u = a[ia], v = b[ib], r;
    unsigned int uu = (unsigned int)u, uv = (unsigned int)v;
    switch (op) {
    case 0: r = (int)(uu + uv); break;
    case 1: r = (int)(uu - uv); break;
    case 2: r = (int)(uu * uv); break;
    case 3: r = v == 0 ? 0 : ((u == (-2147483647 - 1) && v == -1) ? u : u / v); break;
    case 5:
    case 6:
        r = (v == 0 || v == -1) ? 0 : u % v;
        if (op == 5 && r != 0 && ((r < 0) != (v < 0))) r += v;
        break;
    case 7: r = v < u ? v : u; break;
    case 8: r = v > u ? v : u; break;
    default: {
        /* Pow with an integer exponent: exact repeated squaring for e >= 0 (wrapping), else the
         * float power truncated toward zero. */
        if (v >= 0) {
            unsigned int base = uu, acc = 1u, e = uv;
            while (e != 0u) {
                if (e & 1u) acc *= base;
                base *= base;
                e >>= 1;
            }
            r = (int)acc;
        } else {
            r = float_to_int_sat(POWF((float)u, (float)v), -2147483648.0f, 2147483520.0f);
        }
    } break;
    }
    y[i] = narrow_int(r, narrow);
}

/* Pow with a float base and an integer exponent: the result is float. */
KERNEL pow_f32_i32(GLOBAL const FLT* a, GLOBAL const int* b, GLOBAL FLT* y, int n, int rank, GLOBAL const int* meta) {
    PDL_ENTRY();
    int i = GLOBAL_ID(0);
    if (i >= n) return;
    int ia, ib;
    operand_offsets(i, rank, meta, &ia, &ib);
    STF(y, i, POWF(LDF(a, ia), (float)b[ib]));
}

/* Pow with an integer base and a float exponent: the float power, truncated into the base's type. */
KERNEL pow_i32_f32(GLOBAL const int* a, GLOBAL const FLT* b, GLOBAL int* y, int n, float lo, float hi, int narrow,
                   int rank, GLOBAL const int* meta) {
    PDL_ENTRY();
    int i = GLOBAL_ID(0);
    if (i >= n) return;
    int ia, ib;
    operand_offsets(i, rank, meta, &ia, &ib);
    y[i] = narrow_int(float_to_int_sat(POWF((float)a[ia], LDF(b, ib)), lo, hi), narrow);
}

/* op: 0 Greater, 1 Less, 2 Equal, 4 GreaterOrEqual, 5 LessOrEqual; the result is bool (0/1). */
KERNEL compare_f32(GLOBAL const FLT* a, GLOBAL const FLT* b, GLOBAL int* y, int n, int op, int rank,
                   GLOBAL const int* meta) {
    PDL_ENTRY();
    int i = GLOBAL_ID(0);
    if (i >= n) return;
    int ia, ib;
    operand_offsets(i, rank, meta, &ia, &ib);
    float u = LDF(a, ia), v = LDF(b, ib);
    int r;
    switch (op) {
    case 0: r = u > v; break;
    case 1: r = u < v; break;
    case 4: r = u >= v; break;
    case 5: r = u <= v; break;
    default: r = u == v; break;
    }
    y[i] = r;
}

/* op: 0 Greater, 1 Less, 2 Equal, 3 And, 4 GreaterOrEqual, 5 LessOrEqual, 6 Or, 7 Xor. */
KERNEL compare_i32(GLOBAL const int* a, GLOBAL const int* b, GLOBAL int* y, int n, int op, int rank,
                   GLOBAL const int* meta) {
    PDL_ENTRY();
    int i = GLOBAL_ID(0);
    if (i >= n) return;
    int ia, ib;
    operand_offsets(i, rank, meta, &ia, &ib);
    int u = a[ia], v = b[ib];
    int r;
    switch (op) {
    case 0: r = u > v; break;
    case 1: r = u < v; break;
    case 2: r = u == v; break;
    case 3: r = u != 0 && v != 0; break;
    case 4: r = u >= v; break;
    case 5: r = u <= v; break;
    case 6: r = u != 0 || v != 0; break;
    default: r = (u != 0) != (v != 0); break;
    }
    y[i] = r;
}

/* Where(c, x, y) on words (MOVE_T: float bits or ints alike): meta holds dims and three stride sets. */
KERNEL where_words(GLOBAL const int* c, GLOBAL const MOVE_T* x, GLOBAL const MOVE_T* y, GLOBAL MOVE_T* out, int n, int rank,
                   GLOBAL const int* meta) {
    PDL_ENTRY();
    int i = GLOBAL_ID(0);
    if (i >= n) return;
    int ic = i, ix = i, iy = i;
    if (rank > 0) {
        ic = strided_offset(i, rank, meta, meta + rank);
        ix = strided_offset(i, rank, meta, meta + 2 * rank);
        iy = strided_offset(i, rank, meta, meta + 3 * rank);
    }
    out[i] = c[ic] != 0 ? x[ix] : y[iy];
}

/* Clip with optional bounds read from one-element buffers (bit 0: min given, bit 1: max given). */
KERNEL clip_f32(GLOBAL const FLT* x, GLOBAL FLT* y, int n, GLOBAL const FLT* lo, GLOBAL const FLT* hi, int flags) {
    PDL_ENTRY();
    int i = GLOBAL_ID(0);
    if (i >= n) return;
    float v = LDF(x, i);
    if ((flags & 1) && v < LDF(lo, 0)) v = LDF(lo, 0);
    if ((flags & 2) && v > LDF(hi, 0)) v = LDF(hi, 0);
    STF(y, i, v);
}

KERNEL clip_i32(GLOBAL const int* x, GLOBAL int* y, int n, GLOBAL const int* lo, GLOBAL const int* hi, int flags) {
    PDL_ENTRY();
    int i = GLOBAL_ID(0);
    if (i >= n) return;
    int v = x[i];
    if ((flags & 1) && v < lo[0]) v = lo[0];
    if ((flags & 2) && v > hi[0]) v = hi[0];
    y[i] = v;
}

/* Casts. Float -> integer saturates into [lo, hi] then narrows; to bool is `x != 0` (NaN -> true). */
KERNEL cast_f32_i32(GLOBAL const FLT* x, GLOBAL int* y, int n, float lo, float hi, int narrow) {
    PDL_ENTRY();
    int i = GLOBAL_ID(0);
    if (i >= n) return;
    float v = LDF(x, i);
    y[i] = narrow == 3 ? (v != 0.0f) : narrow_int(float_to_int_sat(v, lo, hi), narrow);
}

KERNEL cast_i32_f32(GLOBAL const int* x, GLOBAL FLT* y, int n) {
    PDL_ENTRY();
    int i = GLOBAL_ID(0);
    if (i < n) STF(y, i, (float)x[i]);
}

KERNEL cast_i32_i32(GLOBAL const int* x, GLOBAL int* y, int n, int narrow) {
    PDL_ENTRY();
    int i = GLOBAL_ID(0);
    if (i < n) y[i] = narrow_int(x[i], narrow);
}

/* Inference BatchNormalization over [N, C, inner], folded per channel as the CPU does:
 * a = scale / sqrt(var + eps), y = x * a + (bias - mean * a). */
KERNEL batch_norm(GLOBAL const FLT* x, GLOBAL const FLT* scale, GLOBAL const FLT* bias, GLOBAL const FLT* mean,
                  GLOBAL const FLT* var, GLOBAL FLT* y, int n, int channels, int inner, float eps) {
    PDL_ENTRY();
    int i = GLOBAL_ID(0);
    if (i >= n) return;
    int c = (i / inner) % channels;
    float a = LDF(scale, c) / SQRTF(LDF(var, c) + eps);
    STF(y, i, LDF(x, i) * a + (LDF(bias, c) - LDF(mean, c) * a));
}
