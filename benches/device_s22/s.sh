#!/bin/bash
# Session 22 calls V (bash s.sh N on the GPU host, binaries from pack.sh; FULL=1 for stage 1):
#   1: correctness of whole frames recorded as CUDA graphs (gpu_frame_graphs, and the GPU tests
#      with DYNASPA_FRAME_GRAPHS=1), then the three full-size models end to end with frame graphs
#      off and on, alternated twice, PyTorch eager after each round;
#   2: the issue-5 convs at batch 1 (whole frames launch by launch and from graphs timed beside
#      the member), PyTorch, then again;
#   3: where the full-size DynConv's frame goes (FULL=1): `dynaspa profile` with a sync after
#      every step (DYNASPA_GPU_STEP_TIMES=1, the 60 slowest steps), sparse and with every sparse
#      op forced to its dense member, then the profile's phase table without syncs.
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
fi
