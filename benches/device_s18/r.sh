#!/bin/bash
# Session 18 call R: call Q's kernel with partial sums stored as float2 / float4 runs (the default)
# against the kernel as before (DYNASPA_SC_VEC=0), same binaries,
# alternated on one host, PyTorch before each pair. Two device calls (10 minutes each):
#   bash r.sh 1: correctness, two rounds at batch 1 and one at batches 2 and 4 (sampled knobs);
#   bash r.sh 2: NVIDIA OpenCL both ways, batches 2 and 4 with default members, the full-size DynConv.
stage=$1
[ "$stage" = 2 ] && FULL=1
source "$(dirname "$0")/start.sh"
# PyTorch, then both variants, each against that PyTorch run; where the masks are not dumped
# yet (round 1, or a fresh machine), the new variant dumps them before PyTorch: pair KIND REP.
pair() {
  local first= m=${1#b}
  [ -n "$(ls /tmp/masks${m%k} 2>/dev/null)" ] || first=1
  [ -n "$first" ] && DUMP=1 bench $1 vec_$2 $D
  [ $1 = b1 ] && torch_b1 $2 || torch_b24 $2
  [ -n "$first" ] || bench $1 vec_$2 $D
  bench $1 scal_$2 $D DYNASPA_SC_VEC=0
  [ $1 = b1 ] && vs_rep b1 $2 vec scal || for v in vec scal; do
    python3 benches/gpu_vs_torch.py $OUT/r/$1_${v}_$2.jsonl $OUT/r/torch_b24_$2.jsonl > $OUT/r/vs_$1_${v}_$2.txt; done
}
if [ "$stage" = 1 ]; then
  source "$(dirname "$0")/../device_s13/correctness.sh"
  pair b1 1
  pair b1 2
  pair b24k 1
else
  BACKEND=opencl bench b1 clvec_1 $D
  BACKEND=opencl bench b1 clscal_1 $D DYNASPA_SC_VEC=0
  pair b24 1
  full_ab DYNASPA_SC_VEC 1 0
fi
pack_results
