//! Word-level helpers behind the mask operations.
//!
//! A mask is packed row-major, so a row rarely starts on a word boundary. The operations that
//! work a row at a time (tiles, dilation, components) first copy a row out into a word-aligned
//! buffer ("row words": bit `x` of the row is bit `x % 64` of word `x / 64`, bits past the row's
//! width zero); there one shift or OR handles 64 columns.

/// The `n` low bits set (`n` ≤ 64).
#[inline]
pub(crate) fn low_bits(n: usize) -> u64 {
    if n >= 64 {
        !0
    } else {
        (1u64 << n) - 1
    }
}

/// The 64 bits of `raw` starting at bit `offset`; bits past the end of `raw` read as 0.
/// Without branches: this is the inner step of every row-wise operation.
#[inline(always)]
pub(crate) fn load64(raw: &[u64], offset: usize) -> u64 {
    let (q, s) = (offset / 64, offset % 64);
    let lo = raw.get(q).map_or(0, |w| w >> s);
    // Two shifts so that s = 0 shifts the next word out entirely instead of by 64.
    let hi = raw.get(q + 1).map_or(0, |w| (w << 1) << (63 - s));
    lo | hi
}

/// Words that keep the first `len` bits of a row (all ones, then the partial last word).
pub(crate) fn row_mask(len: usize, out: &mut [u64]) {
    for (k, m) in out.iter_mut().enumerate() {
        *m = low_bits(len.saturating_sub(64 * k));
    }
}

/// [`or_bits`] for a row of `mask.len()` words, `mask` from [`row_mask`]: one load, AND and OR
/// per word, unrolled when the caller's row words have a fixed size.
#[inline(always)]
pub(crate) fn or_row(raw: &[u64], offset: usize, mask: &[u64], acc: &mut [u64]) {
    for (k, (a, m)) in acc.iter_mut().zip(mask).enumerate() {
        *a |= load64(raw, offset + 64 * k) & m;
    }
}

/// ORs bits `offset..offset + len` of `raw` into the row words `acc` (bit `offset` lands on
/// bit 0 of `acc[0]`). `acc` needs `len.div_ceil(64)` words.
#[inline]
pub(crate) fn or_bits(raw: &[u64], offset: usize, len: usize, acc: &mut [u64]) {
    let full = len / 64;
    for (k, a) in acc[..full].iter_mut().enumerate() {
        *a |= load64(raw, offset + 64 * k);
    }
    let rem = len % 64;
    if rem != 0 {
        acc[full] |= load64(raw, offset + 64 * full) & low_bits(rem);
    }
}

/// ORs the row words `src` (bits past `len` zero) into `raw` at bit `offset`.
/// `raw` must hold `offset + len` bits.
#[inline]
pub(crate) fn or_store(raw: &mut [u64], offset: usize, len: usize, src: &[u64]) {
    let (q, s) = (offset / 64, offset % 64);
    for (k, &w) in src[..len.div_ceil(64)].iter().enumerate() {
        if w == 0 {
            continue;
        }
        raw[q + k] |= w << s;
        if s != 0 {
            // Non-zero only when the row spills into the next word, which then exists.
            let hi = w >> (64 - s);
            if hi != 0 {
                raw[q + k + 1] |= hi;
            }
        }
    }
}

/// Sets bits `a..b` of the row words `r`.
pub(crate) fn set_range(r: &mut [u64], a: usize, b: usize) {
    let mut p = a;
    while p < b {
        let (i, s) = (p / 64, p % 64);
        let n = (64 - s).min(b - p);
        r[i] |= low_bits(n) << s;
        p += n;
    }
}

/// `r |= r >> s` over the multi-word row `r` (towards bit 0).
#[inline]
fn shr_or(r: &mut [u64], s: usize) {
    let (q, b) = (s / 64, s % 64);
    let n = r.len();
    // Ascending: r[i] reads only r[i + q] and r[i + q + 1], which are not yet updated.
    for i in 0..n.saturating_sub(q) {
        let mut v = r[i + q] >> b;
        if b != 0 && i + q + 1 < n {
            v |= r[i + q + 1] << (64 - b);
        }
        r[i] |= v;
    }
}

/// `r |= r << s` over the multi-word row `r` (away from bit 0; bits pushed past the last word
/// are dropped).
#[inline]
fn shl_or(r: &mut [u64], s: usize) {
    let (q, b) = (s / 64, s % 64);
    let n = r.len();
    // Descending: r[i] reads only r[i - q] and r[i - q - 1], which are not yet updated.
    for i in (q..n).rev() {
        let mut v = r[i - q] << b;
        if b != 0 && i > q {
            v |= r[i - q - 1] >> (64 - b);
        }
        r[i] |= v;
    }
}

