# Sourced first by the session-24 device scripts: session 22's start (bench, torch_b1, torch_b24,
# vs_rep, gpu_test) with this session's binaries (dist-s24) in /tmp/d24, and session 23's
# gpu_sparse_bench (dist-s24old) in /tmp/d24old.
DIST=${DIST:-dist-s24} D=${D:-/tmp/d24}
source "$(dirname "${BASH_SOURCE[0]}")/../device_s22/start.sh"
O=/tmp/d24old; mkdir -p $O
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" dist-s24old/gpu_sparse_bench.xz $O/gpu_sparse_bench && chmod +x $O/gpu_sparse_bench
# The best member per (op, batch, density) of a bench's jsonl, over every member and over those
# with KS <= 32, of KIND_TAG_REP against PyTorch's time in torch_KIND_REP: best KIND TAG REP
best() {
  python3 benches/device_s24/best.py $OUT/r/$1_$2_$3.jsonl $OUT/r/torch_$1_$3.jsonl | tee $OUT/r/best_$1_$2_$3.txt
}
