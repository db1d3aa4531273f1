"""What the bench harnesses share: the CPU's name, PyTorch set up for timing (TF32 off,
cuDNN autotuning on), CUDA-event timing and the JSON lines they append."""
import json
import platform
import statistics
import sys


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# ---------------------------------------------------------------------------------------------
# ONNX Runtime on the CPU


def torch_setup(tool):
    """PyTorch on the GPU with TF32 off and cudnn.benchmark on; exits naming `tool` without CUDA."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    if not torch.cuda.is_available():
        sys.exit(f"{tool}: CUDA is not available to PyTorch")
    return torch


def time_cuda(torch, fn, runs, warmup):
    """(median, min) µs of `fn` over `runs` calls, CUDA events around each, after `warmup`."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times), min(times)


def emit(torch, row, json_path):
    row.update(device=torch.cuda.get_device_name(0), torch=torch.__version__, cudnn=torch.backends.cudnn.version())
    line = json.dumps(row)
    print(line, flush=True)
    if json_path:
        with open(json_path, "a") as f:
            f.write(line + "\n")