/// Widens a window OR towards higher bits: on entry bit `p` of `r` is the OR of some row's bits
/// `p..p + from`; afterwards it is the OR of bits `p..p + to`. `from` ≥ 1 (1 = a plain row).
/// Doubling, so `log2(to / from)` passes, each one shift and OR per word.
pub(crate) fn widen_down(r: &mut [u64], from: usize, to: usize) {
    let mut cur = from.max(1);
    while cur < to {
        let step = cur.min(to - cur);
        shr_or(r, step);
        cur += step;
    }
}

/// Like [`widen_down`] towards lower bits: bit `p` becomes the OR of bits `p + 1 - to..=p`
/// (positions below 0 count as unset).
pub(crate) fn widen_up(r: &mut [u64], from: usize, to: usize) {
    let mut cur = from.max(1);
    while cur < to {
        let step = cur.min(to - cur);
        shl_or(r, step);
        cur += step;
    }
}

/// Sets, in the row words `out`, the bits at multiples of `step` below `len` (the first column
/// of every `step`-wide group) and clears the others.
pub(crate) fn group_starts(len: usize, step: usize, out: &mut [u64]) {
    out.fill(0);
    if out.is_empty() {
        return;
    }
    // Doubling: the pattern below `span` shifted up by `span` is the pattern below 2 * span.
    out[0] = 1;
    let mut span = step.max(1);
    while span < 64 * out.len() {
        shl_or(out, span);
        span *= 2;
    }
    for (k, o) in out.iter_mut().enumerate() {
        *o &= low_bits(len.saturating_sub(64 * k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sparsity::test_rng::TestRng;

    fn bit(r: &[u64], p: usize) -> bool {
        p / 64 < r.len() && (r[p / 64] >> (p % 64)) & 1 == 1
    }

    #[test]
    fn windows_match_a_per_bit_reference() {
        let (mut rng, _seed) = TestRng::fresh();
        for _ in 0..400 {
            let nw = rng.range(1, 5);
            let row: Vec<u64> = (0..nw).map(|_| rng.sparse_word()).collect();
            let to = rng.range(1, 150);
            let from = rng.range(1, to + 1);
            // Build the `from` window per bit, then widen and compare with the `to` window.
            let win = |len: usize, down: bool| -> Vec<u64> {
                let mut o = vec![0u64; nw];
                for p in 0..nw * 64 {
                    let any = (0..len).any(|d| if down { bit(&row, p + d) } else { p >= d && bit(&row, p - d) });
                    if any {
                        o[p / 64] |= 1 << (p % 64);
                    }
                }
                o
            };
            let mut r = win(from, true);
            widen_down(&mut r, from, to);
            assert_eq!(r, win(to, true), "down {from}->{to}");
            let mut r = win(from, false);
            widen_up(&mut r, from, to);
            assert_eq!(r, win(to, false), "up {from}->{to}");
        }
    }

    #[test]
    fn bit_ranges_load_and_store() {
        let (mut rng, _seed) = TestRng::fresh();
        for _ in 0..400 {
            let raw: Vec<u64> = (0..6).map(|_| rng.next_u64()).collect();
            let len = rng.range(1, 140);
            let offset = rng.range(0, 6 * 64 - len + 1);
            let mut acc = vec![0u64; len.div_ceil(64)];
            or_bits(&raw, offset, len, &mut acc);
            for p in 0..acc.len() * 64 {
                assert_eq!(bit(&acc, p), p < len && bit(&raw, offset + p), "load {offset}+{p}");
            }
            let mut back = vec![0u64; 6];
            or_store(&mut back, offset, len, &acc);
            for p in 0..6 * 64 {
                let inside = p >= offset && p < offset + len;
                assert_eq!(bit(&back, p), inside && bit(&raw, p), "store {p}");
            }
            let (a, b) = (rng.range(0, 200), rng.range(0, 200));
            let (a, b) = (a.min(b), a.max(b));
            let mut r = vec![0u64; 4];
            set_range(&mut r, a, b);
            for p in 0..256 {
                assert_eq!(bit(&r, p), p >= a && p < b);
            }
            let step = rng.range(1, 70);
            group_starts(len, step, &mut acc);
            for p in 0..acc.len() * 64 {
                assert_eq!(bit(&acc, p), p < len && p % step == 0);
            }
        }
    }
}
