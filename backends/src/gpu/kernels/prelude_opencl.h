/* The OpenCL C 1.2 prelude of the shared kernel sources (the .cl files beside this one).
 * Kernels use only these macros, plain C and the math macros below, so a CUDA prelude that
 * defines the same names lets NVRTC compile the very same files. */
#define KERNEL __kernel void
#define GLOBAL __global
#define LOCAL __local
/* Qualifier of a pointer parameter into LOCAL memory (empty under CUDA). */
#define LOCAL_PTR __local
#define RESTRICT restrict
#define FUNC static inline
/* A FUNC the compiler must inline (see sparse_conv_load_stage in sparse_conv_gemm.cl for why). */
#define FUNC_INLINE static inline __attribute__((always_inline))
/* A CUDA register bound (cuda/prelude.h); OpenCL C 1.2 has no way to say it. */
#define LAUNCH_BOUNDS(threads, blocks)
/* Alignment of a LOCAL array that is read as float2 / float4 (LOCAL_VEC2, LOCAL_VEC4). */
#define ALIGN16 __attribute__((aligned(16)))
/* 2 or 4 consecutive floats of LOCAL memory in one load; p is 8 / 16-byte aligned. */
#define LOCAL_VEC2(p) (*(__local const float2*)(p))
#define LOCAL_VEC4(p) (*(__local const float4*)(p))
/* 2 or 4 consecutive floats of GLOBAL memory in one store; p is 8 / 16-byte aligned. */
#define GLOBAL_STORE_VEC2(p, a, b) (*(__global float2*)(p) = (float2)((a), (b)))
#define GLOBAL_STORE_VEC4(p, a, b, c, d) (*(__global float4*)(p) = (float4)((a), (b), (c), (d)))
/* The same into LOCAL memory. */
#define LOCAL_STORE_VEC4(p, a, b, c, d) (*(__local float4*)(p) = (float4)((a), (b), (c), (d)))
/* 4 consecutive floats of GLOBAL memory at p into d[0 .. 4) in one load; p is 16-byte aligned. */
#define GLOBAL_LOAD_VEC4(d, p)                                                                      \
    do {                                                                                            \
        float4 v_ = vload4(0, (p));                                                                 \
        (d)[0] = v_.x, (d)[1] = v_.y, (d)[2] = v_.z, (d)[3] = v_.w;                                 \
    } while (0)
#define LOCAL_BARRIER() barrier(CLK_LOCAL_MEM_FENCE)
/* Also orders the group's global memory accesses (a work-group reads what it wrote). */
#define GLOBAL_BARRIER() barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)
/* Orders the work-item's global stores and loads before and after it as other work-groups see
 * them, when an atomic passes the word between them (split-K's last work-group, sparse_conv_gemm.cl).
 * NVIDIA's OpenCL compiles mem_fence(CLK_GLOBAL_MEM_FENCE) to `membar.cta`, a fence for the
 * work-group only (its PTX; RESULTS.md, "NVIDIA OpenCL: the fused finish's fence"), and the
 * fused finish then read partial sums other work-groups had not yet made visible: wrong outputs
 * now and then. There the host defines NV_GPU_FENCE and the fence is PTX's device-wide one, as
 * CUDA's __threadfence. */
#ifdef NV_GPU_FENCE
#define GLOBAL_FENCE() asm volatile("membar.gl;" ::: "memory")
#else
#define GLOBAL_FENCE() mem_fence(CLK_GLOBAL_MEM_FENCE)
#endif
/* Adds 1 to a GLOBAL int and returns its old value (OpenCL 1.2 core, 32-bit). */
#define ATOMIC_INC(p) atomic_inc(p)
#define ATOMIC_MIN_LOCAL(p, v) atomic_min((p), (v))
#define ATOMIC_ADD_LOCAL(p, v) atomic_add((p), (v))
/* CUDA's keeps loop-invariant values out of registers across a loop; nothing here. */
#define NO_HOIST(x) do { } while (0)
/* First statement of every kernel: a CUDA launch hook (cuda/pdl.rs), nothing here. */
#define PDL_ENTRY() do { } while (0)
#define PDL_TRIGGER() do { } while (0)
#define PDL_WAIT() do { } while (0)
#define GROUP_ID(d) ((int)get_group_id(d))
#define LOCAL_ID(d) ((int)get_local_id(d))
#define GLOBAL_ID(d) ((int)get_global_id(d))
#define LOCAL_SIZE(d) ((int)get_local_size(d))
#define NUM_GROUPS(d) ((int)get_num_groups(d))

#define F32_INF INFINITY
#define F32_NAN NAN
#define EXPF(x) exp(x)
#define LOGF(x) log(x)
#define LOG1PF(x) log1p(x)
#define SINF(x) sin(x)
#define COSF(x) cos(x)
#define SQRTF(x) sqrt(x)
#define TANHF(x) tanh(x)
#define ERFF(x) erf(x)
#define ERFCF(x) erfc(x)
#define POWF(x, y) pow(x, y)
#define FMODF(x, y) fmod(x, y)
#define FABSF(x) fabs(x)
#define FLOORF(x) floor(x)
#define CEILF(x) ceil(x)
#define RINTF(x) rint(x)
#define FMAXF(x, y) fmax(x, y)
#define FMINF(x, y) fmin(x, y)
#define ISNAN(x) isnan(x)
#define IMIN(a, b) min((int)(a), (int)(b))
#define IMAX(a, b) max((int)(a), (int)(b))
#define POPCOUNT(x) ((int)popcount((uint)(x)))
#define AS_FLOAT(i) as_float(i)
#define AS_INT(f) as_int(f)

/* Storage of float tensors in GLOBAL memory. Kernels declare such pointers FLT, read an element
 * as float with LDF(p, i), write one from float with STF(p, i, v), and move 2 or 4 of them at
 * once with LDF4 / STF2 / STF4 (p aligned to as many elements). With DSP_HALF (the host's fp16
 * precision) FLT is IEEE half: vload_half/vstore_half are core OpenCL C and need no cl_khr_fp16,
 * and without that extension a bare p[i] does not compile, so no access slips past the macros.
 * Arithmetic is float either way. Tables the host makes (tap weights, partial sums) stay float.
 * common.h defines them for f32 storage, and MOVE_T, the data-movement kernels' word. */
#if DSP_HALF
#define FLT half
#define LDF(p, i) vload_half((i), (p))
#define STF(p, i, v) vstore_half_rte((v), (i), (p))
#define LDF4(d, p)                                                                                  \
    do {                                                                                            \
        float4 v_ = vload_half4(0, (p));                                                            \
        (d)[0] = v_.x, (d)[1] = v_.y, (d)[2] = v_.z, (d)[3] = v_.w;                                 \
    } while (0)
#define STF2(p, a, b) vstore_half2_rte((float2)((a), (b)), 0, (p))
#define STF4(p, a, b, c, d) vstore_half4_rte((float4)((a), (b), (c), (d)), 0, (p))
#endif
/* A half element of a ushort buffer as float, and back (round to nearest even), whatever
 * DSP_HALF says: the conversions between half storage and the values kept in f32 (gpu/wide.rs). */
#define HALF_LOAD(p, i) vload_half((i), (__global const half*)(p))
#define HALF_STORE(p, i, v) vstore_half_rte((v), (i), (__global half*)(p))
