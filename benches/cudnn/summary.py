"""Merges the bench and PyTorch JSON lines of run.sh into one file and prints the table: per
op and batch, the dense member (median over rounds) with cuDNN off / timed / forced, and
PyTorch's cuDNN conv (+ReLU, and the conv alone)."""
import glob, json, os, statistics, sys

src, out = sys.argv[1], sys.argv[2]
rows = []
for f in sorted(glob.glob(os.path.join(src, "bench_*_*.jsonl"))):
    mode, rnd = os.path.basename(f)[6:-6].rsplit("_", 1)
    for line in open(f):
        r = json.loads(line); r.update(kind="dynaspa", mode=mode, round=int(rnd)); rows.append(r)
for f in sorted(glob.glob(os.path.join(src, "torch_*.jsonl"))):
    rnd = int(os.path.basename(f)[6:-6])
    for line in open(f):
        r = json.loads(line); r.update(kind="torch", round=rnd); rows.append(r)
with open(out, "w") as o:
    for r in rows:
        o.write(json.dumps(r) + "\n")
names = {"conv3x3": "conv3x3_s1_40x40_256", "conv1x1": "conv1x1_40x40_256", "conv3x3s2": "conv3x3_s2_80x80_128_256", "dw3x3": "dw3x3_40x40_256"}
med = lambda v: statistics.median(v) if v else float("nan")
print(f"{'op':<10} {'batch':>5} {'ours':>8} {'timed':>8} {'forced':>8} {'torch':>8} {'t-conv':>8} {'timed/torch':>11} {'forced/torch':>12}  timed impl | forced impl")
for op, tname in names.items():
    for b in (1, 2, 4):
        d = lambda m: [r for r in rows if r["kind"] == "dynaspa" and r["op"] == op and r["batch"] == b and r["mode"] == m and r["member"] == "dense"]
        t = lambda impl: [r["us"] for r in rows if r["kind"] == "torch" and r.get("op") == tname and r.get("batch") == b and r.get("impl") == impl]
        ours, timed, forced = (med([r["us"] for r in d(m)]) for m in ("0", "1", "force"))
        tc, tco = med(t("cudnn")), med(t("cudnn-conv-only"))
        impl = lambda m: (d(m)[0]["dense_impl"] if d(m) else "-")
        print(f"{op:<10} {b:>5} {ours:>8.1f} {timed:>8.1f} {forced:>8.1f} {tc:>8.1f} {tco:>8.1f} {timed / tc:>11.3f} {forced / tc:>12.3f}  {impl('1')} | {impl('force')}")
