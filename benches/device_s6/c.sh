#!/bin/bash
# Session 6 calls C/D: GPU tuning on the H100 (scripts/tune_gpu_device.sh), backend $1; results
# copied flat into $OUT (nested folders do not come back).
source "$(dirname "$0")/common.sh"
mkdir -p /tmp/tune
DYNASPA=$D/dynaspa OUT=/tmp/tune bash scripts/tune_gpu_device.sh "$1" 2>&1 | tee $OUT/log_$1.txt | tail -40
tar -C /tmp/tune -czf $OUT/tune_$1.tgz profiles; tar -tzf $OUT/tune_$1.tgz
