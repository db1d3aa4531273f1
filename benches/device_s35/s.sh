#!/bin/bash
# Session 35 calls (bash s.sh N on the GPU host; binaries from benches/device_s13/pack.sh with
# DIST=dist-s35 TESTS="gpu_sparse gpu_fused_finish gpu_models" on the tree with late_wait.patch
# applied (calls 1 and 2), and DIST=dist-s35b TESTS=gpu_sparse on the tree with the host's
# queueing time in the bench (call 4, D=/tmp/d35b).
#   1 (call 35.1): gpu_sparse on CUDA with LATE; conv1x1 at density 0.1, batches 1, 2 and 4, the
#      bench's sample, LATE ("l") against LIST ("p"), two rounds alternated; PyTorch on the same
#      masks; member-by-member ratios (fused_pairs.py).
#   2 (call 35.2): conv1x1 at density 0.1 and batch 1 over sched.py's members (one launch, no
#      split, in small tiles; beside a few splits), two rounds, then batch 2 once; PyTorch on the
#      same masks.
#   3 (call 35.3): pdl_floor.cu built with nvcc and run: the floor of one and two empty grids per
#      frame, with and without PDL, launched and in a CUDA graph, and a timeline of two-grid frames.
#   4 (call 35.4, DIST=dist-s35b D=/tmp/d35b): pdl_floor again, with a graph per frame and the
#      driver's launch; conv1x1 at density 0.1, batches 1, 2 and 4, the bench's sample, two
#      rounds, with the host's queueing time of the steady member's frames; PyTorch.
#   5 (call 35.5, DIST=dist-s35b D=/tmp/d35b): conv1x1 at density 0.1, batches 1, 2 and 4, the
#      bench's sample, each member's launches replayed from a recorded CUDA graph
#      (DYNASPA_GRAPHS=1, "g") against launch by launch ("n"), two rounds alternated; PyTorch.
#   6 (call 35.6): cl_ext.c built and run: which OpenCL platforms report command buffers.
#   7 (not run in session 35: no device was lent after 35.6; DIST=dist-s35c D=/tmp/d35c, packed
#      from the tree with bind_check.patch applied: the launch's context check and its parameter
#      check without an allocation): pdl_floor; gpu_sparse; conv1x1 at density 0.1, batches 1, 2, 4,
#      the bench's sample, the check ("c") against DYNASPA_CUDA_BIND_CHECK=0 ("s", a
#      cuCtxSetCurrent before every launch), three rounds alternated; PyTorch.
stage=$1
source "$(dirname "$0")/start.sh"
keep() { (cd $OUT && tar czf r_$stage.tgz r); }
echo "$(date -u +%T) start"
if [ "$stage" = 1 ]; then
  gpu_test gpu_sparse gpu_sparse_1 $LATE; keep
  for r in 1 2; do
    knobs l_$r $LATE; keep
    knobs p_$r $LIST; keep
  done
  torch_sw 1; keep
  for v in l_1 p_1 l_2 p_2; do python3 benches/device_s24/best.py $OUT/r/kn_$v.jsonl $OUT/r/torch_sw_1.jsonl | tee $OUT/r/best_kn_$v.txt; done
  python3 benches/device_s32/fused_pairs.py $OUT/r/kn_l_1.jsonl $OUT/r/kn_p_1.jsonl $OUT/r/kn_l_2.jsonl $OUT/r/kn_p_2.jsonl | tee $OUT/r/pairs_1.txt
  keep
elif [ "$stage" = 2 ]; then
  for r in 1 2; do
    BATCHES=1 sweep35 b1_$r; keep
  done
  BATCHES=2 sweep35 b2; keep
  BATCHES=1,2 torch_sw 2; keep
  for v in b1_1 b1_2 b2; do python3 benches/device_s24/best.py $OUT/r/sw_$v.jsonl $OUT/r/torch_sw_2.jsonl | tee $OUT/r/best_sw_$v.txt; done
  keep
elif [ "$stage" = 3 ]; then
  nvcc -O2 -arch=sm_90 -o /tmp/pdl_floor benches/device_s35/pdl_floor.cu -lcuda 2>&1 | tail -5
  for r in 1 2; do /tmp/pdl_floor 1000 2>&1 | tee $OUT/r/pdl_floor_$r.txt; done
  keep
elif [ "$stage" = 4 ]; then
  nvcc -O2 -arch=sm_90 -o /tmp/pdl_floor benches/device_s35/pdl_floor.cu -lcuda 2>&1 | tail -5
  /tmp/pdl_floor 1000 2>&1 | grep -v "^  gemm\|^  fin" | tee $OUT/r/pdl_floor_4.txt; keep
  for r in 1 2; do knobs q_$r; keep; done
  torch_sw 4; keep
  for v in q_1 q_2; do python3 benches/device_s24/best.py $OUT/r/kn_$v.jsonl $OUT/r/torch_sw_4.jsonl | tee $OUT/r/best_kn_$v.txt; grep -h "host queued" $OUT/r/kn_$v.txt; done
  keep
elif [ "$stage" = 5 ]; then
  for r in 1 2; do
    knobs g_$r DYNASPA_GRAPHS=1; keep
    knobs n_$r; keep
  done
  torch_sw 5; keep
  for v in g_1 n_1 g_2 n_2; do python3 benches/device_s24/best.py $OUT/r/kn_$v.jsonl $OUT/r/torch_sw_5.jsonl | tee $OUT/r/best_kn_$v.txt; grep -h "host queued" $OUT/r/kn_$v.txt; done
  python3 benches/device_s32/fused_pairs.py $OUT/r/kn_g_1.jsonl $OUT/r/kn_n_1.jsonl $OUT/r/kn_g_2.jsonl $OUT/r/kn_n_2.jsonl | tee $OUT/r/pairs_5.txt
  keep
elif [ "$stage" = 6 ]; then
  gcc benches/device_s35/cl_ext.c -I/usr/local/cuda/include -lOpenCL -o /tmp/cl_ext 2>&1 | tail -3
  /tmp/cl_ext | tee $OUT/r/cl_ext.txt
elif [ "$stage" = 7 ]; then
  nvcc -O2 -arch=sm_90 -o /tmp/pdl_floor benches/device_s35/pdl_floor.cu -lcuda 2>&1 | tail -5
  /tmp/pdl_floor 1000 2>&1 | grep "driver\|graph of two\|40 frames" | tee $OUT/r/pdl_floor_7.txt; keep
  gpu_test gpu_sparse gpu_sparse_7; keep
  for r in 1 2 3; do
    knobs c_$r; keep
    knobs s_$r DYNASPA_CUDA_BIND_CHECK=0; keep
  done
  torch_sw 7; keep
  for v in c_1 s_1 c_2 s_2 c_3 s_3; do python3 benches/device_s24/best.py $OUT/r/kn_$v.jsonl $OUT/r/torch_sw_7.jsonl | tee $OUT/r/best_kn_$v.txt; grep -h "host queued" $OUT/r/kn_$v.txt; done
  python3 benches/device_s32/fused_pairs.py $OUT/r/kn_c_1.jsonl $OUT/r/kn_s_1.jsonl $OUT/r/kn_c_2.jsonl $OUT/r/kn_s_2.jsonl $OUT/r/kn_c_3.jsonl $OUT/r/kn_s_3.jsonl | tee $OUT/r/pairs_7.txt
  keep
fi
echo "$(date -u +%T) end"
