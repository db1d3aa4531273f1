#!/bin/bash
# Session 19: session 13's pack (the CLI, the CUDA self-check, gpu_sparse_bench and the GPU test
# binaries of this tree, gpu_tokens among them) into dist-s19/ (ignored by git).
DIST=${DIST:-dist-s19} TESTS="gpu_sparse gpu_fused_finish gpu_ops gpu_models gpu_tokens onnx_node" \
  exec bash "$(dirname "$0")/../device_s13/pack.sh"
