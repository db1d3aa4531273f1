#!/bin/bash
# Session 19 call S: a register bound on NVIDIA's OpenCL (-cl-nv-maxrregcount=128 for the
# members of 256 work-items, as 4bf80dd built it) against none (DYNASPA_REG_BOUND=0), same
# binaries; then the 128 x 128 sampled tiles on CUDA. Two device calls (10 minutes each):
#   bash s.sh 1 (4bf80dd): correctness, NVIDIA OpenCL with and without the bound, its programs;
#   bash s.sh 2 (0ce7031): batches 2 and 4, then 1, sampled knobs, PyTorch after each bench;
#   bash s.sh 3: the same with splits between the powers of two, batch 1 twice;
#   bash s.sh 4: correctness, then A-ViT's token ops at batches 1, 2 and 4 with the tiled
#   attention (the default) against the row kernel (DYNASPA_TILED_ATTENTION=0), alternated
#   twice, PyTorch's SDPA on the same masks before and after;
#   bash s.sh 5: NVIDIA OpenCL's ptxas reports, A-ViT on NVIDIA OpenCL with either attention;
#   bash s.sh 6: NVIDIA OpenCL with a register cap for every program against none, both reported.
stage=$1
source "$(dirname "$0")/start.sh"
if [ "$stage" = 1 ]; then
  source "$(dirname "$0")/../device_s13/correctness.sh"
  BACKEND=opencl bench b1 clbound_1 $D
  BACKEND=opencl bench b1 clfree_1 $D DYNASPA_REG_BOUND=0
  keep_clcache
  BACKEND=opencl bench b1 clbound_2 $D
  BACKEND=opencl bench b1 clfree_2 $D DYNASPA_REG_BOUND=0
elif [ "$stage" = 4 ]; then
  source "$(dirname "$0")/../device_s13/correctness.sh"
  DYNASPA_REQUIRE_BACKENDS=cuda timeout 150 $D/t_gpu_tokens --test-threads 4 > $OUT/r/test_gpu_tokens.txt 2>&1
  echo "test gpu_tokens rc=$? $(grep '^test result' $OUT/r/test_gpu_tokens.txt | tail -1)"
  DYNASPA_TILED_ATTENTION=0 DYNASPA_REQUIRE_BACKENDS=cuda timeout 150 $D/t_gpu_tokens --test-threads 4 > $OUT/r/test_gpu_tokens_row.txt 2>&1
  echo "test gpu_tokens (row kernel) rc=$? $(grep '^test result' $OUT/r/test_gpu_tokens_row.txt | tail -1)"
  mkdir -p /tmp/avm
  avit() { env "${@:3}" timeout 150 $D/gpu_sparse_bench --backend cuda --avit --batches 1,2,4 --samples 15 --runs 10 \
    ${DUMP:+--dump-masks /tmp/avm} --json $OUT/r/avit_$1_$2.jsonl > $OUT/r/avit_$1_$2.txt 2>&1
    rc=$?; echo "$(date -u +%T) avit $1 $2 rc=$rc wrong=$(grep -c WRONG $OUT/r/avit_$1_$2.txt)"; }
  DUMP=1 avit tiled 0
  timeout 90 python3 benches/gpu_baselines.py --attention /tmp/avm --runs 100 --json $OUT/r/torch_attn.jsonl > $OUT/r/torch_attn.txt 2>&1; echo "torch attn rc=$?"
  for rep in 1 2; do
    avit tiled $rep
    avit row $rep DYNASPA_TILED_ATTENTION=0
  done
  timeout 90 python3 benches/gpu_baselines.py --attention /tmp/avm --runs 100 --json $OUT/r/torch_attn_2.jsonl > $OUT/r/torch_attn_2.txt 2>&1; echo "torch attn 2 rc=$?"
elif [ "$stage" = 5 ]; then
  # NVIDIA's OpenCL: ptxas's report for every program (registers, spills), then A-ViT's token
  # ops with the tiled attention against the row kernel.
  DYNASPA_CL_OPTIONS=-cl-nv-verbose RUST_LOG=dynaspa_backends::opencl=debug BACKEND=opencl bench b1 clverbose $D
  grep -E "ptxas info|bytes stack|TM=" $OUT/r/b1_clverbose.txt | cut -c1-400 > $OUT/r/cl_ptxas.txt; echo "ptxas lines: $(wc -l < $OUT/r/cl_ptxas.txt)"
  for v in tiled row; do
    env $([ $v = row ] && echo DYNASPA_TILED_ATTENTION=0) timeout 150 $D/gpu_sparse_bench --backend opencl --device NVIDIA --avit \
      --batches 1,2,4 --samples 15 --runs 10 --json $OUT/r/clavit_$v.jsonl > $OUT/r/clavit_$v.txt 2>&1; echo "cl avit $v rc=$?"
  done
elif [ "$stage" = 6 ]; then
  # NVIDIA's OpenCL with -cl-nv-maxrregcount=128 for every program against none, ptxas's
  # report kept for both.
  export RUST_LOG=dynaspa_backends::opencl=debug
  DYNASPA_CL_OPTIONS="-cl-nv-verbose" BACKEND=opencl bench b1 clv_free $D
  DYNASPA_CL_OPTIONS="-cl-nv-verbose -cl-nv-maxrregcount=128" BACKEND=opencl bench b1 clv_cap $D
  for v in free cap; do grep -E "ptxas info|bytes stack|TM=" $OUT/r/b1_clv_$v.txt | cut -c1-400 > $OUT/r/cl_ptxas_$v.txt; done
elif [ "$stage" = 3 ]; then
  DUMP=1 bench b24k ks_1 $D
  torch_b24 1
  python3 benches/gpu_vs_torch.py $OUT/r/b24k_ks_1.jsonl $OUT/r/torch_b24_1.jsonl > $OUT/r/vs_b24k_ks_1.txt
  DUMP=1 bench b1 ks_1 $D
  torch_b1 1
  bench b1 ks_2 $D
  torch_b1 2
  vs_rep b1 1 ks
  vs_rep b1 2 ks
else
  DUMP=1 bench b24k new_1 $D
  torch_b24 1
  python3 benches/gpu_vs_torch.py $OUT/r/b24k_new_1.jsonl $OUT/r/torch_b24_1.jsonl > $OUT/r/vs_b24k_new_1.txt
  DUMP=1 bench b1 new_1 $D
  torch_b1 1
  vs_rep b1 1 new
fi
pack_results
