#!/bin/bash
# Session 17 call L: the issue-5 convs at batch 1 against PyTorch, alternated three times in one
# call (PyTorch, then this tree's binaries (dist-s17), then session 16's (dist-s16)), each of
# ours compared with the PyTorch run just before it, so the ratios carry the host's drift
# between runs rather than one PyTorch figure for the whole call.
source "$(dirname "$0")/start.sh"
DUMP=1 bench b1 new_0 $D
for rep in 1 2 3; do
  timeout 80 python3 benches/gpu_baselines.py --masks /tmp/masks1 --batches 1 --runs 100 --json $OUT/r/torch_b1_$rep.jsonl > /dev/null 2> $OUT/r/torch_b1_$rep.err; echo "torch $rep rc=$?"
  bench b1 new_$rep $D
  bench b1 old_$rep $OLD
  for v in new old; do python3 benches/gpu_vs_torch.py $OUT/r/b1_${v}_$rep.jsonl $OUT/r/torch_b1_$rep.jsonl > $OUT/r/vs_b1_${v}_$rep.txt; done
done
pack_results
