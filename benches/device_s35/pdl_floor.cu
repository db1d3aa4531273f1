// Session 35: the floor of the frame shapes sparse conv members run on CUDA, with nothing in
// the kernels: one grid per frame (a GEMM alone), and two dependent grids per frame (a split
// GEMM and its finish), with and without programmatic dependent launch (PDL), as our kernels
// trigger and wait. Also when, by %globaltimer, each grid's blocks got past their wait against
// when the grid ahead's last block ended. Built on the GPU host: nvcc -O2 -arch=sm_90 ... -lcuda.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda.h>
#include <cuda_runtime.h>
#include <chrono>
#include "../cuda_timing.h"


__device__ __forceinline__ unsigned long long now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// mode bit 0: trigger at entry (else at exit); bit 1: record times into rec[slot*4..].
// rec: [0] min start, [1] min past-wait, [2] max end (per launch slot), ns.
__global__ void grid_kernel(int* flag, unsigned long long* rec, int slot, int mode) {
    if (mode & 1) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    unsigned long long t0 = (mode & 2) ? now() : 0;
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (mode & 2) {
        unsigned long long t1 = now();
        if (threadIdx.x == 0) {
            atomicMin(&rec[slot * 4 + 0], t0);
            atomicMin(&rec[slot * 4 + 1], t1);
        }
    }
    if (flag[0] == 12345) flag[1] = threadIdx.x;  // never true; keeps the kernel alive
    if (mode & 2) {
        __syncthreads();
        if (threadIdx.x == 0) atomicMax(&rec[slot * 4 + 2], now());
    }
}

// As many parameters as sparse_conv.cl's self-listing GEMM takes (buffers and ints).
__global__ void many_kernel(int* flag, const float* b1, const float* b2, const float* b3, const float* b4, float* b5,
                            int* b6, float* b7, const int* b8, const float* b9, int i0, int i1, int i2, int i3, int i4,
                            int i5, int i6, int i7, int i8, int i9, int i10, int i11, int i12, int i13, int i14,
                            int i15, int i16, int i17, int i18, int i19, int i20, int i21, int i22, int i23, float f0,
                            float f1) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (flag[0] == 12345 + i0 + i23) flag[1] = threadIdx.x + (int)f1;
}

static void launch_many(dim3 g, dim3 b, bool pdl, cudaStream_t s, int* flag) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = g; cfg.blockDim = b; cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr; cfg.numAttrs = pdl ? 1 : 0;
    const float* fp = (const float*)flag;
    CK(cudaLaunchKernelEx(&cfg, many_kernel, flag, fp, fp, fp, fp, (float*)flag, flag, (float*)flag, (const int*)flag, fp,
                          1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 0.5f, 0.25f));
}

static void launch(dim3 g, dim3 b, bool pdl, cudaStream_t s, int* flag, unsigned long long* rec, int slot, int mode) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = g; cfg.blockDim = b; cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr; cfg.numAttrs = pdl ? 1 : 0;
    CK(cudaLaunchKernelEx(&cfg, grid_kernel, flag, rec, slot, mode));
}

