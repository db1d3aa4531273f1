// CUDA prelude of the shared kernel dialect: prepended to every kernel source before NVRTC
// compiles it. Defines the names gpu/kernels/prelude_opencl.h defines for OpenCL C 1.2, with
// the same meaning, so the same .cl files compile on both. Compiled with
// --device-as-default-execution-space: plain functions are device functions, as in OpenCL C.

#define KERNEL extern "C" __global__ void
#define GLOBAL
#define LOCAL __shared__
// Pointer parameters into LOCAL memory need no qualifier in CUDA (generic addressing).
#define LOCAL_PTR
#define RESTRICT __restrict__
#define FUNC static __device__ inline
#define FUNC_INLINE static __device__ __forceinline__
// Between KERNEL and the kernel's name: at most `threads` per block, and registers few enough
// for `blocks` of them per SM (nothing in OpenCL C; see sparse_conv_gemm.cl's SPARSE_CONV_MIN_BLOCKS).
#define LAUNCH_BOUNDS(threads, blocks) __launch_bounds__(threads, blocks)
#define ALIGN16 __attribute__((aligned(16)))
#define LOCAL_VEC2(p) (*(const float2*)(p))
#define LOCAL_VEC4(p) (*(const float4*)(p))
#define GLOBAL_STORE_VEC2(p, a, b)                                                                     \
    do {                                                                                               \
        float2 v_;                                                                                     \
        v_.x = (a), v_.y = (b);                                                                        \
        *(float2*)(p) = v_;                                                                            \
    } while (0)
#define GLOBAL_STORE_VEC4(p, a, b, c, d)                                                               \
    do {                                                                                               \
        float4 v_;                                                                                     \
        v_.x = (a), v_.y = (b), v_.z = (c), v_.w = (d);                                                \
        *(float4*)(p) = v_;                                                                            \
    } while (0)
#define LOCAL_STORE_VEC4(p, a, b, c, d) GLOBAL_STORE_VEC4(p, a, b, c, d)
#define GLOBAL_LOAD_VEC4(d, p)                                                                         \
    do {                                                                                               \
        float4 v_ = *(const float4*)(p);                                                               \
        (d)[0] = v_.x, (d)[1] = v_.y, (d)[2] = v_.z, (d)[3] = v_.w;                                    \
    } while (0)
// A local array of rows of `cols` in the dynamic shared memory the launch provides (the source's
// DSP_DYN_SMEM bytes, which cuda/device.rs passes to every launch): CUDA declares at most 48 KiB
// statically. One per kernel; OpenCL C has no such split (nothing in its prelude).
#define LOCAL_FROM_LAUNCH(type, name, cols)                                                            \
    extern __shared__ float4 dsp_launch_local_[];                                                      \
    type(*name)[cols] = (type(*)[cols])dsp_launch_local_
#define LOCAL_BARRIER() __syncthreads()
#define GLOBAL_BARRIER() __syncthreads()
// Device-scope fence and atomic increment (old value returned), as prelude_opencl.h's, and the
// minimum of and addition to a local (shared) int.
#define GLOBAL_FENCE() __threadfence()
#define ATOMIC_INC(p) atomicAdd((p), 1)
#define ATOMIC_MIN_LOCAL(p, v) atomicMin((p), (v))
#define ATOMIC_ADD_LOCAL(p, v) atomicAdd((p), (v))
// An int the compiler must take as changed here (an empty asm that "writes" it): what is
// computed from it after this point stays after it, so a loop's body computes it again
// instead of holding it in a register across the loop (sparse_conv_gemm.cl's window loop).
#define NO_HOIST(x) asm volatile("" : "+r"(x))

// Work-item ids and sizes as int, like the OpenCL prelude's casts of get_*_id; a dimension past
// 2 reads as OpenCL's do (id 0, size 1).
__device__ __forceinline__ int dsp_dim(int d, unsigned x, unsigned y, unsigned z, unsigned other) {
    return (int)(d == 0 ? x : d == 1 ? y : d == 2 ? z : other);
}
#define GROUP_ID(d) dsp_dim((d), blockIdx.x, blockIdx.y, blockIdx.z, 0u)
#define LOCAL_ID(d) dsp_dim((d), threadIdx.x, threadIdx.y, threadIdx.z, 0u)
#define LOCAL_SIZE(d) dsp_dim((d), blockDim.x, blockDim.y, blockDim.z, 1u)
#define NUM_GROUPS(d) dsp_dim((d), gridDim.x, gridDim.y, gridDim.z, 1u)
#define GLOBAL_ID(d)                                                                                    \
    dsp_dim((d), blockIdx.x * blockDim.x + threadIdx.x, blockIdx.y * blockDim.y + threadIdx.y,         \
            blockIdx.z * blockDim.z + threadIdx.z, 0u)

