#!/bin/bash
# Session 10 call U: ncu on the sparse conv3x3's own launches at density 0.1 (call T's filter
# caught the dense member's epilogue first): the bitmask kernel and the sparse GEMM and finish.
DIST=dist-s10 D=/tmp/d10
source "$(dirname "$0")/../device_s7/common.sh"
exec > >(tee $OUT/log.txt) 2>&1
date -u
for k in bitmask_tiles sconv_gemm_f32; do
  timeout 120 ncu --clock-control none -k regex:"^$k\$" --launch-skip 2 --launch-count 3 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats \
    $D/gpu_sparse_bench --backend cuda --batches 1 --only conv3x3 --densities 0.1 --samples 2 --runs 1 > $OUT/ncu_$k.txt 2>&1
  echo "$k rc=$? lines=$(wc -l < $OUT/ncu_$k.txt)"
done
date -u
