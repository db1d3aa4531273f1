#!/bin/bash
# Session 19: session 13's pack (the CLI, the CUDA self-check, gpu_sparse_bench and the GPU test
# binaries of this tree) into dist-s19/ (ignored by git), for the session-19 calls.
DIST=${DIST:-dist-s19} exec bash "$(dirname "$0")/../device_s13/pack.sh"
