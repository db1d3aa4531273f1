#!/bin/bash
# Session 17 call N: split-K finishes stepping over the frame's columns with one wave of
# work-groups (FINISH_LOOP, dist-s17c, on by default on CUDA) against the same binaries with
# DYNASPA_FINISH_LOOP=0 (call K's finish), alternated three times with PyTorch before each
# pair: correctness, the issue-5 convs at batch 1, batches 2 and 4 once, the full-size DynConv.
FULL=1
source "$(dirname "$0")/start.sh"
( DIST=dist-s17c D=/tmp/d17c; source benches/device_s7/common.sh ); NEW=/tmp/d17c
K=$D; D=$NEW; source "$(dirname "$0")/../device_s13/correctness.sh"; D=$K
DUMP=1 bench b1 loop_0 $NEW
b1_rounds loop $NEW grid $NEW DYNASPA_FINISH_LOOP=0
DUMP=1 bench b24 loop_1 $NEW
bench b24 grid_1 $NEW DYNASPA_FINISH_LOOP=0
timeout 60 python3 benches/gpu_baselines.py --masks /tmp/masks24 --batches 2,4 --runs 100 --json $OUT/r/torch_b24.jsonl > /dev/null 2> $OUT/r/torch_b24.err; echo "torch b24 rc=$?"
vs_torch b24_{loop,grid}_1
while [ ! -f /tmp/full/done ]; do sleep 2; done; tail -1 /tmp/full/export.log
for rep in 1 2 3; do full_run "[$rep] loop" $NEW; full_run "[$rep] grid" $NEW DYNASPA_FINISH_LOOP=0; done
pack_results
