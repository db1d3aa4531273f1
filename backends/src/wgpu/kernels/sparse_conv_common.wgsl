// What every sparse conv twin (sparse_conv_gemm.wgsl, sparse_conv_dw.wgsl,
// sparse_conv_fill.wgsl) shares, as sparse_conv_common.h does for the OpenCL sources: the
// granularity, the one set of buffers and scalars every entry point takes, and where a
// column's output lies. See sparse_conv_common.h for the layout of `meta`.

override GH: i32 = 1;
override GW: i32 = 1;
override TILED: i32 = 1;

@group(0) @binding(0) var<storage, read_write> sx: array<f32>;
@group(0) @binding(1) var<storage, read_write> sw_: array<f32>;
@group(0) @binding(2) var<storage, read_write> sbias: array<f32>;
@group(0) @binding(3) var<storage, read_write> sres: array<f32>;
@group(0) @binding(4) var<storage, read_write> sy: array<f32>;
@group(0) @binding(5) var<storage, read_write> smeta: array<i32>;
@group(0) @binding(6) var<storage, read_write> spart: array<f32>;
@group(0) @binding(7) var<storage, read_write> sktab: array<i32>;

struct SparseConvP {
    cin: i32, cout: i32, ih: i32, iw: i32, oh: i32, ow: i32, kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32,
    dh: i32, dw: i32, cstride: i32, gi: i32, data0: i32, img_stride: i32, tiles_at: i32, cap: i32, masked: i32,
    has_bias: i32, has_res: i32, act: i32, p0: f32, p1: f32,
}
@group(0) @binding(8) var<uniform> sc: SparseConvP;

fn sparse_conv_columns(n: i32) -> i32 {
    if (TILED != 0) { return smeta[n * sc.cstride + sc.gi] * GH * GW; }
    return sc.oh * sc.ow;
}

// Output position of column j (y * ow + x), or -1 for a phantom.
fn sparse_conv_position(base: i32, j: i32) -> i32 {
    if (TILED == 0) { return j; }
    let gv = GH * GW;
    let t = j / gv;
    let r = j - t * gv;
    let o = smeta[base + sc.tiles_at + t];
    let y = o / sc.ow + r / GW;
    let x = o % sc.ow + r % GW;
    if (y < sc.oh && x < sc.ow) { return y * sc.ow + x; }
    return -1;
}

fn mask_bit(base: i32, p: i32) -> bool {
    return ((bitcast<u32>(smeta[base + (p >> 5u)]) >> u32(p & 31)) & 1u) != 0u;
}

fn sparse_conv_epilogue(v_: f32, co: i32, at: i32) -> f32 {
    var v = v_;
    if (sc.has_bias != 0) { v += sbias[co]; }
    if (sc.has_res != 0) { v += sres[at]; }
    return activate(sc.act, v, sc.p0, sc.p1);
}
