// Kernels in the shared dialect (the macros of the CUDA and OpenCL preludes, OpenCL C 1.2
// otherwise) that exercise what real kernels use: 1-D and 2-D ids, local memory with a barrier,
// schedule constants from defines, and the float built-ins the preludes map. The GPU
// self-check runs them against CPU references; CI compiles them for every schedule below.
//
// Defines: TILE (side of the square tile of transpose_scale, 8..32), ACT (0 none, 1 relu,
// 2 sigmoid, 3 clamp to [-1, 1]).

#ifndef ACT
#define ACT 0
#endif

float activate(float x) {
#if ACT == 1
    return fmax(x, 0.0f);
#elif ACT == 2
    return 1.0f / (1.0f + exp(-x));
#elif ACT == 3
    return clamp(x, -1.0f, 1.0f);
#else
    return x;
#endif
}

// y[i] = act(a * x[i] + b) for i < n.
KERNEL void axpb_act(GLOBAL const float *x, GLOBAL float *y, int n, float a, float b) {
    int i = (int)GLOBAL_ID(0);
    if (i < n) {
        y[i] = activate(mad(a, x[i], b));
    }
}

#ifdef TILE
// out[c][r] = scale * in[r][c] for an in of rows x cols, through a local tile (padded by one
// column so the transposed reads do not hit one bank). Work-groups of TILE x TILE.
KERNEL void transpose_scale(GLOBAL const float *in, GLOBAL float *out, uint rows, uint cols, float scale) {
    LOCAL float tile[TILE][TILE + 1];
    uint lx = (uint)LOCAL_ID(0), ly = (uint)LOCAL_ID(1);
    uint c = (uint)GROUP_ID(0) * TILE + lx;
    uint r = (uint)GROUP_ID(1) * TILE + ly;
    if (r < rows && c < cols) {
        tile[ly][lx] = in[r * cols + c];
    }
    LOCAL_BARRIER();
    // The tile's transpose: this thread writes row (block col + ly), column (block row + lx).
    uint oc = (uint)GROUP_ID(1) * TILE + lx;
    uint orow = (uint)GROUP_ID(0) * TILE + ly;
    if (orow < cols && oc < rows) {
        out[orow * rows + oc] = scale * tile[lx][ly];
    }
}
#endif
