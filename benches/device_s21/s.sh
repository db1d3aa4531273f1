#!/bin/bash
# Session 21 calls U (bash s.sh N on the GPU host, binaries from pack.sh):
#   1: the launch floor on CUDA and NVIDIA OpenCL (both OpenCL launch modes, alternated), then
#      the issue-6 convs and A-ViT on NVIDIA OpenCL in the new and the old launch mode,
#      alternated twice;
#   2: correctness (the CUDA self-check, the GPU tests on CUDA and NVIDIA OpenCL, the node suite),
#      then the launch floor again beside PyTorch's (eager and in a CUDA graph);
#   3: correctness with members recorded as CUDA graphs (then on by default), then CUDA at
#      batch 1 with graphs (DYNASPA_GRAPHS=1) and without (=0), PyTorch between;
#   4: the GPU tests on CUDA with every member recorded (DYNASPA_GRAPHS=1, off by default
#      since stage 3), gpu_fused_finish as it is, then stage 3's comparison in the other order;
#   5: A-ViT on NVIDIA OpenCL at batches 1, 2 and 4, the new launch mode three times around one
#      run of the old, then the issue-6 convs in the new mode once more;
#   6: the full-size DynConv end to end on NVIDIA OpenCL (`dynaspa bench`, 20 vtest frames, 5
#      rounds), the new and the old launch mode alternated twice;
#   7: the same model on CUDA twice, with bench's sparse-against-dense warnings shown;
#   8: the issue-6 convs on NVIDIA OpenCL with two reduction stages in flight (DYNASPA_SC_DEPTH=2)
#      and with one, alternated twice.
stage=$1
source "$(dirname "$0")/start.sh"
if [ "$stage" = 1 ]; then
  floor cuda cuda
  for rep in 1 2; do
    floor cl_new_$rep opencl
    floor cl_old_$rep opencl $OLD_CL
    floor cl_memo_only_$rep opencl DYNASPA_CL_LAUNCH_EVENTS=1
  done
  for rep in 1 2; do
    BACKEND=opencl bench b1 new_$rep $D
    BACKEND=opencl bench b1 old_$rep $D $OLD_CL
  done
  for rep in 1 2; do
    for m in new old; do
      env $([ $m = old ] && echo $OLD_CL) timeout 120 $D/gpu_sparse_bench --backend opencl --device NVIDIA --avit --batches 1 \
        --densities 0.1,0.3,0.5 --samples 15 --runs 10 --json $OUT/r/avit_${m}_$rep.jsonl > $OUT/r/avit_${m}_$rep.txt 2>&1
      rc=$?; echo "$(date -u +%T) avit $m $rep rc=$rc wrong=$(grep -c WRONG $OUT/r/avit_${m}_$rep.txt)"
    done
  done
elif [ "$stage" = 2 ]; then
  source "$(dirname "$0")/../device_s13/correctness.sh"
  gpu_test gpu_tokens gpu_tokens
  for rep in 1 2; do
    floor cuda_$rep cuda
    floor cl_new_$rep opencl
    timeout 60 python3 benches/device_s21/torch_floor.py > $OUT/r/torch_floor_$rep.txt 2>&1
    echo "torch floor rc=$? $(tr -s ' ' < $OUT/r/torch_floor_$rep.txt | tr '\n' ';')"
  done
elif [ "$stage" = 3 ]; then
  source "$(dirname "$0")/../device_s13/correctness.sh"
  gpu_test gpu_tokens gpu_tokens
  DUMP=1 bench b1 gon_1 $D DYNASPA_GRAPHS=1
  torch_b1 1
  bench b1 goff_1 $D DYNASPA_GRAPHS=0
  vs_rep b1 1 gon goff
elif [ "$stage" = 4 ]; then
  for t in gpu_sparse gpu_fused_finish gpu_models gpu_ops gpu_tokens; do gpu_test $t g1_$t DYNASPA_GRAPHS=1; done
  gpu_test gpu_fused_finish gpu_fused_finish
  DUMP=1 bench b1 goff_2 $D
  torch_b1 2
  bench b1 gon_2 $D DYNASPA_GRAPHS=1
  vs_rep b1 2 gon goff
elif [ "$stage" = 5 ]; then
  for run in new_1 old_1 new_2 new_3; do
    env $([ ${run%_*} = old ] && echo $OLD_CL) timeout 120 $D/gpu_sparse_bench --backend opencl --device NVIDIA --avit --batches 1,2,4 \
      --densities 0.1,0.3,0.5 --samples 15 --runs 10 --json $OUT/r/avit_$run.jsonl > $OUT/r/avit_$run.txt 2>&1
    rc=$?; echo "$(date -u +%T) avit $run rc=$rc wrong=$(grep -c WRONG $OUT/r/avit_$run.txt)"
  done
  BACKEND=opencl bench b1 new_3 $D
elif [ "$stage" = 6 ]; then
  while [ ! -f /tmp/full/done ]; do sleep 2; done; tail -1 /tmp/full/export.log
  for rep in 1 2; do
    for m in new old; do
      echo "== [$rep] $m full DynConv, NVIDIA OpenCL: $(env $([ $m = old ] && echo $OLD_CL) timeout 120 $D/dynaspa bench /tmp/full/dynconv_full_d30.onnx \
        --frames models/frames/vtest --max-frames 20 --rounds 5 --backend opencl --device NVIDIA 2>&1 | grep -E 'median|speedup_vs_dense|warn' | tr '\n' ' ')"
    done
  done
elif [ "$stage" = 7 ]; then
  while [ ! -f /tmp/full/done ]; do sleep 2; done; tail -1 /tmp/full/export.log
  for rep in 1 2; do
    echo "== [$rep] full DynConv, CUDA: $(timeout 120 $D/dynaspa bench /tmp/full/dynconv_full_d30.onnx --frames models/frames/vtest \
      --max-frames 20 --rounds 5 --backend cuda 2>&1 | grep -E 'median|speedup_vs_dense|warn' | tr '\n' ' ')"
  done
elif [ "$stage" = 8 ]; then
  for rep in 1 2; do
    BACKEND=opencl bench b1 d2_$rep $D DYNASPA_SC_DEPTH=2
    BACKEND=opencl bench b1 d1_$rep $D
  done
fi
pack_results
