/* Batched GEMM with general strides and a fused epilogue (MatMul, Gemm, the projections of
 * attention): C[b] = act(alpha * A[b] . B[b] + beta * bias), tiled in local memory.
 *
 * Schedule: a work-group computes a TM x TN tile of C, staging TK-deep slices of A and B in
 * local memory; each of its (TM/WM) x (TN/WN) work-items accumulates WM x WN outputs in
 * registers, interleaved (rows ty + i*TY, cols tx + j*TX) so that stores and local reads of
 * neighbouring work-items are contiguous. Grid: (ceil(N/TN), ceil(M/TM), batch), local (TX, TY). */

#ifndef TM
#define TM 64
#endif
#ifndef TN
#define TN 64
#endif
#ifndef TK
#define TK 16
#endif
#ifndef WM
#define WM 4
#endif
#ifndef WN
#define WN 4
#endif
#define TX (TN / WN)
#define TY (TM / WM)
#define NT (TX * TY)

/* A[m, k] at a + m*sam + k*sak; B[k, n] at b + k*sbk + n*sbn; C[m, n] at c + m*scm + n.
 * boff holds per batch the element offsets of A, B and C. bias[m, n] at m*sbm + n*sbn_ (Gemm's
 * C, broadcast by zero strides), added times beta when has_bias. */
KERNEL gemm_f32(GLOBAL const FLT* A, GLOBAL const FLT* B, GLOBAL FLT* C, int M, int N, int K, int sam,
                int sak, int sbk, int sbn, int scm, GLOBAL const int* boff, float alpha, GLOBAL const FLT* bias,
                int has_bias, float beta, int sbm, int sbn_, int act, float p0, float p1) {
    PDL_ENTRY();
    LOCAL float As[TK][TM];
    LOCAL float Bs[TK][TN];
    int tx = LOCAL_ID(0), ty = LOCAL_ID(1);
    int tid = ty * TX + tx;
    int n0 = GROUP_ID(0) * TN, m0 = GROUP_ID(1) * TM, bt = GROUP_ID(2);
    GLOBAL const FLT* Ab = A + boff[3 * bt];
    GLOBAL const FLT* Bb = B + boff[3 * bt + 1];
    float acc[WM][WN];
    for (int i = 0; i < WM; ++i)
        for (int j = 0; j < WN; ++j) acc[i][j] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TK) {
        /* Consecutive work-items load along whichever operand axis is contiguous in memory. */
        for (int e = tid; e < TM * TK; e += NT) {
            int m, k;
            if (sak == 1) {
                k = e % TK;
                m = e / TK;
            } else {
                m = e % TM;
                k = e / TM;
            }
            int gm = m0 + m, gk = k0 + k;
            As[k][m] = (gm < M && gk < K) ? LDF(Ab, gm * sam + gk * sak) : 0.0f;
        }
        for (int e = tid; e < TN * TK; e += NT) {
            int n, k;
            if (sbn == 1) {
                n = e % TN;
                k = e / TN;
            } else {
                k = e % TK;
                n = e / TK;
            }
            int gn = n0 + n, gk = k0 + k;
            Bs[k][n] = (gn < N && gk < K) ? LDF(Bb, gk * sbk + gn * sbn) : 0.0f;
        }
        LOCAL_BARRIER();
        for (int kk = 0; kk < TK; ++kk) {
            float a[WM], b[WN];
            for (int i = 0; i < WM; ++i) a[i] = As[kk][ty + i * TY];
            for (int j = 0; j < WN; ++j) b[j] = Bs[kk][tx + j * TX];
            for (int i = 0; i < WM; ++i)
                for (int j = 0; j < WN; ++j) acc[i][j] += a[i] * b[j];
        }
        LOCAL_BARRIER();
    }
    GLOBAL FLT* Cb = C + boff[3 * bt + 2];
    for (int i = 0; i < WM; ++i) {
        int m = m0 + ty + i * TY;
        if (m >= M) continue;
        for (int j = 0; j < WN; ++j) {
            int n = n0 + tx + j * TX;
            if (n >= N) continue;
            float v = alpha * acc[i][j];
            if (has_bias) v += beta * LDF(bias, m * sbm + n * sbn_);
            STF(Cb, m * scm + n, activate(act, v, p0, p1));
        }
    }
}

/* GEMM with few rows and a long reduction (a classifier's Gemm at batch 1: 1 x 2048 by 2048 x
 * 1000): gemm_f32 would give each of a few work-groups the whole K loop, a barrier pair per TK
 * step, so the op is latency bound. Here a work-group of GRB work-items sums one output's
 * reduction in a tree instead. Arguments as gemm_f32. Grid: (N, M, batch), local (GRB, 1, 1). */
#define GRB 128
KERNEL gemm_reduce_f32(GLOBAL const FLT* A, GLOBAL const FLT* B, GLOBAL FLT* C, int M, int N, int K,
                       int sam, int sak, int sbk, int sbn, int scm, GLOBAL const int* boff, float alpha,
                       GLOBAL const FLT* bias, int has_bias, float beta, int sbm, int sbn_, int act, float p0,
                       float p1) {
    PDL_ENTRY();
    LOCAL float s[GRB];
    int n = GROUP_ID(0), m = GROUP_ID(1), bt = GROUP_ID(2), tid = LOCAL_ID(0);
    GLOBAL const FLT* Am = A + boff[3 * bt] + m * sam;
    GLOBAL const FLT* Bn = B + boff[3 * bt + 1] + n * sbn;
    float acc = 0.0f;
    for (int k = tid; k < K; k += GRB) acc += LDF(Am, k * sak) * LDF(Bn, k * sbk);
    acc = group_sum(s, acc, GRB);
    if (tid == 0) {
        float v = alpha * acc;
        if (has_bias) v += beta * LDF(bias, m * sbm + n * sbn_);
        STF(C, boff[3 * bt + 2] + m * scm + n, activate(act, v, p0, p1));
    }
}
