#!/bin/bash
# Session 38 calls (bash benches/device_s38/s.sh N on the GPU host; binaries from
# benches/device_s13/pack.sh with TESTS="gpu_sliced gpu_sparse" in DIST, unpacked to D).
#   1 (call 38.1, dist-s38): one-stage members copy their weights and gather into shared memory
#      with cp.async (SC_ASYNC; a self-listing one only once its count says it has columns):
#      gpu_sliced and gpu_sparse on CUDA; conv1x1 at density 0.1, batches 1, 2 and 4, the bench's
#      sample (kn) and ONE/SPLIT (one) in samples of 10 frames, with and without
#      DYNASPA_SC_ASYNC=0, alternated, two rounds; PyTorch on the same masks; c1_floor's 32 x 8,
#      64 x 8 and 32 x 16 tiles at batch 2.
stage=$1
case $stage in
  *) DIST=${DIST:-dist-s38} D=${D:-/tmp/d38} ;;
esac
source "$(dirname "$0")/../device_s37/start.sh"
echo "$(date -u +%T) start"
if [ "$stage" = 1 ]; then
  gpu_test gpu_sliced gpu_sliced_1; gpu_test gpu_sparse gpu_sparse_1; keep
  for r in 1 2; do
    RUNS=10 kn on_$r; RUNS=10 kn off_$r DYNASPA_SC_ASYNC=0; keep
    RUNS=10 one on_$r; RUNS=10 one off_$r DYNASPA_SC_ASYNC=0; keep
  done
  torch_sw 1; keep
  for v in kn_on_1 kn_off_1 kn_on_2 kn_off_2 one_on_1 one_off_1 one_on_2 one_off_2; do
    python3 benches/device_s24/best.py $OUT/r/$v.jsonl $OUT/r/torch_sw_1.jsonl | tee $OUT/r/best_$v.txt
  done
  keep
  FLOORS="2:co32_ct8_w8 2:co64_ct8_w8 2:co32_ct16_w8" floors
fi
echo "$(date -u +%T) end"
