// Elementwise kernels (elementwise.cl): unary maps, broadcasting binary ops, comparisons,
// Where, Clip, Cast, fills. One invocation per output element, 1-D grid. Broadcasting: with
// `rank` > 0, `meta` holds the output dims, then one stride array per operand (0 along broadcast
// dims); `rank` 0 means every operand has the output's shape.

struct FillP { off: i32, n: i32, bits: i32 }
@group(0) @binding(0) var<storage, read_write> fill_y: array<i32>;
@group(0) @binding(8) var<uniform> fill_p: FillP;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn fill_words(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = i32(gid.x);
    if (i < fill_p.n) { fill_y[fill_p.off + i] = fill_p.bits; }
}

// Buffers of the one-input kernels (unary, clip, cast): x at 0, y at 1.
@group(0) @binding(0) var<storage, read_write> xf: array<f32>;
@group(0) @binding(0) var<storage, read_write> xi: array<i32>;
@group(0) @binding(1) var<storage, read_write> yf: array<f32>;
@group(0) @binding(1) var<storage, read_write> yi: array<i32>;

struct UnaryF32P { n: i32, code: i32, p0: f32, p1: f32 }
@group(0) @binding(8) var<uniform> unary_f32_p: UnaryF32P;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn unary_f32(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = i32(gid.x);
    let p = unary_f32_p;
    if (i < p.n) { yf[i] = activate(p.code, xf[i], p.p0, p.p1); }
}

// Relu (0), Neg (11), Abs (12), Sign (14) on integers, wrapping like two's complement; Not (20)
// on bool.
struct UnaryI32P { n: i32, code: i32, narrow: i32 }
@group(0) @binding(8) var<uniform> unary_i32_p: UnaryI32P;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn unary_i32(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = i32(gid.x);
    let p = unary_i32_p;
    if (i >= p.n) { return; }
    let v = xi[i];
    var r: i32;
    if (p.code == 0) { r = max(v, 0); }
    else if (p.code == 11) { r = 0 - v; }
    else if (p.code == 12) { r = select(v, 0 - v, v < 0); }
    else if (p.code == 14) { r = select(0, 1, v > 0) - select(0, 1, v < 0); }
    else { r = select(0, 1, v == 0); }
    yi[i] = narrow_int(r, p.narrow);
}

// Buffers of the two-operand kernels: a at 0, b at 1, y at 2, meta at 3.
@group(0) @binding(0) var<storage, read_write> af: array<f32>;
@group(0) @binding(0) var<storage, read_write> ai: array<i32>;
@group(0) @binding(1) var<storage, read_write> bf: array<f32>;
@group(0) @binding(1) var<storage, read_write> bi: array<i32>;
@group(0) @binding(2) var<storage, read_write> outf: array<f32>;
@group(0) @binding(2) var<storage, read_write> outi: array<i32>;
@group(0) @binding(3) var<storage, read_write> meta3: array<i32>;

// strided_offset of common.h over meta3: dims at meta3[0..rank), strides at meta3[s..s+rank).
fn offset3(i_: i32, rank: i32, s: i32) -> i32 {
    var i = i_;
    var off = 0;
    for (var d = rank - 1; d >= 0; d--) {
        let n = meta3[d];
        let q = i / n;
        off += (i - q * n) * meta3[s + d];
        i = q;
    }
    return off;
}

// Element offsets of operands a and b for output element i.
fn operands(i: i32, rank: i32) -> vec2<i32> {
    if (rank == 0) { return vec2<i32>(i, i); }
    return vec2<i32>(offset3(i, rank, rank), offset3(i, rank, 2 * rank));
}

// op: 0 Add, 1 Sub, 2 Mul, 3 Div, 4 Pow, 5 Pow with the exponent known to be 2 (x * x, exact),
// 6 Mod with the dividend's sign (C's fmod; WGSL's % on floats truncates the quotient too).
struct BinaryF32P { n: i32, op: i32, rank: i32 }
@group(0) @binding(8) var<uniform> binary_f32_p: BinaryF32P;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn binary_f32(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = i32(gid.x);
    let p = binary_f32_p;
    if (i >= p.n) { return; }
    let o = operands(i, p.rank);
    let u = af[o.x];
    let v = bf[o.y];
    var r: f32;
    switch (p.op) {
        case 0: { r = u + v; }
        case 1: { r = u - v; }
        case 2: { r = u * v; }
        case 3: { r = u / v; }
        case 4: { r = pow_(u, v); }
        case 6: { r = u % v; }
        // Min (7) and Max (8): a NaN operand gives NaN, as numpy's minimum and maximum do.
        case 7: { r = select(u, v, is_nan(v) || v < u); }
        case 8: { r = select(u, v, is_nan(v) || v > u); }
        default: { r = u * u; }
    }
    outf[i] = r;
}

