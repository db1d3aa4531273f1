// Convolutions over NCDHW (conv.cl): Conv as an implicit GEMM (output channels x output
// positions x (input channels of the group x taps)), tiled like matmul.wgsl, with bias, a
// residual input and an activation fused into the store; a direct kernel for depthwise and other
// thin convolutions; ConvTranspose as a GEMM per output phase, or as a gather.
//
// Geometry arguments, in this order everywhere: channels in and out per group, groups, input
// extents (d, h, w), output extents (d, h, w), kernel (d, h, w), strides, begin pads, dilations.

override TM: u32 = 64u;
override TN: u32 = 64u;
override TK: u32 = 16u;
override WM: u32 = 4u;
override WN: u32 = 4u;
override TX: u32 = TN / WN;
override TY: u32 = TM / WM;

var<workgroup> As: array<f32, TK * TM>;
var<workgroup> Bs: array<f32, TK * TN>;

@group(0) @binding(0) var<storage, read_write> cx: array<f32>;
@group(0) @binding(1) var<storage, read_write> cw: array<f32>;
@group(0) @binding(2) var<storage, read_write> cbias: array<f32>;
// Conv: the residual at 3 and Y at 4; ConvTranspose (no residual): Y at 3.
@group(0) @binding(3) var<storage, read_write> cres: array<f32>;
@group(0) @binding(4) var<storage, read_write> cy: array<f32>;
@group(0) @binding(3) var<storage, read_write> cty: array<f32>;

// The geometry fields (flat: a nested struct would be padded to 16 bytes in a uniform), then
// each kernel's own.
struct ConvP {
    cin_g: i32, cout_g: i32, groups: i32, id: i32, ih: i32, iw: i32, od: i32, oh: i32, ow: i32,
    kd: i32, kh: i32, kw: i32, sd: i32, sh: i32, sw: i32, pd: i32, ph: i32, pw: i32, dd: i32, dh: i32, dw: i32,
    has_bias: i32, has_res: i32, act: i32, p0: f32, p1: f32, total: i32,
}
@group(0) @binding(8) var<uniform> conv_gemm_p: ConvP;
@group(0) @binding(8) var<uniform> conv_direct_p: ConvP;
@group(0) @binding(8) var<uniform> conv_reduce_p: ConvP;

struct ConvTP {
    cin_g: i32, cout_g: i32, groups: i32, id: i32, ih: i32, iw: i32, od: i32, oh: i32, ow: i32,
    kd: i32, kh: i32, kw: i32, sd: i32, sh: i32, sw: i32, pd: i32, ph: i32, pw: i32, dd: i32, dh: i32, dw: i32,
    has_bias: i32, total: i32,
}
@group(0) @binding(8) var<uniform> conv_t_p: ConvTP;

struct ConvTGP {
    cin_g: i32, cout_g: i32, groups: i32, id: i32, ih: i32, iw: i32, od: i32, oh: i32, ow: i32,
    kd: i32, kh: i32, kw: i32, sd: i32, sh: i32, sw: i32, pd: i32, ph: i32, pw: i32, dd: i32, dh: i32, dw: i32,
    has_bias: i32,
}
@group(0) @binding(8) var<uniform> conv_tg_p: ConvTGP;

fn conv_epilogue(v_: f32, co: i32, at: i32, has_bias: i32, has_res: i32, act: i32, p0: f32, p1: f32) -> f32 {
    var v = v_;
    if (has_bias != 0) { v += cbias[co]; }
    if (has_res != 0) { v += cres[at]; }
    return activate(act, v, p0, p1);
}

