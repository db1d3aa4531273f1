#!/bin/bash
# Session 8 call M: the tuner's experiments on full-size DynConv ops on CUDA after the
# roofline's serial-stage term and the four-constant fit: Kendall tau on a sample, the live
# searches on the whole space and on the pruned candidates (pruning's measurements to reach
# the unpruned best), k = 6 against the oracle; pairs dumped for roofline_replay.
source "$(dirname "$0")/../device_s7/common.sh"
exec > >(tee $OUT/log.txt) 2>&1
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /tmp/full
timeout 200 python3 models/dynconv.py --sizes full --no-dataset --out /tmp/full > /tmp/full/export.log 2>&1; tail -1 /tmp/full/export.log
echo "== tuner experiments, full-size DynConv on CUDA (TX_ARGS=${TX_ARGS:=6 60 3 16 4})"
TX_DUMP=$OUT/tx_pairs.jsonl timeout ${TX_TIMEOUT:-500} $D/tune_experiments_gpu /tmp/full/dynconv_full_d30.onnx \
  models/masks/dynconv_full_d30.dsm cuda $TX_ARGS 2>&1 | grep -v "^\s*$" | tee $OUT/tx_full.txt | tail -40
xz -T4 $OUT/tx_pairs.jsonl
date -u
