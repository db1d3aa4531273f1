// How fast one launch can run the bench's sparse conv1x1 (256 -> 256 channels, 40 x 40,
// bias and ReLU) on the bench's own masks, with nothing general in it: each block lists the
// mask's columns itself, gathers its columns and its output channels' weights into shared memory
// in one step, its warps split K between them, and the warps' partial sums meet in shared memory,
// so there is no second launch and no partial sums in global memory. Timed as dynaspa's frames
// are (launched with PDL, a recorded graph of many frames, a graph per frame), to show where a
// frame of one such launch lands against the runtime's two. Outputs are checked against the CPU
// before timing; columns the mask leaves out must keep their poison.
// Build and run through `python3 benches/ops.py floor --masks DIR` (nvcc -O2 -arch=sm_90), or by hand:
// conv1x1_floor MASKS.npy [frames [VARIANT]]   (MASKS: uint8 [batch, 40, 40], gpu_sparse_bench
// --dump-masks; VARIANT: only that one, e.g. co32_ct8_w8, for a profiler)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <string>
#include <vector>
#include <algorithm>
#include <chrono>
#include <random>
#include <cuda_runtime.h>
#include "timing.h"


constexpr int K = 256, COUT = 256;

template <int N> struct Vec;
template <> struct Vec<1> { using T = float; };
template <> struct Vec<2> { using T = float2; };
template <> struct Vec<4> { using T = float4; };

template <int CO, int CT, int NW>
__device__ __forceinline__ void c1_rest(const float* __restrict__ X, const float* __restrict__ bias, float* __restrict__ Y, int hw,
                                        int trig, float* Ws, float* Xs, float* R, const int* list, int n);

// trig 0: let the next frame's grid launch at entry; 1: after this block's products. GENERIC:
// the mask listed as sparse_conv_gemm.cl's sparse_conv_self_list does (consecutive scalar loads per
// thread, a ping-pong scan with a barrier per step) instead of float4 loads and shuffles.
template <int CO, int CT, int NW, bool GENERIC = false>
__global__ void __launch_bounds__(NW * 32) c1_gemm(const float* __restrict__ mask, const float* __restrict__ X,
                                                   const float* __restrict__ Wt, const float* __restrict__ bias,
                                                   float* __restrict__ Y, int hw, int trig) {
    constexpr int NT = NW * 32, LC = CT / 4, LO = 32 / LC, CPL = CO / LO;
    static_assert(CT % 4 == 0 && 32 % LC == 0 && CO % LO == 0 && (CPL == 1 || CPL == 2 || CPL == 4 || CPL % 4 == 0), "tile");
    extern __shared__ float4 smem4[];
    float* Ws = (float*)smem4;      // [K][CO]
    float* Xs = Ws + K * CO;        // [K][CT]
    float* R = Xs + K * CT;         // [NW][CO * CT]
    int* list = (int*)(R + NW * CO * CT);  // [CT]
    int* wsum = list + CT;          // [NW], or [2 * NT] under GENERIC
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int b = blockIdx.z, co0 = blockIdx.x * CO, ct = blockIdx.y;
    if (trig == 0) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    // The weights are the model's constants: loaded before the wait for the op ahead.
    static_assert((K * CO) % (NT * 4) == 0 && (K * CT) % NT == 0, "loads");
    {
        constexpr int WL = K * CO / (NT * 4);
        float4 t[WL];
#pragma unroll
        for (int j = 0; j < WL; ++j) { int i = (tid + j * NT) * 4; t[j] = *(const float4*)&Wt[(i / CO) * COUT + co0 + i % CO]; }
#pragma unroll
        for (int j = 0; j < WL; ++j) *(float4*)&Ws[(tid + j * NT) * 4] = t[j];
    }
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (GENERIC) {
        const float* m = mask + (size_t)b * hw;
        const int seg = (hw + NT - 1) / NT, lo = min(hw, tid * seg), hi = min(hw, lo + seg);
        unsigned long long gb = 0;
        int cnt = 0;
        for (int p = lo; p < hi; ++p) {
            int on = m[p] == 1.0f;
            gb |= (unsigned long long)on << (p - lo);
            cnt += on;
        }
        int cur = 0;
        wsum[tid] = cnt;
        __syncthreads();
        for (int o = 1; o < NT; o <<= 1) {
            int v = wsum[cur * NT + tid] + (tid >= o ? wsum[cur * NT + tid - o] : 0);
            cur ^= 1;
            wsum[cur * NT + tid] = v;
            __syncthreads();
        }
        const int total = wsum[cur * NT + NT - 1], first = ct * CT;
        if (first >= total) return;
        int r = wsum[cur * NT + tid] - cnt;
        for (int p = lo; p < hi; ++p)
            if ((gb >> (p - lo)) & 1ull) {
                if (r >= first && r < first + CT) list[r - first] = p;
                ++r;
            }
        const int n = min(CT, total - first);
        if (tid >= n && tid < CT) list[tid] = -1;
        __syncthreads();
        c1_rest<CO, CT, NW>(X, bias, Y, hw, trig, Ws, Xs, R, list, n);
        return;
    }
    // Each thread owns Q consecutive float4s of the mask, so the list comes out in raster order.
    const int nq = hw / 4, Q = (nq + NT - 1) / NT;
    const float4* m4 = (const float4*)(mask + (size_t)b * hw);
    unsigned bits = 0;
    for (int q = 0; q < Q; ++q) {
        int i = tid * Q + q;
        if (i < nq) {
            float4 v = m4[i];
            bits |= ((v.x > 0.5f) | (v.y > 0.5f) << 1 | (v.z > 0.5f) << 2 | (v.w > 0.5f) << 3) << (4 * q);
        }
    }
    int cnt = __popc(bits), inc = cnt;
    for (int d = 1; d < 32; d <<= 1) {
        int o = __shfl_up_sync(0xffffffffu, inc, d);
        if (lane >= d) inc += o;
    }
    if (lane == 31) wsum[warp] = inc;
    __syncthreads();
    int off = inc - cnt, total = 0;
    for (int w = 0; w < NW; ++w) { int s = wsum[w]; total += s; if (w < warp) off += s; }
    const int first = ct * CT;
    if (first >= total) return;  // the whole block: total is the same for every thread
    const int n = min(CT, total - first);
    while (bits) {
        int j = __ffs(bits) - 1;
        bits &= bits - 1;
        int idx = off++ - first;
        if (idx >= 0 && idx < CT) list[idx] = (tid * Q + j / 4) * 4 + j % 4;
    }
    if (tid >= n && tid < CT) list[tid] = -1;
    __syncthreads();
    c1_rest<CO, CT, NW>(X, bias, Y, hw, trig, Ws, Xs, R, list, n);
}

