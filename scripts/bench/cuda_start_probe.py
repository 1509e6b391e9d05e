"""How long CUDA takes to start when many processes start it at once (the fleet's floor).

Starts N Python processes together; each times ``import cupy``, ``cuInit`` (device count) and
the creation of its context (``memGetInfo``), or the same through ``libcuda`` alone with
``--driver`` (no CuPy). Prints the median and slowest of each step for every N given.

    python scripts/bench/cuda_start_probe.py 1 16
    python scripts/bench/cuda_start_probe.py --driver 1 16
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

CHILD_CUPY = """
import json, sys, time
marks = {"start": time.time()}
import cupy
marks["import"] = time.time()
cupy.cuda.runtime.getDeviceCount()
marks["init"] = time.time()
cupy.cuda.runtime.memGetInfo()
marks["context"] = time.time()
print(json.dumps(marks))
"""

CHILD_DRIVER = """
import ctypes, json, time
marks = {"start": time.time()}
cuda = ctypes.CDLL("libcuda.so.1")
marks["import"] = time.time()
assert cuda.cuInit(0) == 0
marks["init"] = time.time()
ctx = ctypes.c_void_p()
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
assert cuda.cuCtxSetCurrent(ctx) == 0
free, total = ctypes.c_size_t(), ctypes.c_size_t()
assert cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0
marks["context"] = time.time()
print(json.dumps(marks))
"""


def run(count: int, child: str) -> dict[str, tuple[float, float]]:
    """Start `count` children at once; return {step: (median s, slowest s)} from launch."""
    launched = time.time()
    procs = [
        subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
        for _ in range(count)
    ]
    marks = [json.loads(p.communicate()[0]) for p in procs]
    steps = {}
    for step in ("start", "import", "init", "context"):
        times = [m[step] - launched for m in marks]
        steps[step] = (statistics.median(times), max(times))
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("counts", type=int, nargs="+")
    parser.add_argument("--driver", action="store_true", help="libcuda through ctypes, no CuPy")
    args = parser.parse_args()
    child = CHILD_DRIVER if args.driver else CHILD_CUPY
    label = "libcuda" if args.driver else "cupy"
    print(f"{label}: seconds from launch, median / slowest of N processes started together")
    print(f"{'N':>3} {'python up':>12} {'import':>12} {'cuInit':>12} {'context':>12}")
    for count in args.counts:
        steps = run(count, child)
        cells = " ".join(f"{m:5.2f}/{s:5.2f} " for m, s in steps.values())
        print(f"{count:>3} {cells}")


if __name__ == "__main__":
    main()
