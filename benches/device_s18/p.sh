#!/bin/bash
# Session 18 call P: the GEMM members' float2 / float4 reads of local memory (SC_VEC, the new
# default) against one float per read (DYNASPA_SC_VEC=0, the kernel as before), same binaries,
# alternated on one host, PyTorch before each pair. Two device calls (10 minutes each):
#   bash p.sh 1: correctness, batch 1 round 1, batches 2 and 4 round 1;
#   bash p.sh 2: round 2 of both, NVIDIA OpenCL both ways, the full-size DynConv.
stage=$1
[ "$stage" = 2 ] && FULL=1
source "$(dirname "$0")/start.sh"
# PyTorch, then both variants, each against that PyTorch run; where the masks are not dumped
# yet (round 1, or a fresh machine), the new variant dumps them before PyTorch: pair KIND REP.
pair() {
  local first=
  [ -n "$(ls /tmp/masks${1#b} 2>/dev/null)" ] || first=1
  [ -n "$first" ] && DUMP=1 bench $1 vec_$2 $D
  [ $1 = b1 ] && torch_b1 $2 || torch_b24 $2
  [ -n "$first" ] || bench $1 vec_$2 $D
  bench $1 scal_$2 $D DYNASPA_SC_VEC=0
  vs_rep $1 $2 vec scal
}
if [ "$stage" = 1 ]; then
  source "$(dirname "$0")/../device_s13/correctness.sh"
  pair b1 1
  pair b24 1
else
  pair b1 2
  pair b24 2
  BACKEND=opencl bench b1 clvec_1 $D
  BACKEND=opencl bench b1 clscal_1 $D DYNASPA_SC_VEC=0
  full_ab DYNASPA_SC_VEC 1 0
fi
pack_results