// The gather, the products, the slices' sums and the stores, after the listing.
template <int CO, int CT, int NW>
__device__ __forceinline__ void c1_rest(const float* __restrict__ X, const float* __restrict__ bias, float* __restrict__ Y, int hw,
                                        int trig, float* Ws, float* Xs, float* R, const int* list, int n) {
    constexpr int NT = NW * 32, LC = CT / 4, LO = 32 / LC, CPL = CO / LO, KW = K / NW;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int b = blockIdx.z, co0 = blockIdx.x * CO;
    const float* Xb = X + (size_t)b * K * hw;
    {
        // Every load in flight before the first store: one round trip for the whole gather.
        constexpr int GL = K * CT / NT;
        const int p = list[tid % CT];  // NT is a multiple of CT: a thread keeps its column
        float t[GL];
#pragma unroll
        for (int j = 0; j < GL; ++j) t[j] = p >= 0 ? Xb[(size_t)((tid + j * NT) / CT) * hw + p] : 0.0f;
#pragma unroll
        for (int j = 0; j < GL; ++j) Xs[tid + j * NT] = t[j];
    }
    __syncthreads();
    const int lc = lane % LC, lo = lane / LC;
    float acc[CPL][4];
#pragma unroll
    for (int r = 0; r < CPL; ++r) acc[r][0] = acc[r][1] = acc[r][2] = acc[r][3] = 0.0f;
#pragma unroll 8
    for (int kk = 0; kk < KW; ++kk) {
        const int k = warp * KW + kk;
        float4 x = *(const float4*)&Xs[k * CT + lc * 4];
        float w[CPL];
        constexpr int VW = CPL >= 4 ? 4 : CPL;
#pragma unroll
        for (int r = 0; r < CPL; r += VW) *(typename Vec<VW>::T*)&w[r] = *(const typename Vec<VW>::T*)&Ws[k * CO + lo * CPL + r];
#pragma unroll
        for (int r = 0; r < CPL; ++r) {
            acc[r][0] += w[r] * x.x; acc[r][1] += w[r] * x.y; acc[r][2] += w[r] * x.z; acc[r][3] += w[r] * x.w;
        }
    }
    if (trig == 1) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#pragma unroll
    for (int r = 0; r < CPL; ++r)
        *(float4*)&R[warp * CO * CT + (lo * CPL + r) * CT + lc * 4] = make_float4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
    __syncthreads();
    for (int o = tid; o < CO * CT; o += NT) {
        int c = o % CT, co = o / CT;
        if (c < n) {
            float s = bias[co0 + co];
#pragma unroll
            for (int w = 0; w < NW; ++w) s += R[w * CO * CT + o];
            Y[((size_t)b * COUT + co0 + co) * hw + list[c]] = fmaxf(s, 0.0f);
        }
    }
}

