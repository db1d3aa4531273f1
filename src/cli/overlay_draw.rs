//! Drawing an overlay: the frame (enlarged when small), the mask's active cells tinted, each
//! DISTile outlined, and a strip of text below it.

use dynaspa::runtime::sparsity::{BitMask, TileSet};
use image::{imageops, Rgb, RgbImage};

pub const TINT: [f32; 3] = [255.0, 40.0, 0.0];
pub const TINT_ALPHA: f32 = 0.45;
pub const GRID: Rgb<u8> = Rgb([0, 255, 255]);
const STRIP_BG: Rgb<u8> = Rgb([24, 24, 24]);
const TEXT: Rgb<u8> = Rgb([240, 240, 240]);
/// Frames narrower than this are enlarged by a whole factor to at least this width, so the
/// strip's text fits and cells of a few pixels stay visible.
pub const MIN_WIDTH: u32 = 384;
/// Glyphs are 8 x 8 pixels (font8x8), lines 10 pixels apart, times the text scale.
const GLYPH: u32 = 8;
const LINE: u32 = 10;
const PAD: u32 = 3;

/// The whole factor a frame `width` pixels wide is enlarged by.
pub fn zoom_for(width: u32) -> u32 {
    if width == 0 || width >= MIN_WIDTH {
        1
    } else {
        MIN_WIDTH.div_ceil(width)
    }
}

/// The overlay: `frame` enlarged by [`zoom_for`], `mask` tinted, `tiles` outlined, and `lines`
/// of text in a strip below.
pub fn compose(frame: &RgbImage, mask: &BitMask, tiles: Option<&TileSet>, lines: &[String]) -> RgbImage {
    let z = zoom_for(frame.width());
    let big =
        if z > 1 { imageops::resize(frame, frame.width() * z, frame.height() * z, imageops::FilterType::Nearest) } else { frame.clone() };
    let drawn = draw(&big, mask, tiles);
    let scale = if drawn.width() >= 2 * MIN_WIDTH { 2 } else { 1 };
    let strip_h = (lines.len() as u32 * LINE + 2 * PAD) * scale;
    let mut out = RgbImage::from_pixel(drawn.width(), drawn.height() + strip_h, STRIP_BG);
    imageops::replace(&mut out, &drawn, 0, 0);
    for (i, line) in lines.iter().enumerate() {
        text(&mut out, line, PAD * scale, drawn.height() + (PAD + i as u32 * LINE) * scale + scale, scale);
    }
    out
}

/// First pixel of cell `i` of `n` cells spread over `px` pixels (cells map to pixels by
/// proportional scaling, so cell `i` holds the pixels `p` with `p * n / px == i`).
pub fn cell_start(i: usize, n: usize, px: usize) -> usize {
    (i * px).div_ceil(n)
}

/// The frame with active mask cells tinted and each tile outlined.
pub fn draw(frame: &RgbImage, mask: &BitMask, tiles: Option<&TileSet>) -> RgbImage {
    let (fw, fh) = (frame.width() as usize, frame.height() as usize);
    let (mh, mw) = (mask.height().max(1), mask.width().max(1));
    let mut out = frame.clone();
    for (x, y, px) in out.enumerate_pixels_mut() {
        let (cy, cx) = (y as usize * mh / fh, x as usize * mw / fw);
        if mask.get(cy, cx) {
            for c in 0..3 {
                px[c] = (px[c] as f32 * (1.0 - TINT_ALPHA) + TINT[c] * TINT_ALPHA).round() as u8;
            }
        }
    }
    if let Some(ts) = tiles {
        let thick = (fw.min(fh) / 200).max(1);
        for &t in &ts.tiles {
            let (y0, y1, x0, x1) = ts.extent(t);
            let (py0, py1) = (cell_start(y0, mh, fh), cell_start(y1, mh, fh));
            let (px0, px1) = (cell_start(x0, mw, fw), cell_start(x1, mw, fw));
            outline(&mut out, px0, py0, px1, py1, thick);
        }
    }
    out
}

/// Outlines the tile of pixels [x0, x1) x [y0, y1) by lines `thick` pixels wide on its
/// boundaries x0, x1, y0 and y1 (the first pixel past the tile, kept inside the image), so
/// neighbouring tiles share one line and a grid of small tiles leaves their cells visible.
fn outline(img: &mut RgbImage, x0: usize, y0: usize, x1: usize, y1: usize, thick: usize) {
    if x1 <= x0 || y1 <= y0 {
        return;
    }
    let (w, h) = (img.width() as usize, img.height() as usize);
    let (xe, ye) = (x1.min(w - thick.min(w)), y1.min(h - thick.min(h)));
    let mut put = |x: usize, y: usize| {
        if x < w && y < h {
            img.put_pixel(x as u32, y as u32, GRID);
        }
    };
    for t in 0..thick {
        for x in x0..=xe + t {
            put(x, y0 + t);
            put(x, ye + t);
        }
        for y in y0..=ye + t {
            put(x0 + t, y);
            put(xe + t, y);
        }
    }
}

