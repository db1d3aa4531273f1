#!/bin/bash
# Session 37 calls (bash benches/device_s37/s.sh N on the GPU host; binaries from
# benches/device_s13/pack.sh in DIST, unpacked to D).
#   1 (call 37.1, dist-s37): sliced members whose stage holds the whole reduction (SC_ONE_STAGE:
#      weights as float4 before the PDL wait, one gather of every column, no stage pipeline):
#      gpu_sliced on CUDA; conv1x1 at density 0.1, batches 1, 2 and 4, over ONE (one-stage
#      tiles) and the fastest split members of sessions 32-36, their masks dumped; the same
#      with DYNASPA_SC_ONE_STAGE=0 (those members pipelined as before), alternated, two rounds;
#      PyTorch on the same masks; c1_floor on them.
#   2 (call 37.2, dist-s37): Nsight Compute, batch 1, conv1x1 at density 0.1: the one-stage member
#      m32n8k256 w2x4 WK 8 against c1_floor's co32_ct8_w8 (the same tile) on the same masks; then
#      the one-stage members' A/B of the CUDA defaults (SL_EARLY, SL_PREWAIT, REG_BOUND, SL_GRID).
#   3 (call 37.3, DIST=dist-s37b D=/tmp/d37b: one-stage weights stored as float4, sliced products
#      over a constant trip count): gpu_sliced on CUDA; conv1x1 at density 0.1, batches 1, 2
#      and 4, ONE and SPLIT timed in samples of 10 frames (the bench scripts' usual) and of 100,
#      two rounds alternated, and one of 100 with DYNASPA_SC_ONE_STAGE=0; PyTorch on the same
#      masks; c1_floor's best tiles on them.
#   4 (call 37.4, DIST=dist-s37c D=/tmp/d37c: one-stage weights stored before the listing, 61
#      registers where 93; the bench's sample with four one-stage tiles): gpu_sliced and
#      gpu_sparse on CUDA; ONE and SPLIT in samples of 10 and 100 frames, the bench's own sample
#      (knobs) in samples of 10 and 100, two rounds; PyTorch on the same masks; c1_floor.
#   Calls 37.1-37.4 ran the GEMM without programmatic launches: the one-stage weights' loads
#   came before PDL_ENTRY_DEFERRED(), so cuda/pdl.rs's `waits_first` no longer saw it first.
#   5 (call 37.5, DIST=dist-s37d D=/tmp/d37d: the entry first again, the one-stage wait after
#      the weights): as 4, plus ONE and SPLIT with DYNASPA_SC_ONE_STAGE=0 in samples of 100.
#   6 (call 37.6, dist-s37d, another host): the bench's sample (knobs) in samples of 10 and of
#      100, two rounds; PyTorch on the same masks.
stage=$1
case $stage in
  1|2) DIST=${DIST:-dist-s37} D=${D:-/tmp/d37} ;;
  3) DIST=${DIST:-dist-s37b} D=${D:-/tmp/d37b} ;;
  4) DIST=${DIST:-dist-s37c} D=${D:-/tmp/d37c} ;;
  *) DIST=${DIST:-dist-s37d} D=${D:-/tmp/d37d} ;;
esac
source "$(dirname "$0")/start.sh"
echo "$(date -u +%T) start"
if [ "$stage" = 1 ]; then
  gpu_test gpu_sliced gpu_sliced_1; keep
  for r in 1 2; do one on_$r; keep; one off_$r DYNASPA_SC_ONE_STAGE=0; keep; done
  torch_sw 1; keep
  for v in on_1 off_1 on_2 off_2; do python3 benches/device_s24/best.py $OUT/r/one_$v.jsonl $OUT/r/torch_sw_1.jsonl | tee $OUT/r/best_one_$v.txt; grep -h "host queued" $OUT/r/one_$v.txt | head -3; done
  keep
  nvcc -O2 -arch=sm_90 -o /tmp/c1_floor benches/device_s36/c1_floor.cu 2>&1 | grep -v Wno-deprecated | tail -5
  for b in 1 2 4; do timeout 60 /tmp/c1_floor /tmp/masks32/d0.10_b$b.npy 1000 co32_ct8_w8 > $OUT/r/c1_floor_b$b.txt 2>&1; grep -A2 RIGHT $OUT/r/c1_floor_b$b.txt | head -3; done
  keep
