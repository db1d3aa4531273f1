#!/bin/bash
# Session 24 calls X (bash s.sh N on the GPU host, binaries from pack.sh): splits past 32 and
# only the splits that get a stage (the issue-5 ops' density-0.1 members, whose chains of 16-deep
# stages were 5 long for conv3x3 at KS 32).
#   1: gpu_sparse and gpu_fused_finish on CUDA; the batch-1 bench with this tree's sample
#      (KS up to 72) and session 23's (KS up to 32, no trimming), PyTorch between;
#   2: the same pair and PyTorch again, then this tree's on NVIDIA's OpenCL;
#   3: batches 2 and 4 with this tree's sample, PyTorch after; gpu_models on CUDA.
stage=$1
source "$(dirname "$0")/start.sh"
pair() {
  DUMP=1 LIMIT=240 bench b1 new_$1 $D
  torch_b1 $1
  bench b1 old_$1 $O
  best b1 new $1; best b1 old $1
}
if [ "$stage" = 1 ]; then
  for t in gpu_sparse gpu_fused_finish; do gpu_test $t $t; done
  pair 1
elif [ "$stage" = 2 ]; then
  pair 2
  BACKEND=opencl LIMIT=240 bench b1 cl_1 $D
  python3 benches/device_s24/best.py $OUT/r/b1_cl_1.jsonl | tee $OUT/r/best_b1_cl.txt
elif [ "$stage" = 3 ]; then
  DUMP=1 LIMIT=400 bench b24k new_1 $D
  torch_b24 1; cp $OUT/r/torch_b24_1.jsonl $OUT/r/torch_b24k_1.jsonl
  best b24k new 1
  gpu_test gpu_models gpu_models
fi
