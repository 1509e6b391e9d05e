"""Time the CUDA BM3D backend alone (no VapourSynth): kernels, threads, memory.

Usage: PYTHONPATH=$PWD python3 scripts/bench/gpu_bm3d_check.py [--only NAME] [--frames N]

For each 1080p configuration (the speed benchmark's, at BM3DCUDA's defaults: block_step 8,
bm_range 9, ps_num 2, ps_range 4, sigma 3) it prints the GPU time of each kernel per frame
(CUDA events, one workspace), frames per second through ``CudaBackend.process`` with 16
threads and with 1 (host frames of a smooth moving pattern with noise), and the device memory
the backend holds. Parity with the NumPy oracle is tests/cuda/test_bm3d_cuda.py's job.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "cuda"))

from _clips import SyntheticClip, layout
from _gpu_timing import load_cupy, throughput

from avdenoise_vs._backends.cuda.backend import CudaBackend
from avdenoise_vs._params.options import Distance
from avdenoise_vs._params.settings import Bm3dSettings, Stages

HD = dict(width=1920, height=1080)


def bm3d(planes, distance, radius, stages=1, sigma=3.0):
    """A BM3D pass at BM3DCUDA's defaults."""
    return Bm3dSettings(
        planes=planes, distance=distance, plane_strengths=(sigma,) * len(planes), radius=radius,
        stages=Stages.from_parameter(stages, has_ref=False), lambda_ht=2.7, mismatch_scale=1.0,
        block_step=8, bm_range=9, ps_num=2, ps_range=4,
    )  # fmt: skip


Y, YUV = ((0,), Distance.LUMA), ((0, 1, 2), Distance.YUV)
GRAYS, YUV444PS = layout("gray", bits=32, **HD), layout("yuv", bits=32, **HD)
CONFIGS = {
    "r0 luma": (GRAYS, (bm3d(*Y, 0),)),
    "r0 luma 8-bit": (layout("gray", bits=8, **HD), (bm3d(*Y, 0),)),
    "r0 yuv444": (YUV444PS, (bm3d(*YUV, 0),)),
    "r1 yuv444": (YUV444PS, (bm3d(*YUV, 1),)),
    "r2 yuv444": (YUV444PS, (bm3d(*YUV, 2),)),
    "r1 yuv444 2 stages": (YUV444PS, (bm3d(*YUV, 1, stages=2),)),
    "r0 luma 2 stages": (GRAYS, (bm3d(*Y, 0, stages=2),)),
}


class _Pool:
    """SyntheticClip frames reused cyclically, as _gpu_timing's pools are."""

    def __init__(self, fmt, size: int = 6) -> None:
        self.clip = SyntheticClip(fmt, size, seed=1, noise=3 / 255)

    def window(self, n: int, radius: int, num_frames: int):
        numbers = tuple(min(max(n + t, 0), num_frames - 1) for t in range(-radius, radius + 1))
        frames = tuple(self.clip.window(f % self.clip.num_frames, 0)[1][0] for f in numbers)
        return numbers, frames


def kernel_ms(backend, fmt, passes, pool, frames: int = 12, start: int = 500) -> dict:
    """GPU time per output frame of each kernel, from CUDA events around every launch of a
    single-threaded run (steady state: cached sums are reused as in a real render)."""
    npass = backend._passes[0]
    original = npass.run
    events = []

    def timed(name, args, stream_ptr):
        begin, end = cupy.cuda.Event(), cupy.cuda.Event()
        cupy.cuda.runtime.eventRecord(begin.ptr, stream_ptr)
        original(name, args, stream_ptr)
        cupy.cuda.runtime.eventRecord(end.ptr, stream_ptr)
        events.append((name, begin, end))

    npass.run = timed
    try:
        throughput(backend, fmt, passes, frames, 1, start=start, pool=pool)
    finally:
        del npass.run
    times: dict[str, float] = {}
    for name, begin, end in events:
        end.synchronize()
        times[name] = times.get(name, 0.0) + cupy.cuda.get_elapsed_time(begin, end) / frames
    return times


def time_config(name: str, fmt, passes, frames: int) -> dict:
    backend = CudaBackend(passes, fmt, device_index=None)
    t0 = time.perf_counter()
    backend.warm_up()
    warm_s = time.perf_counter() - t0
    pool = _Pool(fmt)
    throughput(backend, fmt, passes, 32, 16, start=100, pool=pool)
    kernels = kernel_ms(backend, fmt, passes, pool)
    fps1 = throughput(backend, fmt, passes, max(frames // 4, 16), 1, start=300, pool=pool)
    before = backend._passes[0].produced()
    fps16 = throughput(backend, fmt, passes, frames, 16, start=1000, pool=pool)
    # V-BM3D jobs, basic estimates and zeroed accumulators made per output frame and kind with
    # 16 threads: 1.0 (a job or accumulator per stage) unless the caches dropped accumulators
    # before they were finished (AVDENOISE_DEBUG's bm3d_cache).
    made = {k: (v - before.get(k, 0)) / frames for k, v in backend._passes[0].produced().items()}
    return dict(config=name, fps16=fps16, fps1=fps1, kernels=kernels, warm_s=warm_s,
                mem_mb=backend.memory_bytes() / 2**20, made=made)  # fmt: skip


def main() -> None:
    global cupy
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated config names")
    parser.add_argument("--frames", type=int, default=400)
    parser.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "bm3d.json"))
    args = parser.parse_args()
    cupy = load_cupy()
    names = [n for n in CONFIGS if not args.only or n in args.only.split(",")]
    rows = []
    for name in names:
        fmt, passes = CONFIGS[name]
        try:
            row = time_config(name, fmt, passes, args.frames)
        except Exception as error:  # keep going: one failure must not hide the others
            print(f"{name}: failed: {error!r}", flush=True)
            traceback.print_exc()
            continue
        rows.append(row)
        kernels = "  ".join(f"{k} {v:.3f}" for k, v in row["kernels"].items())
        kernels += "".join(f"  made/{k} {v:.2f}" for k, v in row["made"].items())
        print(f"{name:20s} {row['fps16']:6.0f} fps16 {row['fps1']:6.0f} fps1 "
              f"{row['mem_mb']:6.0f} MiB warm {row['warm_s']:.2f}s | ms: {kernels}", flush=True)  # fmt: skip
    with open(args.json, "w") as fh:
        json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
