// Helpers every WGSL kernel file starts with: the counterparts of gpu/kernels/common.h.
//
// Conventions (as for the OpenCL sources): every element is a 32-bit word (f32, or i32 for every
// integer type and bool); offsets and sizes are in elements. Buffers bind at 0.. in the order of
// the kernel's OpenCL arguments, scalars are one uniform struct at binding 8. Globals of one
// binding slot may differ per entry point (f32 in one, i32 in another): each entry point sees
// only the ones it uses. WGSL has no pointers into buffers, so what OpenCL does with `base + off`
// pointers is an index offset here.

// The work-group shape, set per pipeline from the launch (see wgpu/shaders.rs).
override WG_X: u32 = 256u;
override WG_Y: u32 = 1u;
override WG_Z: u32 = 1u;

// WGSL has no infinity or NaN literals, and a constant expression may not produce them: read
// the bits through a variable so they are made at run time.
fn f32_inf() -> f32 {
    var b = 0x7f800000u;
    return bitcast<f32>(b);
}

fn f32_nan() -> f32 {
    var b = 0x7fc00000u;
    return bitcast<f32>(b);
}

// On the bits: drivers may fold `x != x` away.
fn is_nan(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

// Brings an i32 result back into the range of its ONNX type: 1 INT8, 2 UINT8, 3 BOOL.
fn narrow_int(v: i32, mode: i32) -> i32 {
    if (mode == 1) { return (v << 24u) >> 24u; }
    if (mode == 2) { return v & 255; }
    if (mode == 3) { return select(0, 1, v != 0); }
    return v;
}

// Float -> integer as the CPU's casts do: toward zero, saturating, NaN -> 0.
fn float_to_int_sat(x: f32, lo: f32, hi: f32) -> i32 {
    if (is_nan(x)) { return 0; }
    return i32(min(max(x, lo), hi));
}

// C's fmax/fmin: a NaN operand yields the other one (WGSL leaves max(NaN, x) to the driver).
fn fmax_(a: f32, b: f32) -> f32 {
    if (is_nan(a)) { return b; }
    if (is_nan(b)) { return a; }
    return max(a, b);
}

// tanh saturates to +-1 well before |x| = 15; some drivers compute it through exp and give NaN
// for large |x|.
fn tanh_(x: f32) -> f32 {
    if (x > 15.0) { return 1.0; }
    if (x < -15.0) { return -1.0; }
    return tanh(x);
}

// erfc for x >= 0.5 (Chebyshev-fitted rational exponent, fractional error < 1.2e-7).
fn erfc_tail(z: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.5 * z);
    let p = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807
        + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
    return t * exp(-z * z + p);
}

// erf near 0 by its Maclaurin series (the tail formula's 1 - erfc loses digits there);
// the first omitted term is below 2e-8 at |x| = 0.5.
fn erf_series(x: f32) -> f32 {
    let x2 = x * x;
    return 1.1283791671 * x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (1.0 / 10.0 + x2 * (-1.0 / 42.0 + x2 * (1.0 / 216.0 + x2 * (-1.0 / 1320.0))))));
}

// WGSL has no erf.
fn erf_(x: f32) -> f32 {
    let z = abs(x);
    if (z < 0.5) { return erf_series(x); }
    let r = 1.0 - erfc_tail(z);
    return select(r, -r, x < 0.0);
}

fn erfc_(x: f32) -> f32 {
    let z = abs(x);
    if (z < 0.5) { return 1.0 - erf_series(x); }
    let t = erfc_tail(z);
    return select(t, 2.0 - t, x < 0.0);
}

// C's pow: WGSL's pow is undefined for x < 0 and for x = 0 with y <= 0.
fn pow_(x: f32, y: f32) -> f32 {
    if (y == 0.0) { return 1.0; }
    if (is_nan(x) || is_nan(y)) { return f32_nan(); }
    let integral = floor(y) == y;
    if (x == 0.0) {
        if (y > 0.0) { return select(0.0, x, integral && abs(y % 2.0) == 1.0); }
        return select(f32_inf(), select(f32_inf(), -f32_inf(), x < 0.0 || bitcast<u32>(x) == 0x80000000u), integral && abs(y % 2.0) == 1.0);
    }
    if (x < 0.0) {
        if (!integral) { return f32_nan(); }
        let r = pow(-x, y);
        return select(r, -r, abs(y % 2.0) == 1.0);
    }
    return pow(x, y);
}

// C's log: Vulkan leaves log(x) undefined for x <= 0.
fn log_(x: f32) -> f32 {
    if (x > 0.0) { return log(x); }
    if (x == 0.0) { return -f32_inf(); }
    return f32_nan();
}

// ln(1 + x) without losing the digits of small x (WGSL has no log1p): log(u) * x / (u - 1)
// corrects the rounding of u = 1 + x.
fn log1p_(x: f32) -> f32 {
    let u = 1.0 + x;
    if (u == 1.0) { return x; }
    return log_(u) * x / (u - 1.0);
}

