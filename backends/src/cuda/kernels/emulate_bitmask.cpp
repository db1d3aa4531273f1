// Runs bitmask.cu on the CPU: one block of BLOCK std::threads with std::barrier standing in
// for __syncthreads and the warp votes/shuffles, so CI (no GPU) checks the kernel's logic
// against the host's BitMask. Not a CUDA emulator in general: only what bitmask.cu uses.
//
// Build: c++ -std=c++20 -pthread -DBLOCK=128 emulate_bitmask.cpp
// stdin (little-endian u32 unless noted): height, width, n_gran, 3 * n_gran grans words,
// height * width f32 mask values. stdout: the words, the n_gran + 1 counts, the tile words.

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

typedef unsigned int uint;

struct Dim {
    unsigned x = 0, y = 0, z = 0;
};
thread_local Dim threadIdx;
static std::barrier<> *block_barrier;

struct Warp {
    std::barrier<> bar{32};
    std::atomic<uint> vote{0};
    uint lanes[32];
};
static std::vector<Warp *> warps;

#define __syncthreads() block_barrier->arrive_and_wait()

static uint __ballot_sync(uint, bool p) {
    Warp &w = *warps[threadIdx.x / 32];
    if (p) {
        w.vote.fetch_or(1u << (threadIdx.x % 32));
    }
    w.bar.arrive_and_wait();
    uint r = w.vote.load();
    w.bar.arrive_and_wait();
    if (threadIdx.x % 32 == 0) {
        w.vote = 0;
    }
    w.bar.arrive_and_wait();
    return r;
}

static uint __shfl_up_sync(uint, uint v, uint d) {
    Warp &w = *warps[threadIdx.x / 32];
    uint lane = threadIdx.x % 32;
    w.lanes[lane] = v;
    w.bar.arrive_and_wait();
    uint r = lane >= d ? w.lanes[lane - d] : v;
    w.bar.arrive_and_wait();
    return r;
}

static uint __popc(uint x) { return __builtin_popcount(x); }
static uint __float_as_uint(float f) {
    uint u;
    memcpy(&u, &f, 4);
    return u;
}
static void atomicMin(uint *p, uint v) {
    std::atomic_ref<uint> a(*p);
    uint old = a.load();
    while (v < old && !a.compare_exchange_weak(old, v)) {
    }
}
using std::max;
using std::min;

// Shared variables are function statics: one block runs at a time.
#define __shared__ static
#define __device__
#define KERNEL void
#define GLOBAL
#define __launch_bounds__(x)
#include "bitmask.cu"

static bool read_u32(uint *v, size_t n) { return fread(v, 4, n, stdin) == n; }

int main() {
    uint head[3];
    if (!read_u32(head, 3)) {
        return 2;
    }
    const uint h = head[0], w = head[1], ng = head[2];
    std::vector<uint> grans(3 * ng);
    std::vector<float> mask(size_t(h) * w);
    if (!read_u32(grans.data(), grans.size()) || fread(mask.data(), 4, mask.size(), stdin) != mask.size()) {
        return 2;
    }
    size_t tile_words = 0;
    for (uint g = 0; g < ng; ++g) {
        uint gh = max(grans[3 * g], 1u), gw = max(grans[3 * g + 1], 1u);
        tile_words = max(tile_words, size_t(grans[3 * g + 2]) + 2 * size_t((h + gh - 1) / gh) * ((w + gw - 1) / gw));
    }
    // Poisoned outputs, as on the GPU.
    std::vector<uint> words((size_t(h) * w + 31) / 32, 0xa5a5a5a5u), counts(ng + 1, 0xa5a5a5a5u),
        tiles(tile_words, 0xa5a5a5a5u);
    std::barrier<> bar(BLOCK);
    block_barrier = &bar;
    for (int i = 0; i < BLOCK / 32; ++i) {
        warps.push_back(new Warp);
    }
    std::vector<std::thread> threads;
    for (uint t = 0; t < BLOCK; ++t) {
        threads.emplace_back([&, t] {
            threadIdx.x = t;
            bitmask_tiles(mask.data(), h, w, words.data(), grans.data(), ng, counts.data(), tiles.data());
        });
    }
    for (auto &t : threads) {
        t.join();
    }
    fwrite(words.data(), 4, words.size(), stdout);
    fwrite(counts.data(), 4, counts.size(), stdout);
    fwrite(tiles.data(), 4, tiles.size(), stdout);
    return 0;
}
