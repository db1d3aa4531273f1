#!/bin/bash
# Session 14: the dynaspa CLI, the CUDA self-check, gpu_sparse_bench and the GPU test binaries
# (run on the GPU host against CUDA: the node suite, the sparse and fused-finish tests, models)
# of this tree, stripped and xz-compressed into dist-s14/ (ignored by git), for the session-14 calls.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/target-main}
cargo build --release --bin dynaspa --example cuda_selfcheck
cargo build --release -p dynaspa-backends --example gpu_sparse_bench --features cuda,opencl
tests="gpu_sparse gpu_fused_finish gpu_ops gpu_models onnx_node"
cargo test --release --no-run $(for t in $tests; do echo --test $t; done) 2>&1 | tee /tmp/pack14_tests.log | tail -3
mkdir -p dist-s14
rm -f dist-s14/*.xz
for b in release/dynaspa release/examples/cuda_selfcheck release/examples/gpu_sparse_bench; do
  n=$(basename $b)
  strip -o /tmp/$n.stripped $CARGO_TARGET_DIR/$b
  xz -T2 -6 -c /tmp/$n.stripped > dist-s14/$n.xz
done
for t in $tests; do
  f=$(grep -o "release/deps/$t-[0-9a-f]*" /tmp/pack14_tests.log | tail -1)
  strip -o /tmp/t_$t.stripped $CARGO_TARGET_DIR/$f
  xz -T2 -6 -c /tmp/t_$t.stripped > dist-s14/t_$t.xz
done
ls -la dist-s14
