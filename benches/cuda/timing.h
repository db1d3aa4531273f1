// CUDA error check and frame timing for the hand-written CUDA programs beside it
// (conv1x1_floor.cu).
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

// Medians (and the GPU's extremes) over `samples` samples, after two untimed, of `calls` calls
// of `queue` queued back to back, per frame (`per_call` frames a call): the GPU's time between
// events, and the host's time in the calls alone, before it waited.
struct Timed { float gpu, gpu_min, gpu_max, host; };
template <class Queue>
static Timed timed(cudaStream_t s, cudaEvent_t a, cudaEvent_t b, int samples, int calls, int per_call, Queue queue) {
    std::vector<float> gpu, host;
    float frames = (float)calls * per_call;
    for (int r = 0; r < samples + 2; ++r) {
        CK(cudaStreamSynchronize(s));
        CK(cudaEventRecord(a, s));
        auto h0 = std::chrono::steady_clock::now();
        for (int c = 0; c < calls; ++c) queue();
        double hus = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - h0).count();
        CK(cudaEventRecord(b, s));
        CK(cudaEventSynchronize(b));
        float ms; CK(cudaEventElapsedTime(&ms, a, b));
        if (r >= 2) { gpu.push_back(ms * 1000.0f / frames); host.push_back((float)hus / frames); }
    }
    std::sort(gpu.begin(), gpu.end()); std::sort(host.begin(), host.end());
    return {gpu[gpu.size() / 2], gpu.front(), gpu.back(), host[host.size() / 2]};
}
