// Reductions and normalisations (reduce.cl): ReduceSum/Mean/Max, GlobalAveragePool, Softmax,
// LayerNormalization, GroupNormalization, CumSum. Work-group reductions use WG invocations (a
// power of two, at most 256: the size of the scratch array).

override WG: u32 = 256u;

var<workgroup> red_s: array<f32, 256>;

// Tree reductions over the work-group; every invocation gets the result. Called from uniform
// control flow only (WGSL requires barriers there).
fn wg_sum(t: u32, v: f32) -> f32 {
    return group_sum(t, v, WG);
}

// NaN wins, as in numpy's maximum.reduce.
fn max_nan(a: f32, x: f32) -> f32 {
    return select(a, x, x > a || is_nan(x));
}

fn wg_max(t: u32, v: f32) -> f32 {
    red_s[t] = v;
    workgroupBarrier();
    for (var k = WG / 2u; k > 0u; k >>= 1u) {
        if (t < k) { red_s[t] = max_nan(red_s[t], red_s[t + k]); }
        workgroupBarrier();
    }
    let r = red_s[0];
    workgroupBarrier();
    return r;
}

// A reduction as kept dims x reduced dims. meta: kept dims [orank], their input strides
// [orank], reduced dims [rrank], their input strides [rrank]. kind: 0 sum, 1 mean, 2 max.
@group(0) @binding(0) var<storage, read_write> red_xf: array<f32>;
@group(0) @binding(0) var<storage, read_write> red_xi: array<i32>;
@group(0) @binding(1) var<storage, read_write> red_yf: array<f32>;
@group(0) @binding(1) var<storage, read_write> red_yi: array<i32>;
@group(0) @binding(2) var<storage, read_write> red_meta: array<i32>;
struct ReduceF32P { nout: i32, nred: i32, kind: i32, orank: i32, rrank: i32 }
@group(0) @binding(8) var<uniform> reduce_item_p: ReduceF32P;
@group(0) @binding(8) var<uniform> reduce_group_p: ReduceF32P;

// strided_offset over red_meta: dims at meta[dims..], strides at meta[strides..].
fn red_offset(i_: i32, rank: i32, dims: i32, strides: i32) -> i32 {
    var i = i_;
    var off = 0;
    for (var d = rank - 1; d >= 0; d--) {
        let n = red_meta[dims + d];
        let q = i / n;
        off += (i - q * n) * red_meta[strides + d];
        i = q;
    }
    return off;
}

fn reduce_one(base: i32, r0: i32, step: i32, p: ReduceF32P) -> f32 {
    let rd = 2 * p.orank;
    var acc = select(0.0, -f32_inf(), p.kind == 2);
    for (var r = r0; r < p.nred; r += step) {
        let v = red_xf[base + red_offset(r, p.rrank, rd, rd + p.rrank)];
        acc = select(acc + v, max_nan(acc, v), p.kind == 2);
    }
    return acc;
}

fn reduce_finish(acc: f32, kind: i32, nred: i32) -> f32 {
    if (kind == 1) {
        if (nred == 0) { return f32_nan(); }
        return acc / f32(nred);
    }
    return acc;
}

// One invocation per output: for short reductions.
@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn reduce_f32_item(@builtin(global_invocation_id) gid: vec3<u32>) {
    let p = reduce_item_p;
    let o = i32(gid.x);
    if (o >= p.nout) { return; }
    let base = red_offset(o, p.orank, 0, p.orank);
    red_yf[o] = reduce_finish(reduce_one(base, 0, 1, p), p.kind, p.nred);
}

// One work-group per output: for long reductions.
@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn reduce_f32_group(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = reduce_group_p;
    let o = i32(wid.x);
    let base = red_offset(o, p.orank, 0, p.orank);
    var acc = reduce_one(base, i32(lid.x), i32(WG), p);
    if (p.kind == 2) { acc = wg_max(lid.x, acc); } else { acc = wg_sum(lid.x, acc); }
    if (lid.x == 0u) { red_yf[o] = reduce_finish(acc, p.kind, p.nred); }
}

