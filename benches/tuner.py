#!/usr/bin/env python3
"""The offline tuner's experiments (scheduler/), one flag set per question.

    python3 benches/tuner.py oracle MODEL DSM [--threads 2] [--rounds 5] [--no-flush]
    python3 benches/tuner.py gpu MODEL DSM --backend cuda [--device SEL] [--ops 3] [--sample 150]
                             [--seeds 3] [--trials 24] [--held 4] [--dump PAIRS.jsonl]
    python3 benches/tuner.py replay PAIRS.jsonl [--top 0.1] [--fit] [--verbose]
    python3 benches/tuner.py vs-calibration MODEL --profile P [--frames models/frames/vtest]
                             [--backend cpu] [--threads 2] [--pairs 3] [--max-frames 30] [--rounds 5]
                             [--input NAME=PATH]

oracle          CPU backend (scheduler/examples/tune_experiments.rs): every schedule of each
                sparse conv's space and dense timed on tuning and held-out frames (caches flushed
                before each run unless --no-flush); the tuned k = 6 PolyKernel on held-out frames
                against the oracle (the best measured schedule per frame); Kendall tau of the
                roofline against the measured times; measurements roofline pruning needs to reach
                the unpruned search's best.
gpu             a GPU backend (scheduler/examples/tune_experiments_gpu.rs), where spaces hold
                10^4-10^5 schedules: tau over a seeded sample plus the pruned candidates, the
                pruned candidates' best against the sample's and calibration's, the search run live
                pruned and unpruned (--seeds x --trials), a k = 6 PolyKernel against the oracle on
                --held held-out frames. --dump writes the (schedule, frame) pairs with the
                roofline's terms, for `replay`.
replay          re-estimates a dump's pairs with the current roofline (scheduler/examples/
                roofline_replay.rs): tau and how much of the measured top --top share the model
                keeps; --fit refits the device constants first.
vs-calibration  whole model, `dynaspa bench` with the default (calibrated, on a fresh calibration
                cache each time) and with the tuned --profile, --pairs alternating pairs: the
                median sparse frame and speedup_vs_dense of each, and tuned / default.

The experiment binaries are built on first use (`cargo build --release -p dynaspa-scheduler
--example ...`). Results go to benches/RESULTS.md ("Offline tuner") with the command, the device
and the date.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "target", "release", "examples")
DYNASPA = os.path.join(ROOT, "target", "release", "dynaspa")


def example(name):
    exe = os.path.join(EXAMPLES, name)
    if not os.path.exists(exe):
        subprocess.run(["cargo", "build", "--release", "-p", "dynaspa-scheduler", "--example", name], cwd=ROOT, check=True)
    return exe


def run(cmd, env=None):
    print("+", " ".join(cmd), flush=True)
    rc = subprocess.run(cmd, env=env).returncode
    if rc:
        sys.exit(rc)


def cmd_oracle(a):
    env = dict(os.environ, FLUSH="0" if a.no_flush else "1")
    run([example("tune_experiments"), a.model, a.dsm, str(a.threads), str(a.rounds)], env)


def cmd_gpu(a):
    env = dict(os.environ)
    if a.dump:
        env["TX_DUMP"] = a.dump
    if a.device:
        # The experiment opens the backend's default device; the backends' device variables pick it.
        key = {"cuda": "DYNASPA_CUDA_DEVICE", "opencl": "DYNASPA_OPENCL_DEVICE", "wgpu": "DYNASPA_WGPU_DEVICE"}[a.backend]
        env[key] = a.device
    run([example("tune_experiments_gpu"), a.model, a.dsm, a.backend, str(a.ops), str(a.sample), str(a.seeds),
         str(a.trials), str(a.held)], env)


def cmd_replay(a):
    env = dict(os.environ)
    if a.fit:
        env["REPLAY_FIT"] = "1"
    if a.verbose:
        env["REPLAY_VERBOSE"] = "1"
    run([example("roofline_replay"), a.pairs, str(a.top)], env)


def bench_once(a, profile):
    with tempfile.TemporaryDirectory() as cache:
        cmd = [a.dynaspa, "bench", a.model, "--frames", a.frames, "--max-frames", str(a.max_frames),
               "--rounds", str(a.rounds), "--backend", a.backend, "--threads", str(a.threads)]
        for inp in a.input or []:
            cmd += ["--input", inp]
        if profile:
            cmd += ["--profile", profile]
        out = subprocess.run(cmd, env=dict(os.environ, DYNASPA_CACHE_DIR=cache), capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{out.stderr}")
    sparse = re.search(r"^\s+median\s+[0-9.]+\s+([0-9.]+)", out.stdout, re.M)
    speed = re.search(r"speedup_vs_dense: ([0-9.]+)", out.stdout)
    if not (sparse and speed):
        sys.exit(f"could not read `dynaspa bench`'s output:\n{out.stdout}")
    return float(sparse.group(1)), float(speed.group(1))


def cmd_vs_calibration(a):
    if not os.path.exists(a.dynaspa):
        sys.exit(f"tuner.py: no dynaspa at {a.dynaspa}: cargo build --release")
    res = {"default": [], "tuned": []}
    for i in range(a.pairs):
        for arm in ("default", "tuned"):
            res[arm].append(bench_once(a, a.profile if arm == "tuned" else None))
        print(f"pair {i}: default {res['default'][-1][0]:.3f} ms ({res['default'][-1][1]:.2f}x), "
              f"tuned {res['tuned'][-1][0]:.3f} ms ({res['tuned'][-1][1]:.2f}x)", flush=True)
    med = {arm: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for arm, v in res.items()}
    print(f"model {a.model}, backend {a.backend}, {a.pairs} pairs of `dynaspa bench` ({a.max_frames} frames, {a.rounds} rounds)")
    print(f"{'':<8} {'sparse ms':>10} {'speedup_vs_dense':>17}")
    for arm, (ms, sp) in med.items():
        print(f"{arm:<8} {ms:>10.3f} {sp:>17.2f}")
    print(f"tuned / default: {med['tuned'][0] / med['default'][0]:.2f}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    o = sub.add_parser("oracle", help="CPU: PolyKernel vs oracle, tau, pruning")
    o.add_argument("model")
    o.add_argument("dsm")
    o.add_argument("--threads", type=int, default=2)
    o.add_argument("--rounds", type=int, default=5)
    o.add_argument("--no-flush", action="store_true", help="leave the caches warm between runs")

    g = sub.add_parser("gpu", help="a GPU backend: tau, pruning live, PolyKernel vs oracle")
    g.add_argument("model")
    g.add_argument("dsm")
    g.add_argument("--backend", required=True, choices=("cuda", "opencl", "wgpu"))
    g.add_argument("--device")
    g.add_argument("--ops", type=int, default=3, help="sparse ops to study, in graph order")
    g.add_argument("--sample", type=int, default=150, help="random valid schedules per op")
    g.add_argument("--seeds", type=int, default=3, help="searches per op, pruned and unpruned (0: none)")
    g.add_argument("--trials", type=int, default=24)
    g.add_argument("--held", type=int, default=4, help="held-out frames for the k = 6 PolyKernel (0: none)")
    g.add_argument("--dump", help="write the sampled pairs with the roofline's terms here (JSON lines)")

    r = sub.add_parser("replay", help="re-estimate a dump with the current roofline")
    r.add_argument("pairs")
    r.add_argument("--top", type=float, default=0.1)
    r.add_argument("--fit", action="store_true")
    r.add_argument("--verbose", action="store_true")

    v = sub.add_parser("vs-calibration", help="whole model: tuned profile against calibration")
    v.add_argument("model")
    v.add_argument("--profile", required=True)
    v.add_argument("--frames", default="models/frames/vtest")
    v.add_argument("--backend", default="cpu")
    v.add_argument("--threads", type=int, default=2)
    v.add_argument("--pairs", type=int, default=3)
    v.add_argument("--max-frames", type=int, default=30)
    v.add_argument("--rounds", type=int, default=5)
    v.add_argument("--input", action="append", help="NAME=PATH, e.g. SIGE's mask")
    v.add_argument("--dynaspa", default=DYNASPA)

    a = p.parse_args()
    {"oracle": cmd_oracle, "gpu": cmd_gpu, "replay": cmd_replay, "vs-calibration": cmd_vs_calibration}[a.cmd](a)


if __name__ == "__main__":
    main()
