//! Mask datasets (`.dsm`): the mask every sparse op of a model sees over many real frames,
//! bit-packed. Written by `models/common.py` (`write_mask_dataset`); the format is specified in
//! `models/masks/FORMAT.md`. Summary (all integers little-endian):
//!
//! ```text
//! magic "DSPAMASK" | u32 version (1) | u32 n_frames | u32 n_maps | u32 n_ops | u32 meta_len
//! meta: meta_len bytes of UTF-8 JSON (an object)
//! n_maps x map:  u16 name_len | name | u32 height | u32 width | u32 prefix_tokens
//! n_ops  x op:   u16 name_len | name | u32 map | u16 reduce | u16 dilate | u32 height | u32 width
//! payload: for each frame, for each map: ceil(height*width/8) bytes, row-major, LSB first
//! u32 CRC-32 (IEEE 802.3, as zlib.crc32) of every byte before it
//! ```
//!
//! An op sees its map max-pooled by `reduce` (kernel = stride) and then dilated by a
//! `dilate`×`dilate` square; `height`×`width` in the op record is the result's size.

use super::bitmask::BitMask;
use crate::error::{Error, Result};
use std::path::Path;

pub const MAGIC: &[u8; 8] = b"DSPAMASK";
pub const VERSION: u32 = 1;
const HEADER_LEN: usize = 8 + 5 * 4;

/// One stored map: a distinct mask per frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapInfo {
    pub name: String,
    pub height: usize,
    pub width: usize,
    /// Always-active tokens before the grid (attention: the class token). 0 for conv maps.
    pub prefix_tokens: usize,
}

/// A sparse op (ONNX node name) and how its mask derives from a stored map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SparseOp {
    pub name: String,
    pub map: usize,
    /// Max-pool factor (kernel = stride) applied to the map first; 1 = none.
    pub reduce: usize,
    /// Side of the square dilation applied next (odd); 1 = none.
    pub dilate: usize,
    /// Size of the op's mask (the map's size divided by `reduce`).
    pub height: usize,
    pub width: usize,
}

#[derive(Clone, Debug)]
pub struct MaskDataset {
    meta: serde_json::Value,
    maps: Vec<MapInfo>,
    ops: Vec<SparseOp>,
    /// frames[f][m]: map m of frame f.
    frames: Vec<Vec<BitMask>>,
}

fn bad(msg: impl Into<String>) -> Error {
    Error::Other(format!("mask dataset: {}", msg.into()))
}

const fn crc_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}
static CRC_TABLE: [u32; 256] = crc_table();

/// CRC-32 (IEEE 802.3, reflected, init and final xor 0xFFFFFFFF), equal to Python's zlib.crc32.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut c = 0xFFFF_FFFFu32;
    for &b in bytes {
        c = CRC_TABLE[((c ^ b as u32) & 0xFF) as usize] ^ (c >> 8);
    }
    c ^ 0xFFFF_FFFF
}

/// A bounds-checked little-endian reader that names the section it is reading in errors.
struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| bad(format!("truncated: {what} needs {n} bytes at offset {}, the file has {}", self.pos, self.b.len())))?;
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u16(&mut self, what: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.take(2, what)?.try_into().unwrap()))
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4, what)?.try_into().unwrap()))
    }
    fn name(&mut self, what: &str) -> Result<String> {
        let n = self.u16(what)? as usize;
        let raw = self.take(n, what)?;
        let s = std::str::from_utf8(raw).map_err(|_| bad(format!("{what}: name is not UTF-8")))?;
        if s.is_empty() {
            return Err(bad(format!("{what}: empty name")));
        }
        Ok(s.to_string())
    }
}

