//! `BitMask`: a binary map over the output positions of an op (H×W for convs, the token grid for
//! attention), packed row-major into `u64` words, least significant bit first: position
//! `i = y * width + x` is bit `i % 64` of `words[i / 64]`. Bits past `height * width` are zero.

use crate::error::{Error, Result};

#[derive(Clone, PartialEq, Eq, Hash)]
pub struct BitMask {
    height: usize,
    width: usize,
    words: Vec<u64>,
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

fn n_words(bits: usize) -> usize {
    bits.div_ceil(64)
}

impl BitMask {
    /// An all-zero mask. Panics only if `height * width` overflows `usize`.
    pub fn zeros(height: usize, width: usize) -> BitMask {
        let n = height.checked_mul(width).expect("mask size overflows usize");
        BitMask { height, width, words: vec![0; n_words(n)] }
    }

    pub fn ones(height: usize, width: usize) -> BitMask {
        BitMask::from_fn(height, width, |_, _| true)
    }

    pub fn from_fn(height: usize, width: usize, mut f: impl FnMut(usize, usize) -> bool) -> BitMask {
        let mut m = BitMask::zeros(height, width);
        for y in 0..height {
            for x in 0..width {
                if f(y, x) {
                    m.set(y, x, true);
                }
            }
        }
        m
    }

    /// From row-major booleans; `values.len()` must be `height * width`.
    pub fn from_bools(height: usize, width: usize, values: &[bool]) -> Result<BitMask> {
        if height.checked_mul(width) != Some(values.len()) {
            return Err(Error::Other(format!("BitMask {height}x{width}: got {} values", values.len())));
        }
        Ok(BitMask::from_fn(height, width, |y, x| values[y * width + x]))
    }

    /// From bytes packed least significant bit first (bit `i` in byte `i / 8`, bit `i % 8`), as
    /// `numpy.packbits(..., bitorder="little")` writes them. Needs exactly
    /// `ceil(height * width / 8)` bytes, and the padding bits of the last byte must be zero.
    pub fn from_packed_bytes(height: usize, width: usize, bytes: &[u8]) -> Result<BitMask> {
        let n = height
            .checked_mul(width)
            .ok_or_else(|| Error::Other(format!("BitMask {height}x{width}: size overflows")))?;
        if bytes.len() != n.div_ceil(8) {
            return Err(Error::Other(format!(
                "BitMask {height}x{width}: needs {} packed bytes, got {}",
                n.div_ceil(8),
                bytes.len()
            )));
        }
        if n % 8 != 0 {
            let last = bytes[bytes.len() - 1];
            if last >> (n % 8) != 0 {
                return Err(Error::Other(format!(
                    "BitMask {height}x{width}: padding bits after the last position are not zero"
                )));
            }
        }
        let mut words = vec![0u64; n_words(n)];
        for (i, chunk) in bytes.chunks(8).enumerate() {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            words[i] = u64::from_le_bytes(b);
        }
        Ok(BitMask { height, width, words })
    }

    /// The inverse of [`BitMask::from_packed_bytes`].
    pub fn to_packed_bytes(&self) -> Vec<u8> {
        let nb = self.len().div_ceil(8);
        let mut out = Vec::with_capacity(nb);
        for w in &self.words {
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
    /// The packed words (see the module docs for the bit order).
    pub fn words(&self) -> &[u64] {
        &self.words
    }
    /// The same bits as `u32` words (the device layout).
    pub fn to_u32_words(&self) -> Vec<u32> {
        let n = self.len().div_ceil(32);
        let mut out = Vec::with_capacity(n);
        for w in &self.words {
            out.push(*w as u32);
            out.push((*w >> 32) as u32);
        }
        out.truncate(n);
        out
    }

    /// Bit at row `y`, column `x`. Panics when out of range, like slice indexing.
    pub fn get(&self, y: usize, x: usize) -> bool {
        assert!(y < self.height && x < self.width, "({y}, {x}) outside {}x{}", self.height, self.width);
        let i = y * self.width + x;
        (self.words[i / 64] >> (i % 64)) & 1 == 1
    }

    pub fn set(&mut self, y: usize, x: usize, v: bool) {
        assert!(y < self.height && x < self.width, "({y}, {x}) outside {}x{}", self.height, self.width);
        let i = y * self.width + x;
        if v {
            self.words[i / 64] |= 1 << (i % 64);
        } else {
            self.words[i / 64] &= !(1 << (i % 64));
        }
    }

    pub fn count_ones(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
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
        (0..self.len()).map(|i| (self.words[i / 64] >> (i % 64)) & 1 == 1).collect()
    }

    /// Max-pool with kernel = stride = `r` (a cell is set if any position in its r×r block is):
    /// the mask of a layer `r` times coarser. `r` must divide both sides.
    pub fn max_pool(&self, r: usize) -> Result<BitMask> {
        if r == 0 || self.height % r != 0 || self.width % r != 0 {
            return Err(Error::Other(format!("BitMask {}x{}: cannot max-pool by {r}", self.height, self.width)));
        }
        if r == 1 {
            return Ok(self.clone());
        }
        let mut out = BitMask::zeros(self.height / r, self.width / r);
        for y in 0..self.height {
            for x in 0..self.width {
                if self.get(y, x) {
                    out.set(y / r, x / r, true);
                }
            }
        }
        Ok(out)
    }

    /// Dilate with a k×k square (k odd; stride 1, positions outside the map count as unset):
    /// the positions whose k×k neighbourhood holds a set bit, i.e. the halo a k×k conv reads.
    pub fn dilate(&self, k: usize) -> Result<BitMask> {
        if k == 0 || k % 2 == 0 {
            return Err(Error::Other(format!("BitMask: dilation size must be odd, got {k}")));
        }
        if k == 1 {
            return Ok(self.clone());
        }
        let r = k / 2;
        let mut out = BitMask::zeros(self.height, self.width);
        for y in 0..self.height {
            for x in 0..self.width {
                if self.get(y, x) {
                    for yy in y.saturating_sub(r)..(y + r + 1).min(self.height) {
                        for xx in x.saturating_sub(r)..(x + r + 1).min(self.width) {
                            out.set(yy, xx, true);
                        }
                    }
                }
            }
        }
        Ok(out)
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
