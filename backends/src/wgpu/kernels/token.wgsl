// Token sparsity on the device (token.cl, which documents the `meta` layout): compaction of a
// binary token mask into an active count and a token order per image, the token-sparse
// projection, the inactive keys' norms and the attention over active tokens. Work-groups past an
// image's count only write the zeros of inactive rows.

override BLOCK: u32 = 256u;
override TM: u32 = 32u;
override TN: u32 = 32u;
override TK: u32 = 16u;
override WM: u32 = 2u;
override WN: u32 = 2u;
override TX: u32 = TN / WN;
override TY: u32 = TM / WM;
override WG: u32 = 128u;
override TK_MAX: u32 = 256u;
// token.cl's EARLY_EXIT: 1, a work-group with nothing to compute returns after its zeros.
override EARLY_EXIT: u32 = 1u;
// token.cl's DENSE: 1, every row computed in token order (the PolyKernel's dense member).
override DENSE: u32 = 0u;

// ---- token_compact: grid (images, 1, 1), local (BLOCK, 1, 1) ----

var<workgroup> tc_scan: array<i32, BLOCK>;

@group(0) @binding(0) var<storage, read_write> tc_mask: array<f32>;
@group(0) @binding(1) var<storage, read_write> tc_meta: array<i32>;
struct CompactP { tokens: i32, mask_stride: i32, images: i32 }
@group(0) @binding(8) var<uniform> tc_p: CompactP;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn token_compact(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = tc_p;
    let tid = i32(lid.x);
    let blk = i32(BLOCK);
    let n = i32(wid.x);
    let m0 = n * p.mask_stride;
    let o0 = p.images + n * p.tokens;
    var found = 0;
    for (var t0 = 0; t0 < p.tokens; t0 += blk) {
        let t = t0 + tid;
        var on = 0;
        if (t < p.tokens) {
            if (tc_mask[m0 + t] == 1.0) { on = 1; }
        }
        tc_scan[tid] = on;
        workgroupBarrier();
        for (var off = 1; off < blk; off <<= 1u) {
            var v = 0;
            if (tid >= off) { v = tc_scan[tid - off]; }
            workgroupBarrier();
            tc_scan[tid] += v;
            workgroupBarrier();
        }
        if (t < p.tokens) {
            let before = found + tc_scan[tid] - on;
            if (on != 0) {
                tc_meta[o0 + before] = t;
            } else {
                tc_meta[o0 + p.tokens - 1 - (t - before)] = t;
            }
        }
        found += tc_scan[blk - 1];
        workgroupBarrier();
    }
    if (tid == 0) { tc_meta[n] = found; }
}

// Whether token t is among the `count` first (increasing) entries of the order at tg_meta[ob..].
fn tok_listed(ob: i32, count: i32, t: i32) -> i32 {
    var lo = 0;
    var hi = count;
    while (lo < hi) {
        let mid = (lo + hi) / 2;
        if (tg_meta[ob + mid] < t) { lo = mid + 1; } else { hi = mid; }
    }
    return i32(lo < count && tg_meta[ob + lo] == t);
}

// ---- token_gemm_f32: grid (ceil(N/TN), ceil(T/TM), images), local (TX, TY) ----

var<workgroup> tg_as: array<f32, TK * TM>;
var<workgroup> tg_bs: array<f32, TK * TN>;
var<workgroup> tg_rows: array<i32, TM>;
var<workgroup> tg_on: array<i32, TM>;
var<workgroup> tg_count: i32;