// Integers (and bool for max): sums wrap in 32 bits, mean truncates, max of nothing is INT_MIN.
struct ReduceI32P { nout: i32, nred: i32, kind: i32, narrow: i32, orank: i32, rrank: i32 }
@group(0) @binding(8) var<uniform> reduce_i32_p: ReduceI32P;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn reduce_i32_item(@builtin(global_invocation_id) gid: vec3<u32>) {
    let p = reduce_i32_p;
    let o = i32(gid.x);
    if (o >= p.nout) { return; }
    let base = red_offset(o, p.orank, 0, p.orank);
    let rd = 2 * p.orank;
    var sum = 0;
    var mx = select(i32(-2147483647 - 1), 0, p.narrow == 3);
    for (var r = 0; r < p.nred; r++) {
        let v = red_xi[base + red_offset(r, p.rrank, rd, rd + p.rrank)];
        sum += v;
        mx = max(mx, v);
    }
    var res = sum;
    if (p.kind == 2) { res = mx; } else if (p.kind == 1) { res = select(sum / p.nred, 0, p.nred == 0); }
    red_yi[o] = narrow_int(res, p.narrow);
}

// Softmax along contiguous rows of `len`, one work-group per row.
struct SoftmaxRowsP { len: i32 }
@group(0) @binding(8) var<uniform> softmax_rows_p: SoftmaxRowsP;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn softmax_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let len = softmax_rows_p.len;
    let base = i32(wid.x) * len;
    let t = i32(lid.x);
    let step = i32(WG);
    var m = -f32_inf();
    for (var i = t; i < len; i += step) { m = fmax_(m, red_xf[base + i]); }
    m = wg_max(lid.x, m);
    var sum = 0.0;
    for (var i = t; i < len; i += step) {
        let e = exp(red_xf[base + i] - m);
        red_yf[base + i] = e;
        sum += e;
    }
    sum = wg_sum(lid.x, sum);
    let inv = 1.0 / sum;
    // Each invocation rescales the elements it wrote itself, so no barrier is needed.
    for (var i = t; i < len; i += step) { red_yf[base + i] *= inv; }
}

// Softmax along a strided axis: one invocation per (outer, inner) column of [outer, len, inner].
struct ColsP { outer: i32, len: i32, inner: i32 }
@group(0) @binding(8) var<uniform> softmax_cols_p: ColsP;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn softmax_cols(@builtin(global_invocation_id) gid: vec3<u32>) {
    let p = softmax_cols_p;
    let c = i32(gid.x);
    if (c >= p.outer * p.inner) { return; }
    let o = c / p.inner;
    let base = o * p.len * p.inner + (c - o * p.inner);
    var m = -f32_inf();
    for (var k = 0; k < p.len; k++) { m = fmax_(m, red_xf[base + k * p.inner]); }
    var sum = 0.0;
    for (var k = 0; k < p.len; k++) {
        let e = exp(red_xf[base + k * p.inner] - m);
        red_yf[base + k * p.inner] = e;
        sum += e;
    }
    let inv = 1.0 / sum;
    for (var k = 0; k < p.len; k++) { red_yf[base + k * p.inner] *= inv; }
}

// Buffers of the normalisations: x, scale, bias, y (and LayerNorm's meta).
@group(0) @binding(0) var<storage, read_write> nx: array<f32>;
@group(0) @binding(1) var<storage, read_write> nscale: array<f32>;
@group(0) @binding(2) var<storage, read_write> nbias: array<f32>;
@group(0) @binding(3) var<storage, read_write> ny: array<f32>;
@group(0) @binding(4) var<storage, read_write> ln_meta: array<i32>;

// Mean and 1/sqrt(var + eps) of nx[base .. base + len), two passes, over the work-group.
fn wg_stats(t: u32, base: i32, len: i32, eps: f32) -> vec2<f32> {
    let step = i32(WG);
    let cnt = f32(max(len, 1));
    var acc = 0.0;
    for (var i = i32(t); i < len; i += step) { acc += nx[base + i]; }
    let m = wg_sum(t, acc) / cnt;
    acc = 0.0;
    for (var i = i32(t); i < len; i += step) {
        let d = nx[base + i] - m;
        acc += d * d;
    }
    let v = wg_sum(t, acc) / cnt;
    return vec2<f32>(m, 1.0 / sqrt(v + eps));
}

fn ln_offset(i_: i32, rank: i32, s: i32) -> i32 {
    var i = i_;
    var off = 0;
    for (var d = rank - 1; d >= 0; d--) {
        let n = ln_meta[d];
        let q = i / n;
        off += (i - q * n) * ln_meta[s + d];
        i = q;
    }
    return off;
}

