//! Image file -> model input: RGB, resized to the input's H x W, scaled to [0, 1], NCHW,
//! then normalised per channel.

use dynaspa_runtime::{Error, Result, Tensor};
use image::RgbImage;
use std::path::Path;

/// Decodes and lays out an image for an input of shape [N, 3, H, W]; every batch item gets
/// the same image.
pub fn load_for_input(path: &Path, shape: &[usize], mean: &[f32], std: &[f32]) -> Result<Tensor> {
    check_layout(shape, mean, std)?;
    rgb_to_input(&decode_rgb(path)?, shape, mean, std)
}

/// Decodes any supported image file to 8-bit RGB; the error names the file.
pub fn decode_rgb(path: &Path) -> Result<RgbImage> {
    Ok(image::open(path).map_err(|e| Error::Other(format!("cannot decode image {}: {e}", path.display())))?.to_rgb8())
}

/// Checks up front that an image can feed an input of `shape` with this normalisation, so a
/// frame loop fails before the first frame rather than on it.
pub fn check_layout(shape: &[usize], mean: &[f32], std: &[f32]) -> Result<()> {
    let [_, c, _, _] = *shape else {
        return Err(Error::Other(format!("an image can only feed an N x 3 x H x W input, this one is {shape:?}")));
    };
    if c != 3 {
        return Err(Error::Other(format!("an image gives 3 channels, the input wants {c}")));
    }
    if mean.len() != 3 || std.len() != 3 || std.iter().any(|&s| s == 0.0 || !s.is_finite()) {
        return Err(Error::Other(format!("mean {mean:?} / std {std:?} must be 3 finite values, std non-zero")));
    }
    Ok(())
}

/// Lays out a decoded image for an input of shape [N, 3, H, W] (resizing when its size differs);
/// every batch item gets the same image.
pub fn rgb_to_input(img: &RgbImage, shape: &[usize], mean: &[f32], std: &[f32]) -> Result<Tensor> {
    check_layout(shape, mean, std)?;
    let one = chw(img, shape[2], shape[3], mean, std);
    let mut all = Vec::with_capacity(shape[0] * one.len());
    for _ in 0..shape[0] {
        all.extend_from_slice(&one);
    }
    Tensor::from_f32(shape.to_vec(), all)
}

/// Lays out one decoded image per batch item for an input of shape [N, 3, H, W]: `imgs[i]`
/// becomes item i, so `imgs.len()` must be N.
pub fn rgbs_to_input(imgs: &[&RgbImage], shape: &[usize], mean: &[f32], std: &[f32]) -> Result<Tensor> {
    check_layout(shape, mean, std)?;
    if imgs.len() != shape[0] {
        return Err(Error::Other(format!("{} images for an input of batch {} ({shape:?})", imgs.len(), shape[0])));
    }
    let mut all = Vec::with_capacity(shape.iter().product());
    for img in imgs {
        all.extend(chw(img, shape[2], shape[3], mean, std));
    }
    Tensor::from_f32(shape.to_vec(), all)
}

/// One image as normalised 3 x H x W floats (resized when its size differs).
fn chw(img: &RgbImage, h: usize, w: usize, mean: &[f32], std: &[f32]) -> Vec<f32> {
    let resized;
    let img = if img.dimensions() != (w as u32, h as u32) {
        resized = image::imageops::resize(img, w as u32, h as u32, image::imageops::FilterType::Triangle);
        &resized
    } else {
        img
    };
    let plane = h * w;
    let mut one = vec![0f32; 3 * plane];
    for (i, px) in img.pixels().enumerate() {
        for ch in 0..3 {
            one[ch * plane + i] = (px[ch] as f32 / 255.0 - mean[ch]) / std[ch];
        }
    }
    one
}

/// Encodes an RGB image as PNG bytes (to be written with `write_atomic`).
pub fn encode_png(img: &RgbImage) -> Result<Vec<u8>> {
    use image::ImageEncoder;
    let mut out = Vec::new();
    image::codecs::png::PngEncoder::new(&mut out)
        .write_image(img.as_raw(), img.width(), img.height(), image::ExtendedColorType::Rgb8)
        .map_err(|e| Error::Other(format!("cannot encode PNG: {e}")))?;
    Ok(out)
}

/// True for file names the image decoder handles.
pub fn is_image(path: &Path) -> bool {
    matches!(path.extension().and_then(|e| e.to_str()).map(|e| e.to_ascii_lowercase()).as_deref(), Some("png" | "jpg" | "jpeg" | "bmp"))
}
