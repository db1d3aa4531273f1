#!/bin/bash
# Session 6 call F: the tuner's experiments on CUDA (Kendall tau, roofline pruning).
cd "$(dirname "$0")/.."
export DYNASPA_CACHE_DIR=/tmp/dcache
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" dist-s6/tune_experiments_gpu.xz /tmp/tx && chmod +x /tmp/tx
date -u
timeout ${TX_TIMEOUT:-480} /tmp/tx models/dynconv_small_d30.onnx models/masks/dynconv_small_d30.dsm cuda ${TX_ARGS:-3 120 3 16} 2>&1 | grep -v "^\s*$" | tee $OUT/tx_dynconv.txt | tail -60
date -u
