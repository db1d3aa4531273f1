#!/bin/bash
# Session 12: gpu_sparse_bench and the dynaspa CLI (CUDA + OpenCL) of this tree, stripped and
# xz-compressed into dist-s12/ (ignored by git), for ad.sh and ae.sh, with the CUDA self-check.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/target-main}
cargo build --release --bin dynaspa --example cuda_selfcheck
cargo build --release -p dynaspa-backends --example gpu_sparse_bench --features cuda,opencl
mkdir -p dist-s12
for b in release/dynaspa release/examples/cuda_selfcheck release/examples/gpu_sparse_bench; do
  n=$(basename $b)
  strip -o /tmp/$n.stripped $CARGO_TARGET_DIR/$b
  xz -T2 -6 -c /tmp/$n.stripped > dist-s12/$n.xz
done
ls -la dist-s12
