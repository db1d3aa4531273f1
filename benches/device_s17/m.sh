#!/bin/bash
# Session 17 call M: spare CUDA events recorded again instead of created and destroyed per use
# (dist-s17b) against call K's binaries (dist-s17), alternated three times on the same host
# with PyTorch before each pair: correctness of the new binaries, the issue-5 convs at batch 1,
# A-ViT's token ops, the full-size DynConv.
FULL=1
source "$(dirname "$0")/start.sh"
( DIST=dist-s17b D=/tmp/d17b; source benches/device_s7/common.sh ); NEW=/tmp/d17b
K=$D; D=$NEW; source "$(dirname "$0")/../device_s13/correctness.sh"; D=$K
DUMP=1 bench b1 new_0 $NEW
DUMP=1 bench avit new_0 $NEW
for rep in 1 2 3; do
  torch_b1 $rep
  bench b1 new_$rep $NEW
  bench b1 k_$rep $D
  vs_rep $rep new k
  bench avit new_$rep $NEW
  bench avit k_$rep $D
done
full_bins $NEW $D
pack_results
