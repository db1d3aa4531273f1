//! Where bitmask.cl puts its results for one mask reading (images x h x w) and set of
//! granularities: the layout of the `meta` buffer the sparse kernels read, and the decoding of
//! the counts the host reads back.

use dynaspa_runtime::sparsity::Granularity;
use dynaspa_runtime::{Error, Result};

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MetaLayout {
    pub images: usize,
    pub h: usize,
    pub w: usize,
    pub grans: Vec<Granularity>,
    /// Ints per image in the counts region: one count per granularity and the bad-value word.
    pub cstride: usize,
    /// Start of image 0's words and lists (after every image's counts).
    pub data0: usize,
    pub words: usize,
    /// Per granularity: where its list starts in an image's data, and how many tiles its grid has.
    pub tiles_at: Vec<usize>,
    pub caps: Vec<usize>,
    pub img_stride: usize,
    /// A token compaction's buffer (token.cl): the counts are its first `images` ints and no
    /// word reports a bad value (token masks are binary by construction).
    pub tokens: bool,
}

impl MetaLayout {
    pub(crate) fn new(images: usize, h: usize, w: usize, grans: &[Granularity]) -> Result<MetaLayout> {
        let cstride = grans.len() + 1;
        let words = (h * w).div_ceil(32);
        let (mut tiles_at, mut caps) = (Vec::new(), Vec::new());
        let mut at = words;
        for g in grans {
            let e = g.effective();
            let cap = h.div_ceil(e.h as usize) * w.div_ceil(e.w as usize);
            tiles_at.push(at);
            caps.push(cap);
            at += cap;
        }
        let m = MetaLayout {
            images,
            h,
            w,
            grans: grans.to_vec(),
            cstride,
            data0: images * cstride,
            words,
            tiles_at,
            caps,
            img_stride: at,
            tokens: false,
        };
        if m.total() >= i32::MAX as usize || h * w == 0 || images == 0 {
            return Err(Error::Other(format!("a sparse mask of {images} x {h} x {w} is outside what the GPU tile lists index")));
        }
        Ok(m)
    }

    /// The layout of a token compaction of `images` x `tokens`, read as a 1 x tokens plane at
    /// granularity 1x1: its count is the active tokens.
    pub(crate) fn tokens(images: usize, tokens: usize) -> MetaLayout {
        let g = Granularity::new(1, 1);
        MetaLayout {
            images,
            h: 1,
            w: tokens,
            grans: vec![g],
            cstride: 1,
            data0: images,
            words: 0,
            tiles_at: vec![images],
            caps: vec![tokens],
            img_stride: tokens,
            tokens: true,
        }
    }

    /// Ints of the whole buffer.
    pub(crate) fn total(&self) -> usize {
        self.data0 + self.images * self.img_stride
    }

    /// bitmask.cl's `grans` argument.
    pub(crate) fn grans_table(&self) -> Vec<i32> {
        let mut v = Vec::with_capacity(3 * self.grans.len());
        for (g, &at) in self.grans.iter().zip(&self.tiles_at) {
            let e = g.effective();
            v.extend([e.h as i32, e.w as i32, at as i32]);
        }
        v
    }

    pub(crate) fn index(&self, g: Granularity) -> Option<usize> {
        self.grans.iter().position(|&h| h == g)
    }

    /// Columns a launch at granularity index `gi` may have per image: every tile of the grid.
    pub(crate) fn columns_cap(&self, gi: Option<usize>) -> usize {
        match gi {
            Some(i) => {
                let e = self.grans[i].effective();
                self.caps[i] * e.h as usize * e.w as usize
            }
            None => self.h * self.w,
        }
    }

    /// The counts region as read back: tile counts per granularity summed over images, or an
    /// error naming the first position of `mask` that is not 0 or 1.
    pub(crate) fn decode(&self, ints: &[i32], mask: &str, values: impl Fn(usize, usize) -> Option<f32>) -> Result<Vec<usize>> {
        if ints.len() < self.data0 {
            return Err(Error::Other(format!("mask '{mask}': {} count words read back, {} expected", ints.len(), self.data0)));
        }
        if self.tokens {
            return Ok(vec![ints[..self.images].iter().map(|&n| n.max(0) as usize).sum()]);
        }
        let mut sums = vec![0usize; self.grans.len()];
        for img in 0..self.images {
            let c = &ints[img * self.cstride..][..self.cstride];
            let bad = c[self.grans.len()];
            if bad >= 0 {
                let (y, x) = (bad as usize / self.w, bad as usize % self.w);
                let v = values(img, bad as usize).map_or_else(|| "a value".to_string(), |v| format!("{v}"));
                return Err(Error::Other(format!(
                    "mask '{mask}', image {img}: {v} at ({y}, {x}); a sparse op's mask must hold only 0 and 1"
                )));
            }
            for (s, &n) in sums.iter_mut().zip(c) {
                *s += n.max(0) as usize;
            }
        }
        Ok(sums)
    }
}
