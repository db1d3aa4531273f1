#!/bin/bash
# Session 15: session 13's pack (the CLI, the CUDA self-check, gpu_sparse_bench and the GPU test
# binaries of this tree) into dist-s15/ (ignored by git), for d.sh.
DIST=dist-s15 exec bash "$(dirname "$0")/../device_s13/pack.sh"
