#!/bin/bash
# Session 28 calls (bash s.sh N on the GPU host, binaries from pack.sh): split GEMMs that add
# their partial sums with float atomics into zeroed sums and finish in their last work-group
# (DYNASPA_ATOMIC_FINISH=1, "at"), against the default finish ("old"), one binary.
#   1: batch 1 on CUDA: at, PyTorch, old; tables and member-by-member ratios.
#   2: gpu_fused_finish (every finish, atomic among them), gpu_sparse and gpu_models with the
#      atomic finish, on CUDA; then NVIDIA's OpenCL at batch 1, at then old.
#   3: batches 2 and 4 on CUDA, sampled knobs: at, PyTorch, old.
# Call 1 ran stage 1: every atomic member slower, by a round trip to the L2 per accumulator of
# its last work-group (each sum taken, then stored, then the next). Stages 4 and 5
# (DIST=dist-s28b D=/tmp/d28b; OLD=/tmp/d28, call 1's binaries, as "old") take every sum and
# load every bias before the first store, in the fused finishes and the unsplit stores alike:
#   4: batch 1 on CUDA at density 0.1 alone: the new tree's default ("new", its masks dumped),
#      old, new with the atomic finish ("at"), new with the plain fused finish ("fu"); PyTorch.
#   6 (call 3; call 2 ran stage 4, whose benches ran out of time compiling on a fresh host but
#      the last): gpu_fused_finish and gpu_sparse on CUDA with the tree's defaults; conv1x1 at
#      0.1 alone: new, new with the fused self-listing finish ("sl"), at.
#   8 (DIST=dist-s28c D=/tmp/d28c: the bench alone, built from the tree of session 28 with the
#      executables of its sampled schedules built on threads, and CUDA's modules compiled
#      outside the device's lock): conv1x1 at 0.1 alone on a fresh kernel cache with 16 build
#      threads, then on another fresh cache with 1.
#   10 (not run: too little device time was left; dist-s28c and dist-s28d carried,
#      DIST=dist-s28d D=/tmp/d28d, dist-s28d the bench with ks1_store_tile.patch): unsplit stores
#      with their loops unrolled (ks1_store_tile.patch, "ks1", dist-s28d) against the tree's
#      (dist-s28c): conv1x1 at 0.5 alone, c, ks1, c, ks1 on one host, member by member.
#   5 (CHOICE=NAME=VALUE, the finish to land): gpu_fused_finish, and gpu_sparse and gpu_models
#      with CHOICE, on CUDA; batch 1 at 0.1 / 0.3 / 0.5 with CHOICE, then PyTorch.
# Run: 1 (call 28.1), 4 (28.2), 6 (28.3), then conv1x1 benches by hand on the warm host (28.4,
# 28.5: bench_lo with ONLY=conv1x1), 8 (28.6) and a last bench_lo (28.7). Stages 2, 3 and 5 were
# not run (see benches/RESULTS.md, session 28).
stage=$1
source "$(dirname "$0")/start.sh"
if [ "$stage" = 1 ]; then
  LIMIT=250 DUMP=1 bench b1 at_1 $D $AT
  torch_b1 1
  LIMIT=210 bench b1 old_1 $D $NOAT
  for v in at old; do best b1 $v 1; done
  pairs cuda_1 b1_at_1 b1_old_1
elif [ "$stage" = 2 ]; then
  gpu_test gpu_fused_finish gpu_fused_finish_2
  gpu_test gpu_sparse gpu_sparse_at_2 $AT
  gpu_test gpu_models gpu_models_at_2 $AT
  BACKEND=opencl LIMIT=170 bench b1 clat_2 $D $AT
  BACKEND=opencl LIMIT=170 bench b1 clold_2 $D $NOAT
  pairs cl_2 b1_clat_2 b1_clold_2
elif [ "$stage" = 3 ]; then
  LIMIT=260 DUMP=1 bench b24k at_3 $D $AT
  torch_b24 3; cp $OUT/r/torch_b24_3.jsonl $OUT/r/torch_b24k_3.jsonl
  LIMIT=200 bench b24k old_3 $D $NOAT
  for v in at old; do best b24k $v 3; done
  pairs b24_3 b24k_at_3 b24k_old_3
elif [ "$stage" = 4 ]; then
  OLD=${OLD:-/tmp/d28}; mkdir -p $OLD
  python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" dist-s28/gpu_sparse_bench.xz $OLD/gpu_sparse_bench
  chmod +x $OLD/gpu_sparse_bench
  LIMIT=95 DUMP=1 bench_lo new_4 $D
  LIMIT=95 bench_lo old_4 $OLD
  LIMIT=95 bench_lo at_4 $D $AT
  LIMIT=95 bench_lo fu_4 $D DYNASPA_FUSED_FINISH=1
  torch_b1 4; cp $OUT/r/torch_b1_4.jsonl $OUT/r/torch_b1lo_4.jsonl
  pairs lo_4 b1lo_new_4 b1lo_old_4 b1lo_at_4 b1lo_new_4 b1lo_fu_4 b1lo_new_4
  for v in new old at fu; do best b1lo $v 4; done
elif [ "$stage" = 6 ]; then
  gpu_test gpu_fused_finish gpu_fused_finish_6
  gpu_test gpu_sparse gpu_sparse_6
  ONLY=conv1x1 LIMIT=75 bench_lo new_6 $D
  ONLY=conv1x1 LIMIT=75 bench_lo sl_6 $D DYNASPA_SL_FUSED=1
  ONLY=conv1x1 LIMIT=75 bench_lo at_6 $D $AT
  pairs lo_6 b1lo_sl_6 b1lo_new_6 b1lo_at_6 b1lo_new_6
  for v in new sl at; do python3 benches/device_s24/best.py $OUT/r/b1lo_${v}_6.jsonl; done
elif [ "$stage" = 8 ]; then
  export DYNASPA_CACHE_DIR=/tmp/dcache16
  BARGS="--build-threads 16" ONLY=conv1x1 LIMIT=100 bench_lo t16_8 $D
  grep -E "built|sampled" $OUT/r/b1lo_t16_8.txt
  export DYNASPA_CACHE_DIR=/tmp/dcache1
  BARGS="--build-threads 1" ONLY=conv1x1 LIMIT=110 bench_lo t1_8 $D
  grep -E "built|sampled" $OUT/r/b1lo_t1_8.txt
  for v in t16 t1; do python3 benches/device_s24/best.py $OUT/r/b1lo_${v}_8.jsonl; done
elif [ "$stage" = 10 ]; then
  C=/tmp/d28c; mkdir -p $C
  python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" dist-s28c/gpu_sparse_bench.xz $C/gpu_sparse_bench
  chmod +x $C/gpu_sparse_bench
  for r in 1 2; do
    for v in c:$C ks1:$D; do half ${v%%:*}_$r ${v#*:}; done
  done
  pairs ks1_10 h_ks1_1 h_c_1 h_ks1_2 h_c_2
elif [ "$stage" = 5 ]; then
  gpu_test gpu_fused_finish gpu_fused_finish_5
  gpu_test gpu_sparse gpu_sparse_5 $CHOICE
  gpu_test gpu_models gpu_models_5 $CHOICE
  LIMIT=240 DUMP=1 bench b1 ch_5 $D $CHOICE
  torch_b1 5
  best b1 ch 5
fi
