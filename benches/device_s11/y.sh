#!/bin/bash
# Session 11 call Y: where bitmask_tiles (this session's, dist-s11/) spends its cycles: ncu's
# full set on one launch for the conv3x3 bench's 40x40 mask, exported with per-SASS-instruction
# stall samples.
DIST=dist-s11 D=/tmp/d11
source "$(dirname "$0")/../device_s7/common.sh"
exec > >(tee $OUT/log.txt) 2>&1
timeout 120 ncu --clock-control none -k regex:'^bitmask_tiles$' --launch-skip 4 --launch-count 1 --set full -o $OUT/bm \
  $D/gpu_sparse_bench --backend cuda --batches 1 --only conv3x3 --densities 0.3 --samples 2 --runs 1 > $OUT/ncu_run.txt 2>&1
echo "ncu rc=$?"
ncu -i $OUT/bm.ncu-rep > $OUT/details.txt 2>&1
ncu -i $OUT/bm.ncu-rep --page source --print-source sass --csv > $OUT/sass.csv 2>&1
grep -E "Duration|Elapsed Cycles|SM Active|Registers|Achieved Occ|Warp Cycles Per Issued|Issued Ipc" $OUT/details.txt | head -20
wc -l $OUT/sass.csv; head -3 $OUT/sass.csv | cut -c1-600