struct Variant {
    const char* name;
    int co, ct, nw;
    bool generic;
    void (*fn)(const float*, const float*, const float*, const float*, float*, int, int);
};
#define V(CO, CT, NW) {"co" #CO "_ct" #CT "_w" #NW, CO, CT, NW, false, c1_gemm<CO, CT, NW>}
#define VG(CO, CT, NW) {"co" #CO "_ct" #CT "_w" #NW "_generic", CO, CT, NW, true, c1_gemm<CO, CT, NW, true>}

static size_t smem_bytes(const Variant& v) {
    return sizeof(float) * ((size_t)K * v.co + (size_t)K * v.ct + (size_t)v.nw * v.co * v.ct) + sizeof(int) * (v.ct + (v.generic ? 2 * 32 * v.nw : v.nw));
}

// uint8 [n, h, w] .npy, as gpu_sparse_bench writes it.
static std::vector<unsigned char> read_npy(const char* path, int& n, int& h, int& w) {
    FILE* f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "cannot open %s\n", path); exit(1); }
    unsigned char pre[10];
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) { fprintf(stderr, "%s: not an .npy\n", path); exit(1); }
    int hl = pre[8] | pre[9] << 8;
    std::string hdr(hl, ' ');
    if (fread(&hdr[0], 1, hl, f) != (size_t)hl || hdr.find("|u1") == std::string::npos) { fprintf(stderr, "%s: not uint8\n", path); exit(1); }
    size_t p = hdr.find("'shape': (");
    if (p == std::string::npos || sscanf(hdr.c_str() + p + 10, "%d, %d, %d", &n, &h, &w) != 3) { fprintf(stderr, "%s: shape\n", path); exit(1); }
    std::vector<unsigned char> v((size_t)n * h * w);
    if (fread(v.data(), 1, v.size(), f) != v.size()) { fprintf(stderr, "%s: short\n", path); exit(1); }
    fclose(f);
    return v;
}

