# Sourced by the session-13 device scripts (after device_s7/common.sh, with $D and $OUT/r): the
# CUDA self-check with cuDNN required, then the GPU test binaries of pack.sh required on CUDA,
# with the ONNX node suite's counts. The test binaries find the repository where it was built
# (CARGO_MANIFEST_DIR), so that path ($BUILD_DIR: /work/wt-mma unless set) is linked to this copy.
BUILD_DIR=${BUILD_DIR:-/work/wt-mma}
mkdir -p "$(dirname "$BUILD_DIR")" && { [ "$PWD" = "$BUILD_DIR" ] || ln -sfn "$PWD" "$BUILD_DIR"; }
DYNASPA_REQUIRE_BACKENDS=cudnn timeout 120 $D/cuda_selfcheck --repo . > $OUT/r/selfcheck.txt 2>&1; echo "selfcheck rc=$?"
grep -v "^PASS" $OUT/r/selfcheck.txt | cut -c1-300 | tail -4; echo "PASS lines: $(grep -c '^PASS' $OUT/r/selfcheck.txt)"
for t in gpu_sparse gpu_fused_finish gpu_ops gpu_models onnx_node; do
  DYNASPA_REQUIRE_BACKENDS=cuda timeout 150 $D/t_$t --test-threads 4 --show-output > $OUT/r/test_$t.txt 2>&1; echo "test $t rc=$? $(grep '^test result' $OUT/r/test_$t.txt | tail -1)"
  grep -E "FAILED|panicked" $OUT/r/test_$t.txt | head -5 | cut -c1-300
done
grep -E "node suite" $OUT/r/test_onnx_node.txt | head -4