int main(int argc, char** argv) {
    int frames = argc > 1 ? atoi(argv[1]) : 1000, samples = 21;
    int* flag; unsigned long long* rec;
    CK(cudaMalloc(&flag, 8)); CK(cudaMemset(flag, 0, 8));
    const int slots = 64;
    CK(cudaMalloc(&rec, slots * 4 * 8));
    cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    dim3 gemm(120), fin(256), nt(256);
    struct Shape { const char* name; int grids; bool pdl; int gemm_mode, fin_mode; };
    // gemm_mode 0: triggers at exit (ours trigger after the K loop, close to it); fin_mode 1: at entry (FIN_TRIGGER).
    Shape shapes[] = {
        {"one grid, no PDL", 1, false, 0, 0},
        {"one grid, PDL, trigger at exit", 1, true, 0, 0},
        {"one grid, PDL, trigger at entry", 1, true, 1, 0},
        {"two grids, no PDL", 2, false, 0, 0},
        {"two grids, PDL, gemm at exit, finish at entry", 2, true, 0, 1},
        {"two grids, PDL, both at entry", 2, true, 1, 1},
    };
    // Host time of the launch calls alone, few enough (40 frames) that the queue never fills,
    // against the GPU's time for them: which of the two sets the pace.
    for (int many = 0; many < 2; ++many) {
        for (int grids = 1; grids <= 2; ++grids) {
            Timed t = timed(s, a, b, samples, 40, 1, [&] {
                if (many) launch_many(gemm, nt, true, s, flag); else launch(gemm, nt, true, s, flag, rec, 0, 0);
                if (grids == 2) { if (many) launch_many(fin, nt, true, s, flag); else launch(fin, nt, true, s, flag, rec, 0, 1); }
            });
            printf("40 frames of %d grid(s), PDL, %s: GPU %.2f us per frame, host launch calls %.2f us per frame\n", grids,
                   many ? "36 parameters" : "4 parameters", t.gpu, t.host);
        }
    }
    for (auto& sh : shapes) {
        Timed t = timed(s, a, b, samples, frames, 1, [&] {
            launch(gemm, nt, sh.pdl, s, flag, rec, 0, sh.gemm_mode);
            if (sh.grids == 2) launch(fin, nt, sh.pdl, s, flag, rec, 0, sh.fin_mode);
        });
        printf("%-48s %7.2f us per frame (median of %d x %d frames; min %.2f max %.2f); host queueing %.2f us per frame\n", sh.name, t.gpu, samples, frames, t.gpu_min, t.gpu_max, t.host);
    }
    // The same frames captured into one CUDA graph (PDL launches become programmatic edges):
    // the GPU's floor without the host's queueing.
    for (int pdl = 0; pdl < 2; ++pdl) {
        for (int grids = 1; grids <= 2; ++grids) {
            int gf = 100;
            cudaGraph_t g; cudaGraphExec_t ge;
            CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
            for (int f = 0; f < gf; ++f) {
                launch(gemm, nt, pdl, s, flag, rec, 0, 0);
                if (grids == 2) launch(fin, nt, pdl, s, flag, rec, 0, 1);
            }
            CK(cudaStreamEndCapture(s, &g));
            CK(cudaGraphInstantiate(&ge, g, 0));
            Timed t = timed(s, a, b, samples, 10, gf, [&] { CK(cudaGraphLaunch(ge, s)); });
            printf("graph of %d frames: %d grid(s), %-7s %7.2f us per frame (min %.2f max %.2f)\n", gf, grids, pdl ? "PDL" : "no PDL", t.gpu, t.gpu_min, t.gpu_max);
            CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g));
        }
    }
    // One frame (two grids, PDL) as a graph, launched frame by frame: the host's cost of a
    // graph launch against two kernel launches, and the GPU's per frame.
    {
        cudaGraph_t g; cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        launch(gemm, nt, true, s, flag, rec, 0, 0);
        launch(fin, nt, true, s, flag, rec, 0, 1);
        CK(cudaStreamEndCapture(s, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        for (int frames_n : {40, 1000}) {
            Timed t = timed(s, a, b, samples, frames_n, 1, [&] { CK(cudaGraphLaunch(ge, s)); });
            printf("%d frames, each a graph of two grids (PDL): GPU %.2f us per frame, host %.2f us per frame\n", frames_n, t.gpu, t.host);
        }
        CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g));
    }
    // The driver's cuLaunchKernelEx, as dynaspa launches (cudarc), alone, after a
    // cuCtxSetCurrent, and after a cuCtxGetCurrent that finds the context current.
    {
        cudaFunction_t rf; CK(cudaGetFuncBySymbol(&rf, (const void*)grid_kernel));
        CUfunction f = (CUfunction)rf;
        CUcontext ctx; if (cuCtxGetCurrent(&ctx) != CUDA_SUCCESS) { fprintf(stderr, "cuCtxGetCurrent failed\n"); exit(1); }
        for (int bind = 0; bind < 3; ++bind) {
            Timed t = timed(s, a, b, samples, 40, 1, [&] {
                for (int k = 0; k < 2; ++k) {
                    if (bind == 1) cuCtxSetCurrent(ctx);
                    if (bind == 2) { CUcontext cur; if (cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != ctx) cuCtxSetCurrent(ctx); }
                    CUlaunchAttribute at[1];
                    at[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
                    at[0].value.programmaticStreamSerializationAllowed = 1;
                    CUlaunchConfig c = {};
                    c.gridDimX = k ? 256 : 120; c.gridDimY = 1; c.gridDimZ = 1;
                    c.blockDimX = 256; c.blockDimY = 1; c.blockDimZ = 1;
                    c.hStream = (CUstream)s; c.attrs = at; c.numAttrs = 1;
                    int slot = 0, mode = k;
                    void* params[] = {&flag, &rec, &slot, &mode};
                    if (cuLaunchKernelEx(&c, f, params, nullptr) != CUDA_SUCCESS) { fprintf(stderr, "cuLaunchKernelEx failed\n"); exit(1); }
                }
            });
            printf("40 frames of two grids by the driver's cuLaunchKernelEx%s: GPU %.2f us per frame, host %.2f us per frame\n",
                   bind == 1 ? " after cuCtxSetCurrent" : bind == 2 ? " after cuCtxGetCurrent" : "", t.gpu, t.host);
        }
    }
    // Timeline of 8 frames of two grids (PDL as ours), after 200 untimed frames.
    for (int f = 0; f < 200; ++f) { launch(gemm, nt, true, s, flag, rec, 0, 0); launch(fin, nt, true, s, flag, rec, 0, 1); }
    std::vector<unsigned long long> init(slots * 4);
    for (int i = 0; i < slots; ++i) { init[i * 4] = ~0ull; init[i * 4 + 1] = ~0ull; init[i * 4 + 2] = 0; init[i * 4 + 3] = 0; }
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(rec, init.data(), slots * 32, cudaMemcpyHostToDevice));
    int n = 16;
    for (int f = 0; f < n; ++f) { launch(gemm, nt, true, s, flag, rec, 2 * f, 2); launch(fin, nt, true, s, flag, rec, 2 * f + 1, 3); }
    CK(cudaStreamSynchronize(s));
    std::vector<unsigned long long> out(slots * 4);
    CK(cudaMemcpy(out.data(), rec, slots * 32, cudaMemcpyDeviceToHost));
    unsigned long long t0 = out[0];
    printf("timeline, ns from the first grid's first start: grid start / past wait / end; past-wait minus the previous grid's end\n");
    for (int i = 0; i < 2 * n; ++i) {
        long long st = out[i * 4] - t0, pw = out[i * 4 + 1] - t0, en = out[i * 4 + 2] - t0;
        long long gap = i ? (long long)out[i * 4 + 1] - (long long)out[(i - 1) * 4 + 2] : 0;
        printf("  %s %2d: %8lld %8lld %8lld  release %6lld\n", i % 2 ? "fin " : "gemm", i / 2, st, pw, en, gap);
    }
    return 0;
}