// Integer arithmetic wraps (WGSL's i32 arithmetic does); division truncates, x / 0 = 0.
// op 5 is Mod with the divisor's sign (Python's %), 6 with the dividend's (WGSL's %); x mod 0 = 0.
struct BinaryI32P { n: i32, op: i32, narrow: i32, rank: i32 }
@group(0) @binding(8) var<uniform> binary_i32_p: BinaryI32P;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn binary_i32(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = i32(gid.x);
    let p = binary_i32_p;
    if (i >= p.n) { return; }
    let o = operands(i, p.rank);
    let u = ai[o.x];
    let v = bi[o.y];
    var r: i32;
    switch (p.op) {
        case 0: { r = u + v; }
        case 1: { r = u - v; }
        case 2: { r = u * v; }
        case 3: {
            if (v == 0) { r = 0; }
            else if (u == i32(-2147483647 - 1) && v == -1) { r = u; }
            else { r = u / v; }
        }
        case 5, 6: {
            if (v == 0 || v == -1) { r = 0; } else { r = u % v; }
            if (p.op == 5 && r != 0 && ((r < 0) != (v < 0))) { r += v; }
        }
        case 7: { r = min(u, v); }
        case 8: { r = max(u, v); }
        default: {
            // Pow with an integer exponent: exact repeated squaring for e >= 0 (wrapping), else
            // the float power truncated toward zero.
            if (v >= 0) {
                var base = bitcast<u32>(u);
                var acc = 1u;
                var e = bitcast<u32>(v);
                while (e != 0u) {
                    if ((e & 1u) != 0u) { acc *= base; }
                    base *= base;
                    e >>= 1u;
                }
                r = bitcast<i32>(acc);
            } else {
                r = float_to_int_sat(pow_(f32(u), f32(v)), -2147483648.0, 2147483520.0);
            }
        }
    }
    outi[i] = narrow_int(r, p.narrow);
}

// Pow with a float base and an integer exponent: the result is float.
struct PowF32I32P { n: i32, rank: i32 }
@group(0) @binding(8) var<uniform> pow_f32_i32_p: PowF32I32P;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn pow_f32_i32(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = i32(gid.x);
    let p = pow_f32_i32_p;
    if (i >= p.n) { return; }
    let o = operands(i, p.rank);
    outf[i] = pow_(af[o.x], f32(bi[o.y]));
}

// Pow with an integer base and a float exponent: the float power, truncated into the base's type.
struct PowI32F32P { n: i32, lo: f32, hi: f32, narrow: i32, rank: i32 }
@group(0) @binding(8) var<uniform> pow_i32_f32_p: PowI32F32P;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn pow_i32_f32(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = i32(gid.x);
    let p = pow_i32_f32_p;
    if (i >= p.n) { return; }
    let o = operands(i, p.rank);
    outi[i] = narrow_int(float_to_int_sat(pow_(f32(ai[o.x]), bf[o.y]), p.lo, p.hi), p.narrow);
}

// op: 0 Greater, 1 Less, 2 Equal, 4 GreaterOrEqual, 5 LessOrEqual; the result is bool (0/1).
struct CompareP { n: i32, op: i32, rank: i32 }
@group(0) @binding(8) var<uniform> compare_f32_p: CompareP;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn compare_f32(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = i32(gid.x);
    let p = compare_f32_p;
    if (i >= p.n) { return; }
    let o = operands(i, p.rank);
    let u = af[o.x];
    let v = bf[o.y];
    var r: bool;
    switch (p.op) {
        case 0: { r = u > v; }
        case 1: { r = u < v; }
        case 4: { r = u >= v; }
        case 5: { r = u <= v; }
        default: { r = u == v; }
    }
    outi[i] = select(0, 1, r);
}

// op: 0 Greater, 1 Less, 2 Equal, 3 And, 4 GreaterOrEqual, 5 LessOrEqual, 6 Or, 7 Xor.
@group(0) @binding(8) var<uniform> compare_i32_p: CompareP;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn compare_i32(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = i32(gid.x);
    let p = compare_i32_p;
    if (i >= p.n) { return; }
    let o = operands(i, p.rank);
    let u = ai[o.x];
    let v = bi[o.y];
    var r: bool;
    switch (p.op) {
        case 0: { r = u > v; }
        case 1: { r = u < v; }
        case 2: { r = u == v; }
        case 3: { r = u != 0 && v != 0; }
        case 4: { r = u >= v; }
        case 5: { r = u <= v; }
        case 6: { r = u != 0 || v != 0; }
        default: { r = (u != 0) != (v != 0); }
    }
    outi[i] = select(0, 1, r);
}

