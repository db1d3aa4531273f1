#!/bin/bash
# Session 8 call L: the GPU self-check after the shared group_sum, then the tuner's roofline
# against measurement on full-size DynConv ops (no searches), every (schedule, frame) pair
# dumped (TX_DUMP) so the model's terms can be checked offline. Binaries: device_s7/pack.sh.
source "$(dirname "$0")/../device_s7/common.sh"
exec > >(tee $OUT/log.txt) 2>&1
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /tmp/full
( timeout 200 python3 models/dynconv.py --sizes full --no-dataset --out /tmp/full > /tmp/full/export.log 2>&1; touch /tmp/full/done ) &
DYNASPA_REQUIRE_BACKENDS=cudnn timeout 200 $D/cuda_selfcheck --repo . > $OUT/selfcheck.txt 2>&1; echo "selfcheck rc=$?"
grep -v "^PASS" $OUT/selfcheck.txt | cut -c1-300 | tail -15; echo "PASS lines: $(grep -c '^PASS' $OUT/selfcheck.txt)"
date -u
while [ ! -f /tmp/full/done ]; do sleep 2; done; ls /tmp/full; tail -2 /tmp/full/export.log
echo "== roofline vs measured, full-size DynConv on CUDA (TX_ARGS=${TX_ARGS:=6 120 0 16 0})"
TX_DUMP=$OUT/tx_pairs.jsonl timeout ${TX_TIMEOUT:-420} $D/tune_experiments_gpu /tmp/full/dynconv_full_d30.onnx \
  models/masks/dynconv_full_d30.dsm cuda $TX_ARGS 2>&1 | grep -v "^\s*$" | tee $OUT/tx_full.txt | tail -40
wc -l $OUT/tx_pairs.jsonl; xz -T4 $OUT/tx_pairs.jsonl
date -u
