#!/bin/bash
# Session 10: gpu_sparse_bench only (CUDA + OpenCL), stripped and xz-compressed into dist-s10/
# (ignored by git), checked for this session's KS 32 hand-picked schedules.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/target-main}
cargo build --release -p dynaspa-backends --example gpu_sparse_bench --features cuda,opencl
mkdir -p dist-s10
strip -o /tmp/gpu_sparse_bench.stripped $CARGO_TARGET_DIR/release/examples/gpu_sparse_bench
xz -T2 -6 -c /tmp/gpu_sparse_bench.stripped > dist-s10/gpu_sparse_bench.xz
ls -la dist-s10
