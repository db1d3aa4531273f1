#!/bin/bash
# Session 36 calls (bash benches/device_s36/s.sh N on the GPU host; binaries dist-s35c, packed
# in session 35 from the tree with benches/device_s35/bind_check.patch applied, in /tmp/d35c).
#   1 (call 36.1): conv1x1 at density 0.1, batches 1, 2 and 4, the bench's sample, its masks
#      dumped; the launch's context check ("c") against a cuCtxSetCurrent before every launch
#      ("s", DYNASPA_CUDA_BIND_CHECK=0), alternated; PyTorch on the same masks; then
#      c1_floor.cu (one launch per frame, warps splitting K, no finish) on those masks.
#   2 (call 36.2, DIST=dist-s36 D=/tmp/d36: the tree with sliced work-groups, WK): gpu_sliced and
#      gpu_sparse on CUDA; conv1x1 at density 0.1, batches 1, 2 and 4, the bench's sample (now
#      with sliced members), two rounds; PyTorch on the same masks; c1_floor on them again.
#   3 (call 36.3, DIST=dist-s36b D=/tmp/d36b: sliced members' sums in the weights' stage, and
#      stages of 128 and 256 in the sample): gpu_sliced on CUDA; conv1x1 at density 0.1, batches
#      1, 2 and 4, the bench's sample, two rounds; PyTorch on the same masks.
#   4 (call 36.4, dist-s36b): Nsight Compute's kernel durations, batch 1, conv1x1 at density 0.1:
#      the bench's sliced member m32n8k64 WK 8 and split member m64n64k16 KS 10, and c1_floor's
#      co32_ct8_w8 (the same tile) on the same masks.
#   5 (call 36.5, dist-s36b): which of the GEMM's CUDA defaults cost the sliced members: batch 1,
#      conv1x1 at density 0.1, three sliced members and a split one, as they are and with one of
#      SC_DEPTH=1, SL_EARLY=0, SC_HOIST=0, SL_PREWAIT=0, REG_BOUND=0, two rounds alternated.
#   6 (call 36.6, dist-s36b for the masks): c1_floor at batch 1 with its own listing and with
#      sparse_conv.cl's (scalar loads, a barrier per scan step), 32 x 8 and 64 x 8, three rounds.
stage=$1
case $stage in
  1) DIST=${DIST:-dist-s35c} D=${D:-/tmp/d35c} ;;
  2) DIST=${DIST:-dist-s36} D=${D:-/tmp/d36} ;;
  *) DIST=${DIST:-dist-s36b} D=${D:-/tmp/d36b} ;;
esac
source "$(dirname "$0")/../device_s35/start.sh"
keep() { (cd $OUT && tar czf r_$stage.tgz r); }
echo "$(date -u +%T) start"
c1floor() {
  nvcc -O2 -arch=sm_90 -o /tmp/c1_floor benches/device_s36/c1_floor.cu 2>&1 | grep -v Wno-deprecated | tail -5
  for b in 1 2 4; do /tmp/c1_floor /tmp/masks32/d0.10_b$b.npy 1000 2>&1 | tee $OUT/r/c1_floor_b${b}_$1.txt; keep; done
}
if [ "$stage" = 1 ]; then
  knobs c_1; keep
  torch_sw 1; keep
  c1floor 1
  knobs s_1 DYNASPA_CUDA_BIND_CHECK=0; keep
  knobs c_2; keep
  for v in c_1 s_1 c_2; do python3 benches/device_s24/best.py $OUT/r/kn_$v.jsonl $OUT/r/torch_sw_1.jsonl | tee $OUT/r/best_kn_$v.txt; grep -h "host queued" $OUT/r/kn_$v.txt; done
  keep
elif [ "$stage" = 2 ]; then
  gpu_test gpu_sliced gpu_sliced_2; keep
  gpu_test gpu_sparse gpu_sparse_2; keep
  for r in 1 2; do knobs w_$r; keep; done
  torch_sw 2; keep
  c1floor 2
  for v in w_1 w_2; do python3 benches/device_s24/best.py $OUT/r/kn_$v.jsonl $OUT/r/torch_sw_2.jsonl | tee $OUT/r/best_kn_$v.txt; grep -h "host queued" $OUT/r/kn_$v.txt; done
  keep
