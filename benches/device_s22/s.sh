#!/bin/bash
# Session 22 calls V (bash s.sh N on the GPU host, binaries from pack.sh; FULL=1 for stage 1):
#   1: correctness of whole frames recorded as CUDA graphs (gpu_frame_graphs, and the GPU tests
#      with DYNASPA_FRAME_GRAPHS=1), then the three full-size models end to end with frame graphs
#      off and on, alternated twice, PyTorch eager after each round;
#   2: the issue-5 convs at batch 1 (whole frames launch by launch and from graphs timed beside
#      the member), PyTorch, then again;
#   3: where the full-size DynConv's frame goes (FULL=1): `dynaspa profile` with a sync after
#      every step (DYNASPA_GPU_STEP_TIMES=1, the 60 slowest steps), sparse and with every sparse
#      op forced to its dense member, then the profile's phase table without syncs;
#   4: frame graphs on by default: the frame-graph test and the GPU tests as they are, then the
#      three full-size models over 200 vtest frames in camera order (`dynaspa run`, each frame
#      once) with frame graphs off and on, alternated twice;
#   5: the issue-5 convs at batches 2 and 4 (sampled schedules, whole frames timed too), PyTorch
#      (REP=N names the round);
#   6: stage 4's camera-order runs once more, for the host's time to queue a frame (FULL=1; the
#      dynaspa binary of the tree that reports it, the others as packed for stage 4);
#   7: session 21's sparse-dense difference on NVIDIA OpenCL (FULL=1): the full-size DynConv
#      (`dynaspa bench`, 20 frames, 2 rounds) with the split-K finish fused (OpenCL's default) and
#      split, twice each, then CUDA with the finish fused (off by default there): which output
#      differs, and by how much;
#   8: the device-wide fence on NVIDIA OpenCL (FULL=1, binaries of dist-s22b: D=/tmp/d22b
#      DIST=dist-s22b): the fused programs' PTX fences, the fused-finish and sparse tests there,
#      then stage 7's NVIDIA OpenCL runs with the finish fused, three times.
stage=$1
source "$(dirname "$0")/start.sh"
if [ "$stage" = 1 ]; then
  gpu_test gpu_frame_graphs frame_graphs
  for t in gpu_models gpu_sparse gpu_tokens gpu_fused_finish; do gpu_test $t fg_$t DYNASPA_FRAME_GRAPHS=1; done
  while [ ! -f /tmp/full/all_done ]; do sleep 2; done; ls /tmp/full
  for rep in 1 2; do
    for m in dynconv_full_d30 avit_full_d30 sige_full; do
      full_model off_$rep $m DYNASPA_FRAME_GRAPHS=0
      full_model on_$rep $m DYNASPA_FRAME_GRAPHS=1
    done
    timeout 100 python3 benches/gpu_baselines.py --models --runs 50 --json $OUT/r/torch_models_$rep.jsonl > /dev/null 2> $OUT/r/torch_models_$rep.err
    echo "torch models $rep rc=$? $(python3 -c "import json; [print(r['model'], round(r['us']/1000, 3), 'ms (min', round(r['min_us']/1000, 3), end=') ') for r in map(json.loads, open('$OUT/r/torch_models_$rep.jsonl'))]")"
  done
elif [ "$stage" = 2 ]; then
  for rep in 1 2; do
    DUMP=1 bench b1 fg_$rep $D
    torch_b1 $rep
    vs_rep b1 $rep fg
    cat $OUT/r/vs_b1_fg_$rep.txt
  done
elif [ "$stage" = 3 ]; then
  while [ ! -f /tmp/full/export_avit.log ]; do sleep 2; done  # dynconv exported first
  P="$D/dynaspa profile /tmp/full/dynconv_full_d30.onnx --frames models/frames/vtest --max-frames 10 --backend cuda"
  DYNASPA_GPU_STEP_TIMES=1 timeout 120 $P --nodes 60 > $OUT/r/steps_sparse.txt 2>&1; echo "steps sparse rc=$?"
  DYNASPA_GPU_STEP_TIMES=1 DYNASPA_FORCE_MEMBER=dense timeout 120 $P --nodes 60 > $OUT/r/steps_dense.txt 2>&1; echo "steps dense rc=$?"
  timeout 120 $P > $OUT/r/phases.txt 2>&1; echo "phases rc=$?"
  head -c 3000 $OUT/r/steps_sparse.txt
