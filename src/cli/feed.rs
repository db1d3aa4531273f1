//! Turning command-line inputs into model feeds: `--input NAME=PATH` files, and for the frame
//! commands the frame input that every decoded frame is laid out into.

use dynaspa::io::{image, npy};
use dynaspa::runtime::graph::Graph;
use dynaspa::{DType, Error, Result, Tensor};
use std::path::{Path, PathBuf};

fn parse_floats(s: &str) -> Option<Vec<f32>> {
    s.split(',').map(|p| p.trim().parse().ok()).collect()
}

/// Image normalisation: the flags, else the model's `dynaspa.mean` / `dynaspa.std` metadata,
/// else none (mean 0, std 1).
pub fn normalisation(g: &Graph, mean: Option<&[f32]>, std: Option<&[f32]>) -> (Vec<f32>, Vec<f32>) {
    let meta = |k: &str| g.metadata.get(k).and_then(|s| parse_floats(s));
    let mean = mean.map(<[f32]>::to_vec).or_else(|| meta("dynaspa.mean")).unwrap_or_else(|| vec![0.0; 3]);
    let std = std.map(<[f32]>::to_vec).or_else(|| meta("dynaspa.std")).unwrap_or_else(|| vec![1.0; 3]);
    (mean, std)
}

/// Reads every `--input` spec (NAME=PATH, or a bare PATH for a one-input model).
pub fn read_inputs(g: &Graph, specs: &[String], mean: &[f32], std: &[f32]) -> Result<Vec<(String, Tensor)>> {
    let mut feeds = Vec::new();
    for spec in specs {
        let (name, path) = match spec.split_once('=') {
            Some((n, p)) => (n.to_string(), PathBuf::from(p)),
            None if g.inputs.len() == 1 => (g.values[g.inputs[0]].name.clone(), PathBuf::from(spec)),
            None => {
                return Err(Error::Other(format!(
                    "--input '{spec}' needs the form NAME=PATH; the model's inputs are: {}",
                    g.input_names().join(", ")
                )))
            }
        };
        let id = g.inputs.iter().copied().find(|&i| g.values[i].name == name).ok_or_else(|| Error::Input {
            name: name.clone(),
            msg: format!("the model has no such input; its inputs are: {}", g.input_names().join(", ")),
        })?;
        let t = read_input(&path, &g.values[id].shape, mean, std).map_err(|e| Error::Input { name: name.clone(), msg: e.to_string() })?;
        feeds.push((name, t));
    }
    Ok(feeds)
}

fn read_input(path: &Path, shape: &[usize], mean: &[f32], std: &[f32]) -> Result<Tensor> {
    if image::is_image(path) {
        image::load_for_input(path, shape, mean, std)
    } else {
        npy::read(path)
    }
}

/// Everything one frame needs to become a `Session::run` call.
pub struct Feeder {
    pub frame_input: String,
    pub shape: Vec<usize>,
    mean: Vec<f32>,
    std: Vec<f32>,
    fixed: Vec<(String, Tensor)>,
}

/// Inputs that can take an RGB frame: 4-D float with 3 channels.
fn takes_frames(g: &Graph, id: usize) -> bool {
    let v = &g.values[id];
    v.dtype == DType::F32 && v.shape.len() == 4 && v.shape[1] == 3
}

impl Feeder {
    /// Picks the frame input (`--frame-input`, else the only 3-channel 4-D float input not given
    /// by `--input`) and reads the other inputs once.
    pub fn new(g: &Graph, frame_input: Option<&str>, specs: &[String], mean: Option<&[f32]>, std: Option<&[f32]>) -> Result<Feeder> {
        let (mean, std) = normalisation(g, mean, std);
        let fixed = read_inputs(g, specs, &mean, &std)?;
        let given = |name: &str| fixed.iter().any(|(n, _)| n == name);
        let id = match frame_input {
            Some(name) => {
                let id = g.inputs.iter().copied().find(|&i| g.values[i].name == name).ok_or_else(|| {
                    Error::Other(format!(
                        "--frame-input '{name}': the model has no such input; its inputs are: {}",
                        g.input_names().join(", ")
                    ))
                })?;
                if given(name) {
                    return Err(Error::Other(format!("input '{name}' is given both by --frame-input and by --input")));
                }
                id
            }
            None => {
                let cands: Vec<usize> = g.inputs.iter().copied().filter(|&i| takes_frames(g, i) && !given(&g.values[i].name)).collect();
                match cands.as_slice() {
                    [one] => *one,
                    [] => {
                        return Err(Error::Other(format!(
                            "no model input can take frames (a float input of shape [N, 3, H, W] not given by --input); the model's inputs are: {}",
                            describe_inputs(g)
                        )))
                    }
                    many => {
                        let names: Vec<&str> = many.iter().map(|&i| g.values[i].name.as_str()).collect();
                        return Err(Error::Other(format!(
                            "several inputs can take frames ({}); choose one with --frame-input NAME",
                            names.join(", ")
                        )));
                    }
                }
            }
        };
        let v = &g.values[id];
        image::check_layout(&v.shape, &mean, &std)
            .map_err(|e| Error::Input { name: v.name.clone(), msg: format!("cannot take frames: {e}") })?;
        let missing: Vec<String> = g
            .inputs
            .iter()
            .map(|&i| &g.values[i].name)
            .filter(|n| **n != v.name && !given(n))
            .map(|n| format!("--input {n}=PATH"))
            .collect();
        if !missing.is_empty() {
            return Err(Error::Other(format!("frames feed input '{}'; the other inputs need files too: {}", v.name, missing.join(" "))));
        }
        Ok(Feeder { frame_input: v.name.clone(), shape: v.shape.clone(), mean, std, fixed })
    }

