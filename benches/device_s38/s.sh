#!/bin/bash
# Session 38 calls (bash benches/device_s38/s.sh N on the GPU host; binaries from
# benches/device_s13/pack.sh with TESTS="gpu_sliced gpu_sparse" in DIST, unpacked to D).
#   1 (call 38.1, dist-s38): one-stage members copy their weights and gather into shared memory
#      with cp.async (SC_ASYNC; a self-listing one only once its count says it has columns):
#      gpu_sliced and gpu_sparse on CUDA; conv1x1 at density 0.1, batches 1, 2 and 4, the bench's
#      sample (kn) and ONE/SPLIT (one) in samples of 10 frames, with and without
#      DYNASPA_SC_ASYNC=0, alternated, two rounds; PyTorch on the same masks; c1_floor's 32 x 8,
#      64 x 8 and 32 x 16 tiles at batch 2.
#   2 (call 38.2, dist-s38b: tiles past 48 KiB take the weights' stage from the launch,
#      DSP_DYN_SMEM; the bench's sample gains m64n8k256): gpu_sliced and gpu_sparse on CUDA;
#      the bench's sample in samples of 10 frames (two rounds) and 100; ONE2 (one-stage tiles
#      past 48 KiB and the best below) and SPLIT; PyTorch on the same masks.
#   3 (call 38.3, dist-s38c: DYNASPA_CUDA_CARVEOUT, the A/B switch of the shared memory carveout
#      for kernels with dynamic shared memory): Nsight Compute at batch 2 on m64n8k256 (dynamic)
#      and m32n8k256 (static); ONE3 at batches 2 and 4 with the defaults, with a carveout of 100%
#      and with DYNASPA_SC_ASYNC=0, two rounds; c1_floor's 64 x 8 and 32 x 8 at batch 2.
#   4 (call 38.4, dist-s38d: DYNASPA_SC_ASYNC=0|1|2 (registers; copies at the entry; the
#      weights' copies after the count); the bench's sample gains m64n16k256): each mode's knob
#      sample and ONE4 at batches 1, 2 and 4 in samples of 10, alternated, two rounds; the
#      sample in samples of 100 for modes 0 and 1; PyTorch on the same masks.
#   5 (call 38.5, dist-s38e: SC_ASYNC 0 the default; DYNASPA_SC_EARLY_TRIGGER, the one-stage
#      members' trigger at their entry): gpu_sliced on CUDA; the knob sample with and without the
#      early trigger, samples of 10 (two rounds, alternated) and of 100; PyTorch on the masks.
stage=$1
case $stage in
  1) DIST=${DIST:-dist-s38} D=${D:-/tmp/d38} ;;
  3) DIST=${DIST:-dist-s38c} D=${D:-/tmp/d38c} ;;
  4) DIST=${DIST:-dist-s38d} D=${D:-/tmp/d38d} ;;
  5) DIST=${DIST:-dist-s38e} D=${D:-/tmp/d38e} ;;
  *) DIST=${DIST:-dist-s38b} D=${D:-/tmp/d38b} ;;
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
elif [ "$stage" = 2 ]; then
  gpu_test gpu_sliced gpu_sliced_2; gpu_test gpu_sparse gpu_sparse_2; keep
  ONE="m64n8k256_w4x4_s1_wk8,m64n8k256_w4x4_s1_wk4,m32n8k256_w2x4_s1_wk8,m32n16k256_w2x2_s1_wk2,m32n16k256_w4x4_s1_wk8,m64n16k256_w4x4_s1_wk4,m128n8k256_w8x4_s1_wk8,m64n8k256_w2x4_s1_wk4"
  for r in 1 2; do RUNS=10 kn r10_$r; RUNS=10 one r10_$r; keep; done
  RUNS=100 kn r100; keep
  torch_sw 2; keep
  for v in kn_r10_1 one_r10_1 kn_r10_2 one_r10_2 kn_r100; do
    python3 benches/device_s24/best.py $OUT/r/$v.jsonl $OUT/r/torch_sw_2.jsonl | tee $OUT/r/best_$v.txt
  done
  keep
