#!/bin/bash
# Session 27 calls (bash s.sh N on the GPU host, binaries from pack.sh): self-listing members that
# finish their split in the GEMM (CUDA) and store their mask's counts themselves (SELF_COUNT),
# so a frame of an op whose mask is planned with 1x1 tiles alone makes no bitmask launch and a
# lone op's frame can be one launch, against session 26's ($OLD_SL), one binary. On CUDA every
# 1x1-tiled GEMM member self-lists (not only the 1x1 convs'), so every bench op is affected.
#   1: batch 1 on CUDA: new, PyTorch, old; tables and member-by-member ratios.
#   2 (a bench whose sample gained TK-32 tiles): gpu_sparse, gpu_fused_finish and gpu_models on
#      CUDA; batch 1 on CUDA, new, and PyTorch.
#   3: batch 1 with the count but no fused finish (DYNASPA_SL_FUSED=0); conv1x1 with the fused
#      finish but the bitmask launch kept (DYNASPA_SELF_COUNT=0); PyTorch.
#   4: batches 2 and 4 on CUDA, sampled knobs: new, PyTorch, old.
#   5: batches 2 and 4 on CUDA, sampled knobs, with the count but no fused finish
#      (DYNASPA_SL_FUSED=0, the default as landed), then PyTorch.
#   6 (DIST=dist-s27c D=/tmp/d27c: the tree as landed, TESTS="gpu_sparse gpu_fused_finish"):
#      gpu_sparse and gpu_fused_finish on CUDA with the landed defaults, then gpu_fused_finish
#      with the fused self-listing finish asked for (DYNASPA_SL_FUSED=1).
stage=$1
source "$(dirname "$0")/start.sh"
if [ "$stage" = 1 ]; then
  LIMIT=250 DUMP=1 bench b1 new_1 $D
  torch_b1 1
  LIMIT=200 bench b1 old_1 $D $OLD_SL
  for v in new old; do best b1 $v 1; done
  pairs cuda_1 b1_new_1 b1_old_1
elif [ "$stage" = 2 ]; then
  for t in gpu_sparse gpu_fused_finish gpu_models; do gpu_test $t $t; done
  LIMIT=250 DUMP=1 bench b1 new_2 $D
  torch_b1 2
  best b1 new 2
elif [ "$stage" = 3 ]; then
  LIMIT=250 DUMP=1 bench b1 co_3 $D DYNASPA_SL_FUSED=0
  torch_b1 3
  c1 fo_3 DYNASPA_SELF_COUNT=0
  for v in co fo; do best b1 $v 3; done
elif [ "$stage" = 4 ]; then
  LIMIT=260 DUMP=1 bench b24k new_4 $D
  torch_b24 4; cp $OUT/r/torch_b24_4.jsonl $OUT/r/torch_b24k_4.jsonl
  LIMIT=200 bench b24k old_4 $D $OLD_SL
  for v in new old; do best b24k $v 4; done
  pairs b24_4 b24k_new_4 b24k_old_4
elif [ "$stage" = 5 ]; then
  LIMIT=300 DUMP=1 bench b24k co_5 $D DYNASPA_SL_FUSED=0
  torch_b24 5; cp $OUT/r/torch_b24_5.jsonl $OUT/r/torch_b24k_5.jsonl
  best b24k co 5
elif [ "$stage" = 6 ]; then
  gpu_test gpu_sparse gpu_sparse_6
  gpu_test gpu_fused_finish gpu_fused_finish_6
  gpu_test gpu_fused_finish gpu_fused_finish_sl_6 DYNASPA_SL_FUSED=1
fi
