// The ONNX bindings are generated from the schema at build time with the pure-Rust
// protobuf-codegen, so no protoc is needed and the protobuf runtime stays on 3.7.x
// (3.4.0, which onnx-protobuf pins, has RUSTSEC-2024-0437).
fn main() {
    println!("cargo:rerun-if-changed=proto/onnx.proto");
    protobuf_codegen::Codegen::new().pure().include("proto").input("proto/onnx.proto").cargo_out_dir("onnx_proto").run_from_script();
}
