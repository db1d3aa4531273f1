//! A sparse op's mask value -> one `BitMask` per image of the batch.

use dynaspa_runtime::graph::MaskKind;
use dynaspa_runtime::sparsity::BitMask;
use dynaspa_runtime::{Error, Result, Tensor};

/// `mask` is `[N or 1, 1, h, w]` (spatial) or `[N or 1, t]` / `[N or 1, t, 1]` (token, returned as
/// 1 x t masks); a batch of 1 is broadcast to `images`. Values must be exactly 0 or 1.
pub(crate) fn bitmasks(mask: &Tensor, name: &str, kind: MaskKind, images: usize, h: usize, w: usize) -> Result<Vec<BitMask>> {
    let mh = if kind == MaskKind::Spatial { h } else { 1 };
    let mut out = vec![BitMask::zeros(mh, w); images];
    refill(mask, name, kind, &mut out, h, w)?;
    Ok(out)
}

/// One mask value as a sparse op reads it, for `MaskMemo::get`.
pub(crate) struct Reading<'a> {
    pub mask: &'a Tensor,
    pub name: &'a str,
    pub kind: MaskKind,
    pub images: usize,
    pub h: usize,
    pub w: usize,
}

impl super::memo::MaskSource for Reading<'_> {
    fn new(&self) -> Result<Vec<BitMask>> {
        bitmasks(self.mask, self.name, self.kind, self.images, self.h, self.w)
    }
    fn refill(&self, masks: &mut [BitMask]) -> Result<()> {
        refill(self.mask, self.name, self.kind, masks, self.h, self.w)
    }
}

/// [`bitmasks`] into masks of the right sizes made earlier (last frame's): nothing is allocated.
pub(crate) fn refill(mask: &Tensor, name: &str, kind: MaskKind, out: &mut [BitMask], h: usize, w: usize) -> Result<()> {
    let images = out.len();
    let s = mask.shape();
    let shape_ok = match kind {
        MaskKind::Spatial => s.len() == 4 && s[1] == 1 && s[2] == h && s[3] == w,
        MaskKind::Token => (s.len() == 2 && s[1] == w) || (s.len() == 3 && s[1] == w && s[2] == 1),
    } && (s[0] == images || s[0] == 1);
    if !shape_ok {
        let want = match kind {
            MaskKind::Spatial => format!("[{images}, 1, {h}, {w}]"),
            MaskKind::Token => format!("[{images}, {w}] or [{images}, {w}, 1]"),
        };
        return Err(Error::Other(format!("mask '{name}' has shape {s:?}, the sparse op needs {want}")));
    }
    let v = mask.as_f32().map_err(|_| Error::Other(format!("mask '{name}' must be FLOAT, got {}", mask.dtype())))?;
    let plane = match kind {
        MaskKind::Spatial => h * w,
        MaskKind::Token => w,
    };
    for (img, m) in out.iter_mut().enumerate().take(s[0]) {
        m.refill_f32(&v[img * plane..][..plane]).map_err(|e| Error::Other(format!("mask '{name}', image {img}: {e}")))?;
    }
    if s[0] == 1 && images > 1 {
        let (first, rest) = out.split_at_mut(1);
        rest.iter_mut().for_each(|m| m.clone_from(&first[0]));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spatial_and_token_masks_with_broadcast_and_errors() {
        let v: Vec<f32> = (0..2 * 6).map(|i| (i % 3 == 0) as u8 as f32).collect();
        let t = Tensor::from_f32(vec![2, 1, 2, 3], v).unwrap();
        let m = bitmasks(&t, "m", MaskKind::Spatial, 2, 2, 3).unwrap();
        assert_eq!(m.len(), 2);
        assert!(m[0].get(0, 0) && !m[0].get(0, 1) && m[0].get(1, 0));
        assert!(bitmasks(&t, "m", MaskKind::Spatial, 2, 3, 2).is_err());
        let one = Tensor::from_f32(vec![1, 5, 1], vec![1.0, 0.0, 0.0, 1.0, 1.0]).unwrap();
        let m = bitmasks(&one, "tok", MaskKind::Token, 3, 1, 5).unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m[2].count_ones(), 3);
        let bad = Tensor::from_f32(vec![1, 5], vec![1.0, 0.5, 0.0, 1.0, 1.0]).unwrap();
        let e = bitmasks(&bad, "tok", MaskKind::Token, 1, 1, 5).unwrap_err().to_string();
        assert!(e.contains("tok"), "{e}");
    }
}
