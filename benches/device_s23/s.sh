#!/bin/bash
# Session 23 calls W (bash s.sh N on the GPU host, binaries from pack.sh; SIGE=1 for stage 1):
#   1: where the full-size SIGE's frame goes on CUDA against PyTorch: `dynaspa profile` with a
#      sync after every step (DYNASPA_GPU_STEP_TIMES=1, 120 slowest nodes), sparse and with
#      every sparse op forced dense, the phase table without syncs, then torch.profiler over the
#      same generator in PyTorch (torch_ops.py: CUDA time per module and per kernel);
#   2: ConvTranspose as a GEMM per output phase: the GPU tests that cover it (gpu_ops, the node
#      suite, gpu_models) on CUDA and NVIDIA's OpenCL, SIGE's step profile again, then the
#      full-size SIGE end to end with this tree's dynaspa and session 22's (dist-s23old: dist-s22b's dynaspa, the
#      gather) alternated twice with PyTorch after each round, in camera order once each, and
#      on NVIDIA's OpenCL once each.
stage=$1
source "$(dirname "$0")/start.sh"
if [ "$stage" = 1 ]; then
  while [ ! -f /tmp/full/sige_done ]; do sleep 2; done; ls -la /tmp/full /tmp/sige_mask.npy
  sige_profile steps_sparse --nodes 120 DYNASPA_GPU_STEP_TIMES=1
  sige_profile steps_dense --nodes 120 DYNASPA_GPU_STEP_TIMES=1 DYNASPA_FORCE_MEMBER=dense
  sige_profile phases
  timeout 120 python3 benches/device_s23/torch_ops.py --runs 20 > $OUT/r/torch_ops.txt 2>&1; echo "torch ops rc=$?"
  head -c 2500 $OUT/r/torch_ops.txt
elif [ "$stage" = 2 ]; then
  O=/tmp/d22old; mkdir -p $O
  python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" dist-s23old/dynaspa.xz $O/dynaspa && chmod +x $O/dynaspa
  for t in gpu_ops gpu_models; do gpu_test $t $t; done
  DYNASPA_REQUIRE_BACKENDS=cuda timeout 150 $D/t_onnx_node --nocapture > $OUT/r/test_onnx_node.txt 2>&1
  echo "test onnx_node rc=$?"; grep -E "onnx node suite|^test result" $OUT/r/test_onnx_node.txt
  while [ ! -f /tmp/full/sige_done ]; do sleep 2; done
  sige_profile steps_new --nodes 40 DYNASPA_GPU_STEP_TIMES=1
  grep -E "ConvTranspose|^frames" $OUT/r/prof_steps_new.txt | head -6
  for rep in 1 2; do
    for b in $D $O; do sige_bench ${rep}_$(basename $b) $b cuda; done
    timeout 100 python3 benches/gpu_baselines.py --models --runs 50 --json $OUT/r/torch_models_$rep.jsonl > /dev/null 2> $OUT/r/torch_models_$rep.err
    echo "torch models $rep rc=$? $(python3 -c "import json; [print(r['model'], round(r['us']/1000, 3), 'ms (min', round(r['min_us']/1000, 3), end=') ') for r in map(json.loads, open('$OUT/r/torch_models_$rep.jsonl'))]")"
  done
  for b in $D $O; do
    timeout 100 $b/dynaspa run /tmp/full/sige_full.onnx --frames models/frames/vtest --max-frames 200 --backend cuda --input mask=/tmp/sige_mask.npy > $OUT/r/run_$(basename $b).txt 2>&1
    rc=$?; echo "== run $(basename $b) rc=$rc: $(grep -E '^summary|rror|warn' $OUT/r/run_$(basename $b).txt | tr '\n' ' ')"
  done
  for b in $D $O; do sige_bench cl_$(basename $b) $b opencl --device NVIDIA; done
fi
