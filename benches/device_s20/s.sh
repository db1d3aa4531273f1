#!/bin/bash
# Session 20 calls T (bash s.sh N on the GPU host, binaries from pack.sh):
#   1: NVIDIA OpenCL's programs for every sampled member (PTX, to set beside NVRTC's), then the
#      sparse GEMM with two stages in flight (DYNASPA_SC_DEPTH=2) against one on CUDA at batch 1,
#      alternated twice, PyTorch after each round;
#   2: the same at batches 2 and 4;
#   3: the fused split-K finish that loads every sum before its first store, against the split
#      finish (--fused-finish both), NVIDIA OpenCL then CUDA at batch 1, PyTorch after;
#   4: correctness, then NVIDIA OpenCL's default (the finish fused only for tiles of at most
#      8,192 partial sums) against every finish split (DYNASPA_FUSED_FINISH=0), alternated twice;
#   5: the GPU tests on CUDA with two stages in flight (DYNASPA_SC_DEPTH=2), then stage 2;
#   6: stage 4's comparison again with the limit at 32,768 partial sums (gpu_fused_finish first);
#   7: stage 2 in the other order (depth 2 first, then PyTorch, then depth 1).
stage=$1
source "$(dirname "$0")/start.sh"
if [ "$stage" = 1 ]; then
  BACKEND=opencl bench b1 cl_1 $D
  keep_caches
  for rep in 1 2; do
    DUMP=1 bench b1 d1_$rep $D
    torch_b1 $rep
    bench b1 d2_$rep $D DYNASPA_SC_DEPTH=2
    vs_rep b1 $rep d1 d2
  done
elif [ "$stage" = 2 ] || [ "$stage" = 5 ]; then
  if [ "$stage" = 5 ]; then
    for t in gpu_sparse gpu_fused_finish gpu_models; do
      DYNASPA_SC_DEPTH=2 DYNASPA_REQUIRE_BACKENDS=cuda timeout 150 $D/t_$t --test-threads 4 > $OUT/r/test_d2_$t.txt 2>&1
      echo "test (depth 2) $t rc=$? $(grep '^test result' $OUT/r/test_d2_$t.txt | tail -1)"
    done
  fi
  DUMP=1 bench b24k d1_1 $D
  torch_b24 1
  bench b24k d2_1 $D DYNASPA_SC_DEPTH=2
  for v in d1 d2; do python3 benches/gpu_vs_torch.py $OUT/r/b24k_${v}_1.jsonl $OUT/r/torch_b24_1.jsonl > $OUT/r/vs_b24k_${v}_1.txt; done
elif [ "$stage" = 7 ]; then
  DUMP=1 bench b24k d2_2 $D DYNASPA_SC_DEPTH=2
  torch_b24 2
  bench b24k d1_2 $D
  for v in d1 d2; do python3 benches/gpu_vs_torch.py $OUT/r/b24k_${v}_2.jsonl $OUT/r/torch_b24_2.jsonl > $OUT/r/vs_b24k_${v}_2.txt; done
elif [ "$stage" = 3 ]; then
  both() {
    local be=$1 tag=$2; shift 2
    env "$@" timeout 280 $D/gpu_sparse_bench --backend $be $([ $be = opencl ] && echo --device NVIDIA) --batches 1 --only conv \
      --knobs 12 --densities 0.1,0.3,0.5 --samples 15 --runs 10 --fused-finish both ${DUMP:+--dump-masks /tmp/masks1} \
      --json $OUT/r/both_$tag.jsonl > $OUT/r/both_$tag.txt 2>&1
    rc=$?; echo "$(date -u +%T) both $tag rc=$rc wrong=$(grep -c WRONG $OUT/r/both_$tag.txt)"
  }
  mkdir -p /tmp/masks1
  DUMP=1 both opencl cl
  both cuda cu
  torch_b1 1
elif [ "$stage" = 4 ] || [ "$stage" = 6 ]; then
  if [ "$stage" = 4 ]; then
    source "$(dirname "$0")/../device_s13/correctness.sh"
    DYNASPA_REQUIRE_BACKENDS=cuda timeout 150 $D/t_gpu_tokens --test-threads 4 > $OUT/r/test_gpu_tokens.txt 2>&1
    echo "test gpu_tokens rc=$? $(grep '^test result' $OUT/r/test_gpu_tokens.txt | tail -1)"
  else
    DYNASPA_REQUIRE_BACKENDS=cuda timeout 150 $D/t_gpu_fused_finish --test-threads 4 > $OUT/r/test_gpu_fused_finish.txt 2>&1
    echo "test gpu_fused_finish rc=$? $(grep '^test result' $OUT/r/test_gpu_fused_finish.txt | tail -1)"
  fi
  for rep in 1 2; do
    BACKEND=opencl bench b1 clrule_$rep $D
    BACKEND=opencl bench b1 cloff_$rep $D DYNASPA_FUSED_FINISH=0
  done
fi
pack_results
