#!/bin/bash
# Session 8 call O (binaries of the merge of branch fused): the GPU self-check with the split-K
# finish folded into the GEMM (CUDA's default now), then the issue-5 GEMM ops at batch 1 with
# sampled schedules, each member timed with the finish fused and as a second launch, on CUDA
# (against PyTorch) and on NVIDIA's OpenCL (against our dense OpenCL kernel).
source "$(dirname "$0")/../device_s7/common.sh"
exec > >(tee $OUT/log.txt) 2>&1
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /tmp/masks
DYNASPA_REQUIRE_BACKENDS=cudnn timeout 150 $D/cuda_selfcheck --repo . > $OUT/selfcheck.txt 2>&1; echo "selfcheck rc=$?"
grep -v "^PASS" $OUT/selfcheck.txt | cut -c1-300 | tail -15; echo "PASS lines: $(grep -c '^PASS' $OUT/selfcheck.txt)"
echo "== CUDA, fused and split finish"
timeout 220 $D/gpu_sparse_bench --backend cuda --batches 1 --only conv --knobs ${KNOBS:-20} --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
  --fused-finish both --dump-masks /tmp/masks --json $OUT/ops_both.jsonl > /tmp/bench_cuda.txt 2>&1; echo "bench rc=$?"
grep -v "^\s*$" /tmp/bench_cuda.txt | grep -v WRONG | tail -30; echo "WRONG lines: $(grep -c WRONG /tmp/bench_cuda.txt)"; grep WRONG /tmp/bench_cuda.txt | head -5
timeout 60 python3 benches/gpu_baselines.py --masks /tmp/masks --batches 1 --runs 100 --json /tmp/torch_ops.jsonl > /dev/null 2> $OUT/torch_ops.err; echo "torch rc=$?"
python3 benches/device_s8/split_fused.py $OUT/ops_both.jsonl /tmp/ops
for t in split fused; do echo "-- $t"; python3 benches/gpu_vs_torch.py /tmp/ops.$t.jsonl /tmp/torch_ops.jsonl | tee $OUT/vs_torch_$t.txt; done
date -u
echo "== NVIDIA OpenCL, fused and split finish"
timeout 150 $D/gpu_sparse_bench --backend opencl --device NVIDIA --batches 1 --only conv --knobs ${KNOBS_CL:-10} --densities 0.1,0.3,0.5 \
  --samples 10 --runs 10 --fused-finish both --json $OUT/ops_both_cl.jsonl > /tmp/bench_cl.txt 2>&1; echo "bench rc=$?"
grep -v "^\s*$" /tmp/bench_cl.txt | grep -v WRONG | tail -30; echo "WRONG lines: $(grep -c WRONG /tmp/bench_cl.txt)"; grep WRONG /tmp/bench_cl.txt | head -5
date -u
cp /tmp/bench_cuda.txt /tmp/bench_cl.txt $OUT/ 2>/dev/null; true
