#!/bin/bash
# Session 21 calls U (bash s.sh N on the GPU host, binaries from pack.sh):
#   1: the launch floor on CUDA and NVIDIA OpenCL (both OpenCL launch modes, alternated), then
#      the issue-6 convs and A-ViT on NVIDIA OpenCL in the new and the old launch mode,
#      alternated twice;
#   2: correctness (the CUDA self-check, the GPU tests on CUDA and NVIDIA OpenCL, the node suite).
stage=$1
source "$(dirname "$0")/start.sh"
if [ "$stage" = 1 ]; then
  floor cuda cuda
  for rep in 1 2; do
    floor cl_new_$rep opencl
    floor cl_old_$rep opencl $OLD_CL
    floor cl_memo_only_$rep opencl DYNASPA_CL_LAUNCH_EVENTS=1
  done
  for rep in 1 2; do
    BACKEND=opencl bench b1 new_$rep $D
    BACKEND=opencl bench b1 old_$rep $D $OLD_CL
  done
  for rep in 1 2; do
    for m in new old; do
      env $([ $m = old ] && echo $OLD_CL) timeout 120 $D/gpu_sparse_bench --backend opencl --device NVIDIA --avit --batches 1 \
        --densities 0.1,0.3,0.5 --samples 15 --runs 10 --json $OUT/r/avit_${m}_$rep.jsonl > $OUT/r/avit_${m}_$rep.txt 2>&1
      echo "$(date -u +%T) avit $m $rep rc=$? wrong=$(grep -c WRONG $OUT/r/avit_${m}_$rep.txt)"
    done
  done
elif [ "$stage" = 2 ]; then
  source "$(dirname "$0")/../device_s13/correctness.sh"
  DYNASPA_REQUIRE_BACKENDS=cuda timeout 150 $D/t_gpu_tokens --test-threads 4 > $OUT/r/test_gpu_tokens.txt 2>&1
  echo "test gpu_tokens rc=$? $(grep '^test result' $OUT/r/test_gpu_tokens.txt | tail -1)"
fi
pack_results
