#!/usr/bin/env python3
"""Compiles a shared kernel source (.cl) the way the CUDA backend does (cuda/prelude.h, then
common.h, then the file; NVRTC for sm_90 with the given defines) and writes OUT.ptx and
OUT.cubin, to set beside the PTX NVIDIA's OpenCL kept in the program cache (ptx_ops.py).

usage: nvrtc_ptx.py FILE.cl OUT NAME=VALUE...   (libnvrtc from $DYNASPA_NVRTC_LIB)"""
import ctypes, os, sys

def main():
    src_file, out, *defs = sys.argv[1:]
    lib = ctypes.CDLL(os.path.join(os.environ["DYNASPA_NVRTC_LIB"], "libnvrtc.so.13"))
    kernels = os.path.dirname(os.path.abspath(src_file))
    prelude = os.path.join(kernels, "..", "..", "cuda", "prelude.h")
    src = open(prelude).read() + open(os.path.join(kernels, "common.h")).read()
    src += '\n#line 1 "%s"\n' % os.path.basename(src_file) + open(src_file).read()
    prog = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"k.cu", 0, None, None):
        sys.exit("nvrtcCreateProgram failed")
    opts = ["--gpu-architecture=sm_90", "--device-as-default-execution-space"] + ["-D" + d for d in defs]
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
    n = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetProgramLog(prog, log)
    if rc:
        sys.exit(log.value.decode())
    for what, size, get, ext in [("PTX", lib.nvrtcGetPTXSize, lib.nvrtcGetPTX, ".ptx"), ("CUBIN", lib.nvrtcGetCUBINSize, lib.nvrtcGetCUBIN, ".cubin")]:
        size(prog, ctypes.byref(n))
        buf = ctypes.create_string_buffer(n.value)
        get(prog, buf)
        open(out + ext, "wb").write(buf.raw if ext == ".cubin" else buf.value)

main()
