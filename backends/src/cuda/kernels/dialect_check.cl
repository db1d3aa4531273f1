/* Kernels in the shared dialect (the macros of gpu/kernels/prelude_opencl.h and the CUDA
 * prelude, plain C otherwise) that exercise what the executor's kernels use: 1-D and 2-D ids,
 * local memory with a barrier, FUNC helpers, schedule constants from defines, the float maths
 * macros. The GPU self-check runs them against CPU references, independent of the executor's
 * kernels (whose signatures change with the executor); CI compiles them for every schedule.
 *
 * Defines: TILE (side of the square tile of transpose_scale, 8..32), ACT (0 none, 1 relu,
 * 2 sigmoid, 3 clamp to [-1, 1]). */

#ifndef ACT
#define ACT 0
#endif

FUNC float act_check(float x) {
#if ACT == 1
    return FMAXF(x, 0.0f);
#elif ACT == 2
    return 1.0f / (1.0f + EXPF(-x));
#elif ACT == 3
    return FMINF(FMAXF(x, -1.0f), 1.0f);
#else
    return x;
#endif
}

/* y[i] = act(a * x[i] + b) for i < n. */
KERNEL axpb_act(GLOBAL const float* x, GLOBAL float* y, int n, float a, float b) {
    int i = GLOBAL_ID(0);
    if (i < n) y[i] = act_check(a * x[i] + b);
}

#ifdef TILE
/* out[c][r] = scale * in[r][c] for an `in` of rows x cols, through a local tile (padded by one
 * column so the transposed reads do not hit one bank). Work-groups of TILE x TILE. */
KERNEL transpose_scale(GLOBAL const float* in, GLOBAL float* out, int rows, int cols, float scale) {
    LOCAL float tile[TILE][TILE + 1];
    int lx = LOCAL_ID(0), ly = LOCAL_ID(1);
    int c = GROUP_ID(0) * TILE + lx;
    int r = GROUP_ID(1) * TILE + ly;
    if (r < rows && c < cols) tile[ly][lx] = in[r * cols + c];
    LOCAL_BARRIER();
    /* The tile's transpose: this work-item writes row (block col + ly), column (block row + lx). */
    int oc = GROUP_ID(1) * TILE + lx;
    int orow = GROUP_ID(0) * TILE + ly;
    if (orow < cols && oc < rows) out[orow * rows + oc] = scale * tile[lx][ly];
}
#endif
