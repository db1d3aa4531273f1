#!/bin/bash
# Session 11: gpu_sparse_bench and the dynaspa CLI (CUDA + OpenCL), stripped and xz-compressed
# into dist-s11/ (ignored by git). Call V's gpu_sparse_bench (dist-s10/) is the A/B baseline.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/target-main}
cargo build --release --bin dynaspa
cargo build --release -p dynaspa-backends --example gpu_sparse_bench --features cuda,opencl
mkdir -p dist-s11
for b in release/dynaspa release/examples/gpu_sparse_bench; do
  n=$(basename $b)
  strip -o /tmp/$n.stripped $CARGO_TARGET_DIR/$b
  xz -T2 -6 -c /tmp/$n.stripped > dist-s11/$n.xz
done
ls -la dist-s11
