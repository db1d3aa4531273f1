#!/bin/bash
# Session 6 call E: after the few-row GEMM kernel and the per-granularity bitmask work-groups:
# ops at batch 1 vs PyTorch, tuned profile vs default on the reduced models, full-size models
# vs PyTorch eager in alternating rounds.
source "$(dirname "$0")/common.sh"
exec > >(tee $OUT/log.txt) 2>&1
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /tmp/full /tmp/masks
( for f in dynconv avit sige; do timeout 200 python3 models/$f.py --sizes full --no-dataset --out /tmp/full > /tmp/full/export_$f.log 2>&1; done; touch /tmp/full/all_done ) &
echo "== ops on cuda, batch 1"
timeout 150 $D/gpu_sparse_bench --backend cuda --batches 1 --samples 20 --runs 10 --dump-masks /tmp/masks --json $OUT/ops.jsonl 2>&1 | grep -v "^\s*$" | tail -34
timeout 60 python3 benches/gpu_baselines.py --masks /tmp/masks --batches 1 --runs 100 --json $OUT/torch_ops.jsonl > /dev/null 2> $OUT/torch_ops.err; echo "torch rc=$?"
python3 benches/gpu_vs_torch.py $OUT/ops.jsonl $OUT/torch_ops.jsonl
echo "== tuned profile vs default (calibrated) on cuda, reduced models, 2 alternations"
for rep in 1 2; do
  for m in dynconv_small_d30 sige_small; do
    extra=(); [ $m = sige_small ] && extra=(--input mask=tests/goldens/sige_small/mask_0.npy)
    for p in none profiles/cuda-nvidia-h100-80gb-hbm3/$m.json; do
      pa=(); [ $p != none ] && pa=(--profile $p)
      echo "-- [$rep] $m profile=$p"; timeout 60 $D/dynaspa bench models/$m.onnx --frames models/frames/vtest --max-frames 30 --rounds 5 --backend cuda "${extra[@]}" "${pa[@]}" 2>&1 | grep -E "median|speedup|error|refus"
    done
  done
done
while [ ! -f /tmp/full/all_done ]; do sleep 2; done; ls /tmp/full
python3 benches/device_s22/sige_mask.py /tmp/sige_mask.npy
for rep in 1 2 3; do
  for m in dynconv_full_d30 avit_full_d30 sige_full; do
    [ -f /tmp/full/$m.onnx ] || { echo "no /tmp/full/$m.onnx"; continue; }
    extra=(); [ $m = sige_full ] && extra=(--input mask=/tmp/sige_mask.npy)
    echo "== [$rep] $m on cuda"; timeout 100 $D/dynaspa bench /tmp/full/$m.onnx --frames models/frames/vtest --max-frames 20 --rounds 5 --backend cuda "${extra[@]}" 2>&1 | tail -3
  done
  echo "== [$rep] PyTorch"; timeout 100 python3 benches/gpu_baselines.py --models --runs 50 --json $OUT/torch_models_$rep.jsonl 2>&1 | tail -3 | cut -c1-140
done
timeout 100 $D/dynaspa profile /tmp/full/dynconv_full_d30.onnx --frames models/frames/vtest --max-frames 20 --backend cuda 2>&1 | grep -E "^total|^overhead|sparse ops"
date -u