// OpenCL C's scalar type names (ulong is 64-bit there, as here).
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long long ulong;

#define F32_INF __int_as_float(0x7f800000)
#define F32_NAN __int_as_float(0x7fffffff)
// Single-precision maths: the float functions, never the double overloads a bare exp() on a
// double literal would pick.
#define EXPF(x) expf(x)
#define LOGF(x) logf(x)
#define LOG1PF(x) log1pf(x)
#define SINF(x) sinf(x)
#define COSF(x) cosf(x)
#define SQRTF(x) sqrtf(x)
#define TANHF(x) tanhf(x)
#define ERFF(x) erff(x)
#define ERFCF(x) erfcf(x)
#define POWF(x, y) powf(x, y)
#define FMODF(x, y) fmodf(x, y)
#define FABSF(x) fabsf(x)
#define FLOORF(x) floorf(x)
#define CEILF(x) ceilf(x)
#define RINTF(x) rintf(x)
#define FMAXF(x, y) fmaxf(x, y)
#define FMINF(x, y) fminf(x, y)
#define ISNAN(x) isnan(x)
#define IMIN(a, b) min((int)(a), (int)(b))
#define IMAX(a, b) max((int)(a), (int)(b))
#define POPCOUNT(x) ((int)__popc((uint)(x)))
#define AS_FLOAT(i) __int_as_float((int)(i))
#define AS_INT(f) __float_as_int(f)

// First statement of every kernel (cuda/pdl.rs): on sm_90 and later this grid waits until the
// grids before it on the stream have finished and their writes are visible. PDL_TRIGGER(), where
// a kernel has only its stores left, lets the next grid launch (else each block's end does).
// Launched without the programmatic attribute, both are no-ops. (A trigger at every kernel's
// entry instead left the next grid's blocks waiting on the SMs for the whole kernel, which cost
// A-ViT's attention 60%: benches/RESULTS.md, "where the next grid is let go".)
// PDL_WAIT() is the wait alone, for a kernel whose entry defers it (PDL_ENTRY_DEFERRED in
// sparse_conv_gemm.cl: cuda/pdl.rs says what such a kernel may do before it).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define PDL_ENTRY() asm volatile("griddepcontrol.wait;" ::: "memory")
#define PDL_TRIGGER() asm volatile("griddepcontrol.launch_dependents;" ::: "memory")
#define PDL_WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
#else
#define PDL_ENTRY() do { } while (0)
#define PDL_TRIGGER() do { } while (0)
#define PDL_WAIT() do { } while (0)
#endif

// Storage of float tensors in global memory (prelude_opencl.h says how kernels use FLT, LDF,
// STF, LDF4, STF2, STF4; common.h the f32 ones). With DSP_HALF an element is an IEEE half inside a struct,
// so a bare p[i] in arithmetic does not compile and no access slips past the macros; the
// conversions are PTX's cvt (round to nearest even), with no header.
__device__ __forceinline__ float dsp_h2f(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ unsigned short dsp_f2h(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
#define HALF_LOAD(p, i) dsp_h2f((p)[i])
#define HALF_STORE(p, i, v) ((p)[i] = dsp_f2h(v))
#if DSP_HALF
struct dsp_half { unsigned short b; };
#define FLT dsp_half
#define LDF(p, i) dsp_h2f((p)[i].b)
#define STF(p, i, v) ((p)[i].b = dsp_f2h(v))
#define LDF4(d, p)                                                                                     \
    do {                                                                                               \
        uint2 u_ = *(const uint2*)(p);                                                                 \
        (d)[0] = dsp_h2f((unsigned short)(u_.x & 0xffffu)), (d)[1] = dsp_h2f((unsigned short)(u_.x >> 16)); \
        (d)[2] = dsp_h2f((unsigned short)(u_.y & 0xffffu)), (d)[3] = dsp_h2f((unsigned short)(u_.y >> 16)); \
    } while (0)
#define STF2(p, a, b) (*(uint*)(p) = (uint)dsp_f2h(a) | ((uint)dsp_f2h(b) << 16))
#define STF4(p, a, b, c, d)                                                                            \
    do {                                                                                               \
        uint2 u_;                                                                                      \
        u_.x = (uint)dsp_f2h(a) | ((uint)dsp_f2h(b) << 16);                                            \
        u_.y = (uint)dsp_f2h(c) | ((uint)dsp_f2h(d) << 16);                                            \
        *(uint2*)(p) = u_;                                                                             \
    } while (0)
#endif
