//! `BitMask`: a binary map over the output positions of an op (H×W for convs, the token grid for
//! attention), a `bitvec` bit vector packed row-major into `u64` words, least significant bit
//! first: position `i = y * width + x` is bit `i % 64` of `words[i / 64]`. Bits past
//! `height * width` in the last word are always zero (every constructor and operation keeps them
//! so), which lets word-level code (counts, tiles, the device upload) skip masking the tail.
//!
//! DISTiles made from a mask live in [`super::tiles`] and [`super::components`].

use super::words::{self, low_bits};
use crate::error::{Error, Result};
use bitvec::prelude::{BitSlice, BitVec, Lsb0};

#[derive(Clone, PartialEq, Eq, Hash)]
pub struct BitMask {
    height: usize,
    width: usize,
    bits: BitVec<u64, Lsb0>,
}

impl std::fmt::Debug for BitMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BitMask {}x{} ({} of {} set)", self.height, self.width, self.count_ones(), self.len())?;
        if self.len() <= 256 {
            for y in 0..self.height {
                f.write_str("\n  ")?;
                for x in 0..self.width {
                    f.write_str(if self.get(y, x) { "#" } else { "." })?;
                }
            }
        }
        Ok(())
    }
}

/// Bit pattern of 1.0f32. A mask value must be this or 0.0 of either sign (both compare equal
/// to 0, and a `Mul` by either leaves a zero).
const F32_ONE: u32 = 0x3f80_0000;

#[inline]
fn f32_is_binary(bits: u32) -> bool {
    bits == F32_ONE || bits << 1 == 0
}

/// Packs up to 64 mask values into one word; the flag is false if any value is not binary.
/// Branch-free over the values: one flag byte per value (a compare the compiler vectorises),
/// then eight bytes at a time gathered into eight bits by one multiplication (byte `i`'s low bit
/// lands on bit `56 + i`, and no two partial products meet there).
#[inline]
fn pack_f32(values: &[f32; 64]) -> (u64, bool) {
    let mut flags = [0u8; 64];
    let mut bad = 0u32;
    for (f, v) in flags.iter_mut().zip(values) {
        let b = v.to_bits();
        *f = (b == F32_ONE) as u8;
        bad |= ((b != F32_ONE) & (b << 1 != 0)) as u32;
    }
    let mut word = 0u64;
    for (k, c) in flags.chunks_exact(8).enumerate() {
        let bytes = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        word |= (bytes.wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * k);
    }
    (word, bad == 0)
}

impl BitMask {
    /// Takes ownership of packed words (missing ones read as zero, extra ones are dropped) and
    /// clears the bits past the last position.
    pub(crate) fn from_words(height: usize, width: usize, mut raw: Vec<u64>) -> BitMask {
        let n = height * width;
        raw.resize(n.div_ceil(64), 0);
        let tail = n % 64;
        if tail != 0 {
            if let Some(last) = raw.last_mut() {
                *last &= low_bits(tail);
            }
        }
        let mut bits = BitVec::from_vec(raw);
        bits.truncate(n);
        BitMask { height, width, bits }
    }

    /// An all-zero mask. Panics only if `height * width` overflows `usize`.
    pub fn zeros(height: usize, width: usize) -> BitMask {
        let n = height.checked_mul(width).expect("mask size overflows usize");
        BitMask { height, width, bits: BitVec::repeat(false, n) }
    }

    pub fn ones(height: usize, width: usize) -> BitMask {
        let n = height.checked_mul(width).expect("mask size overflows usize");
        BitMask::from_words(height, width, vec![!0; n.div_ceil(64)])
    }

    pub fn from_fn(height: usize, width: usize, mut f: impl FnMut(usize, usize) -> bool) -> BitMask {
        let n = height.checked_mul(width).expect("mask size overflows usize");
        let mut raw = vec![0u64; n.div_ceil(64)];
        for y in 0..height {
            for x in 0..width {
                if f(y, x) {
                    let i = y * width + x;
                    raw[i / 64] |= 1 << (i % 64);
                }
            }
        }
        BitMask::from_words(height, width, raw)
    }

