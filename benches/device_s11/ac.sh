#!/bin/bash
# Session 11 call AC (experiment, not landed): NVIDIA OpenCL's lagged dispatch with the head's
# download_async (flushes both queues) against builds without the main queue's flush
# (dist-s11-exp/gsb_nomain) and without either flush (gsb_noflush), alternated twice.
DIST=dist-s11 D=/tmp/d11
source "$(dirname "$0")/../device_s7/common.sh"
for x in dist-s11-exp/*.xz; do
  python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$x" "$D/$(basename $x .xz)"; chmod +x "$D/$(basename $x .xz)"
done
exec > >(tee $OUT/log.txt) 2>&1
date -u
for rep in 1 2; do
  for b in gpu_sparse_bench gsb_nomain gsb_noflush; do
    echo "== [$rep] opencl $b"
    timeout 100 $D/$b --backend opencl --device NVIDIA --batches 1 --only conv --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
      --json $OUT/opencl_${b}_$rep.jsonl 2>&1 | grep -E "^conv|of the lagged" | head -40
  done
done
date -u
