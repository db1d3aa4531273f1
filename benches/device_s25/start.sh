# Sourced first by the session-25 device scripts: session 22's start (bench, torch_b1, torch_b24,
# vs_rep, gpu_test, full_model) with this session's binaries (dist-s25) in /tmp/d25.
DIST=${DIST:-dist-s25} D=${D:-/tmp/d25}
source "$(dirname "${BASH_SOURCE[0]}")/../device_s22/start.sh"
# The per-op table of session 24's best.py for bench KIND_TAG_REP against torch_KIND_REP: best KIND TAG REP
best() {
  python3 benches/device_s24/best.py $OUT/r/$1_$2_$3.jsonl $OUT/r/torch_$1_$3.jsonl | tee $OUT/r/best_$1_$2_$3.txt
}
# Member-by-member ratios of benches given in (new, old) pairs of KIND_TAG names: pairs OUTNAME KIND_TAG...
pairs() {
  local out=$1; shift
  python3 benches/device_s24/cl_pairs.py $(for t in "$@"; do echo $OUT/r/$t.jsonl; done) | tee $OUT/r/pairs_$out.txt
}