    /// From row-major booleans; `values.len()` must be `height * width`.
    pub fn from_bools(height: usize, width: usize, values: &[bool]) -> Result<BitMask> {
        if height.checked_mul(width) != Some(values.len()) {
            return Err(Error::Other(format!("BitMask {height}x{width}: got {} values", values.len())));
        }
        Ok(BitMask::from_fn(height, width, |y, x| values[y * width + x]))
    }

    /// From a row-major bit vector of exactly `height * width` bits.
    pub fn from_bitvec(height: usize, width: usize, mut bits: BitVec<u64, Lsb0>) -> Result<BitMask> {
        if height.checked_mul(width) != Some(bits.len()) {
            return Err(Error::Other(format!("BitMask {height}x{width}: got {} bits", bits.len())));
        }
        bits.force_align();
        bits.set_uninitialized(false);
        Ok(BitMask { height, width, bits })
    }

    /// From row-major f32 values as a model computes a mask (`Cast`, `Greater`, a halting
    /// score thresholded in-graph): each must be exactly 1.0 or 0.0 (-0.0 counts as 0.0).
    /// Anything else (NaN, 0.5, 2.0, ...) is an error naming the first such position, since
    /// a `Mul` by it would not be a mask. Called per frame per mask value: values are checked
    /// and packed without branches per value (16 per compare on AVX-512, else 64 at a time by
    /// their bit patterns).
    pub fn from_f32(height: usize, width: usize, values: &[f32]) -> Result<BitMask> {
        if height.checked_mul(width) != Some(values.len()) {
            return Err(Error::Other(format!("BitMask {height}x{width} from f32: got {} values", values.len())));
        }
        let mut m = BitMask::zeros(height, width);
        m.refill_f32(values)?;
        Ok(m)
    }

    /// [`BitMask::from_f32`] into this mask's own storage (same size): the per-frame rebuild
    /// of a mask allocates nothing. On an error the mask's contents are unspecified.
    pub fn refill_f32(&mut self, values: &[f32]) -> Result<()> {
        let (height, width) = (self.height, self.width);
        if values.len() != self.len() {
            return Err(Error::Other(format!("BitMask {height}x{width} from f32: got {} values", values.len())));
        }
        let raw = self.bits.as_raw_mut_slice();
        // Every word is rewritten, and the packing leaves bits past the last position clear.
        if !pack_all(values, raw) {
            // Only on the error path: find the first offender for the message.
            if let Some(i) = values.iter().position(|v| !f32_is_binary(v.to_bits())) {
                let (y, x) = (i / width, i % width);
                return Err(Error::Other(format!(
                    "BitMask {height}x{width} from f32: value at (y {y}, x {x}) (index {i}) is {:?}; \
                     a mask holds only 0.0 and 1.0",
                    values[i]
                )));
            }
        }
        Ok(())
    }

    /// Calls `f(start, end)` for every maximal run of set positions, as flat row-major indices
    /// (a run may go on from the end of one row into the next): what clears or copies the
    /// active part of a plane a slice at a time.
    pub fn for_each_run(&self, mut f: impl FnMut(usize, usize)) {
        let (words, n) = (self.words(), self.len());
        // First index >= i whose bit is `want` (n if none).
        let next = |i: usize, want: bool| -> usize {
            let flip = if want { 0 } else { !0u64 };
            let mut wi = i / 64;
            if wi >= words.len() {
                return n;
            }
            let mut w = (words[wi] ^ flip) & (!0u64 << (i % 64));
            loop {
                if w != 0 {
                    return (wi * 64 + w.trailing_zeros() as usize).min(n);
                }
                wi += 1;
                if wi >= words.len() {
                    return n;
                }
                w = words[wi] ^ flip;
            }
        };
        let mut i = 0;
        while i < n {
            let a = next(i, true);
            if a >= n {
                break;
            }
            let b = next(a, false);
            f(a, b);
            i = b;
        }
    }
}

