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
stage=$1
if [ "$stage" = 1 ]; then DIST=${DIST:-dist-s35c} D=${D:-/tmp/d35c}; else DIST=${DIST:-dist-s36} D=${D:-/tmp/d36}; fi
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
fi
echo "$(date -u +%T) end"
