#!/bin/bash
# Session 19 call S: the register bound on NVIDIA's OpenCL (-cl-nv-maxrregcount from the
# member's MAX_REGISTERS; the default) against none (DYNASPA_REG_BOUND=0), same binaries, and
# the 128 x 128 sampled tiles at batches 2 and 4 on CUDA. Two device calls (10 minutes each):
#   bash s.sh 1: correctness, NVIDIA OpenCL with and without the bound, its programs kept;
#   bash s.sh 2: batches 2 and 4 (sampled knobs) with and without the bound, PyTorch before.
stage=$1
source "$(dirname "$0")/start.sh"
if [ "$stage" = 1 ]; then
  source "$(dirname "$0")/../device_s13/correctness.sh"
  BACKEND=opencl bench b1 clbound_1 $D
  BACKEND=opencl bench b1 clfree_1 $D DYNASPA_REG_BOUND=0
  keep_clcache
  BACKEND=opencl bench b1 clbound_2 $D
  BACKEND=opencl bench b1 clfree_2 $D DYNASPA_REG_BOUND=0
else
  DUMP=1 bench b24k bound_1 $D
  torch_b24 1
  bench b24k free_1 $D DYNASPA_REG_BOUND=0
  for v in bound free; do
    python3 benches/gpu_vs_torch.py $OUT/r/b24k_${v}_1.jsonl $OUT/r/torch_b24_1.jsonl > $OUT/r/vs_b24k_${v}_1.txt
  done
fi
pack_results
