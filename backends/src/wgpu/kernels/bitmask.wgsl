// Mask -> packed words -> aligned DISTile counts and lists per granularity (bitmask.cl, which
// documents the layout of `meta`), one work-group per image. Grid: (N, 1, 1), local (BLOCK, 1, 1).

override BLOCK: u32 = 256u;

var<workgroup> bscan: array<i32, BLOCK>;

@group(0) @binding(0) var<storage, read_write> bmask: array<f32>;
@group(0) @binding(1) var<storage, read_write> bmeta: array<i32>;
@group(0) @binding(2) var<storage, read_write> bgrans: array<i32>;

struct BitmaskP { h: i32, w: i32, mask_stride: i32, n_gran: i32, data0: i32, img_stride: i32 }
@group(0) @binding(8) var<uniform> bp: BitmaskP;

const NO_BAD: i32 = 0x7fffffff;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn bitmask_tiles(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let tid = i32(lid.x);
    let blk = i32(BLOCK);
    let n = i32(wid.x);
    let m0 = n * bp.mask_stride;
    let cbase = n * (bp.n_gran + 1);
    let obase = bp.data0 + n * bp.img_stride;
    let P = bp.h * bp.w;
    let n_words = (P + 31) / 32;
    var bad = NO_BAD;
    for (var wi = tid; wi < n_words; wi += blk) {
        var word = 0u;
        for (var b = 0; b < 32; b++) {
            let i = wi * 32 + b;
            if (i >= P) { break; }
            let v = bmask[m0 + i];
            if (v == 1.0) {
                word |= 1u << u32(b);
            } else if (!(v == 0.0) && i < bad) {
                bad = i;
            }
        }
        bmeta[obase + wi] = bitcast<i32>(word);
    }
    bscan[tid] = bad;
    workgroupBarrier();
    for (var off = blk / 2; off > 0; off >>= 1u) {
        if (tid < off) { bscan[tid] = min(bscan[tid], bscan[tid + off]); }
        workgroupBarrier();
    }
    if (tid == 0) { bmeta[cbase + bp.n_gran] = select(bscan[0], -1, bscan[0] == NO_BAD); }
    workgroupBarrier();

    for (var g = 0; g < bp.n_gran; g++) {
        let gh = max(bgrans[3 * g], 1);
        let gw = max(bgrans[3 * g + 1], 1);
        let at = bgrans[3 * g + 2];
        let tiles_x = (bp.w + gw - 1) / gw;
        let n_tiles = ((bp.h + gh - 1) / gh) * tiles_x;
        var found = 0;
        for (var t0 = 0; t0 < n_tiles; t0 += blk) {
            let t = t0 + tid;
            var hit = 0;
            var origin = 0;
            if (t < n_tiles) {
                let y0 = (t / tiles_x) * gh;
                let x0 = (t % tiles_x) * gw;
                let y1 = min(y0 + gh, bp.h);
                let x1 = min(x0 + gw, bp.w);
                origin = y0 * bp.w + x0;
                for (var y = y0; y < y1 && hit == 0; y++) {
                    for (var x = x0; x < x1; x++) {
                        if (bmask[m0 + y * bp.w + x] == 1.0) {
                            hit = 1;
                            break;
                        }
                    }
                }
            }
            bscan[tid] = hit;
            workgroupBarrier();
            for (var off = 1; off < blk; off <<= 1u) {
                var v = 0;
                if (tid >= off) { v = bscan[tid - off]; }
                workgroupBarrier();
                bscan[tid] += v;
                workgroupBarrier();
            }
            if (hit != 0) { bmeta[obase + at + found + bscan[tid] - 1] = origin; }
            found += bscan[blk - 1];
            workgroupBarrier();
        }
        if (tid == 0) { bmeta[cbase + g] = found; }
    }
}
