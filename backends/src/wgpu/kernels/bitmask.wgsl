// Mask -> packed words -> aligned DISTile counts and lists per granularity (bitmask.cl documents
// the layout of `meta` and why the passes are shaped this way), one work-group per image and
// granularity. Grid: (N, G, 1), local (BLOCK, 1, 1); BLOCK a power of two, at least 32; the G
// groups of an image split its granularities, each packing the image's words itself.

override BLOCK: u32 = 256u;

const PER: i32 = 4;
const TPT: i32 = 4;

var<workgroup> bscan: array<i32, BLOCK>;

@group(0) @binding(0) var<storage, read_write> bmask: array<f32>;
@group(0) @binding(1) var<storage, read_write> bmeta: array<i32>;
@group(0) @binding(2) var<storage, read_write> bgrans: array<i32>;

struct BitmaskP { h: i32, w: i32, mask_stride: i32, n_gran: i32, data0: i32, img_stride: i32 }
@group(0) @binding(8) var<uniform> bp: BitmaskP;

const NO_BAD: i32 = 0x7fffffff;

// Whether any bit of positions lo..hi-1 (lo < hi) is set in the words at `base`.
fn bits_any(base: i32, lo: i32, hi: i32) -> bool {
    let wl = lo >> 5u;
    let wh = (hi - 1) >> 5u;
    let ml = 0xffffffffu << u32(lo & 31);
    let mh = 0xffffffffu >> u32(31 - ((hi - 1) & 31));
    if (wl == wh) { return (bitcast<u32>(bmeta[base + wl]) & ml & mh) != 0u; }
    if ((bitcast<u32>(bmeta[base + wl]) & ml) != 0u) { return true; }
    for (var k = wl + 1; k < wh; k++) {
        if (bmeta[base + k] != 0) { return true; }
    }
    return (bitcast<u32>(bmeta[base + wh]) & mh) != 0u;
}

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn bitmask_tiles(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let tid = i32(lid.x);
    let lane = tid & 31;
    let blk = i32(BLOCK);
    let n = i32(wid.x);
    let m0 = n * bp.mask_stride;
    let cbase = n * (bp.n_gran + 1);
    let obase = bp.data0 + n * bp.img_stride;
    let P = bp.h * bp.w;
    let n_words = (P + 31) / 32;
    var bad = NO_BAD;
    for (var base = 0; base < P; base += PER * blk) {
        var bits: array<u32, 4>;
        for (var k = 0; k < PER; k++) {
            let i = base + k * blk + tid;
            bits[k] = 0u;
            if (i < P) {
                let v = bmask[m0 + i];
                if (v == 1.0) {
                    bits[k] = 1u << u32(lane);
                } else if (!(v == 0.0) && i < bad) {
                    bad = i;
                }
            }
        }
        for (var k = 0; k < PER; k++) {
            bscan[tid] = bitcast<i32>(bits[k]);
            workgroupBarrier();
            for (var off = 16; off > 0; off >>= 1u) {
                if (lane < off) { bscan[tid] |= bscan[tid + off]; }
                workgroupBarrier();
            }
            let wi = (base + k * blk) / 32 + tid / 32;
            if (lane == 0 && wi < n_words) { bmeta[obase + wi] = bscan[tid]; }
            workgroupBarrier();
        }
    }
    // First non-binary position, by the image's first group only (wid.y is uniform per group).
    if (wid.y == 0u) {
        bscan[tid] = bad;
        workgroupBarrier();
        for (var off = blk / 2; off > 0; off >>= 1u) {
            if (tid < off) { bscan[tid] = min(bscan[tid], bscan[tid + off]); }
            workgroupBarrier();
        }
        if (tid == 0) { bmeta[cbase + bp.n_gran] = select(bscan[0], -1, bscan[0] == NO_BAD); }
    }
    // The words other invocations wrote are read below.
    storageBarrier();
    workgroupBarrier();

    for (var g = i32(wid.y); g < bp.n_gran; g += i32(nwg.y)) {
        let gh = max(bgrans[3 * g], 1);
        let gw = max(bgrans[3 * g + 1], 1);
        let at = bgrans[3 * g + 2];
        let tiles_x = (bp.w + gw - 1) / gw;
        let n_tiles = ((bp.h + gh - 1) / gh) * tiles_x;
        var found = 0;
        for (var t0 = 0; t0 < n_tiles; t0 += TPT * blk) {
            var hits = 0;
            var mine: array<i32, 4>;
            for (var j = 0; j < TPT; j++) {
                let t = t0 + tid * TPT + j;
                mine[j] = -1;
                if (t < n_tiles) {
                    let ty = t / tiles_x;
                    let y0 = ty * gh;
                    let x0 = (t - ty * tiles_x) * gw;
                    let y1 = min(y0 + gh, bp.h);
                    let x1 = min(x0 + gw, bp.w);
                    var hit = false;
                    for (var y = y0; y < y1 && !hit; y++) {
                        hit = bits_any(obase, y * bp.w + x0, y * bp.w + x1);
                    }
                    if (hit) {
                        mine[j] = y0 * bp.w + x0;
                        hits++;
                    }
                }
            }
            bscan[tid] = hits;
            workgroupBarrier();
            for (var off = 1; off < blk; off <<= 1u) {
                var v = 0;
                if (tid >= off) { v = bscan[tid - off]; }
                workgroupBarrier();
                bscan[tid] += v;
                workgroupBarrier();
            }
            var slot = obase + at + found + bscan[tid] - hits;
            for (var j = 0; j < TPT; j++) {
                if (mine[j] >= 0) {
                    bmeta[slot] = mine[j];
                    slot++;
                }
            }
            found += bscan[blk - 1];
            workgroupBarrier();
        }
        if (tid == 0) { bmeta[cbase + g] = found; }
    }
}
