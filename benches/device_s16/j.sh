#!/bin/bash
# Session 16 call J: the main queue's wait for an off-path bitmask launch deferred to the work
# that needs it (dist-s16 of that commit), PDL on (default) against DYNASPA_PDL=0, alternated
# twice: correctness, the issue-5 convs at batches 1, 2 and 4 with PyTorch on the same masks,
# A-ViT's token ops, the full-size DynConv. Run at cf09d89; reverted after it (f7e5c1d).
source "$(dirname "$0")/start.sh"
source "$(dirname "$0")/../device_s13/correctness.sh"
mkdir -p /tmp/masks1 /tmp/masks24 /tmp/avm
envs() { case $1 in def) echo DYNASPA_PDL=1;; off) echo DYNASPA_PDL=0;; esac; }
for rep in 1 2; do
  for v in def off; do
    echo "== [$rep] $v $(date -u +%T)"
    first=$([ $rep = 1 ] && [ $v = def ] && echo 1)
    env $(envs $v) timeout 150 $D/gpu_sparse_bench --backend cuda --batches 1 --only conv --knobs 12 --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
      ${first:+--dump-masks /tmp/masks1} --json $OUT/r/b1_${v}_$rep.jsonl > $OUT/r/b1_${v}_$rep.txt 2>&1; echo "b1 rc=$? wrong=$(grep -c WRONG $OUT/r/b1_${v}_$rep.txt)"
    env $(envs $v) timeout 100 $D/gpu_sparse_bench --backend cuda --batches 2,4 --only conv --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
      ${first:+--dump-masks /tmp/masks24} --json $OUT/r/b24_${v}_$rep.jsonl > $OUT/r/b24_${v}_$rep.txt 2>&1; echo "b24 rc=$? wrong=$(grep -c WRONG $OUT/r/b24_${v}_$rep.txt)"
    env $(envs $v) timeout 80 $D/gpu_sparse_bench --backend cuda --avit --batches 1 --samples 15 --runs 10 \
      ${first:+--dump-masks /tmp/avm} --json $OUT/r/avit_${v}_$rep.jsonl > $OUT/r/avit_${v}_$rep.txt 2>&1; echo "avit rc=$? wrong=$(grep -c WRONG $OUT/r/avit_${v}_$rep.txt)"
  done
done
torch_baselines
timeout 60 python3 benches/gpu_baselines.py --attention /tmp/avm --runs 100 --json $OUT/r/torch_attn.jsonl > $OUT/r/torch_attn.txt 2>&1; echo "torch attn rc=$?"
vs_torch b1_{def,off}_{1,2} b24_{def,off}_{1,2}
while [ ! -f /tmp/full/done ]; do sleep 2; done; tail -1 /tmp/full/export.log
for rep in 1 2; do
  for v in def off; do full_run "[$rep] $v" $D $(envs $v); done
done
pack_results