impl MaskDataset {
    /// Builds a dataset, checking that everything fits together (what `from_bytes` checks).
    pub fn new(meta: serde_json::Value, maps: Vec<MapInfo>, ops: Vec<SparseOp>, frames: Vec<Vec<BitMask>>) -> Result<MaskDataset> {
        if !meta.is_object() {
            return Err(bad("metadata must be a JSON object"));
        }
        for m in &maps {
            check_map(m)?;
        }
        let mut seen = std::collections::HashSet::new();
        for op in &ops {
            check_op(op, &maps)?;
            if !seen.insert(op.name.as_str()) {
                return Err(bad(format!("op '{}' listed twice", op.name)));
            }
        }
        for (f, per) in frames.iter().enumerate() {
            if per.len() != maps.len() {
                return Err(bad(format!("frame {f} has {} maps, expected {}", per.len(), maps.len())));
            }
            for (m, info) in per.iter().zip(&maps) {
                if (m.height(), m.width()) != (info.height, info.width) {
                    return Err(bad(format!(
                        "frame {f}, map '{}': {}x{}, expected {}x{}",
                        info.name,
                        m.height(),
                        m.width(),
                        info.height,
                        info.width
                    )));
                }
            }
        }
        Ok(MaskDataset { meta, maps, ops, frames })
    }