/// Packs `values` into `raw` (`ceil(n / 64)` words); false if any value is not 0.0, -0.0 or 1.0.
pub(crate) fn pack_all(values: &[f32], raw: &mut [u64]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: AVX-512F detected; `raw` has a word per 64 values.
        return unsafe { pack_avx512(values, raw) };
    }
    pack_portable(values, raw)
}

/// Sixteen values per compare: 1.0 sets the bit, 0.0 (either sign) leaves it clear, anything
/// else (NaN included: it equals nothing) is flagged. A 432-value DynConv mask is 27 vectors.
///
/// # Safety
/// AVX-512F available; `raw.len() >= values.len().div_ceil(64)`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn pack_avx512(values: &[f32], raw: &mut [u64]) -> bool {
    use std::arch::x86_64::*;
    let (one, zero) = (_mm512_set1_ps(1.0), _mm512_setzero_ps());
    let n = values.len();
    let mut bad: __mmask16 = 0;
    for (wi, w) in raw.iter_mut().enumerate().take(n.div_ceil(64)) {
        let mut word = 0u64;
        for q in 0..4 {
            let i = wi * 64 + q * 16;
            if i >= n {
                break;
            }
            let left = n - i;
            let k: __mmask16 = if left >= 16 { 0xffff } else { (1u16 << left) - 1 };
            let v = _mm512_maskz_loadu_ps(k, values.as_ptr().add(i));
            let ones = _mm512_mask_cmp_ps_mask::<_CMP_EQ_OQ>(k, v, one);
            let zeros = _mm512_mask_cmp_ps_mask::<_CMP_EQ_OQ>(k, v, zero);
            bad |= k & !(ones | zeros);
            word |= (ones as u64) << (16 * q);
        }
        *w = word;
    }
    bad == 0
}

/// `pack_f32` 64 values at a time (any machine).
pub(crate) fn pack_portable(values: &[f32], raw: &mut [u64]) -> bool {
    let mut ok = true;
    let chunks = values.chunks_exact(64);
    let tail = chunks.remainder();
    for (w, c) in raw.iter_mut().zip(chunks) {
        let (word, good) = pack_f32(c.try_into().expect("chunks_exact(64) yields 64 values"));
        *w = word;
        ok &= good;
    }
    if !tail.is_empty() {
        // Zeros are valid mask values and set no bit, so padding the tail with them is neutral.
        let mut last = [0.0f32; 64];
        last[..tail.len()].copy_from_slice(tail);
        let (word, good) = pack_f32(&last);
        raw[values.len() / 64] = word;
        ok &= good;
    }
    ok
}

impl BitMask {
    /// From bytes packed least significant bit first (bit `i` in byte `i / 8`, bit `i % 8`), as
    /// `numpy.packbits(..., bitorder="little")` writes them. Needs exactly
    /// `ceil(height * width / 8)` bytes, and the padding bits of the last byte must be zero.
    pub fn from_packed_bytes(height: usize, width: usize, bytes: &[u8]) -> Result<BitMask> {
        let n = height.checked_mul(width).ok_or_else(|| Error::Other(format!("BitMask {height}x{width}: size overflows")))?;
        if bytes.len() != n.div_ceil(8) {
            return Err(Error::Other(format!("BitMask {height}x{width}: needs {} packed bytes, got {}", n.div_ceil(8), bytes.len())));
        }
        if n % 8 != 0 {
            let last = bytes[bytes.len() - 1];
            if last >> (n % 8) != 0 {
                return Err(Error::Other(format!("BitMask {height}x{width}: padding bits after the last position are not zero")));
            }
        }
        let raw = bytes
            .chunks(8)
            .map(|chunk| {
                let mut b = [0u8; 8];
                b[..chunk.len()].copy_from_slice(chunk);
                u64::from_le_bytes(b)
            })
            .collect();
        Ok(BitMask::from_words(height, width, raw))
    }

