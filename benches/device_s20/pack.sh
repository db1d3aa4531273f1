#!/bin/bash
# Session 20: session 13's pack (the CLI, the CUDA self-check, gpu_sparse_bench and the GPU test
# binaries of this tree) into dist-s20/ (ignored by git).
DIST=${DIST:-dist-s20} TESTS="gpu_sparse gpu_fused_finish gpu_ops gpu_models gpu_tokens onnx_node" \
  exec bash "$(dirname "$0")/../device_s13/pack.sh"
