# Sourced by the session-7 device scripts: binaries built on the dev machine, stripped and
# xz-compressed into the ignored dist-s7/ (see pack.sh), unpacked into /tmp/d7; cuDNN from
# PyTorch's wheel (the same library PyTorch uses).
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export DYNASPA_CACHE_DIR=/tmp/dcache
D=/tmp/d7
mkdir -p $D
for x in dist-s7/*.xz; do
  f=$D/$(basename "$x" .xz)
  [ -x "$f" ] || { python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$x" "$f" && chmod +x "$f"; }
done
export DYNASPA_CUDNN_LIB=$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
