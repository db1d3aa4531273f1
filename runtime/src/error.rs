//! The one error type of the runtime: every variant names what is wrong.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    #[error("cannot read ONNX model: {0}")]
    Decode(String),
    #[error("invalid model: {0}")]
    InvalidModel(String),
    #[error("unsupported model: {}", .0.join("; "))]
    Unsupported(Vec<String>),
    #[error("node '{node}' ({op}): {msg}")]
    Node { node: String, op: String, msg: String },
    #[error("input '{name}': {msg}")]
    Input { name: String, msg: String },
    #[error("backend {backend}: {msg}")]
    Backend { backend: String, msg: String },
    /// A backend this build or machine cannot run: no support compiled in, no driver, no device.
    #[error("backend {backend} is not available: {reason}")]
    Unavailable { backend: String, reason: String },
    /// A tuned profile that cannot be used: unreadable, another format version, made for another
    /// device or model, or for kernels this build no longer has.
    #[error("profile {path}: {reason}")]
    Profile { path: String, reason: String },
    #[error("{0}")]
    Other(String),
    #[error("I/O error on {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn node(node: &str, op: &str, msg: impl Into<String>) -> Self {
        Error::Node { node: node.to_string(), op: op.to_string(), msg: msg.into() }
    }
    pub fn io(path: impl AsRef<std::path::Path>, source: std::io::Error) -> Self {
        Error::Io { path: path.as_ref().display().to_string(), source }
    }
}
