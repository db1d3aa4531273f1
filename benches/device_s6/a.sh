#!/bin/bash
# Session 6 call A: correctness (self-check), the issue-5 ops vs PyTorch/cuDNN at batch 1/2/4,
# A-ViT attention; full-size exports start in the background for call B.
source "$(dirname "$0")/common.sh"
exec > >(tee $OUT/log.txt) 2>&1
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch,onnx,onnxruntime;print('torch',torch.__version__,'cudnn',torch.backends.cudnn.version(),'onnx',onnx.__version__,'ort',onnxruntime.__version__)" 2>&1
$D/dynaspa devices 2>&1 | grep -E "^(cuda|opencl)"
mkdir -p /tmp/full /tmp/masks /tmp/avm
( for f in dynconv avit sige; do [ -f /tmp/full/${f}_done ] || { timeout 200 python3 models/$f.py --sizes full --no-dataset --out /tmp/full > /tmp/full/export_$f.log 2>&1 && touch /tmp/full/${f}_done; }; done ) &
echo "== self-check (CUDA backend: node suite, goldens, vs CPU; cuDNN)"
DYNASPA_REQUIRE_BACKENDS=cudnn timeout 200 $D/cuda_selfcheck --repo . > $OUT/selfcheck.txt 2>&1; echo "rc=$?"
grep -v "^PASS" $OUT/selfcheck.txt | cut -c1-400 | tail -40; echo "PASS lines: $(grep -c '^PASS' $OUT/selfcheck.txt)"
echo "== ops on cuda, batches 1,2,4"
timeout 260 $D/gpu_sparse_bench --backend cuda --batches 1,2,4 --samples 15 --runs 10 --dump-masks /tmp/masks --json $OUT/ops.jsonl 2>&1 | grep -v "^\s*$" | tail -60
echo "== PyTorch on the same masks"
timeout 100 python3 benches/gpu_baselines.py --masks /tmp/masks --runs 100 --json $OUT/torch_ops.jsonl > /dev/null 2> $OUT/torch_ops.err; echo "rc=$?"; tail -3 $OUT/torch_ops.err
echo "== A-ViT attention"
timeout 90 $D/gpu_sparse_bench --backend cuda --avit --samples 15 --runs 10 --dump-masks /tmp/avm --json $OUT/avit.jsonl 2>&1 | tail -30
timeout 60 python3 benches/gpu_baselines.py --attention /tmp/avm --runs 100 --json $OUT/torch_attn.jsonl > /dev/null 2> $OUT/torch_attn.err; echo "rc=$?"; tail -3 $OUT/torch_attn.err
ls /tmp/full; date -u