    /// The inverse of [`BitMask::from_packed_bytes`].
    pub fn to_packed_bytes(&self) -> Vec<u8> {
        let nb = self.len().div_ceil(8);
        let mut out = Vec::with_capacity(nb + 8);
        for w in self.words() {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.truncate(nb);
        out
    }

    pub fn height(&self) -> usize {
        self.height
    }
    pub fn width(&self) -> usize {
        self.width
    }
    /// Number of positions (`height * width`).
    pub fn len(&self) -> usize {
        self.height * self.width
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The bits, row-major (position `y * width + x`).
    pub fn bits(&self) -> &BitSlice<u64, Lsb0> {
        &self.bits
    }
    /// The packed words (see the module docs for the bit order).
    pub fn words(&self) -> &[u64] {
        self.bits.as_raw_slice()
    }
    /// The same bits as `u32` words (the device layout).
    pub fn to_u32_words(&self) -> Vec<u32> {
        let n = self.len().div_ceil(32);
        let mut out = Vec::with_capacity(n + 1);
        for w in self.words() {
            out.push(*w as u32);
            out.push((*w >> 32) as u32);
        }
        out.truncate(n);
        out
    }

    /// Bit at row `y`, column `x`. Panics when out of range, like slice indexing.
    pub fn get(&self, y: usize, x: usize) -> bool {
        assert!(y < self.height && x < self.width, "({y}, {x}) outside {}x{}", self.height, self.width);
        self.bits[y * self.width + x]
    }

    pub fn set(&mut self, y: usize, x: usize, v: bool) {
        assert!(y < self.height && x < self.width, "({y}, {x}) outside {}x{}", self.height, self.width);
        self.bits.set(y * self.width + x, v);
    }

    pub fn count_ones(&self) -> usize {
        self.words().iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Fraction of positions set (0 for an empty mask).
    pub fn density(&self) -> f64 {
        if self.is_empty() {
            0.0
        } else {
            self.count_ones() as f64 / self.len() as f64
        }
    }

    /// Row-major booleans.
    pub fn to_bools(&self) -> Vec<bool> {
        self.bits.iter().by_vals().collect()
    }

    /// Max-pool with kernel = stride = `r` (a cell is set if any position in its r×r block is):
    /// the mask of a layer `r` times coarser. `r` must divide both sides.
    pub fn max_pool(&self, r: usize) -> Result<BitMask> {
        if r == 0 || (self.height % r, self.width % r) != (0, 0) {
            return Err(Error::Other(format!("BitMask {}x{}: cannot max-pool by {r}", self.height, self.width)));
        }
        if r == 1 {
            return Ok(self.clone());
        }
        // A pooled cell is set exactly when the aligned r×r DISTile at its block exists.
        let g = u16::try_from(r)
            .map(|r| super::Granularity::new(r, r))
            .map_err(|_| Error::Other(format!("BitMask: max-pool factor {r} is larger than a tile side can be")))?;
        let mut out = BitMask::zeros(self.height / r, self.width / r);
        for t in &self.aligned_tiles(g).tiles {
            out.set(t.y as usize / r, t.x as usize / r, true);
        }
        Ok(out)
    }

    /// Dilate with a k×k square (k odd; stride 1, positions outside the map count as unset):
    /// the positions whose k×k neighbourhood holds a set bit, i.e. the halo a k×k conv reads.
    pub fn dilate(&self, k: usize) -> Result<BitMask> {
        if k & 1 == 0 {
            return Err(Error::Other(format!("BitMask: dilation size must be odd, got {k}")));
        }
        Ok(self.dilate_xy(k / 2, k / 2))
    }

    /// Dilate with a (2·ry+1)×(2·rx+1) rectangle (positions outside the map count as unset):
    /// the halo a conv with that kernel reads around the set positions. Whole rows at a time:
    /// each row is widened by shifted ORs, then rows are ORed with their neighbours, both by
    /// doubling, so the cost is O(rows · words per row · log r) rather than per bit.
    pub fn dilate_xy(&self, ry: usize, rx: usize) -> BitMask {
        let (h, w) = (self.height, self.width);
        if self.is_empty() || (ry == 0 && rx == 0) {
            return self.clone();
        }
        let nw = w.div_ceil(64);
        let mut rows = vec![0u64; h * nw];
        let raw = self.words();
        // Radii past the map's size change nothing; capping keeps the doubling short.
        let (wx, wy) = (rx.min(w) + 1, ry.min(h) + 1);
        for (y, row) in rows.chunks_exact_mut(nw).enumerate() {
            words::or_bits(raw, y * w, w, row);
            if rx > 0 {
                words::widen_down(row, 1, wx);
                words::widen_up(row, 1, wx);
                row[nw - 1] &= low_bits(w - 64 * (nw - 1));
            }
        }
        // Rows: row y becomes the OR of rows y-ry..=y+ry, by the same doubling over rows.
        let mut cur = 1;
        while cur < wy {
            let step = cur.min(wy - cur);
            for y in 0..h.saturating_sub(step) {
                let (a, b) = rows.split_at_mut((y + step) * nw);
                for (d, s) in a[y * nw..(y + 1) * nw].iter_mut().zip(&b[..nw]) {
                    *d |= *s;
                }
            }
            cur += step;
        }
        let mut cur = 1;
        while cur < wy {
            let step = cur.min(wy - cur);
            for y in (step..h).rev() {
                let (a, b) = rows.split_at_mut(y * nw);
                for (d, s) in b[..nw].iter_mut().zip(&a[(y - step) * nw..(y - step + 1) * nw]) {
                    *d |= *s;
                }
            }
            cur += step;
        }
        let mut out = vec![0u64; (h * w).div_ceil(64)];
        for (y, row) in rows.chunks_exact(nw).enumerate() {
            words::or_store(&mut out, y * w, w, row);
        }
        BitMask::from_words(h, w, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_round_trips_lsb_first() {
        let m = BitMask::from_fn(3, 5, |y, x| (y * 5 + x) % 3 == 0);
        let bytes = m.to_packed_bytes();
        assert_eq!(bytes.len(), 2);
        // positions 0, 3, 6, 9, 12 -> bits 0, 3, 6 of byte 0 and bits 1, 4 of byte 1
        assert_eq!(bytes, vec![0b0100_1001, 0b0001_0010]);
        assert_eq!(BitMask::from_packed_bytes(3, 5, &bytes).unwrap(), m);
        assert_eq!(m.count_ones(), 5);
        assert!((m.density() - 5.0 / 15.0).abs() < 1e-12);
        assert_eq!(m.to_u32_words(), vec![0b0001_0010_0100_1001]);
    }

    #[test]
    fn packed_bytes_are_checked() {
        assert!(BitMask::from_packed_bytes(3, 5, &[0]).is_err());
        assert!(BitMask::from_packed_bytes(3, 5, &[0, 0, 0]).is_err());
        let e = BitMask::from_packed_bytes(3, 5, &[0, 0x80]).unwrap_err().to_string();
        assert!(e.contains("padding"), "{e}");
        assert!(BitMask::from_packed_bytes(usize::MAX, 2, &[]).is_err());
    }

    #[test]
    fn long_masks_span_words() {
        let m = BitMask::from_fn(9, 17, |y, x| (y + 2 * x) % 7 == 1);
        let b = m.to_packed_bytes();
        let back = BitMask::from_packed_bytes(9, 17, &b).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.to_bools(), m.to_bools());
        let u32s = m.to_u32_words();
        for i in 0..m.len() {
            assert_eq!((u32s[i / 32] >> (i % 32)) & 1 == 1, m.to_bools()[i]);
        }
    }

    #[test]
    fn max_pool_and_dilate() {
        let mut m = BitMask::zeros(4, 6);
        m.set(0, 0, true);
        m.set(3, 5, true);
        let p = m.max_pool(2).unwrap();
        assert_eq!((p.height(), p.width()), (2, 3));
        assert_eq!(p.to_bools(), vec![true, false, false, false, false, true]);
        assert!(m.max_pool(4).is_err());
        let d = m.dilate(3).unwrap();
        assert_eq!(d.count_ones(), 8);
        assert!(d.get(1, 1) && d.get(2, 4) && !d.get(2, 2));
        assert!(m.dilate(2).is_err());
        assert_eq!(m.dilate(1).unwrap(), m);
    }
}
