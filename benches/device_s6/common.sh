# Sourced by the session-6 device scripts: binaries unpacked into /tmp/d6, caches, cuDNN from PyTorch's wheel.
# Binaries (dynaspa, cuda_selfcheck, gpu_sparse_bench, tune_experiments_gpu) are built on the dev machine,
# stripped and xz-compressed into the ignored dist-s6/ with these scripts, and carried to the GPU machine.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export DYNASPA_CACHE_DIR=/tmp/dcache
D=/tmp/d6
mkdir -p $D
for f in dynaspa cuda_selfcheck gpu_sparse_bench; do
  [ -x $D/$f ] || { python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" dist-s6/$f.xz $D/$f && chmod +x $D/$f; }
done
export DYNASPA_CUDNN_LIB=$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
