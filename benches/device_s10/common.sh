# Sourced by the session-10 device scripts: unpacks dist-s10/*.xz into /tmp/d10; cuDNN from
# PyTorch's wheel (the same library PyTorch uses).
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export DYNASPA_CACHE_DIR=/tmp/dcache
D=/tmp/d10
mkdir -p $D
for x in dist-s10/*.xz; do
  f=$D/$(basename "$x" .xz)
  [ -x "$f" ] || { python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$x" "$f" && chmod +x "$f"; }
done
export DYNASPA_CUDNN_LIB=$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