// LayerNormalization over rows of `len`; scale/bias broadcast over the row through meta
// (dims [prank], scale strides [prank], bias strides [prank]); prank 0: both hold `len` values.
struct LayerNormP { len: i32, eps: f32, has_bias: i32, prank: i32 }
@group(0) @binding(8) var<uniform> layer_norm_p: LayerNormP;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn layer_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = layer_norm_p;
    let base = i32(wid.x) * p.len;
    let st = wg_stats(lid.x, base, p.len, p.eps);
    for (var i = i32(lid.x); i < p.len; i += i32(WG)) {
        var is_ = i;
        var ib = i;
        if (p.prank != 0) {
            is_ = ln_offset(i, p.prank, p.prank);
            ib = ln_offset(i, p.prank, 2 * p.prank);
        }
        var v = (nx[base + i] - st.x) * st.y * nscale[is_];
        if (p.has_bias != 0) { v += nbias[ib]; }
        ny[base + i] = v;
    }
}

// GroupNormalization over [N, groups, cpg * plane] blocks; scale/bias per channel
// (per_channel) or per group. shift_at > 0: y is [2 N, C] instead, the factor per image and
// channel at n C + ch and the offset at shift_at + n C + ch (NormScaleShift).
struct GroupNormP { groups: i32, cpg: i32, plane: i32, eps: f32, per_channel: i32, shift_at: i32 }
@group(0) @binding(8) var<uniform> group_norm_p: GroupNormP;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn group_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = group_norm_p;
    let blk = i32(wid.x);
    let len = p.cpg * p.plane;
    let base = blk * len;
    let st = wg_stats(lid.x, base, len, p.eps);
    let g = blk % p.groups;
    if (p.shift_at > 0) {
        let at = (blk / p.groups) * p.groups * p.cpg;
        for (var j = i32(lid.x); j < p.cpg; j += i32(WG)) {
            let ch = g * p.cpg + j;
            let k = select(g, ch, p.per_channel != 0);
            let a = st.y * nscale[k];
            ny[at + ch] = a;
            ny[p.shift_at + at + ch] = nbias[k] - st.x * a;
        }
        return;
    }
    for (var i = i32(lid.x); i < len; i += i32(WG)) {
        let ch = g * p.cpg + i / p.plane;
        let k = select(g, ch, p.per_channel != 0);
        let a = st.y * nscale[k];
        ny[base + i] = nx[base + i] * a + (nbias[k] - st.x * a);
    }
}

// CumSum along the middle axis of [outer, len, inner]; one invocation per column.
struct CumsumF32P { outer: i32, len: i32, inner: i32, exclusive: i32, reverse: i32 }
@group(0) @binding(8) var<uniform> cumsum_f32_p: CumsumF32P;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn cumsum_f32(@builtin(global_invocation_id) gid: vec3<u32>) {
    let p = cumsum_f32_p;
    let c = i32(gid.x);
    if (c >= p.outer * p.inner) { return; }
    let o = c / p.inner;
    let base = o * p.len * p.inner + (c - o * p.inner);
    var acc = 0.0;
    for (var s = 0; s < p.len; s++) {
        let k = select(s, p.len - 1 - s, p.reverse != 0);
        let v = red_xf[base + k * p.inner];
        if (p.exclusive != 0) {
            red_yf[base + k * p.inner] = acc;
            acc += v;
        } else {
            acc += v;
            red_yf[base + k * p.inner] = acc;
        }
    }
}

struct CumsumI32P { outer: i32, len: i32, inner: i32, exclusive: i32, reverse: i32, narrow: i32 }
@group(0) @binding(8) var<uniform> cumsum_i32_p: CumsumI32P;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn cumsum_i32(@builtin(global_invocation_id) gid: vec3<u32>) {
    let p = cumsum_i32_p;
    let c = i32(gid.x);
    if (c >= p.outer * p.inner) { return; }
    let o = c / p.inner;
    let base = o * p.len * p.inner + (c - o * p.inner);
    var acc = 0;
    for (var s = 0; s < p.len; s++) {
        let k = select(s, p.len - 1 - s, p.reverse != 0);
        let v = red_xi[base + k * p.inner];
        if (p.exclusive != 0) {
            red_yi[base + k * p.inner] = narrow_int(acc, p.narrow);
            acc += v;
        } else {
            acc += v;
            red_yi[base + k * p.inner] = narrow_int(acc, p.narrow);
        }
    }
}
