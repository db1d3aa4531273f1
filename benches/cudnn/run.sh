#!/bin/bash
# cuDNN as the dense conv member (issue 5), one device call: find cuDNN, self-check, then the
# dense member of gpu_sparse_bench with cuDNN off / timed / forced against PyTorch cuDNN, two
# interleaved rounds on the same masks. Everything lands in $OUT.
#
# Here (no GPU needed): build, strip and compress the three binaries into dist-cudnn/ beside
# this repository's root (git ignores it), with this script and summary.py:
#   cargo build --release --bin dynaspa --example cuda_selfcheck
#   cargo build --release -p dynaspa-backends --example gpu_sparse_bench
#   for f in dynaspa examples/cuda_selfcheck examples/gpu_sparse_bench; do
#     strip -o /tmp/$(basename $f) target/release/$f && xz -9 -c /tmp/$(basename $f) > dist-cudnn/$(basename $f).xz; done
#   cp benches/cudnn/run.sh benches/cudnn/summary.py dist-cudnn/
# then on the GPU machine, from the repository root: bash dist-cudnn/run.sh (OUT=<dir>).
set -u
cd "$(dirname "$0")/.."
export DYNASPA_CACHE_DIR=/tmp/dcache
D=/tmp/dc
mkdir -p $D /tmp/masks
for f in dynaspa cuda_selfcheck gpu_sparse_bench; do
  python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" dist-cudnn/$f.xz $D/$f && chmod +x $D/$f
done
exec > >(tee $OUT/log.txt) 2>&1
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== where cuDNN is"
TORCH_CUDNN=$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))')
python3 -c 'import torch;print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version())' 2>&1
echo "PyTorch's cuDNN: $TORCH_CUDNN"; ls $TORCH_CUDNN | head -12
ldconfig -p | grep -i "libcudnn.so" | head -3
echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
echo "== dynaspa devices (our own search, no help)"
$D/dynaspa devices 2>&1 | grep "^cuda"
echo "== the same cuDNN as PyTorch: DYNASPA_CUDNN_LIB=$TORCH_CUDNN"
export DYNASPA_CUDNN_LIB=$TORCH_CUDNN
$D/dynaspa devices 2>&1 | grep "^cuda"
echo "== self-check"
DYNASPA_REQUIRE_BACKENDS=cudnn timeout 100 $D/cuda_selfcheck --repo . > $OUT/selfcheck.txt 2>&1; rc=$?
grep -v "^PASS golden" $OUT/selfcheck.txt | cut -c1-3000; grep -c "^PASS golden" $OUT/selfcheck.txt
if [ $rc -ne 0 ]; then
  echo "self-check rc=$rc: again without the backend-API engines, which stay off for the rest"
  export DYNASPA_CUDNN_ENGINES=0
  DYNASPA_REQUIRE_BACKENDS=cudnn timeout 100 $D/cuda_selfcheck --repo . > $OUT/selfcheck_noengines.txt 2>&1; echo "rc=$?"
  grep -v "^PASS golden" $OUT/selfcheck_noengines.txt | cut -c1-3000
fi
echo "== what cuDNN's searches found for conv3x3 (s1 and s2) 256 (log)"
RUST_LOG=dynaspa_backends=info,dynaspa_backends::gpu::lower::vendor_conv=debug,dynaspa_backends::cuda::cudnn=debug DYNASPA_CUDNN=1 timeout 60 $D/gpu_sparse_bench --backend cuda --only conv3x3 --densities 1.0 --samples 5 --runs 5 2>&1 | grep -iE "cudnn|dense conv|conv3x3 " | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-1500
echo "== bench: dense member, cuDNN off / timed / forced, and PyTorch, 2 rounds"
for round in 1 2; do
  for mode in 0 1 force; do
    DYNASPA_CUDNN=$mode timeout 60 $D/gpu_sparse_bench --backend cuda --densities 1.0 --samples 30 --runs 10 \
      --dump-masks /tmp/masks --json /tmp/bench_${mode}_$round.jsonl 2>&1 | sed "s/^/[$mode r$round] /"
    rc=${PIPESTATUS[0]}
    if [ $rc -ne 0 ] && [ "${DYNASPA_CUDNN_ENGINES:-1}" != 0 ]; then
      echo "bench rc=$rc: again without the backend-API engines, which stay off for the rest"
      export DYNASPA_CUDNN_ENGINES=0
      DYNASPA_CUDNN=$mode timeout 60 $D/gpu_sparse_bench --backend cuda --densities 1.0 --samples 30 --runs 10 \
        --dump-masks /tmp/masks --json /tmp/bench_${mode}_$round.jsonl 2>&1 | sed "s/^/[$mode r$round] /"
    fi
  done
  timeout 30 python3 benches/gpu_baselines.py --masks /tmp/masks --runs 200 --json /tmp/torch_$round.jsonl > /dev/null 2>>/tmp/torch.err
  tail -1 /tmp/torch.err
  python3 dist-cudnn/summary.py /tmp $OUT/bench.jsonl
done
date -u