elif [ "$stage" = 4 ]; then
  for t in gpu_frame_graphs gpu_models gpu_sparse gpu_tokens gpu_fused_finish gpu_ops; do gpu_test $t d_$t; done
  while [ ! -f /tmp/full/all_done ]; do sleep 2; done
  for rep in 1 2; do
    for m in dynconv_full_d30 avit_full_d30 sige_full; do
      extra=(); [ $m = sige_full ] && extra=(--input mask=/tmp/sige_mask.npy)
      for fg in 0 1; do
        DYNASPA_FRAME_GRAPHS=$fg timeout 100 $D/dynaspa run /tmp/full/$m.onnx --frames models/frames/vtest --max-frames 200 --backend cuda "${extra[@]}" > $OUT/r/run_${m}_fg${fg}_$rep.txt 2>&1
        echo "== [$rep] $m graphs=$fg rc=$?: $(grep -E '^summary|rror|warn' $OUT/r/run_${m}_fg${fg}_$rep.txt | tr '\n' ' ')"
      done
    done
  done
elif [ "$stage" = 6 ]; then
  while [ ! -f /tmp/full/all_done ]; do sleep 2; done
  for m in dynconv_full_d30 avit_full_d30 sige_full; do
    extra=(); [ $m = sige_full ] && extra=(--input mask=/tmp/sige_mask.npy)
    for fg in 0 1; do
      DYNASPA_FRAME_GRAPHS=$fg timeout 100 $D/dynaspa run /tmp/full/$m.onnx --frames models/frames/vtest --max-frames 200 --backend cuda "${extra[@]}" > $OUT/r/run_${m}_fg$fg.txt 2>&1
      echo "== $m graphs=$fg rc=$?: $(grep -E '^summary|rror|warn' $OUT/r/run_${m}_fg$fg.txt | tr '\n' ' ')"
    done
  done
elif [ "$stage" = 7 ]; then
  while [ ! -f /tmp/full/export_avit.log ]; do sleep 2; done  # dynconv exported first
  B="$D/dynaspa bench /tmp/full/dynconv_full_d30.onnx --frames models/frames/vtest --max-frames 20 --rounds 2"
  for rep in 1 2; do
    for ff in 1 0; do
      DYNASPA_FUSED_FINISH=$ff timeout 150 $B --backend opencl --device NVIDIA > $OUT/r/cl_ff${ff}_$rep.txt 2>&1
      echo "== [$rep] NVIDIA OpenCL, fused finish $ff rc=$?: $(grep -E 'agree|warn|rror|median' $OUT/r/cl_ff${ff}_$rep.txt | tr -s ' ' | tr '\n' ';')"
    done
  done
  DYNASPA_FUSED_FINISH=1 timeout 100 $B --backend cuda > $OUT/r/cuda_ff1.txt 2>&1
  echo "== CUDA, fused finish 1 rc=$?: $(grep -E 'agree|warn|rror|median' $OUT/r/cuda_ff1.txt | tr -s ' ' | tr '\n' ';')"
elif [ "$stage" = 8 ]; then
  # gpu_fused_finish's OpenCL test; gpu_sparse's tests run on every GPU backend.
  for t in gpu_fused_finish gpu_sparse; do
    env DYNASPA_REQUIRE_BACKENDS=opencl timeout 200 $D/t_$t --test-threads 2 $([ $t = gpu_fused_finish ] && echo opencl) > $OUT/r/test_nv_$t.txt 2>&1
    echo "test nv_$t rc=$? $(grep '^test result' $OUT/r/test_nv_$t.txt | tail -1)"; grep -E "panicked" -A 2 $OUT/r/test_nv_$t.txt | head -6 | cut -c1-300
  done
  f=$(grep -la "FUSED_FINISH=1" $DYNASPA_CACHE_DIR/opencl/* | head -1)
  echo "fences in $f: $(grep -ao 'membar\.[a-z]*' $f | sort | uniq -c | tr '\n' ' ')"
  while [ ! -f /tmp/full/export_avit.log ]; do sleep 2; done
  B="$D/dynaspa bench /tmp/full/dynconv_full_d30.onnx --frames models/frames/vtest --max-frames 20 --rounds 2"
  for rep in 1 2 3; do
    timeout 150 $B --backend opencl --device NVIDIA > $OUT/r/cl_fence_$rep.txt 2>&1
    echo "== [$rep] NVIDIA OpenCL, fused finish, device-wide fence rc=$?: $(grep -E 'agree|warn|rror|median' $OUT/r/cl_fence_$rep.txt | tr -s ' ' | tr '\n' ';')"
  done
elif [ "$stage" = 5 ]; then
  r=${REP:-1}
  DUMP=1 bench b24k fg_$r $D
  torch_b24 $r
  cp $OUT/r/torch_b24_$r.jsonl $OUT/r/torch_b24k_$r.jsonl
  vs_rep b24k $r fg
  cat $OUT/r/vs_b24k_fg_$r.txt
fi
