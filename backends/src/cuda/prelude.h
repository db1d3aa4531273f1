// CUDA prelude of the shared kernel dialect: prepended to every kernel source before NVRTC
// compiles it (with --device-as-default-execution-space, so helper functions without
// qualifiers are device functions, as in OpenCL C). The OpenCL backend maps the same macros
// to OpenCL C 1.2; kernels written against these names compile on both.

#define KERNEL extern "C" __global__
#define GLOBAL
#define LOCAL __shared__
#define CONSTANT const
#define RESTRICT __restrict__
#define LOCAL_BARRIER() __syncthreads()

// Work-item ids are size_t, as OpenCL's get_*_id return; a dimension past 2 reads as in
// OpenCL (id 0, size 1).
__device__ __forceinline__ size_t dsp_pick(int d, unsigned x, unsigned y, unsigned z, unsigned other) {
    return d == 0 ? x : d == 1 ? y : d == 2 ? z : other;
}
#define GROUP_ID(d) dsp_pick((d), blockIdx.x, blockIdx.y, blockIdx.z, 0u)
#define LOCAL_ID(d) dsp_pick((d), threadIdx.x, threadIdx.y, threadIdx.z, 0u)
#define LOCAL_SIZE(d) dsp_pick((d), blockDim.x, blockDim.y, blockDim.z, 1u)
#define NUM_GROUPS(d) dsp_pick((d), gridDim.x, gridDim.y, gridDim.z, 1u)
#define GLOBAL_ID(d) (GROUP_ID(d) * LOCAL_SIZE(d) + LOCAL_ID(d))
#define GLOBAL_SIZE(d) (NUM_GROUPS(d) * LOCAL_SIZE(d))

// OpenCL C scalar type names (ulong is 64-bit in OpenCL, as here).
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long long ulong;

#define FLT_MAX 3.402823466e+38f
#define MAXFLOAT FLT_MAX
#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fffffff)
#define M_PI_F 3.14159265358979323846f
#define M_SQRT1_2_F 0.70710678118654752440f

// OpenCL built-ins CUDA spells differently or lacks. The float maths CUDA already overloads
// for float (fmax, fmin, fabs, exp, log, sqrt, tanh, erf, pow, floor, ceil, round, isnan,
// min/max on int, unsigned and float) keeps its own definitions.
__device__ __forceinline__ float clamp(float x, float lo, float hi) { return fminf(fmaxf(x, lo), hi); }
__device__ __forceinline__ int clamp(int x, int lo, int hi) { return min(max(x, lo), hi); }
__device__ __forceinline__ uint clamp(uint x, uint lo, uint hi) { return min(max(x, lo), hi); }
__device__ __forceinline__ float mad(float a, float b, float c) { return fmaf(a, b, c); }
__device__ __forceinline__ float mix(float a, float b, float t) { return fmaf(t, b - a, a); }
__device__ __forceinline__ float step(float edge, float x) { return x < edge ? 0.0f : 1.0f; }
__device__ __forceinline__ float sign(float x) { return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x; }
__device__ __forceinline__ float native_exp(float x) { return __expf(x); }
__device__ __forceinline__ float native_log(float x) { return __logf(x); }
__device__ __forceinline__ float native_recip(float x) { return __frcp_rn(x); }
__device__ __forceinline__ float native_divide(float a, float b) { return __fdividef(a, b); }
__device__ __forceinline__ float native_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ float native_rsqrt(float x) { return rsqrtf(x); }
__device__ __forceinline__ float as_float(uint x) { return __uint_as_float(x); }
__device__ __forceinline__ float as_float(int x) { return __int_as_float(x); }
__device__ __forceinline__ uint as_uint(float x) { return __float_as_uint(x); }
__device__ __forceinline__ int as_int(float x) { return __float_as_int(x); }
__device__ __forceinline__ uint popcount(uint x) { return __popc(x); }
__device__ __forceinline__ uint clz(uint x) { return __clz(x); }
__device__ __forceinline__ uint mul24(uint a, uint b) { return __umul24(a, b); }
__device__ __forceinline__ int mul24(int a, int b) { return __mul24(a, b); }
__device__ __forceinline__ uint mad24(uint a, uint b, uint c) { return __umul24(a, b) + c; }
__device__ __forceinline__ int mad24(int a, int b, int c) { return __mul24(a, b) + c; }

// OpenCL 1.2 atomics on 32-bit global/local words.
__device__ __forceinline__ int atomic_add(volatile int *p, int v) { return atomicAdd((int *)p, v); }
__device__ __forceinline__ uint atomic_add(volatile uint *p, uint v) { return atomicAdd((uint *)p, v); }
__device__ __forceinline__ int atomic_inc(volatile int *p) { return atomicAdd((int *)p, 1); }
__device__ __forceinline__ uint atomic_inc(volatile uint *p) { return atomicAdd((uint *)p, 1u); }
__device__ __forceinline__ int atomic_min(volatile int *p, int v) { return atomicMin((int *)p, v); }
__device__ __forceinline__ uint atomic_min(volatile uint *p, uint v) { return atomicMin((uint *)p, v); }
__device__ __forceinline__ int atomic_max(volatile int *p, int v) { return atomicMax((int *)p, v); }
__device__ __forceinline__ uint atomic_max(volatile uint *p, uint v) { return atomicMax((uint *)p, v); }
__device__ __forceinline__ uint atomic_or(volatile uint *p, uint v) { return atomicOr((uint *)p, v); }
__device__ __forceinline__ uint atomic_and(volatile uint *p, uint v) { return atomicAnd((uint *)p, v); }
__device__ __forceinline__ int atomic_xchg(volatile int *p, int v) { return atomicExch((int *)p, v); }
__device__ __forceinline__ uint atomic_xchg(volatile uint *p, uint v) { return atomicExch((uint *)p, v); }
__device__ __forceinline__ int atomic_cmpxchg(volatile int *p, int cmp, int v) { return atomicCAS((int *)p, cmp, v); }
__device__ __forceinline__ uint atomic_cmpxchg(volatile uint *p, uint cmp, uint v) { return atomicCAS((uint *)p, cmp, v); }

// OpenCL's convert_T(x) for the scalar types (round toward zero for float -> int, as OpenCL's
// default conversion does).
#define convert_float(x) ((float)(x))
#define convert_int(x) ((int)(x))
#define convert_uint(x) ((uint)(x))
