//! token.cl on the OpenCL and wgpu devices against host references: the compaction (counts
//! and token order per image, a mask per image or one for the batch, token counts above the
//! work-group), the token GEMM (bias and activation, rows of inactive tokens zeroed) and the
//! attention over active tokens (against the CPU's attention_active, with and without the
//! all-keys fallback; the row kernel and the tiled one) and its key-norm pass. Outputs are poisoned with NaN before the kernels run, and each case
//! runs several times (a race shows as a difference between runs).

use crate::gpu::device::{Arg, GpuDevice};
use crate::gpu::kernels::{spec, Src, Tile, ATTENTION_WG};

use crate::gpu::test_rng::Rng;

fn ints(b: &[u8]) -> Vec<i32> {
    b.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn floats(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn buf_f32<D: GpuDevice>(dev: &D, v: &[f32]) -> D::Buffer {
    let b = dev.alloc(v.len().max(1) * 4).unwrap();
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    dev.upload(&b, 0, &bytes).unwrap();
    b
}

fn read<D: GpuDevice>(dev: &D, b: &D::Buffer, words: usize) -> Vec<u8> {
    let mut out = vec![0u8; words * 4];
    dev.download(b, 0, &mut out).unwrap();
    out
}

/// token_compact on `mask` (`images` x `tokens`, or one mask for all when `shared`); returns
/// the meta buffer and its words.
fn compact<D: GpuDevice>(dev: &D, mask: &[f32], images: usize, tokens: usize, shared: bool) -> (D::Buffer, Vec<i32>) {
    let block = crate::gpu::sparse::bitmask::bitmask_block(dev.info().max_work_group_size);
    let k = dev.kernel(&spec(Src::Token, "token_compact", &[("BLOCK", block as i64)])).unwrap();
    let mb = buf_f32(dev, mask);
    let words = images * (tokens + 1);
    let meta = buf_f32(dev, &vec![f32::from_bits(0xA5A5_A5A5); words]);
    let stride = if shared { 0 } else { tokens };
    let args = [Arg::Buf(&mb), Arg::Buf(&meta), Arg::I32(tokens as i32), Arg::I32(stride as i32), Arg::I32(images as i32)];
    dev.launch(&k, [images as u32, 1, 1], [block, 1, 1], &args).unwrap();
    let got = ints(&read(dev, &meta, words));
    (meta, got)
}

/// The EARLY_EXIT values to test on a device: the executor's, and 0 as well where that is 1.
fn exits(info: &crate::gpu::DeviceInfo) -> Vec<i64> {
    let e = crate::gpu::token::launches::early_exit(info);
    if e == 1 {
        vec![1, 0]
    } else {
        vec![e]
    }
}

fn masks(rng: &mut Rng, images: usize, tokens: usize, d: f64) -> Vec<f32> {
    (0..images * tokens).map(|_| (rng.next() < d) as u8 as f32).collect()
}

fn check_compaction<D: GpuDevice>(dev: &D, what: &str) {
    let mut rng = Rng(0x7a3c_5e11_0f0f_1234);
    for &tokens in &[1usize, 37, 109, 197, 256, 257, 300, 600] {
        for &d in &[0.0, 0.02, 0.3, 0.7, 1.0] {
            for shared in [false, true] {
                let images = 3;
                let m = masks(&mut rng, if shared { 1 } else { images }, tokens, d);
                for rep in 0..3 {
                    let (_, meta) = compact(dev, &m, images, tokens, shared);
                    for img in 0..images {
                        let mi = &m[if shared { 0 } else { img * tokens }..][..tokens];
                        let active: Vec<i32> = (0..tokens as i32).filter(|&t| mi[t as usize] == 1.0).collect();
                        let inactive: Vec<i32> = (0..tokens as i32).rev().filter(|&t| mi[t as usize] != 1.0).collect();
                        let order = &meta[images + img * tokens..][..tokens];
                        let c = format!("{what} T={tokens} d={d} shared {shared} image {img} run {rep}");
                        assert_eq!(meta[img], active.len() as i32, "{c}: count");
                        assert_eq!(&order[..active.len()], &active[..], "{c}: active tokens");
                        assert_eq!(&order[active.len()..], &inactive[..], "{c}: inactive tokens");
                    }
                }
            }
        }
    }
}

/// Host reference of token_gemm_f32: act(x . w + bias) on active rows, 0 elsewhere.
#[allow(clippy::too_many_arguments)]
fn gemm_ref(x: &[f32], w: &[f32], bias: Option<&[f32]>, mask: &[f32], images: usize, t: usize, k: usize, n: usize) -> Vec<f32> {
    let mut y = vec![0.0f32; images * t * n];
    for img in 0..images {
        for r in 0..t {
            if mask[img * t + r] != 1.0 {
                continue;
            }
            for c in 0..n {
                let mut acc = 0.0f64;
                for kk in 0..k {
                    acc += x[(img * t + r) * k + kk] as f64 * w[kk * n + c] as f64;
                }
                let v = acc as f32 + bias.map_or(0.0, |b| b[c]);
                y[(img * t + r) * n + c] = v.max(0.0);
            }
        }
    }
    y
}

fn check_gemm<D: GpuDevice>(dev: &D, what: &str) {
    let mut rng = Rng(0x3141_5926_5358_9793);
    for &(t, k, n) in &[(37usize, 24usize, 40usize), (109, 64, 192), (197, 48, 70), (300, 16, 64)] {
        for &d in &[0.0, 0.05, 0.4, 1.0] {
            let images = 2;
            let m = masks(&mut rng, images, t, d);
            let (meta, _) = compact(dev, &m, images, t, false);
            let x = rng.vec(images * t * k, 1.0);
            let w = rng.vec(k * n, 0.5);
            let bias = rng.vec(n, 0.2);
            let want = gemm_ref(&x, &w, Some(&bias), &m, images, t, k, n);
            let variants = [Tile::LARGE, Tile::SMALL].into_iter().flat_map(|t| exits(dev.info()).into_iter().map(move |e| (t, e)));
            // DENSE: the dense member, every row in token order.
            for ((tile, early), dense) in variants.flat_map(|v| [(v, 0i64), (v, 1)]) {
                let mut defines = tile.defines().to_vec();
                defines.push(("EARLY_EXIT", early));
                defines.push(("DENSE", dense));
                let kern = dev.kernel(&spec(Src::Token, "token_gemm_f32", &defines)).unwrap();
                let (xb, wb, bb) = (buf_f32(dev, &x), buf_f32(dev, &w), buf_f32(dev, &bias));
                for rep in 0..2 {
                    let yb = buf_f32(dev, &vec![f32::NAN; images * t * n]);
                    let args = [
                        Arg::Buf(&xb),
                        Arg::Buf(&wb),
                        Arg::Buf(&yb),
                        Arg::Buf(&meta),
                        Arg::Buf(&bb),
                        Arg::I32(t as i32),
                        Arg::I32(n as i32),
                        Arg::I32(k as i32),
                        Arg::I32(images as i32),
                        Arg::I32(1),
                        Arg::I32(0),
                        Arg::F32(0.0),
                        Arg::F32(0.0),
                    ];
                    let groups = [n.div_ceil(tile.tn as usize) as u32, t.div_ceil(tile.tm as usize) as u32, images as u32];
                    dev.launch(&kern, groups, tile.local(), &args).unwrap();
                    let got = floats(&read(dev, &yb, images * t * n));
                    for (i, (&g, &wv)) in got.iter().zip(&want).enumerate() {
                        let c = format!(
                            "{what} T={t} K={k} N={n} d={d} tile {}x{} early exit {early} dense {dense} run {rep}, element {i}",
                            tile.tm, tile.tn
                        );
                        assert!((g - wv).abs() <= 1e-4 * (1.0 + wv.abs()), "{c}: {g} vs {wv}");
                        if wv == 0.0 && m[i / n] != 1.0 {
                            assert_eq!(g.to_bits(), 0, "{c}: inactive row not zeroed");
                        }
                    }
                }
            }
        }
    }
}

/// One case of `check_attention`: T tokens, heads of width dh, the key-mask factor c (None:
/// the mixed case, `aim`'s data and MIXED_C), k stored
/// transposed ([BH, dh, T]), and the scale as a divisor rather than a factor.
struct AttnCase {
    t: usize,
    heads: usize,
    dh: usize,
    c: Option<f32>,
    k_transposed: bool,
    div: bool,
}

const ATTN_CASES: [AttnCase; 6] = [
    AttnCase { t: 37, heads: 3, dh: 16, c: Some(1e4), k_transposed: false, div: false },
    // DeiT-S's heads.
    AttnCase { t: 197, heads: 2, dh: 64, c: Some(1e4), k_transposed: false, div: false },
    AttnCase { t: 197, heads: 2, dh: 64, c: Some(1e4), k_transposed: true, div: true },
    AttnCase { t: 300, heads: 2, dh: 8, c: Some(1e4), k_transposed: false, div: true },
    // Halted keys keep a weight: every row takes the all-keys path.
    AttnCase { t: 45, heads: 2, dh: 16, c: Some(3.0), k_transposed: true, div: false },
    // Some rows of a work-group take the all-keys path and others need not.
    AttnCase { t: 61, heads: 2, dh: 32, c: None, k_transposed: false, div: false },
];

/// The attention kernels against the CPU's active-token attention: the row kernel for every
/// EARLY_EXIT the device takes and, off wgpu, the tiled kernel with the lowering's defines. Per
/// case and density d, three images at densities d, 1 - d and 0.5 (so d = 0 and 1 give an image
/// with no active token and one with all), with active counts that are mostly not multiples of
/// the tiled kernel's QB rows. q, k and v are random and non-zero, except that halted keys are
/// zero where the kernel is told the graph proves them so (keys_zero).
fn check_attention<D: GpuDevice>(dev: &D, what: &str) {
    let mut rng = Rng(0x2718_2818_2845_9045);
    for case in &ATTN_CASES {
        for &d in &[0.0, 0.03, 0.5, 1.0] {
            let m: Vec<f32> = [d, 1.0 - d, 0.5].into_iter().flat_map(|di| masks(&mut rng, 1, case.t, di)).collect();
            let (meta, _) = compact(dev, &m, 3, case.t, false);
            for keys_zero in [false, true] {
                attention_case(dev, &format!("{what} d={d} keys_zero {keys_zero}"), case, &mut rng, &m, &meta, keys_zero);
            }
        }
    }
}

/// The key-mask factor of the mixed case (`aim`).
const MIXED_C: f32 = 125.0;

/// The mixed case's data. In each head of an image with halted tokens, the first halted key
/// lies along the last axis (length 8), which the active keys and every other active query
/// leave out (0 there): those queries' inactive weights vanish and their proof holds (110 + smag
/// |q| 8 - max < c). The other active queries point at that key enough for their score on it to
/// be c, which the bias cancels: their proof fails and the key takes a visible weight.
fn aim(q: &mut [f32], k: &mut [f32], m: &[f32], heads: usize, t: usize, dh: usize, smag: f32) {
    let (len, last) = (8.0, dh - 1);
    for bh in 0..m.len() / t * heads {
        let mi = &m[bh / heads * t..][..t];
        let Some(j) = mi.iter().position(|&x| x != 1.0) else { continue };
        for (d, x) in k[(bh * t + j) * dh..][..dh].iter_mut().enumerate() {
            *x = if d == last { len } else { 0.0 };
        }
        for (n, i) in (0..t).filter(|&i| mi[i] == 1.0).enumerate() {
            k[(bh * t + i) * dh + last] = 0.0;
            q[(bh * t + i) * dh + last] = if n % 2 == 1 { MIXED_C / (smag * len) } else { 0.0 };
        }
    }
}

fn attention_case<D: GpuDevice>(dev: &D, what: &str, case: &AttnCase, rng: &mut Rng, m: &[f32], meta: &D::Buffer, keys_zero: bool) {
    use dynaspa_runtime::graph::ScoreScale;
    let AttnCase { t, heads, dh, k_transposed, div, .. } = *case;
    let b = m.len() / t;
    let n = b * heads * t * dh;
    let (mut q, mut k, v) = (rng.vec(n, 1.0), rng.vec(n, 1.0), rng.vec(n, 1.0));
    let root = (dh as f32).sqrt();
    let (scale, mode, factor) = if div { (ScoreScale::Div(root), 1, root) } else { (ScoreScale::Mul(1.0 / root), 0, 1.0 / root) };
    let smag = scale.magnitude() as f32;
    let c = case.c.unwrap_or(MIXED_C);
    if case.c.is_none() {
        aim(&mut q, &mut k, m, heads, t, dh, smag);
    }
    if keys_zero {
        for (i, x) in k.iter_mut().enumerate() {
            if m[i / (heads * t * dh) * t + (i / dh) % t] != 1.0 {
                *x = 0.0;
            }
        }
    }
    // k as the kernels read it: [BH, dh, T] when transposed.
    let kd: Vec<f32> = if k_transposed { (0..n).map(|i| k[(i / (t * dh) * t + i % t) * dh + (i / t) % dh]).collect() } else { k };
    let (skj, skd) = if k_transposed { (1, t) } else { (dh, 1) };
    let s = crate::cpu::AttnShape { batch: b, heads, tq: t, tk: t, dk: dh, dv: dh, k_transposed };
    let lists: Vec<Vec<u32>> = (0..b).map(|bi| (0..t as u32).filter(|&tok| m[bi * t + tok as usize] == 1.0).collect()).collect();
    let refs: Vec<&[u32]> = lists.iter().map(|l| l.as_slice()).collect();
    let mut want = vec![0.0f32; n];
    let fallbacks = crate::cpu::attention_active(&s, scale, c, &q, &kd, &v, &refs, &mut want).unwrap();
    if case.c.is_none() && !keys_zero {
        // The CPU's proof is the kernels' (tok_keys_vanish): they see the same mixed groups.
        let decided: usize = lists.iter().filter(|l| l.len() < t).map(|l| l.len() * heads).sum();
        assert!(decided < 2 || (fallbacks > 0 && fallbacks < decided), "{what}: {fallbacks} of {decided} rows fell back");
    }
    let bias: Vec<f32> = m.iter().map(|&mv| (mv - 1.0) * c).collect();
    let (qb, kb, vb, biasb) = (buf_f32(dev, &q), buf_f32(dev, &kd), buf_f32(dev, &v), buf_f32(dev, &bias));
    let tk_max = t.next_power_of_two().max(64) as i64;
    let bh = (b * heads) as u32;
    // (name, entry, defines, grid) of each kernel to check.
    let mut kernels: Vec<(String, &'static str, Vec<(&str, i64)>, [u32; 3])> = exits(dev.info())
        .into_iter()
        .map(|e| {
            (
                format!("row kernel, early exit {e}"),
                "token_attention_f32",
                vec![("WG", ATTENTION_WG as i64), ("TK_MAX", tk_max), ("EARLY_EXIT", e)],
                [t as u32, bh, 1],
            )
        })
        .collect();
    if dev.info().backend != "wgpu" {
        use crate::gpu::token::lower::{TiledAttention, TILED_QB};
        let ta = TiledAttention::new(t, dh, dh).expect("tiled extents");
        let local = ta.local_bytes();
        assert!(local <= dev.info().local_mem_bytes, "{what}: the tiled kernel takes {local} bytes of local memory");
        kernels.push(("tiled kernel".into(), "token_attention_tiled_f32", ta.defines().to_vec(), [t.div_ceil(TILED_QB) as u32, bh, 1]));
    }
    let norm_defines = [("WG", ATTENTION_WG as i64), ("TK_MAX", tk_max), ("EARLY_EXIT", exits(dev.info())[0])];
    let norms = dev.kernel(&spec(Src::Token, "token_key_norms", &norm_defines)).unwrap();
    let parts = crate::gpu::token::lower::key_norm_parts(dev.info(), t);
    let dims = [heads as i32, t as i32, dh as i32];
    for (name, entry, defines, grid) in &kernels {
        let att = dev.kernel(&spec(Src::Token, entry, defines)).unwrap();
        for rep in 0..2 {
            let kin = buf_f32(dev, &vec![f32::NAN; b * heads * parts]);
            let out = buf_f32(dev, &vec![f32::NAN; n]);
            if !keys_zero {
                let mut args = vec![Arg::Buf(&kb), Arg::Buf(meta), Arg::Buf(&kin)];
                args.extend(dims.iter().map(|&x| Arg::I32(x)));
                args.extend([Arg::I32(skj as i32), Arg::I32(skd as i32), Arg::I32(b as i32)]);
                dev.launch(&norms, [bh, parts as u32, 1], [ATTENTION_WG, 1, 1], &args).unwrap();
            }
            let mut args =
                vec![Arg::Buf(&qb), Arg::Buf(&kb), Arg::Buf(&vb), Arg::Buf(&biasb), Arg::Buf(&out), Arg::Buf(meta), Arg::Buf(&kin)];
            args.extend(dims.iter().map(|&x| Arg::I32(x)));
            args.extend([Arg::I32(dh as i32), Arg::I32(skj as i32), Arg::I32(skd as i32), Arg::I32(mode)]);
            args.extend([Arg::F32(factor), Arg::F32(smag), Arg::F32(c), Arg::I32(keys_zero as i32)]);
            args.extend([Arg::I32(t as i32), Arg::I32(0), Arg::I32(0), Arg::I32(1), Arg::I32(b as i32), Arg::I32(parts as i32)]);
            dev.launch(&att, *grid, [ATTENTION_WG, 1, 1], &args).unwrap();
            let got = floats(&read(dev, &out, n));
            for (i, (&g, &wv)) in got.iter().zip(&want).enumerate() {
                let cs = format!(
                    "{what} {name}: T={t} heads {heads} dh {dh} c {c} k transposed {k_transposed} divide {div} run {rep}, element {i}"
                );
                assert!((g - wv).abs() <= 1e-4 * (1.0 + wv.abs()), "{cs}: {g} vs {wv}");
                if m[i / (heads * t * dh) * t + (i / dh) % t] != 1.0 {
                    assert_eq!(g.to_bits(), 0, "{cs}: inactive row not zeroed");
                }
            }
        }
    }
}

#[cfg(feature = "opencl")]
fn on_opencl(f: impl Fn(&crate::opencl::OpenClDevice, &str)) {
    match crate::opencl::shared_device(None, None) {
        Ok(d) => f(&d, "opencl"),
        Err(e) => crate::gpu::sparse::bitmask_tests::skip("opencl", e),
    }
}

/// Where a CUDA GPU is present (none in CI: NVRTC alone compiles these kernels there).
#[cfg(feature = "cuda")]
fn on_cuda(f: impl Fn(&crate::cuda::CudaDevice, &str)) {
    match crate::cuda::shared_device(None, None) {
        Ok(d) => f(&d, "cuda"),
        Err(e) => crate::gpu::sparse::bitmask_tests::skip("cuda", e),
    }
}

#[cfg(feature = "wgpu")]
fn on_wgpu(f: impl Fn(&crate::wgpu::WgpuDevice, &str)) {
    match crate::wgpu::shared_device(None) {
        Ok(d) => f(&d, "wgpu"),
        Err(e) => crate::gpu::sparse::bitmask_tests::skip("wgpu", e),
    }
}

/// token_key_norms against the host: per head, the largest Euclidean norm of its inactive keys
/// (the max over the pass's parts, as token_attention_f32 takes it), -inf where every key is
/// active, NaN where an inactive key holds NaN. Keys are random and non-zero (the attention
/// test zeroes halted rows, as A-ViT does, so it never sees a norm but 0); T = 197 and 300 take
/// several parts per head where the device splits heads.
fn check_key_norms<D: GpuDevice>(dev: &D, what: &str) {
    let mut rng = Rng(0x1414_2135_6237_3095);
    for &(t, heads, dh) in &[(197usize, 3usize, 64usize), (37, 2, 16), (300, 1, 8)] {
        for (di, &d) in [0.0, 0.1, 0.5, 1.0].iter().enumerate() {
            let b = 2;
            let m = masks(&mut rng, b, t, d);
            let (meta, _) = compact(dev, &m, b, t, false);
            let mut k = rng.vec(b * heads * t * dh, 1.0);
            // At d = 0.5, a NaN in the first inactive key of image 0's head 0.
            let poisoned = (di == 2).then(|| m[..t].iter().position(|&v| v != 1.0)).flatten();
            if let Some(j) = poisoned {
                k[j * dh + dh / 2] = f32::NAN;
            }
            let parts = crate::gpu::token::lower::key_norm_parts(dev.info(), t);
            let tk_max = t.next_power_of_two().max(64) as i64;
            let kb = buf_f32(dev, &k);
            for early in exits(dev.info()) {
                let defines = [("WG", ATTENTION_WG as i64), ("TK_MAX", tk_max), ("EARLY_EXIT", early)];
                let norms = dev.kernel(&spec(Src::Token, "token_key_norms", &defines)).unwrap();
                let kin = buf_f32(dev, &vec![f32::NAN; b * heads * parts]);
                let args = [
                    Arg::Buf(&kb),
                    Arg::Buf(&meta),
                    Arg::Buf(&kin),
                    Arg::I32(heads as i32),
                    Arg::I32(t as i32),
                    Arg::I32(dh as i32),
                    Arg::I32(dh as i32),
                    Arg::I32(1),
                    Arg::I32(b as i32),
                ];
                dev.launch(&norms, [(b * heads) as u32, parts as u32, 1], [ATTENTION_WG, 1, 1], &args).unwrap();
                let got = floats(&read(dev, &kin, b * heads * parts));
                for bh in 0..b * heads {
                    let bi = bh / heads;
                    let g = got[bh * parts..(bh + 1) * parts].iter().fold(f32::NEG_INFINITY, |a, &x| {
                        if a.is_nan() || x.is_nan() {
                            f32::NAN
                        } else {
                            a.max(x)
                        }
                    });
                    let want = (0..t).filter(|&j| m[bi * t + j] != 1.0).fold(f32::NEG_INFINITY, |a, j| {
                        let row = &k[(bh * t + j) * dh..(bh * t + j + 1) * dh];
                        let n = row.iter().map(|x| x * x).sum::<f32>().sqrt();
                        if a.is_nan() || n.is_nan() {
                            f32::NAN
                        } else {
                            a.max(n)
                        }
                    });
                    let c = format!("{what} T={t} heads {heads} dh {dh} d={d} parts {parts} early exit {early}, head {bh}");
                    if want.is_nan() || want == f32::NEG_INFINITY {
                        assert!(g.is_nan() == want.is_nan() && (want.is_nan() || g == want), "{c}: {g} vs {want}");
                    } else {
                        assert!((g - want).abs() <= 1e-5 * want, "{c}: {g} vs {want}");
                    }
                }
            }
        }
    }
}

#[cfg(feature = "opencl")]
#[test]
fn token_key_norms_match_the_host_on_opencl() {
    on_opencl(|d, w| check_key_norms(d, w));
}

#[cfg(feature = "wgpu")]
#[test]
fn token_key_norms_match_the_host_on_wgpu() {
    on_wgpu(|d, w| check_key_norms(d, w));
}

#[cfg(feature = "opencl")]
#[test]
fn token_compaction_matches_the_host_on_opencl() {
    on_opencl(|d, w| check_compaction(d, w));
}

#[cfg(feature = "opencl")]
#[test]
fn token_gemm_matches_the_host_on_opencl() {
    on_opencl(|d, w| check_gemm(d, w));
}

#[cfg(feature = "opencl")]
#[test]
fn token_attention_matches_the_cpu_on_opencl() {
    on_opencl(|d, w| check_attention(d, w));
}

#[cfg(feature = "wgpu")]
#[test]
fn token_compaction_matches_the_host_on_wgpu() {
    on_wgpu(|d, w| check_compaction(d, w));
}

#[cfg(feature = "wgpu")]
#[test]
fn token_gemm_matches_the_host_on_wgpu() {
    on_wgpu(|d, w| check_gemm(d, w));
}

#[cfg(feature = "wgpu")]
#[test]
fn token_attention_matches_the_cpu_on_wgpu() {
    on_wgpu(|d, w| check_attention(d, w));
}

#[cfg(feature = "cuda")]
#[test]
fn token_attention_matches_the_cpu_on_cuda() {
    on_cuda(|d, w| check_attention(d, w));
}

#[cfg(feature = "cuda")]
#[test]
fn token_key_norms_match_the_host_on_cuda() {
    on_cuda(|d, w| check_key_norms(d, w));
}