    /// Reads and validates a `.dsm` file; errors name the file.
    pub fn open(path: impl AsRef<Path>) -> Result<MaskDataset> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        MaskDataset::from_bytes(&bytes).map_err(|e| match e {
            Error::Other(msg) => Error::Other(format!("{}: {msg}", path.display())),
            e => e,
        })
    }

    /// Parses and validates a whole `.dsm` file held in memory. Never panics on bad input.
    pub fn from_bytes(bytes: &[u8]) -> Result<MaskDataset> {
        if bytes.len() < 8 || &bytes[..8] != MAGIC {
            return Err(bad("not a mask dataset (the file does not start with \"DSPAMASK\")"));
        }
        let mut r = Reader { b: bytes, pos: 8 };
        let version = r.u32("header")?;
        if version != VERSION {
            return Err(bad(format!("format version {version} is not supported (this build reads {VERSION})")));
        }
        let n_frames = r.u32("header")? as usize;
        let n_maps = r.u32("header")? as usize;
        let n_ops = r.u32("header")? as usize;
        let meta_len = r.u32("header")? as usize;
        debug_assert_eq!(r.pos, HEADER_LEN);
        let meta_raw = r.take(meta_len, "metadata")?;
        let meta: serde_json::Value = serde_json::from_slice(meta_raw).map_err(|e| bad(format!("metadata is not valid JSON: {e}")))?;
        // Every map record takes at least 15 bytes and every op record 19, so counts beyond
        // what the file can hold are rejected before anything is allocated for them.
        if n_maps > bytes.len() / 15 || n_ops > bytes.len() / 19 {
            return Err(bad(format!("{n_maps} maps / {n_ops} ops cannot fit in {} bytes", bytes.len())));
        }
        let mut maps = Vec::with_capacity(n_maps);
        for i in 0..n_maps {
            let what = format!("map record {i}");
            let name = r.name(&what)?;
            let height = r.u32(&what)? as usize;
            let width = r.u32(&what)? as usize;
            let prefix_tokens = r.u32(&what)? as usize;
            let m = MapInfo { name, height, width, prefix_tokens };
            check_map(&m)?;
            maps.push(m);
        }
        let mut ops = Vec::with_capacity(n_ops);
        for i in 0..n_ops {
            let what = format!("op record {i}");
            let name = r.name(&what)?;
            let map = r.u32(&what)? as usize;
            let reduce = r.u16(&what)? as usize;
            let dilate = r.u16(&what)? as usize;
            let height = r.u32(&what)? as usize;
            let width = r.u32(&what)? as usize;
            let op = SparseOp { name, map, reduce, dilate, height, width };
            check_op(&op, &maps)?;
            ops.push(op);
        }
        // Payload size, with overflow checks, against the bytes actually present.
        let per_frame = maps
            .iter()
            .try_fold(0usize, |acc, m| m.height.checked_mul(m.width).and_then(|n| acc.checked_add(n.div_ceil(8))))
            .ok_or_else(|| bad("map sizes overflow"))?;
        let payload = per_frame.checked_mul(n_frames).ok_or_else(|| bad("payload size overflows"))?;
        let expected = r.pos.checked_add(payload).and_then(|n| n.checked_add(4)).ok_or_else(|| bad("file size overflows"))?;
        if bytes.len() != expected {
            return Err(bad(format!(
                "{} ({n_frames} frames x {per_frame} bytes of masks need a file of {expected} bytes, it has {})",
                if bytes.len() < expected { "truncated" } else { "trailing bytes after the checksum" },
                bytes.len()
            )));
        }
        let stored = u32::from_le_bytes(bytes[expected - 4..].try_into().unwrap());
        let actual = crc32(&bytes[..expected - 4]);
        if stored != actual {
            return Err(bad(format!("checksum mismatch (stored {stored:08x}, computed {actual:08x}): the file is corrupt")));
        }
        let mut frames = Vec::with_capacity(n_frames);
        for f in 0..n_frames {
            let mut per = Vec::with_capacity(n_maps);
            for m in &maps {
                let raw = r.take((m.height * m.width).div_ceil(8), "payload")?;
                per.push(BitMask::from_packed_bytes(m.height, m.width, raw).map_err(|e| bad(format!("frame {f}, map '{}': {e}", m.name)))?);
            }
            frames.push(per);
        }
        MaskDataset::new(meta, maps, ops, frames)
    }

    /// Serialises to the `.dsm` format (what `from_bytes` reads).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::new();
        let meta = serde_json::to_vec(&self.meta).expect("JSON value serialises");
        b.extend_from_slice(MAGIC);
        for v in [VERSION, self.frames.len() as u32, self.maps.len() as u32, self.ops.len() as u32, meta.len() as u32] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&meta);
        for m in &self.maps {
            b.extend_from_slice(&(m.name.len() as u16).to_le_bytes());
            b.extend_from_slice(m.name.as_bytes());
            for v in [m.height, m.width, m.prefix_tokens] {
                b.extend_from_slice(&(v as u32).to_le_bytes());
            }
        }
        for op in &self.ops {
            b.extend_from_slice(&(op.name.len() as u16).to_le_bytes());
            b.extend_from_slice(op.name.as_bytes());
            b.extend_from_slice(&(op.map as u32).to_le_bytes());
            b.extend_from_slice(&(op.reduce as u16).to_le_bytes());
            b.extend_from_slice(&(op.dilate as u16).to_le_bytes());
            b.extend_from_slice(&(op.height as u32).to_le_bytes());
            b.extend_from_slice(&(op.width as u32).to_le_bytes());
        }
        for per in &self.frames {
            for m in per {
                b.extend_from_slice(&m.to_packed_bytes());
            }
        }
        let c = crc32(&b);
        b.extend_from_slice(&c.to_le_bytes());
        b
    }

    /// The JSON metadata (model, family, target density, frame list, producer...).
    pub fn meta(&self) -> &serde_json::Value {
        &self.meta
    }
    pub fn n_frames(&self) -> usize {
        self.frames.len()
    }
    pub fn maps(&self) -> &[MapInfo] {
        &self.maps
    }
    pub fn ops(&self) -> &[SparseOp] {
        &self.ops
    }
    pub fn op_index(&self, name: &str) -> Option<usize> {
        self.ops.iter().position(|o| o.name == name)
    }

    /// Stored map `map` of frame `frame`.
    pub fn map_mask(&self, frame: usize, map: usize) -> Result<&BitMask> {
        self.frames
            .get(frame)
            .ok_or_else(|| bad(format!("frame {frame} out of range (the dataset has {})", self.frames.len())))?
            .get(map)
            .ok_or_else(|| bad(format!("map {map} out of range (the dataset has {})", self.maps.len())))
    }

    /// The mask op `op` sees in frame `frame` (its map, max-pooled and dilated).
    pub fn op_mask(&self, frame: usize, op: usize) -> Result<BitMask> {
        let o = self.ops.get(op).ok_or_else(|| bad(format!("op {op} out of range (the dataset has {})", self.ops.len())))?;
        self.map_mask(frame, o.map)?.max_pool(o.reduce)?.dilate(o.dilate)
    }

    /// The mask op `name` sees in frame `frame`.
    pub fn op_mask_by_name(&self, frame: usize, name: &str) -> Result<BitMask> {
        let i = self.op_index(name).ok_or_else(|| bad(format!("no sparse op named '{name}'")))?;
        self.op_mask(frame, i)
    }

    /// Every op's mask in frame `frame`, in op order: (op name, mask).
    pub fn frame_op_masks(&self, frame: usize) -> Result<Vec<(&str, BitMask)>> {
        (0..self.ops.len()).map(|i| Ok((self.ops[i].name.as_str(), self.op_mask(frame, i)?))).collect()
    }
}

