//! ONNX protobuf bindings (generated at build time) and import into the IR.

#[allow(clippy::all, unused, missing_docs)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/onnx_proto/mod.rs"));
}
