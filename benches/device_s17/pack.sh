#!/bin/bash
# Session 17: session 13's pack (the CLI, the CUDA self-check, gpu_sparse_bench and the GPU test
# binaries of this tree) into dist-s17/ (ignored by git), for the session-17 calls.
DIST=dist-s17 exec bash "$(dirname "$0")/../device_s13/pack.sh"
