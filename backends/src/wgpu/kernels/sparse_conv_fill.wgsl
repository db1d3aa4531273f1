// The fills of inactive positions that need a kernel (sparse_conv_fill.cl).

// Residual fill: Y = act(res) where the mask bit is 0. Grid: (ceil(oh * ow / 64), cout, N).
@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn sparse_conv_fill_residual_f32(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let p = i32(gid.x);
    let m = i32(wid.y);
    let n = i32(wid.z);
    if (p >= sc.oh * sc.ow || mask_bit(sc.data0 + n * sc.img_stride, p)) { return; }
    let at = (n * sc.cout + m) * sc.oh * sc.ow + p;
    sy[at] = activate(sc.act, sres[at], sc.p0, sc.p1);
}

// Cached fill of an op without sparse kernels: Y = X where the mask bit is 1 (everywhere
// without `masked`). Grid: (ceil(oh * ow / 64), cout, N).
@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn sparse_conv_blend_cached_f32(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let p = i32(gid.x);
    let m = i32(wid.y);
    let n = i32(wid.z);
    if (p >= sc.oh * sc.ow || (sc.masked != 0 && !mask_bit(sc.data0 + n * sc.img_stride, p))) { return; }
    let at = (n * sc.cout + m) * sc.oh * sc.ow + p;
    sy[at] = sx[at];
}
