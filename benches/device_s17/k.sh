#!/bin/bash
# Session 17 call K: the bitmask launch stores its counts in mapped host memory (no copy) and
# the main stream waits for an off-path bitmask launch only where needed (dist-s17), against
# the same binaries with DYNASPA_HOST_COUNTS=0 (a copy per frame, call J's) and session 16's
# (dist-s16, call I's), alternated on the same host. Two device calls (10 minutes each):
#   bash k.sh 1: correctness, round 1 at batch 1 and A-ViT, PyTorch on the same masks;
#   bash k.sh 2: round 2, batches 2 and 4 with PyTorch, the full-size DynConv.
stage=$1
[ "$stage" = 2 ] && FULL=1
source "$(dirname "$0")/start.sh"
variants() {
  bench $1 new_$2 $D
  DUMP= bench $1 copy_$2 $D DYNASPA_HOST_COUNTS=0
  DUMP= bench $1 old_$2 $OLD
}
if [ "$stage" = 1 ]; then
  source "$(dirname "$0")/../device_s13/correctness.sh"
  DUMP=1 variants b1 1
  DUMP=1 variants avit 1
  timeout 80 python3 benches/gpu_baselines.py --masks /tmp/masks1 --batches 1 --runs 100 --json $OUT/r/torch_b1.jsonl > /dev/null 2> $OUT/r/torch_b1.err; echo "torch rc=$?"
  timeout 60 python3 benches/gpu_baselines.py --attention /tmp/avm --runs 100 --json $OUT/r/torch_attn.jsonl > $OUT/r/torch_attn.txt 2>&1; echo "torch attn rc=$?"
  vs_torch b1_{new,copy,old}_1
else
  variants b1 2
  variants avit 2
  DUMP=1 bench b24 new_1 $D
  bench b24 old_1 $OLD
  timeout 60 python3 benches/gpu_baselines.py --masks /tmp/masks24 --batches 2,4 --runs 100 --json $OUT/r/torch_b24.jsonl > /dev/null 2> $OUT/r/torch_b24.err; echo "torch b24 rc=$?"
  vs_torch b24_{new,old}_1
  full_bins $D $OLD
fi
pack_results
