# Sourced first by the session-19 device scripts: session 18's start (bench, torch_b1,
# torch_b24, vs_rep, full_ab) with this session's binaries (dist-s19) unpacked into /tmp/d19.
DIST=dist-s19 D=/tmp/d19
source "$(dirname "${BASH_SOURCE[0]}")/../device_s18/start.sh"
# The OpenCL programs NVIDIA's compiler built (PTX, with the options that keyed them), for
# ptxas -v on the build host: into $OUT/r/clcache.
keep_clcache() {
  mkdir -p $OUT/r/clcache && cp $DYNASPA_CACHE_DIR/opencl/*.clbin $OUT/r/clcache/ 2>/dev/null
  echo "kept $(ls $OUT/r/clcache | wc -l) OpenCL programs"
}
