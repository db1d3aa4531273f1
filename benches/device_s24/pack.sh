#!/bin/bash
# Session 24: session 13's pack (the CLI, the CUDA self-check, gpu_sparse_bench and the GPU test
# binaries of this tree) into dist-s24/ (ignored by git). The baseline bench is session 23's
# gpu_sparse_bench, copied by hand into dist-s24old/.
set -euo pipefail
export DIST=${DIST:-dist-s24} TESTS="gpu_sparse gpu_fused_finish gpu_models"
bash "$(dirname "$0")/../device_s13/pack.sh"