// Where(c, x, y) on 32-bit words: meta holds dims and three stride sets.
@group(0) @binding(0) var<storage, read_write> where_c: array<i32>;
@group(0) @binding(1) var<storage, read_write> where_x: array<i32>;
@group(0) @binding(2) var<storage, read_write> where_y: array<i32>;
@group(0) @binding(3) var<storage, read_write> where_out: array<i32>;
@group(0) @binding(4) var<storage, read_write> where_meta: array<i32>;
struct WhereP { n: i32, rank: i32 }
@group(0) @binding(8) var<uniform> where_p: WhereP;

fn where_offset(i_: i32, rank: i32, s: i32) -> i32 {
    var i = i_;
    var off = 0;
    for (var d = rank - 1; d >= 0; d--) {
        let n = where_meta[d];
        let q = i / n;
        off += (i - q * n) * where_meta[s + d];
        i = q;
    }
    return off;
}

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn where_words(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = i32(gid.x);
    let p = where_p;
    if (i >= p.n) { return; }
    var ic = i;
    var ix = i;
    var iy = i;
    if (p.rank > 0) {
        ic = where_offset(i, p.rank, p.rank);
        ix = where_offset(i, p.rank, 2 * p.rank);
        iy = where_offset(i, p.rank, 3 * p.rank);
    }
    where_out[i] = select(where_y[iy], where_x[ix], where_c[ic] != 0);
}

// Clip with optional bounds read from one-element buffers (bit 0: min given, bit 1: max given).
@group(0) @binding(2) var<storage, read_write> lof: array<f32>;
@group(0) @binding(2) var<storage, read_write> loi: array<i32>;
@group(0) @binding(3) var<storage, read_write> hif: array<f32>;
@group(0) @binding(3) var<storage, read_write> hii: array<i32>;
struct ClipP { n: i32, flags: i32 }
@group(0) @binding(8) var<uniform> clip_f32_p: ClipP;
@group(0) @binding(8) var<uniform> clip_i32_p: ClipP;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn clip_f32(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = i32(gid.x);
    let p = clip_f32_p;
    if (i >= p.n) { return; }
    var v = xf[i];
    if ((p.flags & 1) != 0 && v < lof[0]) { v = lof[0]; }
    if ((p.flags & 2) != 0 && v > hif[0]) { v = hif[0]; }
    yf[i] = v;
}

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn clip_i32(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = i32(gid.x);
    let p = clip_i32_p;
    if (i >= p.n) { return; }
    var v = xi[i];
    if ((p.flags & 1) != 0 && v < loi[0]) { v = loi[0]; }
    if ((p.flags & 2) != 0 && v > hii[0]) { v = hii[0]; }
    yi[i] = v;
}

// Casts. Float -> integer saturates into [lo, hi] then narrows; to bool is `x != 0` (NaN -> true).
struct CastFIP { n: i32, lo: f32, hi: f32, narrow: i32 }
@group(0) @binding(8) var<uniform> cast_f32_i32_p: CastFIP;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn cast_f32_i32(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = i32(gid.x);
    let p = cast_f32_i32_p;
    if (i >= p.n) { return; }
    let v = xf[i];
    if (p.narrow == 3) {
        yi[i] = select(1, 0, v == 0.0);
    } else {
        yi[i] = narrow_int(float_to_int_sat(v, p.lo, p.hi), p.narrow);
    }
}

struct CastIFP { n: i32 }
@group(0) @binding(8) var<uniform> cast_i32_f32_p: CastIFP;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn cast_i32_f32(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = i32(gid.x);
    if (i < cast_i32_f32_p.n) { yf[i] = f32(xi[i]); }
}

struct CastIIP { n: i32, narrow: i32 }
@group(0) @binding(8) var<uniform> cast_i32_i32_p: CastIIP;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn cast_i32_i32(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = i32(gid.x);
    let p = cast_i32_i32_p;
    if (i < p.n) { yi[i] = narrow_int(xi[i], p.narrow); }
}

// Inference BatchNormalization over [N, C, inner], folded per channel as the CPU does:
// a = scale / sqrt(var + eps), y = x * a + (bias - mean * a).
@group(0) @binding(0) var<storage, read_write> bn_x: array<f32>;
@group(0) @binding(1) var<storage, read_write> bn_scale: array<f32>;
@group(0) @binding(2) var<storage, read_write> bn_bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> bn_mean: array<f32>;
@group(0) @binding(4) var<storage, read_write> bn_var: array<f32>;
@group(0) @binding(5) var<storage, read_write> bn_y: array<f32>;
struct BatchNormP { n: i32, channels: i32, inner: i32, eps: f32 }
@group(0) @binding(8) var<uniform> bn_p: BatchNormP;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn batch_norm(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = i32(gid.x);
    let p = bn_p;
    if (i >= p.n) { return; }
    let c = (i / p.inner) % p.channels;
    let a = bn_scale[c] / sqrt(bn_var[c] + p.eps);
    bn_y[i] = bn_x[i] * a + (bn_bias[c] - bn_mean[c] * a);
}
