# Sourced by the session-15 and 16 start scripts (after device_s13/start.sh): the PyTorch
# baselines, the comparison against them and the packing of the results.
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
