#!/bin/bash
# Session 27: session 13's pack (the CLI, the CUDA self-check, gpu_sparse_bench and the GPU test
# binaries of this tree) into dist-s27/ (ignored by git). The baseline is the same binaries with
# DYNASPA_SL_FUSED=0 DYNASPA_SELF_COUNT=0 (session 26's self-listing members: two launches, and
# the mask's bitmask launch beside them every frame).
set -euo pipefail
export DIST=${DIST:-dist-s27} TESTS="gpu_sparse gpu_fused_finish gpu_models"
bash "$(dirname "$0")/../device_s13/pack.sh"