elif [ "$stage" = 3 ]; then
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  mkdir -p /tmp/masks32
  sec="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats"
  for m in m64n8k256_w4x4_s1_wk8 m32n8k256_w2x4_s1_wk8; do
    args="--backend cuda --batches 2 --only conv1x1 --densities 0.1 --samples 1 --runs 1 --schedules $m --dump-masks /tmp/masks32"
    timeout 100 $NCU --cache-control none --clock-control none -k regex:'sconv_gemm_f32' --launch-skip 20 --launch-count 10 $sec \
      -o /tmp/ncu3_$m $D/gpu_sparse_bench $args > $OUT/r/ncu_run_$m.txt 2>&1
    echo "ncu $m rc=$?"
    $NCU --import /tmp/ncu3_$m.ncu-rep --csv --page details > $OUT/r/ncu_$m.csv 2>&1
    grep -E '"(Duration|Registers Per Thread|Dynamic Shared Memory Per Block|Static Shared Memory Per Block|Shared Memory Configuration Size|Block Limit Shared Mem|Block Limit Registers|Achieved Occupancy|Theoretical Occupancy|Waves Per SM|Grid Size)"' $OUT/r/ncu_$m.csv | awk -F'","' '{print $(NF-2)": "$NF}' | sort | uniq -c | head -24
  done
  keep
  ONE="m64n8k256_w4x4_s1_wk8,m32n8k256_w2x4_s1_wk8,m64n16k256_w4x4_s1_wk4,m32n16k256_w4x4_s1_wk8"
  SPLIT="m64n64k16_w4x4_s10"
  for r in 1 2; do
    BATCHES=2,4 one base_$r; BATCHES=2,4 one carve_$r DYNASPA_CUDA_CARVEOUT=100; BATCHES=2,4 one sync_$r DYNASPA_SC_ASYNC=0; keep
  done
  members
  FLOORS="2:co64_ct8_w8 2:co32_ct8_w8" floors
elif [ "$stage" = 4 ]; then
  gpu_test gpu_sliced gpu_sliced_4; keep
  ONE="m64n8k256_w4x4_s1_wk8,m32n8k256_w2x4_s1_wk8,m64n16k256_w4x4_s1_wk4,m32n16k256_w4x4_s1_wk8,m64n8k256_w2x4_s1_wk4,m16n16k256_w2x4_s1_wk8"
  SPLIT="m64n64k16_w4x4_s10,m128n32k16_w4x4_s6"
  for r in 1 2; do
    for m in 0 1 2; do RUNS=10 kn a${m}_$r DYNASPA_SC_ASYNC=$m; RUNS=10 one a${m}_$r DYNASPA_SC_ASYNC=$m; done; keep
  done
  for m in 0 1; do RUNS=100 kn a${m}_r100 DYNASPA_SC_ASYNC=$m; done; keep
  torch_sw 4; keep
  for f in $OUT/r/kn_*.jsonl $OUT/r/one_*.jsonl; do
    v=$(basename $f .jsonl); echo "== $v"; python3 benches/device_s24/best.py $f $OUT/r/torch_sw_4.jsonl | tee $OUT/r/best_$v.txt | tail -3
  done
  members
  keep
elif [ "$stage" = 5 ]; then
  gpu_test gpu_sliced gpu_sliced_5; keep
  for r in 1 2; do RUNS=10 kn t0_$r DYNASPA_SC_EARLY_TRIGGER=0; RUNS=10 kn t1_$r DYNASPA_SC_EARLY_TRIGGER=1; keep; done
  RUNS=100 kn t0_r100 DYNASPA_SC_EARLY_TRIGGER=0; RUNS=100 kn t1_r100 DYNASPA_SC_EARLY_TRIGGER=1; keep
  torch_sw 5; keep
  for v in t0_1 t1_1 t0_2 t1_2 t0_r100 t1_r100; do
    echo "== $v"; python3 benches/device_s24/best.py $OUT/r/kn_$v.jsonl $OUT/r/torch_sw_5.jsonl | tee $OUT/r/best_kn_$v.txt | tail -3
  done
  keep
fi
echo "$(date -u +%T) end"