// Grid: (ceil(P / TN), ceil(cout_g / TM), N * groups), local (TX, TY); P = od * oh * ow.
// conv_gemm_p.total is unused (the OpenCL kernel has no such argument; it is padding here).
@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn conv_gemm_f32(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = conv_gemm_p;
    let tm = i32(TM);
    let tn = i32(TN);
    let tk = i32(TK);
    let nt = i32(TX * TY);
    let tx = i32(lid.x);
    let ty = i32(lid.y);
    let tid = ty * i32(TX) + tx;
    let q0 = i32(wid.x) * tn;
    let m0 = i32(wid.y) * tm;
    let ng = i32(wid.z);
    let g = ng % p.groups;
    let n = ng / p.groups;
    let kvol = p.kd * p.kh * p.kw;
    let khw = p.kh * p.kw;
    let K = p.cin_g * kvol;
    let P = p.od * p.oh * p.ow;
    let ohw = p.oh * p.ow;
    let ivol = p.id * p.ih * p.iw;
    let wg = g * p.cout_g * K;
    let xg = (n * p.groups + g) * p.cin_g * ivol;
    var acc: array<f32, 16>;
    for (var e = 0; e < 16; e++) { acc[e] = 0.0; }
    for (var k0 = 0; k0 < K; k0 += tk) {
        for (var e = tid; e < tm * tk; e += nt) {
            let k = e % tk;
            let m = e / tk;
            let gm = m0 + m;
            let gk = k0 + k;
            var v = 0.0;
            if (gm < p.cout_g && gk < K) { v = cw[wg + gm * K + gk]; }
            As[k * tm + m] = v;
        }
        for (var e = tid; e < tn * tk; e += nt) {
            let pp = e % tn;
            let k = e / tn;
            let gp = q0 + pp;
            let gk = k0 + k;
            var v = 0.0;
            if (gp < P && gk < K) {
                let ci = gk / kvol;
                var r = gk - ci * kvol;
                let kz = r / khw;
                r -= kz * khw;
                let ky = r / p.kw;
                let kx = r - ky * p.kw;
                let oz = gp / ohw;
                let q = gp - oz * ohw;
                let oy = q / p.ow;
                let ox = q - oy * p.ow;
                let iz = oz * p.sd - p.pd + kz * p.dd;
                let iy = oy * p.sh - p.ph + ky * p.dh;
                let ix = ox * p.sw - p.pw + kx * p.dw;
                if (iz >= 0 && iz < p.id && iy >= 0 && iy < p.ih && ix >= 0 && ix < p.iw) {
                    v = cx[xg + ci * ivol + (iz * p.ih + iy) * p.iw + ix];
                }
            }
            Bs[k * tn + pp] = v;
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
    for (var i = 0; i < i32(WM); i++) {
        let m = m0 + ty + i * i32(TY);
        if (m >= p.cout_g) { continue; }
        let co = g * p.cout_g + m;
        let row = (n * p.groups * p.cout_g + co) * P;
        for (var j = 0; j < i32(WN); j++) {
            let q = q0 + tx + j * i32(TX);
            if (q >= P) { continue; }
            cy[row + q] = conv_epilogue(acc[i * i32(WN) + j], co, row + q, p.has_bias, p.has_res, p.act, p.p0, p.p1);
        }
    }
}

// One invocation per output element; for convolutions whose GEMM is too thin to tile (depthwise).
@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn conv_direct_f32(@builtin(global_invocation_id) gid: vec3<u32>) {
    let p = conv_direct_p;
    let i = i32(gid.x);
    if (i >= p.total) { return; }
    let P = p.od * p.oh * p.ow;
    let ohw = p.oh * p.ow;
    let q0 = i % P;
    let nc = i / P;
    let cout = p.groups * p.cout_g;
    let co = nc % cout;
    let n = nc / cout;
    let g = co / p.cout_g;
    let oz = q0 / ohw;
    let q = q0 - oz * ohw;
    let oy = q / p.ow;
    let ox = q - oy * p.ow;
    let ivol = p.id * p.ih * p.iw;
    let xg = (n * p.groups + g) * p.cin_g * ivol;
    let wc = co * p.cin_g * p.kd * p.kh * p.kw;
    var acc = 0.0;
    for (var ci = 0; ci < p.cin_g; ci++) {
        for (var kz = 0; kz < p.kd; kz++) {
            let iz = oz * p.sd - p.pd + kz * p.dd;
            if (iz < 0 || iz >= p.id) { continue; }
            for (var ky = 0; ky < p.kh; ky++) {
                let iy = oy * p.sh - p.ph + ky * p.dh;
                if (iy < 0 || iy >= p.ih) { continue; }
                for (var kx = 0; kx < p.kw; kx++) {
                    let ix = ox * p.sw - p.pw + kx * p.dw;
                    if (ix < 0 || ix >= p.iw) { continue; }
                    acc += cw[wc + ((ci * p.kd + kz) * p.kh + ky) * p.kw + kx] * cx[xg + ci * ivol + (iz * p.ih + iy) * p.iw + ix];
                }
            }
        }
    }
    cy[i] = conv_epilogue(acc, co, i, p.has_bias, p.has_res, p.act, p.p0, p.p1);
}

// One work-group of RBLOCK invocations per output element, summing the reduction in a tree (see
// conv.cl). Grid: (min(total, 65535), ceil(total / 65535)), local (RBLOCK, 1, 1).
const RBLOCK: i32 = 128;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn conv_reduce_f32(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = conv_reduce_p;
    let i = i32(wid.x + wid.y * nwg.x);
    let tid = i32(lid.x);
    // Uniform across the work-group (it depends on the group only), so the barriers below are.
    if (i >= p.total) { return; }
    let P = p.od * p.oh * p.ow;
    let ohw = p.oh * p.ow;
    let q0 = i % P;
    let nc = i / P;
    let cout = p.groups * p.cout_g;
    let co = nc % cout;
    let n = nc / cout;
    let g = co / p.cout_g;
    let oz = q0 / ohw;
    let q = q0 - oz * ohw;
    let oy = q / p.ow;
    let ox = q - oy * p.ow;
    let ivol = p.id * p.ih * p.iw;
    let taps = p.kd * p.kh * p.kw;
    let khw = p.kh * p.kw;
    let xg = (n * p.groups + g) * p.cin_g * ivol;
    let wc = co * p.cin_g * taps;
    var acc = 0.0;
    for (var r = tid; r < p.cin_g * taps; r += RBLOCK) {
        let ci = r / taps;
        let t = r - ci * taps;
        let kz = t / khw;
        let t2 = t - kz * khw;
        let ky = t2 / p.kw;
        let kx = t2 - ky * p.kw;
        let iz = oz * p.sd - p.pd + kz * p.dd;
        let iy = oy * p.sh - p.ph + ky * p.dh;
        let ix = ox * p.sw - p.pw + kx * p.dw;
        if (iz >= 0 && iz < p.id && iy >= 0 && iy < p.ih && ix >= 0 && ix < p.iw) {
            acc += cw[wc + r] * cx[xg + ci * ivol + (iz * p.ih + iy) * p.iw + ix];
        }
    }
    let total = group_sum(lid.x, acc, u32(RBLOCK));
    if (tid == 0) { cy[i] = conv_epilogue(total, co, i, p.has_bias, p.has_res, p.act, p.p0, p.p1); }
}

// ConvTranspose as a gather: output (n, co, z, y, x) sums every (ci, tap) whose scattered
// position lands on it. W is [Cin, cout_g, kd, kh, kw]; cin_g/cout_g are per group.
@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn conv_transpose_f32(@builtin(global_invocation_id) gid: vec3<u32>) {
    let p = conv_t_p;
    let i = i32(gid.x);
    if (i >= p.total) { return; }
    let P = p.od * p.oh * p.ow;
    let ohw = p.oh * p.ow;
    let q0 = i % P;
    let nc = i / P;
    let cout = p.groups * p.cout_g;
    let co = nc % cout;
    let n = nc / cout;
    let g = co / p.cout_g;
    let cg = co - g * p.cout_g;
    let oz = q0 / ohw;
    let q = q0 - oz * ohw;
    let oy = q / p.ow;
    let ox = q - oy * p.ow;
    let ivol = p.id * p.ih * p.iw;
    let kvol = p.kd * p.kh * p.kw;
    var acc = 0.0;
    for (var kz = 0; kz < p.kd; kz++) {
        let tz = oz + p.pd - kz * p.dd;
        if (tz < 0 || tz % p.sd != 0 || tz / p.sd >= p.id) { continue; }
        let iz = tz / p.sd;
        for (var ky = 0; ky < p.kh; ky++) {
            let ty = oy + p.ph - ky * p.dh;
            if (ty < 0 || ty % p.sh != 0 || ty / p.sh >= p.ih) { continue; }
            let iy = ty / p.sh;
            for (var kx = 0; kx < p.kw; kx++) {
                let tx = ox + p.pw - kx * p.dw;
                if (tx < 0 || tx % p.sw != 0 || tx / p.sw >= p.iw) { continue; }
                let ix = tx / p.sw;
                let tap = (kz * p.kh + ky) * p.kw + kx;
                for (var ci = 0; ci < p.cin_g; ci++) {
                    let c = g * p.cin_g + ci;
                    acc += cx[(n * p.groups * p.cin_g + c) * ivol + (iz * p.ih + iy) * p.iw + ix] * cw[(c * p.cout_g + cg) * kvol + tap];
                }
            }
        }
    }
    var v = acc;
    if (p.has_bias != 0) { v += cbias[co]; }
    cty[i] = v;
}

// ConvTranspose with unit dilations as an implicit GEMM per output phase (conv.cl's
// convt_gemm_f32, which says why): outputs of one residue of (o + pad) mod stride per dimension
// take the same taps; per tap, each invocation finds its columns' inputs once. Up to 4 loads of
// B per invocation and stage (TN x TK over the tiles' 256 invocations).
// Grid: (ceil(Pmax / TN), ceil(cout_g / TM), N * groups * sd * sh * sw), local (TX, TY).
struct ConvtDim { o0: i32, cnt: i32, taps: i32, base: i32 }

fn convt_dim(r: i32, s: i32, pad: i32, out: i32, ker: i32) -> ConvtDim {
    var d: ConvtDim;
    d.o0 = ((r - pad) % s + s) % s;
    d.cnt = 0;
    if (d.o0 < out) { d.cnt = (out - d.o0 + s - 1) / s; }
    d.taps = 0;
    if (r < ker) { d.taps = (ker - r + s - 1) / s; }
    d.base = (d.o0 + pad - r) / s;
    return d;
}

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn convt_gemm_f32(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = conv_tg_p;
    let tm = i32(TM);
    let tn = i32(TN);
    let tk = i32(TK);
    let wm = i32(WM);
    let wn = i32(WN);
    let nt = i32(TX * TY);
    let tx = i32(lid.x);
    let ty = i32(lid.y);
    let tid = ty * i32(TX) + tx;
    let j0 = i32(wid.x) * tn;
    let m0 = i32(wid.y) * tm;
    let phases = p.sd * p.sh * p.sw;
    let z = i32(wid.z);
    let phase = z % phases;
    let ng = z / phases;
    let g = ng % p.groups;
    let n = ng / p.groups;
    let rd = phase / (p.sh * p.sw);
    let rh = (phase / p.sw) % p.sh;
    let rw = phase % p.sw;
    let dd = convt_dim(rd, p.sd, p.pd, p.od, p.kd);
    let dh = convt_dim(rh, p.sh, p.ph, p.oh, p.kh);
    let dw = convt_dim(rw, p.sw, p.pw, p.ow, p.kw);
    let P = dd.cnt * dh.cnt * dw.cnt;
    let chw = dh.cnt * dw.cnt;
    let thw = dh.taps * dw.taps;
    let kvol = p.kd * p.kh * p.kw;
    let ivol = p.id * p.ih * p.iw;
    var ntaps = 0;
    if (j0 < P) { ntaps = dd.taps * thw; }
    let xg = (n * p.groups + g) * p.cin_g * ivol;
    let wg = g * p.cin_g * p.cout_g * kvol;
    let bl = (tn * tk + nt - 1) / nt;
    var cd: array<i32, 4>;
    var chh: array<i32, 4>;
    var cww: array<i32, 4>;
    for (var l = 0; l < bl; l++) {
        let e = tid + l * nt;
        let gj = j0 + e % tn;
        cd[l] = -1;
        chh[l] = 0;
        cww[l] = 0;
        if (e < tn * tk && gj < P) {
            let q = gj % chw;
            cd[l] = gj / chw;
            chh[l] = q / dw.cnt;
            cww[l] = q % dw.cnt;
        }
    }
    var acc: array<f32, 16>;
    for (var e = 0; e < 16; e++) { acc[e] = 0.0; }
    for (var u = 0; u < ntaps; u++) {
        let ud = u / thw;
        let uh = (u / dw.taps) % dh.taps;
        let uw = u % dw.taps;
        let tap = ((rd + p.sd * ud) * p.kh + rh + p.sh * uh) * p.kw + rw + p.sw * uw;
        var boff: array<i32, 4>;
        for (var l = 0; l < bl; l++) {
            let iz = dd.base + cd[l] - ud;
            let iy = dh.base + chh[l] - uh;
            let ix = dw.base + cww[l] - uw;
            boff[l] = -1;
            if (cd[l] >= 0 && iz >= 0 && iz < p.id && iy >= 0 && iy < p.ih && ix >= 0 && ix < p.iw) {
                boff[l] = (iz * p.ih + iy) * p.iw + ix;
            }
        }
        for (var c0 = 0; c0 < p.cin_g; c0 += tk) {
            for (var e = tid; e < tm * tk; e += nt) {
                let gm = m0 + e % tm;
                let ci = c0 + e / tm;
                var v = 0.0;
                if (gm < p.cout_g && ci < p.cin_g) { v = cw[wg + (ci * p.cout_g + gm) * kvol + tap]; }
                As[e] = v;
            }
            for (var l = 0; l < bl; l++) {
                let e = tid + l * nt;
                if (e < tn * tk) {
                    let ci = c0 + e / tn;
                    var v = 0.0;
                    if (boff[l] >= 0 && ci < p.cin_g) { v = cx[xg + ci * ivol + boff[l]]; }
                    Bs[e] = v;
                }
            }
            workgroupBarrier();
            for (var kk = 0; kk < tk; kk++) {
                for (var i = 0; i < wm; i++) {
                    let a = As[kk * tm + ty * wm + i];
                    for (var j = 0; j < wn; j++) {
                        acc[i * wn + j] += a * Bs[kk * tn + tx * wn + j];
                    }
                }
            }
            workgroupBarrier();
        }
    }
    for (var i = 0; i < wm; i++) {
        let m = m0 + ty * wm + i;
        if (m >= p.cout_g) { continue; }
        let co = g * p.cout_g + m;
        let yc = (n * p.groups * p.cout_g + co) * p.od * p.oh * p.ow;
        var b = 0.0;
        if (p.has_bias != 0) { b = cbias[co]; }
        for (var j = 0; j < wn; j++) {
            let gj = j0 + tx * wn + j;
            if (gj >= P) { continue; }
            let jd = gj / chw;
            let q = gj - jd * chw;
            let jh = q / dw.cnt;
            let jw = q - jh * dw.cnt;
            let oz = dd.o0 + p.sd * jd;
            let oy = dh.o0 + p.sh * jh;
            let ox = dw.o0 + p.sw * jw;
            cty[yc + (oz * p.oh + oy) * p.ow + ox] = acc[i * wn + j] + b;
        }
    }
}
