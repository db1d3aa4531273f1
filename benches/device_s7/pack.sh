#!/bin/bash
# Builds the session-7 device binaries (release, CUDA + OpenCL) in their own target directory
# and packs them into dist-s7/ (ignored by git), checked for a symbol of this session's code.
set -euo pipefail
cd "$(dirname "$0")/../.."
T=${CARGO_TARGET_DIR:-/work/target-cudnn}
export CARGO_TARGET_DIR=$T
cargo build --release --bin dynaspa --example cuda_selfcheck
cargo build --release -p dynaspa-backends --example gpu_sparse_bench --features cuda,opencl
cargo build --release -p dynaspa-scheduler --example tune_experiments_gpu --features dynaspa-backends/cuda,dynaspa-backends/opencl
mkdir -p dist-s7
for b in release/dynaspa release/examples/cuda_selfcheck release/examples/gpu_sparse_bench release/examples/tune_experiments_gpu; do
  n=$(basename $b)
  strip -o /tmp/$n.stripped $T/$b
  xz -T2 -6 -c /tmp/$n.stripped > dist-s7/$n.xz
done
strings /tmp/gpu_sparse_bench.stripped | grep "see WRONG lines" > /dev/null || { echo "gpu_sparse_bench lacks --knobs" >&2; exit 1; }
ls -la dist-s7
