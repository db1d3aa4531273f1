// The depthwise sparse conv (sparse_conv_dw.cl).

// Depthwise: one invocation per (column, channel). Grid: (ceil(cap / 64), channels, N).
@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn sparse_conv_dw_f32(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let c = i32(gid.x);
    let ch = i32(wid.y);
    let n = i32(wid.z);
    if (c >= min(sc.cap, sparse_conv_columns(n))) { return; }
    let base = sc.data0 + n * sc.img_stride;
    let p = sparse_conv_position(base, c);
    if (p < 0 || (sc.masked != 0 && !mask_bit(base, p))) { return; }
    let y0 = (p / sc.ow) * sc.sh - sc.ph;
    let x0 = (p % sc.ow) * sc.sw - sc.pw;
    let xc = (n * sc.cin + ch) * sc.ih * sc.iw;
    let wc = ch * sc.kh * sc.kw;
    var acc = 0.0;
    for (var ky = 0; ky < sc.kh; ky++) {
        let iy = y0 + ky * sc.dh;
        if (iy < 0 || iy >= sc.ih) { continue; }
        for (var kx = 0; kx < sc.kw; kx++) {
            let ix = x0 + kx * sc.dw;
            if (ix < 0 || ix >= sc.iw) { continue; }
            acc += sw_[wc + ky * sc.kw + kx] * sx[xc + iy * sc.iw + ix];
        }
    }
    let at = (n * sc.cout + ch) * sc.oh * sc.ow + p;
    sy[at] = sparse_conv_epilogue(acc, ch, at);
}
