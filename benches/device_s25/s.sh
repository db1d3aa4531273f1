#!/bin/bash
# Session 25 calls Y (bash s.sh N on the GPU host, binaries from pack.sh): the GEMM's gather
# indices worked out once per kernel (SC_HOIST), against the same binaries with
# DYNASPA_SC_HOIST=0 (session 24's kernel), alternated in one call.
#   1: gpu_sparse and gpu_fused_finish on CUDA; batch 1 on CUDA: hoisted, PyTorch, per element,
#      hoisted again; the tables and member-by-member ratios;
# Stages 2-5 ran the tree of 383da1b; its SC_KW (DYNASPA_SC_KW) was reverted after them.
#   2 (a tree with SC_KW): gpu_fused_finish on CUDA (groups of 1 and 2), gpu_sparse with
#      DYNASPA_SC_KW=2; batch 1 on CUDA: one group, PyTorch, two groups, one, two; tables, ratios;
#   3: gpu_models on CUDA; NVIDIA's OpenCL at batch 1: hoisted, per element, two groups;
#   4 (FULL=1: the full-size models exported in the background): batches 2 and 4 on CUDA,
#      one group, PyTorch, two groups; the full-size models, one group and two;
#   5 (FULL=1): the full-size models, hoisted and per element, alternated twice.
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
  gpu_test gpu_fused_finish gpu_fused_finish
  gpu_test gpu_sparse gpu_sparse_kw2 DYNASPA_SC_KW=2
  DUMP=1 bench b1 k1_2 $D
  torch_b1 2
  bench b1 k2_2 $D DYNASPA_SC_KW=2
  bench b1 k1b_2 $D
  bench b1 k2b_2 $D DYNASPA_SC_KW=2
  for v in k1 k2 k1b k2b; do best b1 $v 2; done
  pairs kw_2 b1_k2_2 b1_k1_2 b1_k2b_2 b1_k1b_2
elif [ "$stage" = 3 ]; then
  gpu_test gpu_models gpu_models
  BACKEND=opencl LIMIT=140 bench b1 clh_3 $D
  BACKEND=opencl LIMIT=140 bench b1 clnh_3 $D DYNASPA_SC_HOIST=0
  BACKEND=opencl LIMIT=140 bench b1 clk2_3 $D DYNASPA_SC_KW=2
  pairs cl_3 b1_clh_3 b1_clnh_3 b1_clk2_3 b1_clh_3
  for t in clh_3 clnh_3 clk2_3; do python3 benches/device_s24/best.py $OUT/r/b1_$t.jsonl > $OUT/r/best_b1_$t.txt; done
elif [ "$stage" = 4 ]; then
  DUMP=1 LIMIT=200 bench b24k k1_4 $D
  torch_b24 4; cp $OUT/r/torch_b24_4.jsonl $OUT/r/torch_b24k_4.jsonl
  LIMIT=200 bench b24k k2_4 $D DYNASPA_SC_KW=2
  for v in k1 k2; do best b24k $v 4; done
  pairs b24_4 b24k_k2_4 b24k_k1_4
  while [ ! -f /tmp/full/all_done ]; do sleep 2; done
  for m in dynconv_full_d30 avit_full_d30 sige_full; do
    full_model k1 $m
    full_model k2 $m DYNASPA_SC_KW=2
  done
elif [ "$stage" = 5 ]; then
  while [ ! -f /tmp/full/all_done ]; do sleep 2; done
  for rep in 1 2; do
    for m in dynconv_full_d30 avit_full_d30 sige_full; do
      full_model h_$rep $m DYNASPA_SC_HOIST=1
      full_model nh_$rep $m DYNASPA_SC_HOIST=0
    done
  done
fi
