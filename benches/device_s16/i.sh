#!/bin/bash
# Session 16 call I: what landed (the late trigger as the default, 5271271) against DYNASPA_PDL=0
# with the same binaries (dist-s16), alternated twice on the same host: correctness, the
# issue-5 convs at batch 1 (sampled schedules) and batches 2 and 4 with PyTorch on the same
# masks, A-ViT's token ops, NVIDIA OpenCL once, the full-size DynConv. Also an experiment
# (gpu_sparse_bench_exp, built with call_i_experiment.patch, not landed): the lagged dispatch
# without the main-queue marker before the off-path bitmask and without the main queue's wait
# for it (safe only because the bench's mask never changes): what the frame's boundary would
# gain if nothing but kernels stood between one frame's finish and the next frame's GEMM.
source "$(dirname "$0")/start.sh"
source "$(dirname "$0")/../device_s13/correctness.sh"
mkdir -p /tmp/masks1 /tmp/masks24 /tmp/avm
envs() { case $1 in def) echo DYNASPA_PDL=1;; off) echo DYNASPA_PDL=0;; exp) echo DYNASPA_EXP_NO_MARKER=1 DYNASPA_EXP_NO_WAIT=1;; nowait) echo DYNASPA_EXP_NO_WAIT=1;; esac; }
benchbin() { case $1 in exp|nowait) echo $D/gpu_sparse_bench_exp;; *) echo $D/gpu_sparse_bench;; esac; }
for rep in 1 2; do
  for v in def off exp nowait; do
    echo "== [$rep] $v $(date -u +%T)"
    first=$([ $rep = 1 ] && [ $v = def ] && echo 1)
    env $(envs $v) timeout 150 $(benchbin $v) --backend cuda --batches 1 --only conv --knobs 12 --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
      ${first:+--dump-masks /tmp/masks1} --json $OUT/r/b1_${v}_$rep.jsonl > $OUT/r/b1_${v}_$rep.txt 2>&1; echo "b1 rc=$? wrong=$(grep -c WRONG $OUT/r/b1_${v}_$rep.txt)"
    case $v in def|off)
      env $(envs $v) timeout 100 $D/gpu_sparse_bench --backend cuda --batches 2,4 --only conv --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
        ${first:+--dump-masks /tmp/masks24} --json $OUT/r/b24_${v}_$rep.jsonl > $OUT/r/b24_${v}_$rep.txt 2>&1; echo "b24 rc=$? wrong=$(grep -c WRONG $OUT/r/b24_${v}_$rep.txt)"
      env $(envs $v) timeout 80 $D/gpu_sparse_bench --backend cuda --avit --batches 1 --samples 15 --runs 10 \
        ${first:+--dump-masks /tmp/avm} --json $OUT/r/avit_${v}_$rep.jsonl > $OUT/r/avit_${v}_$rep.txt 2>&1; echo "avit rc=$? wrong=$(grep -c WRONG $OUT/r/avit_${v}_$rep.txt)";;
    esac
  done
done
timeout 100 $D/gpu_sparse_bench --backend opencl --device NVIDIA --batches 1 --only conv --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
  --json $OUT/r/ocl.jsonl > $OUT/r/ocl.txt 2>&1; echo "ocl rc=$? wrong=$(grep -c WRONG $OUT/r/ocl.txt)"
torch_baselines
timeout 60 python3 benches/gpu_baselines.py --attention /tmp/avm --runs 100 --json $OUT/r/torch_attn.jsonl > $OUT/r/torch_attn.txt 2>&1; echo "torch attn rc=$?"
vs_torch b1_{def,off,exp,nowait}_{1,2} b24_{def,off}_{1,2}
while [ ! -f /tmp/full/done ]; do sleep 2; done; tail -1 /tmp/full/export.log
for rep in 1 2; do
  for v in def off; do full_run "[$rep] $v" $D $(envs $v); done
done
pack_results
