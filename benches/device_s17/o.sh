#!/bin/bash
# Session 17 call O: the A-ViT attention op's key-norm pass with KN_LANES work-items per key and
# several work-groups per head (dist-s17d) against call K's binaries (dist-s17), alternated three
# times on the same host, with PyTorch's attention (SDPA) on the same token masks; correctness
# of the new binaries first.
source "$(dirname "$0")/start.sh"
( DIST=dist-s17d D=/tmp/d17d; source benches/device_s7/common.sh ); NEW=/tmp/d17d
K=$D; D=$NEW; source "$(dirname "$0")/../device_s13/correctness.sh"; D=$K
DYNASPA_REQUIRE_BACKENDS=cuda timeout 150 $NEW/t_gpu_models --test-threads 4 > /dev/null 2>&1; echo "gpu_models again rc=$?"
DUMP=1 bench avit norms_0 $NEW
timeout 60 python3 benches/gpu_baselines.py --attention /tmp/avm --runs 100 --json $OUT/r/torch_attn.jsonl > $OUT/r/torch_attn.txt 2>&1; echo "torch attn rc=$?"
for rep in 1 2 3; do
  bench avit norms_$rep $NEW
  bench avit k_$rep $D
done
bench b1 norms_1 $NEW
pack_results
