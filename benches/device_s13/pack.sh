#!/bin/bash
# Session 13: the dynaspa CLI, the CUDA self-check, gpu_sparse_bench and the GPU test binaries
# (run on the GPU host against CUDA: the node suite, the sparse and fused-finish tests, models)
# of this tree, stripped and xz-compressed into $DIST (dist-s13/ unless set; ignored by git), for
# ag.sh and on (session 14's pack.sh sets DIST=dist-s14).
set -euo pipefail
cd "$(dirname "$0")/../.."
DIST=${DIST:-dist-s13}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/target-main}
cargo build --release --bin dynaspa --example cuda_selfcheck
cargo build --release -p dynaspa-backends --example gpu_sparse_bench --features cuda,opencl
tests=${TESTS:-"gpu_sparse gpu_fused_finish gpu_ops gpu_models onnx_node"}
cargo test --release --no-run $(for t in $tests; do echo --test $t; done) 2>&1 | tee /tmp/pack_${DIST}_tests.log | tail -3
mkdir -p $DIST
rm -f $DIST/*.xz
for b in release/dynaspa release/examples/cuda_selfcheck release/examples/gpu_sparse_bench; do
  n=$(basename $b)
  strip -o /tmp/$n.stripped $CARGO_TARGET_DIR/$b
  xz -T2 -6 -c /tmp/$n.stripped > $DIST/$n.xz
done
for t in $tests; do
  f=$(grep -o "release/deps/$t-[0-9a-f]*" /tmp/pack_${DIST}_tests.log | tail -1)
  strip -o /tmp/t_$t.stripped $CARGO_TARGET_DIR/$f
  xz -T2 -6 -c /tmp/t_$t.stripped > $DIST/t_$t.xz
done
ls -la $DIST
