# Sourced first by the session-20 device scripts: session 18's start (bench, torch_b1,
# torch_b24, vs_rep, full_ab) with this session's binaries (dist-s20) unpacked into /tmp/d20.
DIST=${DIST:-dist-s20} D=${D:-/tmp/d20}
source "$(dirname "${BASH_SOURCE[0]}")/../device_s18/start.sh"
# The kernel programs the benches compiled (gpu_sparse_bench keeps them in $DYNASPA_CACHE_DIR
# since session 20; NVIDIA OpenCL's are PTX), with the options that keyed them: into
# $OUT/r/clcache (OpenCL) and $OUT/r/cucache (CUDA).
keep_caches() {
  mkdir -p $OUT/r/clcache $OUT/r/cucache
  cp $DYNASPA_CACHE_DIR/opencl/* $OUT/r/clcache/ 2>/dev/null
  cp $DYNASPA_CACHE_DIR/cuda/* $OUT/r/cucache/ 2>/dev/null
  echo "kept $(ls $OUT/r/clcache | wc -l) OpenCL and $(ls $OUT/r/cucache | wc -l) CUDA programs"
}
