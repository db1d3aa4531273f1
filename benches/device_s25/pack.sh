#!/bin/bash
# Session 25: session 13's pack (the CLI, the CUDA self-check, gpu_sparse_bench and the GPU test
# binaries of this tree) into dist-s25/ (ignored by git). The baseline is the same binaries with
# DYNASPA_SC_HOIST=0, which compiles session 24's GEMM.
set -euo pipefail
export DIST=${DIST:-dist-s25} TESTS="gpu_sparse gpu_fused_finish gpu_models"
bash "$(dirname "$0")/../device_s13/pack.sh"
