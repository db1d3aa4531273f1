#!/bin/bash
# Session 29 calls (bash s.sh N on the GPU host; binaries from benches/device_s13/pack.sh of the
# trees named, DIST=dist-s29X D=/tmp/d29X). None of the changes landed; each tree is a patch
# against 8516ec1 beside this script (sl_early.patch against 477135c).
#   1 (call 29.1, dist-s29: cluster_finish.patch): split members whose KS work-groups form one
#      thread-block cluster and add their partial sums through each other's shared memory
#      (SC_CLUSTER, DYNASPA_CLUSTER_FINISH=1, "cl") against the split finish in a second launch
#      ("old"), one binary: gpu_fused_finish and gpu_sparse on CUDA with clusters on; batch 1 at
#      density 0.1: cl (masks dumped), old, PyTorch. Its cl bench ran out of its 110 s compiling
#      on the fresh host; call 29.2 repeated that bench (LIMIT=250) and PyTorch on the warm host.
#   3 (call 29.3, dist-s29b: the SC_STORE_TILE switch of cluster_finish.patch without its
#      clusters, and the bench sample of tiles512.patch): batch 1 at 0.1, sampled knobs, masks
#      dumped (only conv3x3 finished in its 200 s on the fresh host), PyTorch; then the
#      unrolled unsplit stores (DYNASPA_SC_STORE_TILE=1, "st") against the default, conv1x1 at
#      0.5 alone, alternated twice.
#   4 (call 29.4, dist-s29c: tiles512.patch, DYNASPA_REG_BOUND_512=1 asking two groups of 512
#      per SM, 64 registers, "r2"): batch 1 at 0.1 alone, stride 2 then conv1x1 with the default
#      bound ("def"), then all three convs with r2; PyTorch on the same masks.
#   6 (call 29.6, dist-s29c, the tree's kernels): batches 2 and 4 at 0.1, conv1x1 and stride 2
#      (sampled knobs, masks dumped), then PyTorch on the same masks.
#   7 (call 29.7, dist-s29c): Nsight Compute on conv1x1 at batch 1 and 0.1, the default members
#      (no sampled knobs), every GEMM and finish launch up to 120, caches and clocks left alone.
#      Call 29.8: SKIP=120, the next 120 (the sparse members').
#   9 (call 29.9, dist-s29d: sl_early.patch, self-listing work-groups that count the mask
#      and leave before the scan when they have no column): batch 1 at 0.1, conv1x1 with it on
#      ("new") and off (DYNASPA_SL_EARLY=0, "old") alternated twice, gpu_sparse on CUDA, then
#      stride 2 once each.
stage=$1
source "$(dirname "$0")/start.sh"
if [ "$stage" = 1 ]; then
  gpu_test gpu_fused_finish gpu_fused_finish_cl_1 $CL
  gpu_test gpu_sparse gpu_sparse_cl_1 $CL
  LIMIT=110 DUMP=1 bench_lo cl_1 $D $CL
  LIMIT=100 bench_lo old_1 $D $NOCL
  torch_b1 1; cp $OUT/r/torch_b1_1.jsonl $OUT/r/torch_b1lo_1.jsonl
  pairs lo_1 b1lo_cl_1 b1lo_old_1
  for v in cl old; do best b1lo $v 1; done