    /// (width, height) of the frame input, the size video frames are decoded at.
    pub fn input_size(&self) -> (u32, u32) {
        (self.shape[3] as u32, self.shape[2] as u32)
    }

    pub fn feeds(&self, img: &::image::RgbImage) -> Result<Vec<(String, Tensor)>> {
        let t = image::rgb_to_input(img, &self.shape, &self.mean, &self.std)?;
        Ok(self.with_fixed(t))
    }

    /// Feeds for a batch of frames: frame i becomes batch item i of the frame input, whose first
    /// dimension must be `imgs.len()`.
    pub fn feeds_batch(&self, imgs: &[&::image::RgbImage]) -> Result<Vec<(String, Tensor)>> {
        let t = image::rgbs_to_input(imgs, &self.shape, &self.mean, &self.std)?;
        Ok(self.with_fixed(t))
    }

    fn with_fixed(&self, frame: Tensor) -> Vec<(String, Tensor)> {
        let mut feeds = self.fixed.clone();
        feeds.push((self.frame_input.clone(), frame));
        feeds
    }
}

fn describe_inputs(g: &Graph) -> String {
    g.inputs.iter().map(|&i| format!("{} {} {:?}", g.values[i].name, g.values[i].dtype, g.values[i].shape)).collect::<Vec<_>>().join(", ")
}

/// Frame-source flags shared by `profile` and `bench`.
#[derive(clap::Args)]
pub struct FrameOpts {
    /// Frames: a directory of images (png/jpg/bmp, file-name order), a video file (decoded by
    /// ffmpeg) or a camera /dev/videoN.
    #[arg(long, value_name = "DIR|VIDEO|/dev/videoN")]
    pub frames: PathBuf,
    /// Inputs other than the frames, NAME=PATH (.npy or image), the same for every frame.
    #[arg(long = "input", short = 'i', value_name = "NAME=PATH")]
    pub inputs: Vec<String>,
    /// The input frames feed (default: the only [N, 3, H, W] float input not given by --input).
    #[arg(long, value_name = "NAME")]
    pub frame_input: Option<String>,
    /// Stop after this many frames.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_frames: Option<u32>,
    /// Backend: auto, cpu, opencl, cuda or wgpu (`dynaspa devices` lists what this machine has).
    #[arg(long, default_value = "auto")]
    pub backend: dynaspa::Backend,
    /// Float precision: f32, or f16 (GPU backends: weights and activations stored as half,
    /// arithmetic in f32; the CPU computes in f32 only).
    #[arg(long, default_value = "f32")]
    pub precision: dynaspa::Precision,
    /// GPU device: a number from `dynaspa devices`, PLATFORM:DEVICE (OpenCL), or part of its
    /// name (default: $DYNASPA_OPENCL_DEVICE / $DYNASPA_CUDA_DEVICE / $DYNASPA_WGPU_DEVICE, else
    /// the first GPU).
    #[arg(long, value_name = "SEL")]
    pub device: Option<String>,
    /// CPU worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Per-channel mean for the frames, e.g. 0.485,0.456,0.406 (default: model metadata).
    #[arg(long, value_delimiter = ',')]
    pub mean: Option<Vec<f32>>,
    /// Per-channel std for the frames (default: model metadata).
    #[arg(long, value_delimiter = ',')]
    pub std: Option<Vec<f32>>,
}

impl FrameOpts {
    pub fn feeder(&self, g: &Graph) -> Result<Feeder> {
        Feeder::new(g, self.frame_input.as_deref(), &self.inputs, self.mean.as_deref(), self.std.as_deref())
    }
}
