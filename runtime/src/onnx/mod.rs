//! ONNX protobuf bindings (generated at build time) and import into the IR.

#[allow(clippy::all, unused, missing_docs)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/onnx_proto/mod.rs"));
}

mod attrs;
pub mod external;
pub mod import;
mod ops;
pub mod tensor_proto;

pub use import::{import, input_names, parse_model, LoadOptions, MAX_OPSET, MIN_OPSET};
