#!/bin/bash
# Session 21: session 13's pack (the CLI, the CUDA self-check, gpu_sparse_bench and the GPU test
# binaries of this tree) plus launch_floor, into dist-s21/ (ignored by git).
set -euo pipefail
export DIST=${DIST:-dist-s21} TESTS="gpu_sparse gpu_fused_finish gpu_ops gpu_models gpu_tokens onnx_node"
bash "$(dirname "$0")/../device_s13/pack.sh"
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/target-main}
cargo build --release -p dynaspa-backends --example launch_floor --features cuda,opencl
strip -o /tmp/launch_floor.stripped $CARGO_TARGET_DIR/release/examples/launch_floor
xz -T2 -6 -c /tmp/launch_floor.stripped > $DIST/launch_floor.xz
ls -la $DIST