/// Writes `s` (ASCII; other characters as '?') from (x, y), cut at the image's right edge.
fn text(img: &mut RgbImage, s: &str, x: u32, y: u32, scale: u32) {
    let advance = GLYPH * scale;
    for (i, ch) in s.chars().enumerate() {
        let x0 = x + i as u32 * advance;
        if x0 + advance > img.width() {
            break;
        }
        let code = if ch.is_ascii() { ch as usize } else { '?' as usize };
        let glyph = font8x8::legacy::BASIC_LEGACY[code];
        for (row, bits) in glyph.iter().enumerate() {
            for col in 0..GLYPH {
                if bits >> col & 1 == 1 {
                    for dy in 0..scale {
                        for dx in 0..scale {
                            let (px, py) = (x0 + col * scale + dx, y + row as u32 * scale + dy);
                            if px < img.width() && py < img.height() {
                                img.put_pixel(px, py, TEXT);
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dynaspa::runtime::sparsity::Granularity;

    #[test]
    fn tint_covers_active_cells_and_grid_outlines_tiles() {
        let frame = RgbImage::from_pixel(40, 20, Rgb([10, 20, 30]));
        // 2 x 4 cells of 10 x 10 pixels; only cell (1, 2) active.
        let mask = BitMask::from_fn(2, 4, |y, x| (y, x) == (1, 2));
        let tiles = mask.aligned_tiles(Granularity::new(2, 2));
        let out = draw(&frame, &mask, Some(&tiles));
        assert_ne!(out.get_pixel(25, 15), frame.get_pixel(25, 15), "active cell centre is tinted");
        assert_eq!(out.get_pixel(5, 5), frame.get_pixel(5, 5), "inactive cell untouched");
        assert_eq!(out.get_pixel(35, 5), frame.get_pixel(35, 5), "inactive cell inside the tile, off its border");
        // The one tile spans cells y 0..2, x 2..4 = pixels x 20..40, y 0..20.
        assert_eq!(*out.get_pixel(20, 10), GRID);
        assert_eq!(*out.get_pixel(39, 0), GRID);
        assert_eq!(*out.get_pixel(30, 19), GRID, "the bottom line, kept inside the frame");
        assert_eq!(*out.get_pixel(19, 10), *frame.get_pixel(19, 10));
        assert_eq!(*out.get_pixel(30, 1), *frame.get_pixel(30, 1), "one line wide");
    }

    #[test]
    fn cells_map_onto_uneven_frames_without_gaps() {
        for (n, px) in [(5, 72), (18, 168), (3, 3), (7, 100)] {
            assert_eq!(cell_start(0, n, px), 0);
            assert_eq!(cell_start(n, n, px), px);
            for p in 0..px {
                let c = p * n / px;
                assert!(cell_start(c, n, px) <= p && p < cell_start(c + 1, n, px), "n {n} px {px} p {p}");
            }
        }
    }

    #[test]
    fn small_frames_are_enlarged_and_the_strip_holds_the_text() {
        let frame = RgbImage::from_pixel(96, 72, Rgb([90, 90, 90]));
        let mask = BitMask::from_fn(3, 4, |y, _| y == 0);
        let out = compose(&frame, &mask, None, &["0.412 ms".into(), "density 0.333".into()]);
        assert_eq!(zoom_for(96), 4);
        assert_eq!(out.width(), 384);
        assert_eq!(out.height(), 288 + 2 * LINE + 2 * PAD);
        let strip = |x: u32, y: u32| *out.get_pixel(x, 288 + y);
        let lit = (0..out.width()).flat_map(|x| (0..2 * LINE + 2 * PAD).map(move |y| (x, y))).filter(|&(x, y)| strip(x, y) == TEXT).count();
        assert!(lit > 50, "text drawn in the strip: {lit} pixels");
        assert_ne!(*out.get_pixel(10, 10), Rgb([90, 90, 90]), "top row of cells tinted");
        assert_eq!(*out.get_pixel(10, 280), Rgb([90, 90, 90]), "bottom row untouched");
        assert_eq!(zoom_for(768), 1);
    }
}