@group(0) @binding(0) var<storage, read_write> tg_x: array<f32>;
@group(0) @binding(1) var<storage, read_write> tg_w: array<f32>;
@group(0) @binding(2) var<storage, read_write> tg_y: array<f32>;
@group(0) @binding(3) var<storage, read_write> tg_meta: array<i32>;
@group(0) @binding(4) var<storage, read_write> tg_bias: array<f32>;
struct TokenGemmP { T: i32, N: i32, K: i32, images: i32, has_bias: i32, act: i32, p0: f32, p1: f32 }
@group(0) @binding(8) var<uniform> tg_p: TokenGemmP;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn token_gemm_f32(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = tg_p;
    let tm = i32(TM);
    let tn = i32(TN);
    let tk = i32(TK);
    let nt = i32(TX * TY);
    let tx = i32(lid.x);
    let ty = i32(lid.y);
    let tid = ty * i32(TX) + tx;
    let n0 = i32(wid.x) * tn;
    let m0 = i32(wid.y) * tm;
    let img = i32(wid.z);
    let ob = p.images + img * p.T;
    let xb = img * p.T * p.K;
    let yb = img * p.T * p.N;
    // Storage reads are not uniform to WGSL's analysis: the count goes through workgroup memory
    // so the early return (the same for the whole group) may precede barriers.
    if (tid == 0) { tg_count = tg_meta[img]; }
    let count = workgroupUniformLoad(&tg_count);
    let live = DENSE != 0u || m0 < count;
    let rows_in = select(count, p.T, DENSE != 0u);
    if (!live) {
        for (var e = tid; e < tm * tn; e += nt) {
            let r = m0 + e / tn;
            let c = n0 + e % tn;
            if (r < p.T && c < p.N) { tg_y[yb + tg_meta[ob + r] * p.N + c] = 0.0; }
        }
        if (EARLY_EXIT != 0u) { return; }
    }
    for (var e = tid; e < tm; e += nt) {
        var row = 0;
        var on = 0;
        if (DENSE != 0u) {
            if (m0 + e < p.T) {
                row = m0 + e;
                on = tok_listed(ob, count, row);
            }
        } else {
            if (m0 + e < p.T) { row = tg_meta[ob + m0 + e]; }
            on = i32(m0 + e < count);
        }
        tg_rows[e] = row;
        tg_on[e] = on;
    }
    workgroupBarrier();
    var acc: array<f32, 16>;
    for (var e = 0; e < 16; e++) { acc[e] = 0.0; }
    let kend = select(0, p.K, live);
    for (var k0 = 0; k0 < kend; k0 += tk) {
        for (var e = tid; e < tm * tk; e += nt) {
            let k = e % tk;
            let m = e / tk;
            let gk = k0 + k;
            var v = 0.0;
            if (m0 + m < rows_in && gk < p.K) { v = tg_x[xb + tg_rows[m] * p.K + gk]; }
            tg_as[k * tm + m] = v;
        }
        for (var e = tid; e < tn * tk; e += nt) {
            let n = e % tn;
            let k = e / tn;
            let gn = n0 + n;
            let gk = k0 + k;
            var v = 0.0;
            if (gn < p.N && gk < p.K) { v = tg_w[gk * p.N + gn]; }
            tg_bs[k * tn + n] = v;
        }
        workgroupBarrier();
        for (var kk = 0; kk < tk; kk++) {
            for (var i = 0; i < i32(WM); i++) {
                let a = tg_as[kk * tm + ty + i * i32(TY)];
                for (var j = 0; j < i32(WN); j++) {
                    acc[i * i32(WN) + j] += a * tg_bs[kk * tn + tx + j * i32(TX)];
                }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0; i < i32(WM) && live; i++) {
        let m = ty + i * i32(TY);
        if (m0 + m >= p.T) { continue; }
        let row_live = tg_on[m] != 0;
        for (var j = 0; j < i32(WN); j++) {
            let n = n0 + tx + j * i32(TX);
            if (n >= p.N) { continue; }
            var v = 0.0;
            if (row_live) {
                v = acc[i * i32(WN) + j];
                if (p.has_bias != 0) { v += tg_bias[n]; }
                v = activate(p.act, v, p.p0, p.p1);
            }
            tg_y[yb + tg_rows[m] * p.N + n] = v;
        }
    }
}

// ---- shared by the attention kernels ----

var<workgroup> ta_red: array<f32, 256>;

// max that keeps NaN (fmax_ drops it): a NaN key must not pass the proof.
fn tok_nanmax(a: f32, b: f32) -> f32 {
    if (is_nan(a) || is_nan(b)) { return f32_nan(); }
    return max(a, b);
}

fn tok_reduce(t: u32, v: f32, is_max: bool) -> f32 {
    ta_red[t] = v;
    workgroupBarrier();
    for (var k = WG / 2u; k > 0u; k >>= 1u) {
        if (t < k) {
            if (is_max) { ta_red[t] = tok_nanmax(ta_red[t], ta_red[t + k]); } else { ta_red[t] += ta_red[t + k]; }
        }
        workgroupBarrier();
    }
    let r = ta_red[0];
    workgroupBarrier();
    return r;
}

// ---- token_key_norms: grid (BH, 1, 1), local (WG, 1, 1) ----

@group(0) @binding(0) var<storage, read_write> tn_k: array<f32>;
@group(0) @binding(1) var<storage, read_write> tn_meta: array<i32>;
@group(0) @binding(2) var<storage, read_write> tn_kin: array<f32>;
struct KeyNormsP { heads: i32, T: i32, dk: i32, skj: i32, skd: i32, images: i32 }
@group(0) @binding(8) var<uniform> tn_p: KeyNormsP;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn token_key_norms(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = tn_p;
    let bh = i32(wid.x);
    let t = i32(lid.x);
    let b = bh / p.heads;
    let count = tn_meta[b];
    let ob = p.images + b * p.T;
    let kb = bh * p.T * p.dk;
    var w = -f32_inf();
    for (var jj = count + t; jj < p.T; jj += i32(WG)) {
        let j = tn_meta[ob + jj];
        var n2 = 0.0;
        for (var d = 0; d < p.dk; d++) {
            let x = tn_k[kb + j * p.skj + d * p.skd];
            n2 += x * x;
        }
        w = tok_nanmax(w, n2);
    }
    w = tok_reduce(lid.x, w, true);
    if (t == 0) {
        if (w == -f32_inf()) { tn_kin[bh] = w; } else { tn_kin[bh] = sqrt(w); }
    }
}

// ---- token_attention_f32: grid (T, BH), local (WG, 1, 1) ----

var<workgroup> ta_sc: array<f32, TK_MAX>;
var<workgroup> ta_keys: array<i32, TK_MAX>;
var<workgroup> ta_count: i32;
var<workgroup> ta_ok: i32;

@group(0) @binding(0) var<storage, read_write> ta_q: array<f32>;
@group(0) @binding(1) var<storage, read_write> ta_k: array<f32>;
@group(0) @binding(2) var<storage, read_write> ta_v: array<f32>;
@group(0) @binding(3) var<storage, read_write> ta_bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> ta_out: array<f32>;
@group(0) @binding(5) var<storage, read_write> ta_meta: array<i32>;
@group(0) @binding(6) var<storage, read_write> ta_kin: array<f32>;
struct TokenAttentionP {
    heads: i32, T: i32, dk: i32, dv: i32, skj: i32, skd: i32, scale_mode: i32, scale: f32, smag: f32, c: f32,
    keys_zero: i32, sb0: i32, sb1: i32, sb2: i32, sb3: i32, images: i32, kin_parts: i32,
}
@group(0) @binding(8) var<uniform> ta_p: TokenAttentionP;

// token.cl's tok_keys_vanish.
fn tok_keys_vanish(mx: f32, qn: f32, kin: f32, smag: f32, c: f32, dk: i32) -> bool {
    if (kin == -f32_inf()) { return true; }
    let slack = 1e-3 + 4.0 * f32(dk) * 1.1920929e-7;
    let halted = smag * qn * kin * (1.0 + slack) + 1e-3 - c * (1.0 - 1e-6);
    return mx - halted >= 110.0;
}

fn ta_scaled(acc: f32, p: TokenAttentionP) -> f32 {
    return select(acc / p.scale, acc * p.scale, p.scale_mode == 0);
}

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn token_attention_f32(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = ta_p;
    let r = i32(wid.x);
    let bh = i32(wid.y);
    let t = i32(lid.x);
    let step = i32(WG);
    let b = bh / p.heads;
    let h = bh - b * p.heads;
    let ob = p.images + b * p.T;
    let i = ta_meta[ob + r];
    let orow = (bh * p.T + i) * p.dv;
    if (t == 0) { ta_count = ta_meta[b]; }
    let count = workgroupUniformLoad(&ta_count);
    let live = r < count;
    if (!live) {
        for (var d = t; d < p.dv; d += step) { ta_out[orow + d] = 0.0; }
        if (EARLY_EXIT != 0u) { return; }
    }
    // Without the return, a dead work-group's loops below are empty.
    let na = select(0, count, live);
    let qr = (bh * p.T + i) * p.dk;
    let kb = bh * p.T * p.dk;
    let vb = bh * p.T * p.dv;
    var mx = -f32_inf();
    for (var jj = t; jj < na; jj += step) {
        let j = ta_meta[ob + jj];
        var acc = 0.0;
        for (var d = 0; d < p.dk; d++) { acc += ta_q[qr + d] * ta_k[kb + j * p.skj + d * p.skd]; }
        // The op adds (1 - 1) * c = 0 to active keys.
        let x = ta_scaled(acc, p) + 0.0;
        ta_sc[jj] = x;
        ta_keys[jj] = j;
        mx = fmax_(mx, x);
    }
    mx = tok_reduce(lid.x, mx, true);
    // |q| and the proof by one invocation, shared through workgroup memory (uniform to WGSL).
    if (t == 0) {
        var qq = 0.0;
        for (var d = 0; d < select(0, p.dk, live); d++) { qq += ta_q[qr + d] * ta_q[qr + d]; }
        var kin = 0.0;
        if (p.keys_zero == 0) {
            // token.cl's tok_kin (here one part per head: this twin's key norms take a head each).
            kin = -f32_inf();
            for (var s = 0; s < p.kin_parts; s++) { kin = tok_nanmax(kin, ta_kin[bh * p.kin_parts + s]); }
        }
        ta_ok = select(0, 1, !live || tok_keys_vanish(mx, sqrt(qq), kin, p.smag, p.c, p.dk));
    }
    let ok = workgroupUniformLoad(&ta_ok) != 0;
    // A row the proof fails for takes every key, with the op's bias: attention_f32's row.
    var mx_all = -f32_inf();
    if (!ok) {
        for (var j = t; j < p.T; j += step) {
            var acc = 0.0;
            for (var d = 0; d < p.dk; d++) { acc += ta_q[qr + d] * ta_k[kb + j * p.skj + d * p.skd]; }
            let x = ta_scaled(acc, p) + ta_bias[b * p.sb0 + h * p.sb1 + i * p.sb2 + j * p.sb3];
            ta_sc[j] = x;
            ta_keys[j] = j;
            mx_all = fmax_(mx_all, x);
        }
    }
    if (EARLY_EXIT != 0u) {
        if (!ok) { mx = tok_reduce(lid.x, mx_all, true); }
    } else {
        mx_all = tok_reduce(lid.x, mx_all, true);
        if (!ok) { mx = mx_all; }
    }
    let n = select(p.T, na, ok);
    var sum = 0.0;
    for (var jj = t; jj < n; jj += step) {
        let e = exp(ta_sc[jj] - mx);
        ta_sc[jj] = e;
        sum += e;
    }
    sum = tok_reduce(lid.x, sum, false);
    let inv = 1.0 / sum;
    for (var jj = t; jj < n; jj += step) { ta_sc[jj] *= inv; }
    workgroupBarrier();
    for (var d = t; d < select(0, p.dv, live); d += step) {
        var acc = 0.0;
        for (var jj = 0; jj < n; jj++) { acc += ta_sc[jj] * ta_v[vb + ta_keys[jj] * p.dv + d]; }
        ta_out[orow + d] = acc;
    }
}
