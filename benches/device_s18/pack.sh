#!/bin/bash
# Session 18: session 13's pack (the CLI, the CUDA self-check, gpu_sparse_bench and the GPU test
# binaries of this tree) into dist-s18/ (ignored by git), for the session-18 calls.
DIST=${DIST:-dist-s18} exec bash "$(dirname "$0")/../device_s13/pack.sh"
