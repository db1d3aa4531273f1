# Sourced by the device scripts of sessions 7 to 10: binaries built on the dev machine, stripped
# and xz-compressed into the ignored $DIST (dist-s7/ unless set; see pack.sh), unpacked into $D
# (/tmp/d7 unless set); cuDNN from PyTorch's wheel (the same library PyTorch uses).
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export DYNASPA_CACHE_DIR=/tmp/dcache
DIST=${DIST:-dist-s7}
D=${D:-/tmp/d7}
mkdir -p $D
for x in "$DIST"/*.xz; do
  f=$D/$(basename "$x" .xz)
  [ -x "$f" ] || { python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$x" "$f" && chmod +x "$f"; }
done
export DYNASPA_CUDNN_LIB=$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
