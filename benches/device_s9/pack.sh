#!/bin/bash
# Session 9: the session-7 pack (dynaspa, cuda_selfcheck, gpu_sparse_bench,
# tune_experiments_gpu into dist-s7/) plus the A-ViT token test binary (tests/gpu_tokens.rs).
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/target-main}
bash benches/device_s7/pack.sh
t=$(cargo test --release --test gpu_tokens --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "gpu_tokens" and m.get("executable"):
        print(m["executable"])')
strip -o /tmp/gpu_tokens.stripped "$t"
xz -T2 -6 -c /tmp/gpu_tokens.stripped > dist-s7/gpu_tokens.xz
ls -la dist-s7
