#!/bin/bash
# Session 24 calls X (bash s.sh N on the GPU host, binaries from pack.sh): only the splits of the
# reduction that get a stage; two stages in flight as CUDA's default.
#   1 (call X1, the tree of c90887c: splits up to 72 sampled): gpu_sparse and gpu_fused_finish
#      on CUDA; the batch-1 bench with this tree's sample and session 23's, PyTorch between;
#   2: the GPU tests with depth 2 as CUDA's default; the batch-1 bench with it, PyTorch, with
#      DYNASPA_SC_DEPTH=1, and session 23's; this tree's on NVIDIA's OpenCL;
#   3 (FULL=1: the three full-size models exported in the background): batches 2 and 4 with
#      this tree's sample, PyTorch after; the full-size models with depth 2 and 1, alternated;
#   4 (FULL=1): the batch-1 bench at depth 2, PyTorch, session 23's; session 23's on NVIDIA's
#      OpenCL (stage 2 ran this tree's); the full-size models at depth 1 and 2 again;
#   5: NVIDIA's OpenCL, this tree's bench and session 23's, alternated twice.
stage=$1
source "$(dirname "$0")/start.sh"
if [ "$stage" = 1 ]; then
  for t in gpu_sparse gpu_fused_finish; do gpu_test $t $t; done
  DUMP=1 LIMIT=240 bench b1 new_1 $D
  torch_b1 1
  bench b1 old_1 $O
elif [ "$stage" = 2 ]; then
  for t in gpu_sparse gpu_fused_finish gpu_models; do gpu_test $t $t; done
  DUMP=1 bench b1 d2_2 $D
  torch_b1 2
  bench b1 d1_2 $D DYNASPA_SC_DEPTH=1
  bench b1 old_2 $O
  for v in d2 d1 old; do best b1 $v 2; done
  BACKEND=opencl LIMIT=150 bench b1 cl_2 $D
  python3 benches/device_s24/best.py $OUT/r/b1_cl_2.jsonl | tee $OUT/r/best_b1_cl_2.txt
elif [ "$stage" = 3 ]; then
  DUMP=1 LIMIT=280 bench b24k new_3 $D
  torch_b24 3; cp $OUT/r/torch_b24_3.jsonl $OUT/r/torch_b24k_3.jsonl
  best b24k new 3
  while [ ! -f /tmp/full/all_done ]; do sleep 2; done
  for m in dynconv_full_d30 avit_full_d30 sige_full; do
    for d in 2 1; do full_model d$d $m DYNASPA_SC_DEPTH=$d; done
  done
elif [ "$stage" = 4 ]; then
  DUMP=1 bench b1 d2_4 $D
  torch_b1 4
  bench b1 old_4 $O
  for v in d2 old; do best b1 $v 4; done
  BACKEND=opencl LIMIT=150 bench b1 clold_4 $O
  python3 benches/device_s24/best.py $OUT/r/b1_clold_4.jsonl | tee $OUT/r/best_b1_clold_4.txt
  while [ ! -f /tmp/full/all_done ]; do sleep 2; done
  for m in dynconv_full_d30 avit_full_d30 sige_full; do
    for d in 1 2; do full_model d${d}_4 $m DYNASPA_SC_DEPTH=$d; done
  done
elif [ "$stage" = 5 ]; then
  for rep in 5 6; do
    for v in cl:$D clold:$O; do
      BACKEND=opencl LIMIT=150 bench b1 ${v%%:*}_$rep ${v#*:}
      python3 benches/device_s24/best.py $OUT/r/b1_${v%%:*}_$rep.jsonl > $OUT/r/best_b1_${v%%:*}_$rep.txt
    done
  done
  python3 benches/device_s24/cl_pairs.py $OUT/r/b1_cl_5.jsonl $OUT/r/b1_clold_5.jsonl $OUT/r/b1_cl_6.jsonl $OUT/r/b1_clold_6.jsonl | tee $OUT/r/cl_pairs.txt
fi
