// MaxPool / AveragePool over NCDHW (pool.cl), one invocation per output. Averages divide by
// the taps inside the input (or inside input + pads with count_include_pad), counted per axis as
// the CPU backend does.

fn taps_inside(o: i32, s: i32, pb: i32, k: i32, d: i32, lo: i32, hi: i32) -> i32 {
    var c = 0;
    for (var j = 0; j < k; j++) {
        let x = o * s - pb + j * d;
        if (x >= lo && x < hi) { c++; }
    }
    return c;
}

@group(0) @binding(0) var<storage, read_write> px: array<f32>;
@group(0) @binding(1) var<storage, read_write> py: array<f32>;
// kind: 0 max, 1 average without pads, 2 average counting pads. pe*: end pads.
struct PoolP {
    total: i32, id: i32, ih: i32, iw: i32, od: i32, oh: i32, ow: i32, kd: i32, kh: i32, kw: i32,
    sd: i32, sh: i32, sw: i32, pd: i32, ph: i32, pw: i32, dd: i32, dh: i32, dw: i32, ped: i32, peh: i32, pew: i32,
    kind: i32,
}
@group(0) @binding(8) var<uniform> pool_p: PoolP;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn pool_f32(@builtin(global_invocation_id) gid: vec3<u32>) {
    let p = pool_p;
    let i = i32(gid.x);
    if (i >= p.total) { return; }
    let P = p.od * p.oh * p.ow;
    let ohw = p.oh * p.ow;
    let q0 = i % P;
    let plane = i / P;
    let oz = q0 / ohw;
    let q = q0 - oz * ohw;
    let oy = q / p.ow;
    let ox = q - oy * p.ow;
    let xp = plane * p.id * p.ih * p.iw;
    var acc = select(0.0, -f32_inf(), p.kind == 0);
    for (var kz = 0; kz < p.kd; kz++) {
        let iz = oz * p.sd - p.pd + kz * p.dd;
        if (iz < 0 || iz >= p.id) { continue; }
        for (var ky = 0; ky < p.kh; ky++) {
            let iy = oy * p.sh - p.ph + ky * p.dh;
            if (iy < 0 || iy >= p.ih) { continue; }
            for (var kx = 0; kx < p.kw; kx++) {
                let ix = ox * p.sw - p.pw + kx * p.dw;
                if (ix < 0 || ix >= p.iw) { continue; }
                let v = px[xp + (iz * p.ih + iy) * p.iw + ix];
                if (p.kind == 0) { acc = select(acc, v, v > acc); } else { acc += v; }
            }
        }
    }
    if (p.kind != 0) {
        let inc = p.kind == 2;
        let cz = taps_inside(oz, p.sd, p.pd, p.kd, p.dd, select(0, -p.pd, inc), select(p.id, p.id + p.ped, inc));
        let cy = taps_inside(oy, p.sh, p.ph, p.kh, p.dh, select(0, -p.ph, inc), select(p.ih, p.ih + p.peh, inc));
        let cx = taps_inside(ox, p.sw, p.pw, p.kw, p.dw, select(0, -p.pw, inc), select(p.iw, p.iw + p.pew, inc));
        acc /= f32(cz) * f32(cy) * f32(cx);
    }
    py[i] = acc;
}
