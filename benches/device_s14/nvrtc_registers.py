"""Registers, spills and shared memory ptxas gives sconv_gemm_f32 (sm_90) for a few define sets,
at a git revision of this repository (`.`: the working tree): `python3 benches/device_s14/nvrtc_registers.py REV`.
Needs libnvrtc (the `nvidia-cuda-nvrtc` wheel; NVRTC_LIB names the file). Session 14 used it
to find why call B's kernel lost occupancy (RESULTS.md)."""
import os, subprocess, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from nvrtc_compile import compile

LIB = os.environ.get("NVRTC_LIB", "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/nvidia/cu13/lib/libnvrtc.so.13")

def ptxas_log(src, opts):
    rc, log, _, _ = compile(LIB, src, opts, "sparse_conv.cu")
    return rc, log

rev = sys.argv[1] if len(sys.argv) > 1 else "HEAD"
# "." reads the working tree.
show = lambda path: open(path).read() if rev == "." else subprocess.check_output(["git", "show", f"{rev}:{path}"]).decode()
prelude, common, sc = show("backends/src/cuda/prelude.h"), show("backends/src/gpu/kernels/common.h"), show("backends/src/gpu/kernels/sparse_conv.cl")
base = dict(GH=1, GW=1, TILED=1)
for defs in [dict(TM=64, TN=32, TK=16, WM=4, WN=2, KS=4, SELF_LIST=1), dict(TM=64, TN=32, TK=16, WM=4, WN=2, KS=4), dict(TM=128, TN=64, TK=16, WM=8, WN=4, KS=16, SELF_LIST=1), dict(TM=128, TN=64, TK=16, WM=8, WN=4, KS=32, SELF_LIST=1), dict(TM=128, TN=64, TK=16, WM=8, WN=4, KS=16)]:
    d = "".join(f"#define {k} {v}\n" for k, v in {**base, **defs}.items())
    rc, log = ptxas_log(prelude + "\n" + d + common + "\n" + sc, ["--gpu-architecture=sm_90", "--device-as-default-execution-space", "--ptxas-options=-v", "-std=c++17"])
    lines = log.splitlines()
    at = [i for i, l in enumerate(lines) if "Compiling entry function 'sconv_gemm_f32'" in l]
    info = [" ".join(l.split()) for l in lines[at[0] + 2:at[0] + 4]] if at else [log[:300]]
    print(rev, defs, "rc", rc, "|", " | ".join(info))
