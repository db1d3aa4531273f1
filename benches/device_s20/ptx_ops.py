#!/usr/bin/env python3
"""Counts the PTX instructions of one kernel entry (sconv_gemm_f32 unless --entry) in .ptx files
or in dynaspa's OpenCL program cache files (.clbin: magic, key length, key text with the build
options, checksum, then the program binary, which NVIDIA's OpenCL makes PTX).

usage: ptx_ops.py [--entry NAME] FILE..."""
import collections, re, struct, sys

def ptx_of(path):
    b = open(path, "rb").read()
    if not path.endswith(".clbin"):
        return "", b.decode(errors="replace")
    for at in range(32):
        klen = struct.unpack("<I", b[at:at + 4])[0]
        key = b[at + 4:at + 4 + klen]
        if 0 < klen < 1 << 20 and key.count(b"\n") >= 3:
            try:
                return key.decode(), b[at + 4 + klen + 8:].decode(errors="replace")
            except UnicodeDecodeError:
                continue
    sys.exit(f"{path}: no cache key found")

args = sys.argv[1:]
entry = "sconv_gemm_f32"
if args[:1] == ["--entry"]:
    entry, args = args[1], args[2:]
for path in args:
    key, ptx = ptx_of(path)
    m = re.search(r"\.entry\s+" + entry + r"\b.*?\n}\n", ptx, re.S)
    if not m:
        continue
    ops = collections.Counter()
    for line in m.group(0).split("\n"):
        line = line.strip().lstrip("@!%p0123456789 ")
        if not line or line.startswith(("//", ".", "{", "}", "$")) or line.endswith(":"):
            continue
        ops[line.split()[0].rstrip(";")] += 1
    print(path.split("/")[-1], key.split("\n")[1] if key else "")
    print("  total", sum(ops.values()), " ".join(f"{k}:{v}" for k, v in ops.most_common(30)))
