#!/bin/bash
# Session 17 call O2: A-ViT's token ops at batches 2 and 4, the key-norm pass of dist-s17d
# against call K's binaries (dist-s17), alternated twice, SDPA on the same masks.
source "$(dirname "$0")/start.sh"
( DIST=dist-s17d D=/tmp/d17d; source benches/device_s7/common.sh ); NEW=/tmp/d17d
mkdir -p /tmp/avm24
timeout 120 $NEW/gpu_sparse_bench --backend cuda --avit --batches 2,4 --samples 15 --runs 10 --dump-masks /tmp/avm24 --json $OUT/r/avit24_norms_0.jsonl > $OUT/r/avit24_norms_0.txt 2>&1; echo "dump rc=$?"
timeout 90 python3 benches/gpu_baselines.py --attention /tmp/avm24 --runs 100 --json $OUT/r/torch_attn24.jsonl > $OUT/r/torch_attn24.txt 2>&1; echo "torch attn rc=$?"
for rep in 1 2; do
  for v in norms k; do
    b=$([ $v = norms ] && echo $NEW || echo $D)
    timeout 120 $b/gpu_sparse_bench --backend cuda --avit --batches 2,4 --samples 15 --runs 10 --json $OUT/r/avit24_${v}_$rep.jsonl > $OUT/r/avit24_${v}_$rep.txt 2>&1; echo "$v $rep rc=$?"
  done
done
pack_results
