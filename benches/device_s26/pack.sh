#!/bin/bash
# Session 26: session 13's pack (the CLI, the CUDA self-check, gpu_sparse_bench and the GPU test
# binaries of this tree) into dist-s26/ (ignored by git). The baseline is the same binaries with
# DYNASPA_SC_CSLOW=0 (column tiles fastest, session 25's grids).
set -euo pipefail
export DIST=${DIST:-dist-s26} TESTS="gpu_sparse gpu_fused_finish gpu_models"
bash "$(dirname "$0")/../device_s13/pack.sh"
