// The implicit GEMM over DISTiles (sparse_conv_gemm.cl): columns are the positions of the
// listed tiles (or every position, TILED = 0), with split-K partials and their finish.

override TM: u32 = 64u;
override TN: u32 = 32u;
override TK: u32 = 16u;
override WM: u32 = 4u;
override WN: u32 = 2u;
override KS: i32 = 1;
override TX: u32 = TN / WN;
override TY: u32 = TM / WM;

var<workgroup> sAs: array<f32, TK * TM>;
var<workgroup> sBs: array<f32, TK * TN>;
var<workgroup> scy: array<i32, TN>;
var<workgroup> scx: array<i32, TN>;
var<workgroup> spos: array<i32, TN>;
var<workgroup> scols: i32;

// Grid: (ceil(cap / TN), ceil(cout / TM), N * KS), local (TX, TY).
@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn sparse_conv_gemm_f32(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let tm = i32(TM);
    let tn = i32(TN);
    let tk = i32(TK);
    let nt = i32(TX * TY);
    let tx = i32(lid.x);
    let ty = i32(lid.y);
    let tid = ty * i32(TX) + tx;
    let c0 = i32(wid.x) * tn;
    let m0 = i32(wid.y) * tm;
    let n = i32(wid.z) / KS;
    let ks = i32(wid.z) % KS;
    // Storage reads are not uniform to WGSL's analysis: the count goes through workgroup memory
    // so the early return (the same for the whole group) may precede barriers.
    if (tid == 0) { scols = sparse_conv_columns(n); }
    let cols = workgroupUniformLoad(&scols);
    if (c0 >= cols) { return; }
    let base = sc.data0 + n * sc.img_stride;
    for (var c = tid; c < tn; c += nt) {
        var p = -1;
        if (c0 + c < cols) { p = sparse_conv_position(base, c0 + c); }
        spos[c] = p;
        var oy = -(1 << 24u);
        var ox = 0;
        if (p >= 0) { oy = p / sc.ow; ox = p % sc.ow; }
        scy[c] = oy * sc.sh - sc.ph;
        scx[c] = ox * sc.sw - sc.pw;
    }
    let K = sc.cin * sc.kh * sc.kw;
    let ihw = sc.ih * sc.iw;
    let chunk = ((K + KS - 1) / KS + tk - 1) / tk * tk;
    let kb = ks * chunk;
    let ke = min(K, kb + chunk);
    let xn = n * sc.cin * ihw;
    var acc: array<f32, 16>;
    for (var e = 0; e < 16; e++) { acc[e] = 0.0; }
    workgroupBarrier();
    for (var k0 = kb; k0 < ke; k0 += tk) {
        for (var e = tid; e < tm * tk; e += nt) {
            let m = e % tm;
            let k = e / tm;
            let gm = m0 + m;
            let gk = k0 + k;
            var v = 0.0;
            if (gm < sc.cout && gk < ke) { v = sw_[gk * sc.cout + gm]; }
            sAs[k * tm + m] = v;
        }
        for (var e = tid; e < tn * tk; e += nt) {
            let c = e % tn;
            let k = e / tn;
            let gk = k0 + k;
            var v = 0.0;
            if (gk < ke) {
                let iy = scy[c] + sktab[3 * gk + 1];
                let ix = scx[c] + sktab[3 * gk + 2];
                if (iy >= 0 && iy < sc.ih && ix >= 0 && ix < sc.iw) { v = sx[xn + sktab[3 * gk] + scy[c] * sc.iw + scx[c]]; }
            }
            sBs[k * tn + c] = v;
        }
        workgroupBarrier();
        for (var kk = 0; kk < tk; kk++) {
            for (var i = 0; i < i32(WM); i++) {
                let a = sAs[kk * tm + ty + i * i32(TY)];
                for (var j = 0; j < i32(WN); j++) {
                    acc[i * i32(WN) + j] += a * sBs[kk * tn + tx + j * i32(TX)];
                }
            }
        }
        workgroupBarrier();
    }
    let P = sc.oh * sc.ow;
    for (var i = 0; i < i32(WM); i++) {
        let m = m0 + ty + i * i32(TY);
        if (m >= sc.cout) { continue; }
        for (var j = 0; j < i32(WN); j++) {
            let c = tx + j * i32(TX);
            let p = spos[c];
            if (p < 0) { continue; }
            if (KS > 1) {
                spart[((n * KS + ks) * sc.cout + m) * sc.cap + c0 + c] = acc[i * i32(WN) + j];
                continue;
            }
            if (sc.masked != 0 && !mask_bit(base, p)) { continue; }
            let at = (n * sc.cout + m) * P + p;
            sy[at] = sparse_conv_epilogue(acc[i * i32(WN) + j], m, at);
        }
    }
}

// Adds the KS partial sums of sparse_conv_gemm_f32, an invocation per output.
// Grid: (ceil(cap / 64), ceil(cout / CH), N), local (64, CH, 1) (sparse_conv_gemm.cl says why).
@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn sparse_conv_finish_f32(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
                    @builtin(local_invocation_id) lid: vec3<u32>) {
    let c = i32(gid.x);
    let m = i32(wid.y * WG_Y + lid.y);
    let n = i32(wid.z);
    if (m >= sc.cout || c >= min(sc.cap, sparse_conv_columns(n))) { return; }
    let base = sc.data0 + n * sc.img_stride;
    let p = sparse_conv_position(base, c);
    if (p < 0 || (sc.masked != 0 && !mask_bit(base, p))) { return; }
    var v = 0.0;
    for (var s = 0; s < KS; s++) { v += spart[((n * KS + s) * sc.cout + m) * sc.cap + c]; }
    let at = (n * sc.cout + m) * sc.oh * sc.ow + p;
    sy[at] = sparse_conv_epilogue(v, m, at);
}
