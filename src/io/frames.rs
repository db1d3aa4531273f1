//! Where frames come from: a directory of images (sorted by file name), one image, or a video
//! file / V4L2 camera decoded by an `ffmpeg` subprocess. Video frames are streamed one at a
//! time from ffmpeg's stdout, so memory stays at one frame whatever the video's length.

use super::image::{decode_rgb, is_image};
use dynaspa_runtime::{Error, Result};
use image::RgbImage;
use std::collections::VecDeque;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// One decoded frame. Image files keep their own size; ffmpeg frames come at the size asked for.
pub struct Frame {
    /// 0-based position in the source.
    pub index: usize,
    /// File name, or `frame N` for video.
    pub label: String,
    /// The file the frame came from (image sources only).
    pub path: Option<PathBuf>,
    pub image: RgbImage,
}

pub struct FrameSource {
    desc: String,
    inner: Inner,
    max: Option<usize>,
    produced: usize,
    skipped: Vec<PathBuf>,
}

enum Inner {
    Files(std::vec::IntoIter<PathBuf>),
    Ffmpeg(Box<FfmpegStream>),
}

/// True for `/dev/videoN`-like paths, which ffmpeg reads through V4L2.
pub fn is_camera(src: &Path) -> bool {
    src.to_str().is_some_and(|s| s.starts_with("/dev/video"))
}

impl FrameSource {
    /// Opens `src`. `video_size` (width, height) is the size ffmpeg scales video frames to;
    /// `max` stops the source after that many frames.
    pub fn open(src: &Path, video_size: (u32, u32), max: Option<usize>) -> Result<FrameSource> {
        let camera = is_camera(src);
        if !camera && !src.exists() {
            return Err(Error::Other(format!(
                "frame source {} does not exist (give a directory of images, a video file or /dev/videoN)",
                src.display()
            )));
        }
        let mut skipped = Vec::new();
        let (desc, inner) = if src.is_dir() {
            let files = list_images(src, &mut skipped)?;
            if files.is_empty() {
                return Err(Error::Other(format!("no images (png, jpg, bmp) in directory {}", src.display())));
            }
            (format!("directory {} ({} images)", src.display(), files.len()), Inner::Files(files.into_iter()))
        } else if !camera && is_image(src) {
            (format!("image {}", src.display()), Inner::Files(vec![src.to_path_buf()].into_iter()))
        } else {
            let what = if camera { "camera" } else { "video" };
            let stream = FfmpegStream::spawn(src, camera, video_size, max)?;
            (format!("{what} {} (ffmpeg, {}x{})", src.display(), video_size.0, video_size.1), Inner::Ffmpeg(Box::new(stream)))
        };
        Ok(FrameSource { desc, inner, max, produced: 0, skipped })
    }

    /// What the source is, for the first line of output.
    pub fn describe(&self) -> &str {
        &self.desc
    }

    /// Directory entries that were not read as frames (not an image by extension, or a folder).
    pub fn skipped(&self) -> &[PathBuf] {
        &self.skipped
    }
}

impl Iterator for FrameSource {
    type Item = Result<Frame>;

    fn next(&mut self) -> Option<Result<Frame>> {
        if self.max.is_some_and(|m| self.produced >= m) {
            return None;
        }
        let index = self.produced;
        let frame = match &mut self.inner {
            Inner::Files(files) => {
                let path = files.next()?;
                decode_rgb(&path).map(|image| Frame {
                    index,
                    label: path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
                    path: Some(path),
                    image,
                })
            }
            Inner::Ffmpeg(s) => match s.next_frame() {
                Ok(Some(image)) => Ok(Frame { index, label: format!("frame {index}"), path: None, image }),
                Ok(None) => return None,
                Err(e) => Err(e),
            },
        };
        self.produced += 1;
        Some(frame)
    }
}

