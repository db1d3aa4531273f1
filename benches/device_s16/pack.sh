#!/bin/bash
# Session 16: session 13's pack (the CLI, the CUDA self-check, gpu_sparse_bench and the GPU test
# binaries of this tree) into dist-s16/ (ignored by git), for the session-16 calls.
DIST=dist-s16 exec bash "$(dirname "$0")/../device_s13/pack.sh"