elif [ "$stage" = 3 ]; then
  LIMIT=200 DUMP=1 bench_lo new_3 $D
  torch_b1 3; cp $OUT/r/torch_b1_3.jsonl $OUT/r/torch_b1lo_3.jsonl
  best b1lo new 3
  for r in 1 2; do
    for v in st:"$ST" def:"DYNASPA_SC_STORE_TILE=0"; do LIMIT=60 half ${v%%:*}_$r $D ${v#*:}; done
  done
  pairs st_3 h_st_1 h_def_1 h_st_2 h_def_2
elif [ "$stage" = 4 ]; then
  ONLY=conv3x3s2 LIMIT=170 DUMP=1 bench_lo def_s2_4 $D
  ONLY=conv1x1 LIMIT=110 DUMP=1 bench_lo def_c1_4 $D
  LIMIT=220 DUMP=1 bench_lo r2_4 $D DYNASPA_REG_BOUND_512=1
  torch_b1 4; cp $OUT/r/torch_b1_4.jsonl $OUT/r/torch_b1lo_4.jsonl
  for v in def_s2 def_c1 r2; do best b1lo $v 4; done
elif [ "$stage" = 6 ]; then
  mkdir -p /tmp/masks24
  for op in conv1x1 conv3x3s2; do
    timeout 200 $D/gpu_sparse_bench --backend cuda --batches 2,4 --only $op --knobs 12 --densities 0.1 --samples 15 \
      --runs 10 --dump-masks /tmp/masks24 --json $OUT/r/b24k_${op}_6.jsonl > $OUT/r/b24k_${op}_6.txt 2>&1
    rc=$?; echo "$(date -u +%T) b24k $op rc=$rc wrong=$(grep -c WRONG $OUT/r/b24k_${op}_6.txt)"
  done
  cat $OUT/r/b24k_conv1x1_6.jsonl $OUT/r/b24k_conv3x3s2_6.jsonl > $OUT/r/b24k_all_6.jsonl
  torch_b24 6; cp $OUT/r/torch_b24_6.jsonl $OUT/r/torch_b24k_6.jsonl
  best b24k all 6
elif [ "$stage" = 7 ]; then
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  args="--backend cuda --batches 1 --only conv1x1 --densities 0.1 --samples 1 --runs 1"
  # The programs compiled first, outside the profiler, into the cache the profiled run reads.
  timeout 90 $D/gpu_sparse_bench $args --json $OUT/r/warm_7.jsonl > $OUT/r/warm_7.txt 2>&1
  rc=$?; echo "$(date -u +%T) warm rc=$rc"
  # SKIP=N: start after the first N matching launches (29.7's 120 were all the dense member's).
  timeout 300 $NCU --cache-control none --clock-control none -k regex:'sconv_(gemm|finish)_f32' --launch-skip ${SKIP:-0} --launch-count 120 \
    --section SpeedOfLight --section LaunchStats --section WarpStateStats --section Occupancy --section SchedulerStats \
    --csv --page details $D/gpu_sparse_bench $args --json $OUT/r/ncu_7.jsonl > $OUT/r/ncu_7.csv 2> $OUT/r/ncu_7.err
  rc=$?; echo "$(date -u +%T) ncu rc=$rc rows=$(wc -l < $OUT/r/ncu_7.csv)"
elif [ "$stage" = 9 ]; then
  # Archived after every bench: the call may run out of device time before the end.
  keep() { (cd $OUT && tar czf r_9.tgz r); }
  for r in 1 2; do
    ONLY=conv1x1 LIMIT=${L1:-90} bench_lo c1_new_$r $D; keep
    ONLY=conv1x1 LIMIT=60 bench_lo c1_old_$r $D DYNASPA_SL_EARLY=0; keep
    L1=40
  done
  pairs c1_9 b1lo_c1_new_1 b1lo_c1_old_1 b1lo_c1_new_2 b1lo_c1_old_2; keep
  gpu_test gpu_sparse gpu_sparse_9; keep
  ONLY=conv3x3s2 LIMIT=100 bench_lo s2_new_1 $D; keep
  ONLY=conv3x3s2 LIMIT=70 bench_lo s2_old_1 $D DYNASPA_SL_EARLY=0
  pairs s2_9 b1lo_s2_new_1 b1lo_s2_old_1; keep
  exit 0
fi
# Every result in one archive: the device machine returns a handful of files per call.
(cd $OUT && tar czf r_$stage.tgz r && rm -rf r)