fn check_map(m: &MapInfo) -> Result<()> {
    if m.height == 0 || m.width == 0 {
        return Err(bad(format!("map '{}' has an empty size {}x{}", m.name, m.height, m.width)));
    }
    if m.height.checked_mul(m.width).is_none_or(|n| n > u32::MAX as usize) {
        return Err(bad(format!("map '{}' is too large ({}x{})", m.name, m.height, m.width)));
    }
    Ok(())
}

fn check_op(op: &SparseOp, maps: &[MapInfo]) -> Result<()> {
    let m = maps.get(op.map).ok_or_else(|| bad(format!("op '{}' refers to map {}, but there are {} maps", op.name, op.map, maps.len())))?;
    if op.reduce == 0 || m.height % op.reduce != 0 || m.width % op.reduce != 0 {
        return Err(bad(format!(
            "op '{}': reduce factor {} does not divide map '{}' ({}x{})",
            op.name, op.reduce, m.name, m.height, m.width
        )));
    }
    if op.dilate == 0 || op.dilate % 2 == 0 {
        return Err(bad(format!("op '{}': dilation {} is not odd", op.name, op.dilate)));
    }
    if (op.height, op.width) != (m.height / op.reduce, m.width / op.reduce) {
        return Err(bad(format!(
            "op '{}': recorded size {}x{} does not match map '{}' {}x{} reduced by {}",
            op.name, op.height, op.width, m.name, m.height, m.width, op.reduce
        )));
    }
    if op.reduce > 1 && m.prefix_tokens > 0 {
        return Err(bad(format!("op '{}': a token map with prefix tokens cannot be reduced", op.name)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> MaskDataset {
        let maps = vec![
            MapInfo { name: "spatial".into(), height: 4, width: 6, prefix_tokens: 0 },
            MapInfo { name: "tokens".into(), height: 2, width: 3, prefix_tokens: 1 },
        ];
        let op = |name: &str, map, reduce, dilate, h, w| SparseOp { name: name.into(), map, reduce, dilate, height: h, width: w };
        let ops = vec![
            op("/conv1/Conv", 0, 1, 3, 4, 6),
            op("/conv2/Conv", 0, 1, 1, 4, 6),
            op("/down/Conv", 0, 2, 1, 2, 3),
            op("/blocks.1/attn/MatMul", 1, 1, 1, 2, 3),
        ];
        let frames = (0..3)
            .map(|f| vec![BitMask::from_fn(4, 6, |y, x| (y * 6 + x + f) % 5 == 0), BitMask::from_fn(2, 3, |y, x| (y + x + f) % 2 == 0)])
            .collect();
        MaskDataset::new(serde_json::json!({"model": "tiny", "density_target": 0.3}), maps, ops, frames).unwrap()
    }

    /// The file layout written out by hand (independent of `to_bytes`), as FORMAT.md specifies.
    fn hand_written() -> Vec<u8> {
        let mut b = b"DSPAMASK".to_vec();
        let meta = br#"{"a":1}"#;
        for v in [1u32, 1, 1, 2, meta.len() as u32] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(meta);
        b.extend_from_slice(&4u16.to_le_bytes());
        b.extend_from_slice(b"mask");
        for v in [2u32, 5, 0] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for (name, red, dil, h, w) in [("/a/Conv", 1u16, 3u16, 2u32, 5u32), ("/b/Conv", 1, 1, 2, 5)] {
            b.extend_from_slice(&(name.len() as u16).to_le_bytes());
            b.extend_from_slice(name.as_bytes());
            b.extend_from_slice(&0u32.to_le_bytes());
            b.extend_from_slice(&red.to_le_bytes());
            b.extend_from_slice(&dil.to_le_bytes());
            b.extend_from_slice(&h.to_le_bytes());
            b.extend_from_slice(&w.to_le_bytes());
        }
        // 2x5 mask: row 0 = 1 0 0 0 0, row 1 = 0 0 0 0 1 -> bits 0 and 9
        b.extend_from_slice(&[0b0000_0001, 0b0000_0010]);
        let c = crc32(&b);
        b.extend_from_slice(&c.to_le_bytes());
        b
    }

    fn with_crc(mut b: Vec<u8>) -> Vec<u8> {
        let n = b.len() - 4;
        let c = crc32(&b[..n]);
        b[n..].copy_from_slice(&c.to_le_bytes());
        b
    }

    fn err(b: &[u8]) -> String {
        MaskDataset::from_bytes(b).expect_err("corrupt input must be an error").to_string()
    }

    #[test]
    fn crc32_matches_zlib() {
        assert_eq!(crc32(b""), 0);
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b"The quick brown fox jumps over the lazy dog"), 0x414F_A339);
    }

    #[test]
    fn reads_the_documented_layout() {
        let d = MaskDataset::from_bytes(&hand_written()).unwrap();
        assert_eq!(d.n_frames(), 1);
        assert_eq!(d.meta()["a"], 1);
        assert_eq!(d.maps()[0], MapInfo { name: "mask".into(), height: 2, width: 5, prefix_tokens: 0 });
        let m = d.map_mask(0, 0).unwrap();
        assert_eq!(m.to_bools(), vec![true, false, false, false, false, false, false, false, false, true]);
        let a = d.op_mask_by_name(0, "/a/Conv").unwrap();
        assert_eq!(a.to_bools(), vec![true, true, false, true, true, true, true, false, true, true]);
        assert_eq!(d.op_mask(0, 1).unwrap(), *m);
        assert_eq!(d.to_bytes(), hand_written());
    }

    #[test]
    fn round_trips_and_derives_op_masks() {
        let d = tiny();
        let b = d.to_bytes();
        let e = MaskDataset::from_bytes(&b).unwrap();
        assert_eq!(e.maps(), d.maps());
        assert_eq!(e.ops(), d.ops());
        assert_eq!(e.meta(), d.meta());
        for f in 0..3 {
            for m in 0..2 {
                assert_eq!(e.map_mask(f, m).unwrap(), d.map_mask(f, m).unwrap());
            }
            let ops = e.frame_op_masks(f).unwrap();
            assert_eq!(ops.len(), 4);
            let base = e.map_mask(f, 0).unwrap();
            assert_eq!(ops[0].1, base.dilate(3).unwrap());
            assert_eq!(ops[1].1, *base);
            assert_eq!(ops[2].1, base.max_pool(2).unwrap());
            assert_eq!((ops[2].1.height(), ops[2].1.width()), (2, 3));
            assert_eq!(ops[3].0, "/blocks.1/attn/MatMul");
        }
        assert!(e.op_mask(3, 0).is_err());
        assert!(e.op_mask(0, 9).is_err());
        assert!(e.op_mask_by_name(0, "nope").unwrap_err().to_string().contains("nope"));
    }

    #[test]
    fn every_truncation_is_an_error() {
        let b = tiny().to_bytes();
        for n in 0..b.len() {
            let e = err(&b[..n]);
            assert!(e.contains("mask dataset"), "{n}: {e}");
        }
        assert!(err(&b[..b.len() - 1]).contains("truncated"));
    }

    #[test]
    fn header_errors_are_named() {
        let b = tiny().to_bytes();
        assert!(err(b"").contains("DSPAMASK"));
        let mut x = b.clone();
        x[0] = b'X';
        assert!(err(&x).contains("DSPAMASK"));
        let mut x = b.clone();
        x[8] = 2;
        assert!(err(&x).contains("version 2"));
        let mut x = b.clone();
        x.push(0);
        assert!(err(&x).contains("trailing"));
        // a huge frame count: rejected by size, nothing allocated
        let mut x = b.clone();
        x[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(err(&x).contains("truncated"));
        // huge map and op counts
        let mut x = b.clone();
        x[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(err(&x).contains("cannot fit"));
        let mut x = b.clone();
        x[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(err(&x).contains("cannot fit"));
        // metadata not JSON
        let mut x = b.clone();
        x[HEADER_LEN] = b'#';
        assert!(err(&x).contains("JSON"));
    }

    #[test]
    fn payload_corruption_fails_the_checksum() {
        let b = tiny().to_bytes();
        let mut x = b.clone();
        let n = x.len();
        x[n - 6] ^= 0x10;
        assert!(err(&x).contains("checksum"));
        let mut x = b.clone();
        x[n - 1] ^= 1;
        assert!(err(&x).contains("checksum"));
    }

    #[test]
    fn inconsistent_records_are_rejected_even_with_a_valid_checksum() {
        let base = hand_written();
        let meta_end = HEADER_LEN + 7;
        let map_rec = meta_end; // u16 4 | "mask" | h | w | prefix
        let op0 = map_rec + 2 + 4 + 12; // u16 7 | "/a/Conv" | map | reduce | dilate | h | w
        let op0_fields = op0 + 2 + 7;
        let patch = |off: usize, bytes: &[u8]| {
            let mut x = base.clone();
            x[off..off + bytes.len()].copy_from_slice(bytes);
            with_crc(x)
        };
        assert!(err(&patch(op0_fields, &7u32.to_le_bytes())).contains("refers to map 7"));
        assert!(err(&patch(op0_fields + 4, &2u16.to_le_bytes())).contains("does not divide"));
        assert!(err(&patch(op0_fields + 6, &2u16.to_le_bytes())).contains("not odd"));
        assert!(err(&patch(op0_fields + 8, &3u32.to_le_bytes())).contains("does not match"));
        assert!(err(&patch(map_rec + 6, &0u32.to_le_bytes())).contains("empty size"));
        assert!(err(&patch(map_rec + 2, &[0xFF, 0xFE])).contains("UTF-8"));
        // second op renamed to the first one's name
        let op1 = op0 + 2 + 7 + 16;
        assert!(err(&patch(op1 + 2, b"/a/Conv")).contains("twice"));
        // a set padding bit after the 10 mask bits
        let n = base.len();
        assert!(err(&patch(n - 5, &[0b0000_0110])).contains("padding"));
        // maps too large: refused by size before anything is allocated for them
        let big = |side: u32| {
            let mut x = base.clone();
            x[map_rec + 6..map_rec + 10].copy_from_slice(&side.to_le_bytes());
            x[map_rec + 10..map_rec + 14].copy_from_slice(&side.to_le_bytes());
            with_crc(x)
        };
        assert!(err(&big(70_000)).contains("too large"));
        assert!(err(&big(50_000)).contains("does not match")); // op records still say 2x5
    }

    #[test]
    fn random_corruption_never_panics() {
        let b = tiny().to_bytes();
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..2000 {
            let mut x = b.clone();
            for _ in 0..1 + next() % 4 {
                let i = (next() % x.len() as u64) as usize;
                x[i] = next() as u8;
            }
            let fixed = with_crc(x.clone());
            let _ = MaskDataset::from_bytes(&x);
            let _ = MaskDataset::from_bytes(&fixed);
        }
    }

    #[test]
    fn new_checks_frames_against_maps() {
        let d = tiny();
        let mut frames = vec![vec![BitMask::zeros(4, 6)]];
        let e = MaskDataset::new(d.meta().clone(), d.maps().to_vec(), vec![], frames.clone()).unwrap_err();
        assert!(e.to_string().contains("has 1 maps"));
        frames[0].push(BitMask::zeros(3, 3));
        let e = MaskDataset::new(d.meta().clone(), d.maps().to_vec(), vec![], frames).unwrap_err();
        assert!(e.to_string().contains("expected 2x3"));
        assert!(MaskDataset::new(serde_json::json!([1]), vec![], vec![], vec![]).is_err());
    }

    #[test]
    fn open_names_the_file() {
        let dir = std::env::temp_dir().join(format!("dsm-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("bad.dsm");
        std::fs::write(&p, b"DSPAMASK\x01\0\0\0").unwrap();
        let e = MaskDataset::open(&p).unwrap_err().to_string();
        assert!(e.contains("bad.dsm") && e.contains("truncated"), "{e}");
        let e = MaskDataset::open(dir.join("missing.dsm")).unwrap_err().to_string();
        assert!(e.contains("missing.dsm"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