// sin(x) (cosine false) or cos(x) (cosine true). Vulkan bounds WGSL's own sin and cos only by
// an absolute error of 2^-11 and only on [-pi, pi]; the DDPM timestep embedding takes them of
// values in the hundreds. x = k pi/2 + r with |r| <= pi/4: pi/2 is split in three (Cody-Waite;
// the first two parts have 8 and 11 significant bits, so k times them is exact for |k| < 2^13,
// |x| < 12868: the reduction loses digits only beyond), then Taylor series in r, whose first
// omitted terms are below 2e-9 at pi/4. cos(x) = sin(x + pi/2): one quadrant further.
fn sin_cos_(x: f32, cosine: bool) -> f32 {
    if (is_nan(x) || abs(x) == f32_inf()) { return f32_nan(); }
    let k = round(x * 0.63661977236758134);
    let r = ((x - k * 1.5703125) - k * 4.837512969970703125e-4) - k * 7.5497901264043e-8;
    let r2 = r * r;
    let s = r + r * r2 * (-1.0 / 6.0 + r2 * (1.0 / 120.0 + r2 * (-1.0 / 5040.0 + r2 * (1.0 / 362880.0))));
    let c = 1.0 - 0.5 * r2 + r2 * r2 * (1.0 / 24.0 + r2 * (-1.0 / 720.0 + r2 * (1.0 / 40320.0 + r2 * (-1.0 / 3628800.0))));
    // k mod 4 (of its two's complement, so for negative k too), plus one for the cosine.
    let q = (i32(k) + select(0, 1, cosine)) & 3;
    switch (q) {
        case 0: { return s; }
        case 1: { return c; }
        case 2: { return -s; }
        default: { return -c; }
    }
}

fn clamp01(x: f32) -> f32 {
    return select(select(x, 1.0, x > 1.0), 0.0, x < 0.0);
}

// Activation codes shared by Unary and the fused epilogues of Conv/Gemm/MatMul:
// -1 none, 0 Relu, 1 LeakyRelu(p0), 2 Sigmoid, 3 HardSigmoid(p0, p1), 4 HardSwish, 5 Tanh,
// 6 Erf, 7 Gelu (erf), 8 Gelu (tanh), 9 Exp, 10 Sqrt, 11 Neg, 12 Abs, 13 Clip(p0, p1),
// 14 Sign, 15 Round (half to even), 16 Floor, 17 Ceil, 18 Reciprocal, 19 Log, 21 Softplus,
// 22 Sin, 23 Cos (20 is Not, on bool words: unary_i32).
// Comparisons are written so that NaN stays NaN, as the reference does.
fn activate(code: i32, x: f32, p0: f32, p1: f32) -> f32 {
    switch (code) {
        case 0: { return select(x, 0.0, x < 0.0); }
        case 1: { return select(x, p0 * x, x < 0.0); }
        case 2: { return 1.0 / (1.0 + exp(-x)); }
        case 3: { return clamp01(p0 * x + p1); }
        case 4: { return x * clamp01(x * (1.0 / 6.0) + 0.5); }
        case 5: { return tanh_(x); }
        case 6: { return erf_(x); }
        case 7: { return 0.5 * x * erfc_(x * -0.70710678118654752); }
        case 8: { return 0.5 * x * (1.0 + tanh_(0.79788456080286536 * (x + 0.044715 * x * x * x))); }
        case 9: { return exp(x); }
        case 10: { return sqrt(x); }
        case 11: { return -x; }
        case 12: { return abs(x); }
        case 13: {
            let y = select(x, p0, x < p0);
            return select(y, p1, y > p1);
        }
        case 14: { return select(select(x, -1.0, x < 0.0), 1.0, x > 0.0); }
        // WGSL's round takes halves to the even integer.
        case 15: { return round(x); }
        case 16: { return floor(x); }
        case 17: { return ceil(x); }
        case 18: { return 1.0 / x; }
        case 19: { return log_(x); }
        // max(x, 0) + ln(1 + e^-|x|), as the CPU computes it.
        case 21: { return select(log1p_(exp(x)), x + log1p_(exp(-x)), x > 0.0); }
        case 22: { return sin_cos_(x, false); }
        case 23: { return sin_cos_(x, true); }
        default: { return x; }
    }
}

// Scratch of group_sum: every module has it, a pipeline only where its entry point calls it.
var<workgroup> grp_sum: array<f32, 256>;

// Sum of v over the first n invocations of dimension 0 (n a power of two, at most 256, the
// group's size there) in a tree; every invocation gets the result. Uniform control flow only.
fn group_sum(t: u32, v: f32, n: u32) -> f32 {
    grp_sum[t] = v;
    workgroupBarrier();
    for (var k = n / 2u; k > 0u; k >>= 1u) {
        if (t < k) { grp_sum[t] += grp_sum[t + k]; }
        workgroupBarrier();
    }
    let r = grp_sum[0];
    workgroupBarrier();
    return r;
}