elif [ "$stage" = 2 ]; then
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  mkdir -p /tmp/masks32
  args="--backend cuda --batches 1 --only conv1x1 --densities 0.1 --samples 1 --runs 1 --schedules m32n8k256_w2x4_s1_wk8 --dump-masks /tmp/masks32"
  timeout 90 $D/gpu_sparse_bench $args > $OUT/r/ncu_warm_2.txt 2>&1; echo "warm rc=$?"
  sec="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section InstructionStats --section MemoryWorkloadAnalysis"
  timeout 200 $NCU --cache-control none --clock-control none -k regex:'sconv_gemm_f32' --launch-skip 20 --launch-count 40 $sec \
    -o /tmp/ncu2 $D/gpu_sparse_bench $args > $OUT/r/ncu_run_2.txt 2>&1
  echo "ncu rc=$?"
  $NCU --import /tmp/ncu2.ncu-rep --csv --page details > $OUT/r/ncu_details_2.csv 2> $OUT/r/ncu_details_2.err; keep
  nvcc -O2 -arch=sm_90 -o /tmp/c1_floor benches/device_s36/c1_floor.cu 2>&1 | grep -v Wno-deprecated | tail -5
  timeout 120 $NCU --cache-control none --clock-control none -k regex:c1_gemm --launch-count 40 $sec \
    -o /tmp/ncu2f /tmp/c1_floor /tmp/masks32/d0.10_b1.npy 2 co32_ct8_w8 > $OUT/r/ncu_run_2f.txt 2>&1
  echo "ncu floor rc=$?"
  $NCU --import /tmp/ncu2f.ncu-rep --csv --page details > $OUT/r/ncu_details_2f.csv 2> $OUT/r/ncu_details_2f.err; keep
  ONE="m32n8k256_w2x4_s1_wk8,m32n8k256_w1x4_s1_wk4,m16n16k256_w2x4_s1_wk8,m32n8k256_w4x4_s1_wk16"
  SPLIT="m64n64k16_w4x4_s10"
  for r in 1 2; do
    BATCHES=1 one base_$r
    BATCHES=1 one early0_$r DYNASPA_SL_EARLY=0
    BATCHES=1 one prewait0_$r DYNASPA_SL_PREWAIT=0
    BATCHES=1 one regb0_$r DYNASPA_REG_BOUND=0
    BATCHES=1 one grid0_$r DYNASPA_SL_GRID=0
    keep
  done
elif [ "$stage" = 3 ]; then
  gpu_test gpu_sliced gpu_sliced_3; keep
  for r in 1 2; do RUNS=10 one r10_$r; keep; RUNS=100 one r100_$r; keep; done
  RUNS=100 one off100 DYNASPA_SC_ONE_STAGE=0; keep
  torch_sw 3; keep
  for v in r10_1 r100_1 r10_2 r100_2 off100; do python3 benches/device_s24/best.py $OUT/r/one_$v.jsonl $OUT/r/torch_sw_3.jsonl | tee $OUT/r/best_one_$v.txt; done
  keep
  floors
elif [ "$stage" = 4 ] || [ "$stage" = 5 ]; then
  gpu_test gpu_sliced gpu_sliced_$stage; keep
  gpu_test gpu_sparse gpu_sparse_$stage; keep
  for r in 1 2; do RUNS=10 one r10_$r; RUNS=100 one r100_$r; keep; RUNS=10 kn r10_$r; RUNS=100 kn r100_$r; keep; done
  [ "$stage" = 5 ] && { RUNS=100 one off100 DYNASPA_SC_ONE_STAGE=0; keep; }
  torch_sw $stage; keep
  for v in one_r10_1 one_r100_1 one_r10_2 one_r100_2 kn_r10_1 kn_r100_1 kn_r10_2 kn_r100_2 one_off100; do
    [ -f $OUT/r/$v.jsonl ] && python3 benches/device_s24/best.py $OUT/r/$v.jsonl $OUT/r/torch_sw_$stage.jsonl | tee $OUT/r/best_$v.txt
  done
  keep
  floors
elif [ "$stage" = 6 ]; then
  for r in 1 2; do RUNS=10 kn r10_$r; RUNS=100 kn r100_$r; keep; done
  torch_sw 6; keep
  for v in kn_r10_1 kn_r100_1 kn_r10_2 kn_r100_2; do python3 benches/device_s24/best.py $OUT/r/$v.jsonl $OUT/r/torch_sw_6.jsonl | tee $OUT/r/best_$v.txt; done
  keep
fi
echo "$(date -u +%T) end"
