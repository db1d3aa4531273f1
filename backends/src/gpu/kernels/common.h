/* Helpers every kernel file starts with (after the backend prelude). Written in the common
 * subset of OpenCL C 1.2 and CUDA C++: plain C, `int`/`float`, the prelude's macros.
 *
 * Conventions: integer and bool tensors are int words; float tensors are FLT elements, read and
 * written through LDF/STF (the prelude: float, or half with the host's fp16 precision), and all
 * arithmetic is float; offsets and sizes are in elements; `meta` buffers hold int index tables
 * made at compile time. */

/* f32 storage: the float-tensor access macros of the preludes' DSP_HALF branch, as plain
 * accesses. MOVE_T: the data-movement kernels' word, 16 bits for half tensors (MOVE16). */
#if !DSP_HALF
#define FLT float
#define LDF(p, i) ((p)[i])
#define STF(p, i, v) ((p)[i] = (v))
#define LDF4(d, p) GLOBAL_LOAD_VEC4(d, p)
#define STF2(p, a, b) GLOBAL_STORE_VEC2(p, a, b)
#define STF4(p, a, b, c, d) GLOBAL_STORE_VEC4(p, a, b, c, d)
#endif
#if MOVE16
#define MOVE_T ushort
#else
#define MOVE_T int
#endif

/* Offset of row-major element `i` of a tensor with `rank` dims `dims`, in a tensor laid out with
 * `strides` (0 for broadcast dims). */
FUNC int strided_offset(int i, int rank, GLOBAL const int* dims, GLOBAL const int* strides) {
    int off = 0;
    for (int d = rank - 1; d >= 0; --d) {
        int n = dims[d];
        int q = i / n;
        off += (i - q * n) * strides[d];
        i = q;
    }
    return off;
}

/* Brings an i32 result back into the range of its ONNX type: 1 INT8, 2 UINT8, 3 BOOL. */
FUNC int narrow_int(int v, int mode) {
    if (mode == 1) return (int)(signed char)v;
    if (mode == 2) return v & 255;
    if (mode == 3) return v != 0;
    return v;
}

/* Float -> integer as the CPU's casts do: toward zero, saturating, NaN -> 0. */
FUNC int float_to_int_sat(float x, float lo, float hi) {
    if (ISNAN(x)) return 0;
    if (x < lo) x = lo;
    if (x > hi) x = hi;
    return (int)x;
}

/* Activation codes shared by Unary and the fused epilogues of Conv/Gemm/MatMul:
 * -1 none, 0 Relu, 1 LeakyRelu(p0), 2 Sigmoid, 3 HardSigmoid(p0, p1), 4 HardSwish, 5 Tanh,
 * 6 Erf, 7 Gelu (erf), 8 Gelu (tanh), 9 Exp, 10 Sqrt, 11 Neg, 12 Abs, 13 Clip(p0, p1),
 * 14 Sign, 15 Round (half to even), 16 Floor, 17 Ceil, 18 Reciprocal, 19 Log, 21 Softplus,
 * 22 Sin, 23 Cos (20 is Not, on bool words: unary_i32).
 * Comparisons are written so that NaN stays NaN, as the reference does. */
FUNC float clamp01(float x) {
    return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x);
}

FUNC float activate(int code, float x, float p0, float p1) {
    switch (code) {
    case 0: return x < 0.0f ? 0.0f : x;
    case 1: return x < 0.0f ? p0 * x : x;
    case 2: return 1.0f / (1.0f + EXPF(-x));
    case 3: return clamp01(p0 * x + p1);
    case 4: return x * clamp01(x * (1.0f / 6.0f) + 0.5f);
    case 5: return TANHF(x);
    case 6: return ERFF(x);
    case 7: return 0.5f * x * ERFCF(x * -0.70710678118654752f);
    case 8: return 0.5f * x * (1.0f + TANHF(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case 9: return EXPF(x);
    case 10: return SQRTF(x);
    case 11: return -x;
    case 12: return FABSF(x);
    case 13: { float y = x < p0 ? p0 : x; return y > p1 ? p1 : y; }
    case 14: return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x);
    case 15: return RINTF(x);
    case 16: return FLOORF(x);
    case 17: return CEILF(x);
    case 18: return 1.0f / x;
    case 19: return LOGF(x);
    /* max(x, 0) + ln(1 + e^-|x|), as the CPU computes it. */
    case 21: return x > 0.0f ? x + LOG1PF(EXPF(-x)) : LOG1PF(EXPF(x));
    case 22: return SINF(x);
    case 23: return COSF(x);
    default: return x;
    }
}

/* Sum of v over the first n work-items of dimension 0 (n a power of two, the group's size
 * there), in a tree through s (n floats of LOCAL memory); every work-item gets the result.
 * Call from uniform control flow: it holds barriers. */
FUNC float group_sum(LOCAL_PTR float* s, float v, int n) {
    int t = LOCAL_ID(0);
    s[t] = v;
    LOCAL_BARRIER();
    for (int k = n / 2; k > 0; k >>= 1) {
        if (t < k) s[t] += s[t + k];
        LOCAL_BARRIER();
    }
    float r = s[0];
    LOCAL_BARRIER();
    return r;
}

/* n (1, 2 or 4: a compile-time constant) consecutive floats of local memory at s into d[0 .. n)
 * in one load; s is 8 / 16-byte aligned for 2 / 4. The branches not taken fold away. */
#define LDS_RUN(d, s, n)                                                                  \
    do {                                                                                  \
        if ((n) == 4) {                                                                   \
            float4 v_ = LOCAL_VEC4(s);                                                    \
            (d)[0] = v_.x; (d)[1] = v_.y; (d)[2 % (n)] = v_.z; (d)[3 % (n)] = v_.w;       \
        } else if ((n) == 2) {                                                            \
            float2 v_ = LOCAL_VEC2(s);                                                    \
            (d)[0] = v_.x; (d)[1 % (n)] = v_.y;                                           \
        } else {                                                                          \
            (d)[0] = *(s);                                                                \
        }                                                                                 \
    } while (0)
