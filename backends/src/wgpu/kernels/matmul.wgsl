// Batched GEMM with general strides and a fused epilogue (matmul.cl): C[b] = act(alpha * A[b] .
// B[b] + beta * bias), tiled in workgroup memory.
//
// Schedule (override constants): a work-group computes a TM x TN tile of C, staging TK-deep
// slices of A and B; each of its (TM/WM) x (TN/WN) invocations accumulates WM x WN outputs
// (at most 16, the size of `acc`), interleaved (rows ty + i*TY, cols tx + j*TX) so that
// neighbouring invocations touch neighbouring words. Grid: (ceil(N/TN), ceil(M/TM), batch).

override TM: u32 = 64u;
override TN: u32 = 64u;
override TK: u32 = 16u;
override WM: u32 = 4u;
override WN: u32 = 4u;
override TX: u32 = TN / WN;
override TY: u32 = TM / WM;

var<workgroup> As: array<f32, TK * TM>;
var<workgroup> Bs: array<f32, TK * TN>;

// A[m, k] at A + m*sam + k*sak; B[k, n] at B + k*sbk + n*sbn; C[m, n] at C + m*scm + n.
// boff holds per batch the element offsets of A, B and C. bias[m, n] at m*sbm + n*sbn_
// (Gemm's C, broadcast by zero strides), added times beta when has_bias.
@group(0) @binding(0) var<storage, read_write> ga: array<f32>;
@group(0) @binding(1) var<storage, read_write> gb: array<f32>;
@group(0) @binding(2) var<storage, read_write> gc: array<f32>;
@group(0) @binding(3) var<storage, read_write> gboff: array<i32>;
@group(0) @binding(4) var<storage, read_write> gbias: array<f32>;
struct GemmP {
    M: i32, N: i32, K: i32, sam: i32, sak: i32, sbk: i32, sbn: i32, scm: i32,
    alpha: f32, has_bias: i32, beta: f32, sbm: i32, sbn_: i32, act: i32, p0: f32, p1: f32,
}
@group(0) @binding(8) var<uniform> gemm_p: GemmP;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn gemm_f32(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = gemm_p;
    let tm = i32(TM);
    let tn = i32(TN);
    let tk = i32(TK);
    let nt = i32(TX * TY);
    let tx = i32(lid.x);
    let ty = i32(lid.y);
    let tid = ty * i32(TX) + tx;
    let n0 = i32(wid.x) * tn;
    let m0 = i32(wid.y) * tm;
    let bt = i32(wid.z);
    let ab = gboff[3 * bt];
    let bb = gboff[3 * bt + 1];
    var acc: array<f32, 16>;
    for (var e = 0; e < 16; e++) { acc[e] = 0.0; }
    for (var k0 = 0; k0 < p.K; k0 += tk) {
        // Consecutive invocations load along whichever operand axis is contiguous in memory.
        for (var e = tid; e < tm * tk; e += nt) {
            var m: i32;
            var k: i32;
            if (p.sak == 1) { k = e % tk; m = e / tk; } else { m = e % tm; k = e / tm; }
            let gm = m0 + m;
            let gk = k0 + k;
            var v = 0.0;
            if (gm < p.M && gk < p.K) { v = ga[ab + gm * p.sam + gk * p.sak]; }
            As[k * tm + m] = v;
        }
        for (var e = tid; e < tn * tk; e += nt) {
            var n: i32;
            var k: i32;
            if (p.sbn == 1) { n = e % tn; k = e / tn; } else { k = e % tk; n = e / tk; }
            let gn = n0 + n;
            let gk = k0 + k;
            var v = 0.0;
            if (gn < p.N && gk < p.K) { v = gb[bb + gk * p.sbk + gn * p.sbn]; }
            Bs[k * tn + n] = v;
        }
        workgroupBarrier();
        for (var kk = 0; kk < tk; kk++) {
            for (var i = 0; i < i32(WM); i++) {
                let a = As[kk * tm + ty + i * i32(TY)];
                for (var j = 0; j < i32(WN); j++) {
                    acc[i * i32(WN) + j] += a * Bs[kk * tn + tx + j * i32(TX)];
                }
            }
        }
        workgroupBarrier();
    }
    let cb = gboff[3 * bt + 2];
    for (var i = 0; i < i32(WM); i++) {
        let m = m0 + ty + i * i32(TY);
        if (m >= p.M) { continue; }
        for (var j = 0; j < i32(WN); j++) {
            let n = n0 + tx + j * i32(TX);
            if (n >= p.N) { continue; }
            var v = p.alpha * acc[i * i32(WN) + j];
            if (p.has_bias != 0) { v += p.beta * gbias[m * p.sbm + n * p.sbn_]; }
            gc[cb + m * p.scm + n] = activate(p.act, v, p.p0, p.p1);
        }
    }
}

// GEMM with few rows and a long reduction (matmul.cl's gemm_reduce_f32): a work-group of GRB
// invocations sums one output's reduction in a tree. Grid: (N, M, batch), local (GRB, 1, 1).
const GRB: i32 = 128;
@group(0) @binding(8) var<uniform> gemm_reduce_p: GemmP;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn gemm_reduce_f32(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = gemm_reduce_p;
    let n = i32(wid.x);
    let m = i32(wid.y);
    let bt = i32(wid.z);
    let tid = i32(lid.x);
    let am = gboff[3 * bt] + m * p.sam;
    let bn = gboff[3 * bt + 1] + n * p.sbn;
    var acc = 0.0;
    for (var k = tid; k < p.K; k += GRB) { acc += ga[am + k * p.sak] * gb[bn + k * p.sbk]; }
    let total = group_sum(lid.x, acc, u32(GRB));
    if (tid == 0) {
        var v = p.alpha * total;
        if (p.has_bias != 0) { v += p.beta * gbias[m * p.sbm + n * p.sbn_]; }
        gc[gboff[3 * bt + 2] + m * p.scm + n] = activate(p.act, v, p.p0, p.p1);
    }
}
