#!/bin/bash
# Session 9 call P (binaries of the token-PolyKernel commits): the GPU self-check (the A-ViT
# goldens now run the token projections as PolyKernel ops), the A-ViT token tests on CUDA and
# NVIDIA's OpenCL (the test binary, run from a /work/main link since it finds the repository
# there), then the reduced families tuned on CUDA with the token-projection space.
source "$(dirname "$0")/../device_s7/common.sh"
exec > >(tee $OUT/log.txt) 2>&1
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
DYNASPA_REQUIRE_BACKENDS=cudnn timeout 150 $D/cuda_selfcheck --repo . > $OUT/selfcheck.txt 2>&1; echo "selfcheck rc=$?"
grep -v "^PASS" $OUT/selfcheck.txt | cut -c1-300 | tail -8; echo "PASS lines: $(grep -c '^PASS' $OUT/selfcheck.txt)"
mkdir -p /work && { [ -e /work/main ] || ln -s "$PWD" /work/main; }
DYNASPA_REQUIRE_BACKENDS=cuda,opencl timeout 150 $D/gpu_tokens --test-threads 1 > $OUT/gpu_tokens.txt 2>&1; echo "gpu_tokens rc=$?"
grep -E "^test |test result|panicked" $OUT/gpu_tokens.txt | head -12
DYNASPA=$D/dynaspa OUT=$OUT/tune MODELS="${MODELS:-avit_small_d30 dynconv_small_d30 sige_small}" timeout 400 bash scripts/tune_gpu_device.sh ${BACKEND:-cuda}
date -u
