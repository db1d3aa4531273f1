"""One NVRTC compile through ctypes, for the bench scripts that read what NVRTC makes of a
kernel source (device_s14/nvrtc_registers.py, device_s20/nvrtc_ptx.py). `lib` is the path of
libnvrtc (the `nvidia-cuda-nvrtc` wheel carries it)."""
import ctypes


def compile(lib, source, options, name="kernel.cu"):
    """(return code, log, PTX, CUBIN) of compiling `source` with `options`; PTX and CUBIN are
    None where the compile failed."""
    nvrtc = ctypes.CDLL(lib)
    prog = ctypes.c_void_p()
    if nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None):
        raise RuntimeError("nvrtcCreateProgram failed")
    arr = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
    rc = nvrtc.nvrtcCompileProgram(prog, len(options), arr)

    def fetch(size_of, get, text):
        n = ctypes.c_size_t()
        size_of(prog, ctypes.byref(n))
        buf = ctypes.create_string_buffer(n.value)
        get(prog, buf)
        return buf.value if text else buf.raw

    log = fetch(nvrtc.nvrtcGetProgramLogSize, nvrtc.nvrtcGetProgramLog, True).decode()
    if rc:
        return rc, log, None, None
    ptx = fetch(nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX, True)
    cubin = fetch(nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN, False)
    return rc, log, ptx, cubin