int main(int argc, char** argv) {
    if (argc < 2) { fprintf(stderr, "usage: conv1x1_floor MASKS.npy [frames]\n"); return 2; }
    int B, H, Wd;
    std::vector<unsigned char> m8 = read_npy(argv[1], B, H, Wd);
    const int frames = argc > 2 ? atoi(argv[2]) : 1000, samples = 21, hw = H * Wd;
    if (hw % 4) { fprintf(stderr, "h*w must be a multiple of 4\n"); return 2; }
    std::mt19937 rng(std::random_device{}());
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> mask(m8.size()), X((size_t)B * K * hw), W((size_t)COUT * K), Wt(W.size()), bias(COUT);
    int maxcols = 0;
    for (int b = 0; b < B; ++b) {
        int c = 0;
        for (int p = 0; p < hw; ++p) { mask[b * hw + p] = m8[b * hw + p] ? 1.0f : 0.0f; c += m8[b * hw + p] != 0; }
        maxcols = std::max(maxcols, c);
    }
    for (auto& x : X) x = u(rng);
    for (auto& x : W) x = u(rng) / 16.0f;
    for (auto& x : bias) x = u(rng) * 0.1f;
    for (int co = 0; co < COUT; ++co) for (int k = 0; k < K; ++k) Wt[k * COUT + co] = W[co * K + k];
    // The runtime's grid: the power of two at or above 1.25 x the expected columns (160 at 0.1).
    int bucket = 1;
    while (bucket < (int)std::ceil(1.25 * maxcols)) bucket <<= 1;
    printf("masks %s: batch %d, %dx%d, most columns in an image %d, grid sized for %d\n", argv[1], B, H, Wd, maxcols, bucket);
    float *dm, *dX, *dW, *db, *dY;
    CK(cudaMalloc(&dm, mask.size() * 4)); CK(cudaMalloc(&dX, X.size() * 4)); CK(cudaMalloc(&dW, Wt.size() * 4));
    CK(cudaMalloc(&db, bias.size() * 4)); CK(cudaMalloc(&dY, (size_t)B * COUT * hw * 4));
    CK(cudaMemcpy(dm, mask.data(), mask.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dX, X.data(), X.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dW, Wt.data(), Wt.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(db, bias.data(), bias.size() * 4, cudaMemcpyHostToDevice));
    std::vector<float> ref((size_t)B * COUT * hw, NAN);
    for (int b = 0; b < B; ++b)
        for (int p = 0; p < hw; ++p) {
            if (!m8[b * hw + p]) continue;
            for (int co = 0; co < COUT; ++co) {
                double s = bias[co];
                for (int k = 0; k < K; ++k) s += (double)W[co * K + k] * X[((size_t)b * K + k) * hw + p];
                ref[((size_t)b * COUT + co) * hw + p] = (float)std::max(s, 0.0);
            }
        }
    cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t ea, eb; CK(cudaEventCreate(&ea)); CK(cudaEventCreate(&eb));
    Variant vs[] = {V(16, 8, 8), V(16, 16, 4), V(16, 16, 8), V(16, 32, 8), V(32, 8, 8), V(32, 16, 4),
                    V(32, 16, 8), V(32, 16, 16), V(32, 32, 8), V(64, 16, 8), V(64, 8, 8), VG(32, 8, 8), VG(64, 8, 8)};
    for (auto& v : vs) {
        if (argc > 3 && strcmp(argv[3], v.name) != 0) continue;
        size_t sm = smem_bytes(v);
        CK(cudaFuncSetAttribute((const void*)v.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm));
        dim3 grid(COUT / v.co, bucket / v.ct, B), block(v.nw * 32);
        auto launch = [&](bool pdl, int trig) {
            cudaLaunchConfig_t cfg = {};
            cfg.gridDim = grid; cfg.blockDim = block; cfg.stream = s; cfg.dynamicSmemBytes = sm;
            cudaLaunchAttribute at[1];
            at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
            at[0].val.programmaticStreamSerializationAllowed = 1;
            cfg.attrs = at; cfg.numAttrs = pdl ? 1 : 0;
            CK(cudaLaunchKernelEx(&cfg, v.fn, (const float*)dm, (const float*)dX, (const float*)dW, (const float*)db, dY, hw, trig));
        };
        // Poison, one frame, compare: every listed output within 1e-4 relative, every other one untouched.
        std::vector<float> got(ref.size());
        CK(cudaMemset(dY, 0xff, got.size() * 4));
        launch(false, 0);
        CK(cudaStreamSynchronize(s));
        CK(cudaMemcpy(got.data(), dY, got.size() * 4, cudaMemcpyDeviceToHost));
        double num = 0, den = 0; long bad = 0;
        for (size_t i = 0; i < ref.size(); ++i) {
            if (std::isnan(ref[i])) { if (!std::isnan(got[i])) ++bad; continue; }
            if (!std::isfinite(got[i])) { ++bad; continue; }
            num += (double)(got[i] - ref[i]) * (got[i] - ref[i]); den += (double)ref[i] * ref[i];
        }
        double rel = std::sqrt(num / std::max(den, 1e-30));
        bool ok = bad == 0 && rel < 1e-4;
        printf("%-14s grid %3dx%2dx%d x %3d, smem %5zu B: %s (relative L2 %.2e, %ld outputs wrong or missing)\n", v.name, grid.x, grid.y,
               grid.z, block.x, sm, ok ? "RIGHT" : "WRONG", rel, bad);
        if (!ok) continue;
        for (int trig = 0; trig < 2; ++trig) {
            const char* tn = trig ? "trigger after products" : "trigger at entry";
            Timed l = timed(s, ea, eb, samples, frames, 1, [&] { launch(true, trig); });
            Timed l40 = timed(s, ea, eb, samples, 40, 1, [&] { launch(true, trig); });
            int gf = 100;
            cudaGraph_t g; cudaGraphExec_t ge;
            CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
            for (int f = 0; f < gf; ++f) launch(true, trig);
            CK(cudaStreamEndCapture(s, &g));
            CK(cudaGraphInstantiate(&ge, g, 0));
            Timed gm = timed(s, ea, eb, samples, 10, gf, [&] { CK(cudaGraphLaunch(ge, s)); });
            CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g));
            CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
            launch(true, trig);
            CK(cudaStreamEndCapture(s, &g));
            CK(cudaGraphInstantiate(&ge, g, 0));
            Timed g1 = timed(s, ea, eb, samples, frames, 1, [&] { CK(cudaGraphLaunch(ge, s)); });
            CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g));
            printf("  %-24s launched (PDL) %5.2f us/frame, host %4.2f (40 frames: GPU %5.2f, host %4.2f); %d-frame graph %5.2f; graph per frame %5.2f, host %4.2f\n",
                   tn, l.gpu, l.host, l40.gpu, l40.host, gf, gm.gpu, g1.gpu, g1.host);
        }
        Timed np = timed(s, ea, eb, samples, frames, 1, [&] { launch(false, 0); });
        printf("  %-24s launched %5.2f us/frame, host %4.2f\n", "no PDL", np.gpu, np.host);
    }
    return 0;
}
