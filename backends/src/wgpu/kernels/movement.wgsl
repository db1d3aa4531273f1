// Data movement on 32-bit words (movement.cl): strided copies (Transpose, Slice, Expand,
// Concat, Split), Gather, per-axis index maps (Pad, nearest Resize) and the separable passes of
// linear Resize. One invocation per element.

// dst[doff + walk(i, dst strides)] = src[soff + walk(i, src strides)] over `n` elements of a
// `rank`-dim index space. meta: dims [rank], src strides [rank], dst strides [rank].
@group(0) @binding(0) var<storage, read_write> copy_src: array<i32>;
@group(0) @binding(1) var<storage, read_write> copy_dst: array<i32>;
@group(0) @binding(2) var<storage, read_write> copy_meta: array<i32>;
struct CopyP { soff: i32, doff: i32, n: i32, rank: i32 }
@group(0) @binding(8) var<uniform> copy_p: CopyP;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn strided_copy(@builtin(global_invocation_id) gid: vec3<u32>) {
    let p = copy_p;
    var i = i32(gid.x);
    if (i >= p.n) { return; }
    // Both walks in one pass over the dims.
    var s = p.soff;
    var d = p.doff;
    for (var k = p.rank - 1; k >= 0; k--) {
        let len = copy_meta[k];
        let q = i / len;
        let j = i - q * len;
        s += j * copy_meta[p.rank + k];
        d += j * copy_meta[2 * p.rank + k];
        i = q;
    }
    copy_dst[d] = copy_src[s];
}

// Gather over [outer, axis_len, inner] with `nidx` indices: out [outer, nidx, inner].
// Negative indices count from the end; indices out of range are clamped.
@group(0) @binding(0) var<storage, read_write> gather_src: array<i32>;
@group(0) @binding(1) var<storage, read_write> gather_idx: array<i32>;
@group(0) @binding(2) var<storage, read_write> gather_dst: array<i32>;
struct GatherP { n: i32, axis_len: i32, nidx: i32, inner: i32 }
@group(0) @binding(8) var<uniform> gather_p: GatherP;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn gather_words(@builtin(global_invocation_id) gid: vec3<u32>) {
    let p = gather_p;
    let i = i32(gid.x);
    if (i >= p.n) { return; }
    let in_ = i % p.inner;
    let r = i / p.inner;
    let j = r % p.nidx;
    let o = r / p.nidx;
    var k = gather_idx[j];
    if (k < 0) { k += p.axis_len; }
    k = min(max(k, 0), p.axis_len - 1);
    gather_dst[i] = gather_src[(o * p.axis_len + k) * p.inner + in_];
}

// Each output index along each axis reads one input index from a table (-1: the fill value).
// meta: out dims [rank], input strides [rank], table offsets [rank] (into meta), tables.
@group(0) @binding(0) var<storage, read_write> map_src: array<i32>;
@group(0) @binding(1) var<storage, read_write> map_dst: array<i32>;
@group(0) @binding(2) var<storage, read_write> map_meta: array<i32>;
@group(0) @binding(3) var<storage, read_write> map_fill: array<i32>;
struct MapP { n: i32, rank: i32 }
@group(0) @binding(8) var<uniform> map_p: MapP;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn axis_map_gather(@builtin(global_invocation_id) gid: vec3<u32>) {
    let p = map_p;
    let i = i32(gid.x);
    if (i >= p.n) { return; }
    var rem = i;
    var off = 0;
    for (var d = p.rank - 1; d >= 0; d--) {
        let len = map_meta[d];
        let q = rem / len;
        let j = rem - q * len;
        rem = q;
        let k = map_meta[map_meta[2 * p.rank + d] + j];
        if (k < 0) {
            map_dst[i] = map_fill[0];
            return;
        }
        off += k * map_meta[p.rank + d];
    }
    map_dst[i] = map_src[off];
}

// One axis of a linear Resize: [outer, n_in, inner] -> [outer, n_out, inner], each output index
// the weighted sum of `width` taps (tap tables made on the host).
@group(0) @binding(0) var<storage, read_write> rs_src: array<f32>;
@group(0) @binding(1) var<storage, read_write> rs_dst: array<f32>;
@group(0) @binding(2) var<storage, read_write> rs_taps: array<i32>;
@group(0) @binding(3) var<storage, read_write> rs_weights: array<f32>;
struct ResampleP { n: i32, n_in: i32, n_out: i32, inner: i32, width: i32 }
@group(0) @binding(8) var<uniform> rs_p: ResampleP;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn resample_axis(@builtin(global_invocation_id) gid: vec3<u32>) {
    let p = rs_p;
    let i = i32(gid.x);
    if (i >= p.n) { return; }
    let in_ = i % p.inner;
    let r = i / p.inner;
    let j = r % p.n_out;
    let o = r / p.n_out;
    var acc = 0.0;
    for (var t = 0; t < p.width; t++) {
        let w = rs_weights[j * p.width + t];
        if (w != 0.0) { acc += w * rs_src[(o * p.n_in + rs_taps[j * p.width + t]) * p.inner + in_]; }
    }
    rs_dst[i] = acc;
}

// tf_crop_and_resize: positions outside the crop box along any axis take the extrapolation value.
// meta as for axis_map_gather, with tables of 1 (inside) / 0 (outside) or offset -1 (all inside).
@group(0) @binding(0) var<storage, read_write> ex_y: array<f32>;
@group(0) @binding(1) var<storage, read_write> ex_meta: array<i32>;
struct ExtrapolateP { n: i32, rank: i32, value: f32 }
@group(0) @binding(8) var<uniform> ex_p: ExtrapolateP;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn extrapolate(@builtin(global_invocation_id) gid: vec3<u32>) {
    let p = ex_p;
    let i = i32(gid.x);
    if (i >= p.n) { return; }
    var rem = i;
    for (var d = p.rank - 1; d >= 0; d--) {
        let len = ex_meta[d];
        let q = rem / len;
        let j = rem - q * len;
        rem = q;
        let t = ex_meta[2 * p.rank + d];
        if (t >= 0 && ex_meta[t + j] == 0) {
            ex_y[i] = p.value;
            return;
        }
    }
}
