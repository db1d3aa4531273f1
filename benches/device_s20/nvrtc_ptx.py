#!/usr/bin/env python3
"""Compiles a shared kernel source (.cl) the way the CUDA backend does (cuda/prelude.h, then
common.h, then the file; NVRTC for sm_90 with the given defines) and writes OUT.ptx and
OUT.cubin, to set beside the PTX NVIDIA's OpenCL kept in the program cache (ptx_ops.py).

usage: nvrtc_ptx.py FILE.cl OUT NAME=VALUE...   (libnvrtc from $DYNASPA_NVRTC_LIB)"""
import os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from nvrtc_compile import compile

src_file, out, *defs = sys.argv[1:]
kernels = os.path.dirname(os.path.abspath(src_file))
prelude = os.path.join(kernels, "..", "..", "cuda", "prelude.h")
src = open(prelude).read() + open(os.path.join(kernels, "common.h")).read()
src += '\n#line 1 "%s"\n' % os.path.basename(src_file) + open(src_file).read()
opts = ["--gpu-architecture=sm_90", "--device-as-default-execution-space"] + ["-D" + d for d in defs]
rc, log, ptx, cubin = compile(os.path.join(os.environ["DYNASPA_NVRTC_LIB"], "libnvrtc.so.13"), src, opts, "k.cu")
if rc:
    sys.exit(log)
open(out + ".ptx", "wb").write(ptx)
open(out + ".cubin", "wb").write(cubin)
