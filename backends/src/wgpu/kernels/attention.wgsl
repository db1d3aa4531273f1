// Fused scaled dot-product attention (attention.cl): out = softmax(scale(q . k^T) + bias) . v
// per (batch, head), one work-group of WG invocations (at most 256) per query row. The row's
// scores live in workgroup memory (TK_MAX >= Tk floats), so the [Tq, Tk] matrix never exists.

override WG: u32 = 128u;
override TK_MAX: u32 = 256u;

var<workgroup> att_sc: array<f32, TK_MAX>;
var<workgroup> att_red: array<f32, 256>;

fn att_reduce(t: u32, v: f32, is_max: bool) -> f32 {
    att_red[t] = v;
    workgroupBarrier();
    for (var k = WG / 2u; k > 0u; k >>= 1u) {
        if (t < k) {
            if (is_max) { att_red[t] = fmax_(att_red[t], att_red[t + k]); } else { att_red[t] += att_red[t + k]; }
        }
        workgroupBarrier();
    }
    let r = att_red[0];
    workgroupBarrier();
    return r;
}

// q [BH, Tq, dk]; k element (bh, j, d) at bh*Tk*dk + j*skj + d*skd (transposed or not);
// v [BH, Tk, dv]; out [BH, Tq, dv]. bias (b, h, i, j) at b*sb0 + h*sb1 + i*sb2 + j*sb3 (zero
// strides broadcast). scale_mode 0: scores * scale, 1: scores / scale. Grid: (Tq, BH).
@group(0) @binding(0) var<storage, read_write> aq: array<f32>;
@group(0) @binding(1) var<storage, read_write> ak: array<f32>;
@group(0) @binding(2) var<storage, read_write> av: array<f32>;
@group(0) @binding(3) var<storage, read_write> abias: array<f32>;
@group(0) @binding(4) var<storage, read_write> aout: array<f32>;
struct AttentionP {
    heads: i32, tq: i32, tk: i32, dk: i32, dv: i32, skj: i32, skd: i32, scale_mode: i32, scale: f32,
    has_bias: i32, sb0: i32, sb1: i32, sb2: i32, sb3: i32,
}
@group(0) @binding(8) var<uniform> att_p: AttentionP;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn attention_f32(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = att_p;
    let i = i32(wid.x);
    let bh = i32(wid.y);
    let t = i32(lid.x);
    let step = i32(WG);
    let b = bh / p.heads;
    let h = bh - b * p.heads;
    let qr = (bh * p.tq + i) * p.dk;
    let kb = bh * p.tk * p.dk;
    let vb = bh * p.tk * p.dv;
    var m = -f32_inf();
    for (var j = t; j < p.tk; j += step) {
        var acc = 0.0;
        for (var d = 0; d < p.dk; d++) { acc += aq[qr + d] * ak[kb + j * p.skj + d * p.skd]; }
        var x = select(acc / p.scale, acc * p.scale, p.scale_mode == 0);
        if (p.has_bias != 0) { x += abias[b * p.sb0 + h * p.sb1 + i * p.sb2 + j * p.sb3]; }
        att_sc[j] = x;
        m = fmax_(m, x);
    }
    m = att_reduce(lid.x, m, true);
    var sum = 0.0;
    for (var j = t; j < p.tk; j += step) {
        let e = exp(att_sc[j] - m);
        att_sc[j] = e;
        sum += e;
    }
    sum = att_reduce(lid.x, sum, false);
    let inv = 1.0 / sum;
    for (var j = t; j < p.tk; j += step) { att_sc[j] *= inv; }
    workgroupBarrier();
    let orow = (bh * p.tq + i) * p.dv;
    for (var d = t; d < p.dv; d += step) {
        var acc = 0.0;
        for (var j = 0; j < p.tk; j++) { acc += att_sc[j] * av[vb + j * p.dv + d]; }
        aout[orow + d] = acc;
    }
}
