# Sourced first by the session-15 device scripts: session 13's start with pack.sh's binaries
# (dist-s15) unpacked into /tmp/d15 (BUILD_DIR: where session 13's correctness step finds the
# test binaries' repository), call AJ's binaries in $OLD, and the steps the calls share.
DIST=dist-s15 D=/tmp/d15 BUILD_DIR=/work/main FULL=1
source "$(dirname "${BASH_SOURCE[0]}")/../device_s13/start.sh"
# Call AJ's binaries (dist-s13b, c6e7963), the baseline of every session-15 call, in $OLD.
( DIST=dist-s13b D=/tmp/d13; source benches/device_s7/common.sh ) ; OLD=/tmp/d13
# The binaries of variant NAME: "old" is call AJ's, anything else this tree's.
bin() { [ $1 = old ] && echo $OLD || echo $D; }

# PyTorch (cuDNN) on the masks the new binary dumped: /tmp/masks1 (batch 1) and /tmp/masks24.
torch_baselines() {
  timeout 80 python3 benches/gpu_baselines.py --masks /tmp/masks1 --batches 1 --runs 100 --json $OUT/r/torch_b1.jsonl > /dev/null 2> $OUT/r/torch_b1.err; echo "torch rc=$?"
  timeout 60 python3 benches/gpu_baselines.py --masks /tmp/masks24 --batches 2,4 --runs 100 --json $OUT/r/torch_b24.jsonl > /dev/null 2> $OUT/r/torch_b24.err; echo "torch b24 rc=$?"
}
# gpu_vs_torch.py for each bench result NAME under $OUT/r (b1_* against batch 1's baseline,
# the others against batches 2 and 4's) into vs_NAME.txt: vs_torch NAME...
vs_torch() {
  local f t
  for f in "$@"; do
    t=$([ "${f#b1_}" != "$f" ] && echo torch_b1 || echo torch_b24)
    python3 benches/gpu_vs_torch.py $OUT/r/$f.jsonl $OUT/r/$t.jsonl > $OUT/r/vs_$f.txt
  done
}
# The results under $OUT/r into $OUT/results.tgz (what comes back).
pack_results() {
  tar -C $OUT -czf $OUT/results.tgz r && rm -rf $OUT/r
  date -u
}
