/* Data movement on words of MOVE_T (float bits and ints alike, so every type shares one kernel; 16
 * bits for half tensors):
 * strided copies (Transpose, Slice, Expand, Concat, Split), Gather, per-axis index maps (Pad,
 * nearest Resize) and the separable passes of linear Resize. One work-item per element. */

/* dst[doff + walk(i, dst strides)] = src[soff + walk(i, src strides)] over `n` elements of a
 * `rank`-dim index space. meta: dims [rank], src strides [rank], dst strides [rank]. */
KERNEL strided_copy(GLOBAL const MOVE_T* src, int soff, GLOBAL MOVE_T* dst, int doff, int n, int rank,
                    GLOBAL const int* meta) {
    PDL_ENTRY();
    int i = GLOBAL_ID(0);
    if (i >= n) return;
    int s = soff + strided_offset(i, rank, meta, meta + rank);
    int d = doff + strided_offset(i, rank, meta, meta + 2 * rank);
    dst[d] = src[s];
}

/* Gather over [outer, axis_len, inner] with `nidx` indices: out [outer, nidx, inner].
 * Negative indices count from the end; indices out of range are clamped (validated on the
 * host wherever the indices are known). */
KERNEL gather_words(GLOBAL const MOVE_T* src, GLOBAL const int* idx, GLOBAL MOVE_T* dst, int n, int axis_len, int nidx,
                    int inner) {
    PDL_ENTRY();
    int i = GLOBAL_ID(0);
    if (i >= n) return;
    int in_ = i % inner;
    int r = i / inner;
    int j = r % nidx;
    int o = r / nidx;
    int k = idx[j];
    if (k < 0) k += axis_len;
    k = IMIN(IMAX(k, 0), axis_len - 1);
    dst[i] = src[(o * axis_len + k) * inner + in_];
}

/* Each output index along each axis reads one input index from a table (-1: the fill value).
 * meta: out dims [rank], input strides [rank], table offsets [rank] (into meta), tables. */
KERNEL axis_map_gather(GLOBAL const MOVE_T* src, GLOBAL MOVE_T* dst, int n, int rank, GLOBAL const int* meta,
                       GLOBAL const MOVE_T* fill) {
    PDL_ENTRY();
    int i = GLOBAL_ID(0);
    if (i >= n) return;
    int rem = i, off = 0;
    for (int d = rank - 1; d >= 0; --d) {
        int len = meta[d];
        int q = rem / len;
        int j = rem - q * len;
        rem = q;
        int k = meta[meta[2 * rank + d] + j];
        if (k < 0) {
            dst[i] = fill[0];
            return;
        }
        off += k * meta[rank + d];
    }
    dst[i] = src[off];
}

/* One axis of a linear Resize: [outer, n_in, inner] -> [outer, n_out, inner], each output index
 * the weighted sum of `width` taps (tap tables made on the host). */
KERNEL resample_axis(GLOBAL const FLT* src, GLOBAL FLT* dst, int n, int n_in, int n_out, int inner, int width,
                     GLOBAL const int* taps, GLOBAL const float* weights) {
    PDL_ENTRY();
    int i = GLOBAL_ID(0);
    if (i >= n) return;
    int in_ = i % inner;
    int r = i / inner;
    int j = r % n_out;
    int o = r / n_out;
    float acc = 0.0f;
    for (int t = 0; t < width; ++t) {
        float w = weights[j * width + t];
        if (w != 0.0f) acc += w * LDF(src, (o * n_in + taps[j * width + t]) * inner + in_);
    }
    STF(dst, i, acc);
}

/* tf_crop_and_resize: positions outside the crop box along any axis take the extrapolation value.
 * meta as for axis_map_gather, with tables of 1 (inside) / 0 (outside) or offset -1 (all inside). */
KERNEL extrapolate(GLOBAL FLT* y, int n, int rank, GLOBAL const int* meta, float value) {
    PDL_ENTRY();
    int i = GLOBAL_ID(0);
    if (i >= n) return;
    int rem = i;
    for (int d = rank - 1; d >= 0; --d) {
        int len = meta[d];
        int q = rem / len;
        int j = rem - q * len;
        rem = q;
        int t = meta[2 * rank + d];
        if (t >= 0 && meta[t + j] == 0) {
            STF(y, i, value);
            return;
        }
    }
}
