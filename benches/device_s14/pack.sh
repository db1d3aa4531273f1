#!/bin/bash
# Session 14: session 13's pack (the CLI, the CUDA self-check, gpu_sparse_bench and the GPU test
# binaries of this tree) into dist-s14/ (ignored by git), for a.sh and b.sh.
DIST=dist-s14 exec bash "$(dirname "$0")/../device_s13/pack.sh"
