#!/bin/bash
# Session 7 call G: where the sparse conv3x3's time goes (ncu, kernel durations at density 0.1
# and 0.3), then the issue-5 GEMM ops with sampled GEMM schedules (--knobs) on CUDA against
# PyTorch, and on NVIDIA's OpenCL against our dense OpenCL kernel.
source "$(dirname "$0")/common.sh"
exec > >(tee $OUT/log.txt) 2>&1
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /tmp/masks
echo "== ncu: conv3x3 b1, default members"
for d in 0.1 0.3; do
  timeout 120 ncu --clock-control none --csv -k regex:'sconv|bitmask|fill|blend' --launch-skip 40 --launch-count 40 \
    --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size $D/gpu_sparse_bench --backend cuda --only conv3x3 \
    --batches 1 --densities $d --samples 3 --runs 2 > $OUT/ncu_$d.csv 2> $OUT/ncu_$d.err; echo "ncu d=$d rc=$?"
  python3 - $OUT/ncu_$d.csv <<'P'
import csv, sys, collections
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
if not rows: print("no ncu rows"); sys.exit()
h = rows[0]; ki, ni, vi, ii = h.index("Kernel Name"), h.index("Metric Name"), h.index("Metric Value"), h.index("ID")
per = collections.OrderedDict()
for r in rows[1:]:
    per.setdefault(r[ii], {"k": r[ki]})[r[ni]] = r[vi]
for i, m in per.items():
    print(f'{i:>4} {m["k"][:28]:<28} grid {m.get("launch__grid_size","?"):>8} block {m.get("launch__block_size","?"):>5} {m.get("gpu__time_duration.sum","?"):>10} ns')
P
done
echo "== CUDA, GEMM ops b1 with sampled schedules"
timeout 300 $D/gpu_sparse_bench --backend cuda --batches 1 --only conv --knobs ${KNOBS:-36} --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
  --dump-masks /tmp/masks --json $OUT/ops_knobs.jsonl 2>&1 | grep -v "^\s*$" | tail -40
timeout 60 python3 benches/gpu_baselines.py --masks /tmp/masks --batches 1 --runs 100 --json $OUT/torch_ops.jsonl > /dev/null 2> $OUT/torch_ops.err; echo "torch rc=$?"
python3 benches/gpu_vs_torch.py $OUT/ops_knobs.jsonl $OUT/torch_ops.jsonl
date -u
echo "== NVIDIA OpenCL, GEMM ops b1 with sampled schedules (issue 6: sparse vs our dense OpenCL)"
timeout 200 $D/gpu_sparse_bench --backend opencl --device NVIDIA --batches 1 --only conv --knobs ${KNOBS_CL:-20} --densities 0.1,0.3,0.5 \
  --samples 10 --runs 10 --json $OUT/ops_knobs_cl.jsonl 2>&1 | grep -v "^\s*$" | tail -30
date -u