fn list_images(dir: &Path, skipped: &mut Vec<PathBuf>) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let path = entry.map_err(|e| Error::io(dir, e))?.path();
        if path.is_file() && is_image(&path) {
            files.push(path);
        } else {
            skipped.push(path);
        }
    }
    // File-name order is frame order for the usual zero-padded names (frame_0001.png, ...).
    files.sort();
    skipped.sort();
    Ok(files)
}

/// Lines of ffmpeg's stderr kept for error messages.
const STDERR_LINES: usize = 8;

struct FfmpegStream {
    src: PathBuf,
    child: Child,
    stdout: ChildStdout,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    stderr_reader: Option<JoinHandle<()>>,
    size: (u32, u32),
    finished: bool,
}

impl FfmpegStream {
    fn spawn(src: &Path, camera: bool, size: (u32, u32), max: Option<usize>) -> Result<FfmpegStream> {
        let mut cmd = Command::new("ffmpeg");
        cmd.args(["-hide_banner", "-nostdin", "-loglevel", "error"]);
        if camera {
            cmd.args(["-f", "v4l2"]);
        }
        cmd.arg("-i").arg(src);
        if let Some(m) = max {
            // ffmpeg stops decoding by itself instead of being killed mid-write.
            cmd.args(["-frames:v", &m.to_string()]);
        }
        cmd.args(["-an", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", &format!("{}x{}", size.0, size.1), "-"]);
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Error::Other(format!(
                    "ffmpeg not found on PATH: needed to decode {}; install ffmpeg or pass a directory of images",
                    src.display()
                ))
            } else {
                Error::Other(format!("cannot start ffmpeg to decode {}: {e}", src.display()))
            }
        })?;
        let stdout = child.stdout.take().ok_or_else(|| Error::Other("ffmpeg: no stdout pipe".into()))?;
        let stderr = child.stderr.take().ok_or_else(|| Error::Other("ffmpeg: no stderr pipe".into()))?;
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let tail = stderr_tail.clone();
        // Drained on its own thread: a full stderr pipe would block ffmpeg and so our stdout reads.
        let stderr_reader = std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
                if t.len() == STDERR_LINES {
                    t.pop_front();
                }
                t.push_back(line);
            }
        });
        Ok(FfmpegStream { src: src.to_path_buf(), child, stdout, stderr_tail, stderr_reader: Some(stderr_reader), size, finished: false })
    }

    fn next_frame(&mut self) -> Result<Option<RgbImage>> {
        if self.finished {
            return Ok(None);
        }
        let (w, h) = self.size;
        let mut buf = vec![0u8; w as usize * h as usize * 3];
        let mut filled = 0;
        while filled < buf.len() {
            match self.stdout.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::Other(format!("reading frames of {} from ffmpeg: {e}", self.src.display()))),
            }
        }
        if filled == buf.len() {
            return Ok(RgbImage::from_raw(w, h, buf));
        }
        self.finish()?;
        if filled > 0 {
            return Err(Error::Other(format!(
                "ffmpeg's output for {} ended inside a frame ({filled} of {} bytes)",
                self.src.display(),
                buf.len()
            )));
        }
        Ok(None)
    }

    /// Waits for ffmpeg after its stdout closed and turns a failure into an error carrying the
    /// last lines it printed.
    fn finish(&mut self) -> Result<()> {
        self.finished = true;
        let status = self.child.wait().map_err(|e| Error::Other(format!("waiting for ffmpeg: {e}")))?;
        if let Some(t) = self.stderr_reader.take() {
            let _ = t.join();
        }
        if status.success() {
            return Ok(());
        }
        let tail = self.stderr_tail.lock().unwrap_or_else(|p| p.into_inner());
        let detail = if tail.is_empty() { "(no message)".to_string() } else { tail.iter().cloned().collect::<Vec<_>>().join("\n  ") };
        Err(Error::Other(format!("ffmpeg failed to decode {} ({status}):\n  {detail}", self.src.display())))
    }
}

impl Drop for FfmpegStream {
    fn drop(&mut self) {
        if !self.finished {
            // Stopped early (an error downstream, or a camera): don't leave ffmpeg running.
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
