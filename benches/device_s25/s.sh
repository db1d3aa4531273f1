#!/bin/bash
# Session 25 calls Y (bash s.sh N on the GPU host, binaries from pack.sh): the GEMM's gather
# indices worked out once per kernel (SC_HOIST), against the same binaries with
# DYNASPA_SC_HOIST=0 (session 24's kernel), alternated in one call.
#   1: gpu_sparse and gpu_fused_finish on CUDA; batch 1 on CUDA: hoisted, PyTorch, per element,
#      hoisted again; the tables and member-by-member ratios;
#   2: gpu_models on CUDA; NVIDIA's OpenCL at batch 1, hoisted and per element, alternated twice;
#   3 (FULL=1: the full-size models exported in the background): batches 2 and 4 on CUDA,
#      hoisted, PyTorch, per element; the full-size models, hoisted and per element.
stage=$1
source "$(dirname "$0")/start.sh"
if [ "$stage" = 1 ]; then
  for t in gpu_sparse gpu_fused_finish; do gpu_test $t $t; done
  DUMP=1 bench b1 h_1 $D
  torch_b1 1
  bench b1 nh_1 $D DYNASPA_SC_HOIST=0
  bench b1 hb_1 $D
  for v in h nh hb; do best b1 $v 1; done
  pairs cuda_1 b1_h_1 b1_nh_1 b1_hb_1 b1_nh_1
elif [ "$stage" = 2 ]; then
  gpu_test gpu_models gpu_models
  for rep in 2 3; do
    BACKEND=opencl LIMIT=140 bench b1 clh_$rep $D
    BACKEND=opencl LIMIT=140 bench b1 clnh_$rep $D DYNASPA_SC_HOIST=0
  done
  pairs cl b1_clh_2 b1_clnh_2 b1_clh_3 b1_clnh_3
  for t in clh_2 clnh_2 clh_3 clnh_3; do python3 benches/device_s24/best.py $OUT/r/b1_$t.jsonl > $OUT/r/best_b1_$t.txt; done
elif [ "$stage" = 3 ]; then
  DUMP=1 LIMIT=200 bench b24k h_4 $D
  torch_b24 4; cp $OUT/r/torch_b24_4.jsonl $OUT/r/torch_b24k_4.jsonl
  LIMIT=200 bench b24k nh_4 $D DYNASPA_SC_HOIST=0
  for v in h nh; do best b24k $v 4; done
  pairs b24 b24k_h_4 b24k_nh_4
  while [ ! -f /tmp/full/all_done ]; do sleep 2; done
  for m in dynconv_full_d30 avit_full_d30 sige_full; do
    full_model h $m
    full_model nh $m DYNASPA_SC_HOIST=0
  done
fi