elif [ "$stage" = 3 ]; then
  gpu_test gpu_sliced gpu_sliced_3; keep
  for r in 1 2; do knobs d_$r; keep; done
  torch_sw 3; keep
  for v in d_1 d_2; do python3 benches/device_s24/best.py $OUT/r/kn_$v.jsonl $OUT/r/torch_sw_3.jsonl | tee $OUT/r/best_kn_$v.txt; grep -h "host queued" $OUT/r/kn_$v.txt; done
  keep
elif [ "$stage" = 4 ]; then
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  echo "ncu: $NCU"
  mkdir -p /tmp/masks32
  args="--backend cuda --batches 1 --only conv1x1 --densities 0.1 --samples 1 --runs 1 --schedules m32n8k64_w2x4_s1_wk8,m64n64k16_w4x4_s10 --dump-masks /tmp/masks32"
  timeout 90 $D/gpu_sparse_bench $args > $OUT/r/ncu_warm_4.txt 2>&1; echo "warm rc=$?"
  sec="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats"
  timeout 200 $NCU --cache-control none --clock-control none -k regex:'sconv_(gemm|finish)_f32' --launch-count 300 $sec \
    -o /tmp/ncu4 $D/gpu_sparse_bench $args > $OUT/r/ncu_run_4.txt 2>&1
  echo "ncu rc=$?"
  $NCU --import /tmp/ncu4.ncu-rep --csv --page details > $OUT/r/ncu_details_4.csv 2> $OUT/r/ncu_details_4.err; keep
  nvcc -O2 -arch=sm_90 -o /tmp/c1_floor benches/device_s36/c1_floor.cu 2>&1 | grep -v Wno-deprecated | tail -5
  timeout 120 $NCU --cache-control none --clock-control none -k regex:c1_gemm --launch-count 40 $sec \
    -o /tmp/ncu4f /tmp/c1_floor /tmp/masks32/d0.10_b1.npy 2 co32_ct8_w8 > $OUT/r/ncu_run_4f.txt 2>&1
  echo "ncu floor rc=$?"
  $NCU --import /tmp/ncu4f.ncu-rep --csv --page details > $OUT/r/ncu_details_4f.csv 2> $OUT/r/ncu_details_4f.err; keep
elif [ "$stage" = 5 ]; then
  sl="m32n8k64_w2x4_s1_wk8,m32n8k128_w2x4_s1_wk8,m32n16k64_w4x4_s1_wk16,m64n64k16_w4x4_s10"
  mkdir -p /tmp/masks32
  ab() {
    local tag=$1; shift
    env "$@" timeout 60 $D/gpu_sparse_bench --backend cuda --batches 1 --only conv1x1 --densities 0.1 --samples 15 --runs 10 \
      --schedules $sl --dump-masks /tmp/masks32 --json $OUT/r/ab_$tag.jsonl > $OUT/r/ab_$tag.txt 2>&1
    echo "$(date -u +%T) ab $tag rc=$? wrong=$(grep -c WRONG $OUT/r/ab_$tag.txt)"
  }
  for r in 1 2; do
    ab base_$r
    ab depth1_$r DYNASPA_SC_DEPTH=1
    ab early0_$r DYNASPA_SL_EARLY=0
    ab hoist0_$r DYNASPA_SC_HOIST=0
    ab prewait0_$r DYNASPA_SL_PREWAIT=0
    ab regb0_$r DYNASPA_REG_BOUND=0
    keep
  done
elif [ "$stage" = 6 ]; then
  mkdir -p /tmp/masks32
  timeout 60 $D/gpu_sparse_bench --backend cuda --batches 1 --only conv1x1 --densities 0.1 --samples 1 --runs 1 \
    --schedules m64n64k16_w4x4_s10 --dump-masks /tmp/masks32 > $OUT/r/masks_6.txt 2>&1; echo "masks rc=$?"
  nvcc -O2 -arch=sm_90 -o /tmp/c1_floor benches/device_s36/c1_floor.cu 2>&1 | grep -v Wno-deprecated | tail -5
  for r in 1 2 3; do
    for v in co32_ct8_w8 co32_ct8_w8_generic co64_ct8_w8 co64_ct8_w8_generic; do
      /tmp/c1_floor /tmp/masks32/d0.10_b1.npy 1000 $v 2>&1 | tee -a $OUT/r/c1_generic_$r.txt
    done
    keep
  done
fi
echo "$(date -u +%T) end"
