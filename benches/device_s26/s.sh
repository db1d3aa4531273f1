#!/bin/bash
# Session 26 calls Z (bash s.sh N on the GPU host, binaries from pack.sh): sparse members' grids
# with column tiles slowest (SC_CSLOW, the default) against the same binaries with
# DYNASPA_SC_CSLOW=0 (column tiles fastest, session 25's grids), alternated in one call.
#   1: gpu_sparse and gpu_fused_finish on CUDA; batch 1 on CUDA: slowest, PyTorch, fastest,
#      slowest again; the tables and member-by-member ratios;
#   2 (a bench whose sample gained the splits 10-28 on three tiles): gpu_models on CUDA; batch
#      1 on CUDA, the wider sample, PyTorch, again; NVIDIA's OpenCL at batch 1: slowest,
#      fastest;
#   3 (FULL=1: the full-size models exported in the background): batches 2 and 4 on CUDA,
#      slowest, PyTorch, fastest; the full-size models, slowest and fastest, alternated twice.
#   4: NVIDIA's OpenCL at batch 1: fastest, PyTorch, slowest.
#   5 (FULL=1): the full-size DynConv end to end, then the three models in PyTorch eager, twice.
#   ncu: Nsight Compute on the first 80 sparse GEMM launches of the batch-1 stride-2 bench at
#      density 0.1 (run it twice on a fresh host: the first run compiles the programs).
stage=$1
source "$(dirname "$0")/start.sh"
if [ "$stage" = 1 ]; then
  for t in gpu_sparse gpu_fused_finish; do gpu_test $t $t; done
  DUMP=1 bench b1 cs_1 $D
  torch_b1 1
  bench b1 cf_1 $D DYNASPA_SC_CSLOW=0
  bench b1 csb_1 $D
  for v in cs cf csb; do best b1 $v 1; done
  pairs cuda_1 b1_cs_1 b1_cf_1 b1_csb_1 b1_cf_1
elif [ "$stage" = 2 ]; then
  gpu_test gpu_models gpu_models
  DUMP=1 bench b1 w_2 $D
  torch_b1 2
  bench b1 wb_2 $D
  for v in w wb; do best b1 $v 2; done
  BACKEND=opencl LIMIT=170 bench b1 clcs_2 $D
  BACKEND=opencl LIMIT=170 bench b1 clcf_2 $D DYNASPA_SC_CSLOW=0
  pairs cl_2 b1_clcs_2 b1_clcf_2
  for t in clcs_2 clcf_2; do python3 benches/device_s24/best.py $OUT/r/b1_$t.jsonl > $OUT/r/best_b1_$t.txt; done
elif [ "$stage" = 3 ]; then
  DUMP=1 LIMIT=200 bench b24k cs_3 $D
  torch_b24 3; cp $OUT/r/torch_b24_3.jsonl $OUT/r/torch_b24k_3.jsonl
  LIMIT=200 bench b24k cf_3 $D DYNASPA_SC_CSLOW=0
  for v in cs cf; do best b24k $v 3; done
  pairs b24_3 b24k_cs_3 b24k_cf_3
  while [ ! -f /tmp/full/all_done ]; do sleep 2; done
  for rep in 1 2; do
    for m in dynconv_full_d30 avit_full_d30 sige_full; do
      full_model cs_$rep $m
      full_model cf_$rep $m DYNASPA_SC_CSLOW=0
    done
  done
elif [ "$stage" = 4 ]; then
  BACKEND=opencl LIMIT=170 DUMP=1 bench b1 clcf_4 $D DYNASPA_SC_CSLOW=0
  torch_b1 4
  BACKEND=opencl LIMIT=170 bench b1 clcs_4 $D
  pairs cl_4 b1_clcs_4 b1_clcf_4
  for v in clcs clcf; do best b1 $v 4; done
elif [ "$stage" = 5 ]; then
  while [ ! -f /tmp/full/export_avit.log ]; do sleep 2; done  # DynConv is exported first
  for rep in 1 2; do
    full_model cs_$rep dynconv_full_d30
    timeout 100 python3 benches/gpu_baselines.py --models --runs 50 --json $OUT/r/torch_models_$rep.jsonl > /dev/null 2> $OUT/r/torch_models_$rep.err
    echo "torch models $rep rc=$? $(python3 -c "import json; [print(r['model'], round(r['us']/1000, 3), 'ms (min', round(r['min_us']/1000, 3), end=') ') for r in map(json.loads, open('$OUT/r/torch_models_$rep.jsonl'))]")"
  done
elif [ "$stage" = ncu ]; then
  echo "ncu: $NCU"; $NCU --version | tail -1
  ncu_op s2 conv3x3s2 0.1
  head -c 3000 $OUT/r/ncu_s2.err
fi
