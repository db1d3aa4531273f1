#!/bin/bash
# Session 23: session 13's pack (the CLI, the CUDA self-check, gpu_sparse_bench and the GPU test
# binaries of this tree) into dist-s23/ (ignored by git).
set -euo pipefail
export DIST=${DIST:-dist-s23} TESTS="gpu_sparse gpu_fused_finish gpu_ops gpu_models gpu_tokens gpu_frame_graphs onnx_node"
bash "$(dirname "$0")/../device_s13/pack.sh"
