"""Check the CUDA NLM backend against the NumPy oracle briefly, then time it alone (no VapourSynth).

Usage: PYTHONPATH=$PWD python3 scripts/bench/gpu_check.py [--quick] [--json PATH] [--only NAME]
       PYTHONPATH=$PWD python3 scripts/bench/gpu_check.py --scaling 1,2,4,8,16 --only d0a2s4

``--scaling`` skips the checks and prints, for the ``--only`` configs, the backend's frames per
second at each thread count: whether the backend alone (no VapourSynth) scales with threads.

Timing drives ``CudaBackend.process`` the way the bridge does: T threads each take the next
frame number from a shared counter and process it, with host planes of a pool of distinct
frames. Reported per config: frames per second with 16 threads and with 1, GPU time of the
kernels per frame (CUDA events), the GIL-held time per frame (wall time of a single-threaded
``process`` minus the time spent inside the GIL-releasing driver calls, an upper bound since
the kernel launch is counted as held), and the device memory the backend holds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "cuda"))

from _clips import SyntheticClip, layout, lumachroma, options, run
from _gpu_timing import gil_held_us, gpu_ms, load_cupy, throughput

from avdenoise_vs._backends.cuda.backend import CudaBackend
from avdenoise_vs._backends.reference import NumpyBackend
from avdenoise_vs._params.options import Distance, WeightMode

PARITY = [
    (
        "gray8 d1a2s4",
        layout("gray", bits=8, width=96, height=64),
        (options((0,), Distance.LUMA, h=3, r=1, a=2, s=4),),
        False,
    ),
    (
        "gray16 d1 h1.2 band",
        layout("gray", bits=16, width=96, height=64),
        (options((0,), Distance.LUMA, h=1.2, r=1, a=2, s=4),),
        False,
    ),
    (
        "420p10 lumachroma ref",
        layout("yuv", 1, 1, 10, width=97, height=65),
        lumachroma(h=3, r=1, a=2, s=3, ref=True),
        True,
    ),
    (
        "422p8 d2 bisqB",
        layout("yuv", 1, 0, 8, width=97, height=65),
        lumachroma(h=12, r=2, a=2, s=2, wmode=WeightMode.BISQUARE_B),
        False,
    ),
    (
        "444p16 yuv d1",
        layout("yuv", 0, 0, 16, width=80, height=48),
        (options((0, 1, 2), Distance.YUV, h=3, r=1, a=3, s=2),),
        False,
    ),
    (
        "rgbs d1 bisqC",
        layout("rgb", bits=32, width=80, height=48),
        (options((0, 1, 2), Distance.RGB, h=14, r=1, a=2, s=2, wmode=WeightMode.BISQUARE_C),),
        False,
    ),
    (
        "gray8 d3 a4 s5 wref.5",
        layout("gray", bits=8, width=70, height=45),
        (options((0,), Distance.LUMA, h=3, r=3, a=4, s=5, wref=0.5),),
        False,
    ),
]

HD = dict(width=1920, height=1080)
UHD = dict(width=3840, height=2160)
Y8_D1 = (options((0,), Distance.LUMA, h=1.2, r=1, a=2, s=4),)
YUV_D1 = (options((0, 1, 2), Distance.YUV, h=1.2, r=1, a=2, s=4),)
HD8, HD16, UHD8 = (
    layout("yuv", 1, 1, 8, **HD),
    layout("yuv", 1, 1, 16, **HD),
    layout("yuv", 1, 1, 8, **UHD),
)
# (name, layout, passes, frames, transfer); the same config under several transfers is an A/B.
TIMING = [
    ("Y8 1080p d1a2s4", HD8, Y8_D1, 1200, "staged"),
    ("Y8 1080p d1a2s4", HD8, Y8_D1, 1200, "direct"),
    ("Y8 1080p d1a2s4", HD8, Y8_D1, 1200, "staged-upload"),
    ("Y8 1080p d1a2s4", HD8, Y8_D1, 1200, "staged-download"),
    ("Y8 1080p d2a4s4", HD8, (options((0,), Distance.LUMA, h=1.2, r=2, a=4, s=4),), 500, "direct"),
    ("Y8 1080p d0a2s4", HD8, (options((0,), Distance.LUMA, h=1.2, r=0, a=2, s=4),), 1500, "staged"),
    ("Y8 1080p d0a2s4", HD8, (options((0,), Distance.LUMA, h=1.2, r=0, a=2, s=4),), 1500, "direct"),
    ("420p8 1080p Y+UV d1a2s4", HD8, lumachroma(h=1.2, r=1, a=2, s=4), 1000, "staged"),
    ("420p8 1080p Y+UV d1a2s4", HD8, lumachroma(h=1.2, r=1, a=2, s=4), 1000, "direct"),
    ("444p8 1080p YUV d1a2s4", layout("yuv", 0, 0, 8, **HD), YUV_D1, 700, "staged"),
    ("444p8 1080p YUV d1a2s4", layout("yuv", 0, 0, 8, **HD), YUV_D1, 700, "staged-upload"),
    ("Y16 1080p d1a2s4", HD16, Y8_D1, 1200, "staged"),
    ("Y16 1080p d1a2s4", HD16, Y8_D1, 1200, "direct"),
    ("Y16 1080p d1a2s4", HD16, Y8_D1, 1200, "staged-upload"),
    ("Y8 2160p d1a2s4", UHD8, Y8_D1, 400, "staged"),
    ("Y8 2160p d1a2s4", UHD8, Y8_D1, 400, "direct"),
    ("Y8 1080p d1a2s4", HD8, Y8_D1, 1200, "staged"),  # again: does the order matter?
    ("Y8 1080p d1a2s4", HD8, Y8_D1, 1200, "direct"),
]


def parity() -> list[tuple[str, float, str]]:
    """Max abs difference (codes, or float) against the oracle for a few configs."""
    rows = []
    for name, fmt, passes, ref in PARITY:
        clips = [SyntheticClip(fmt, 5, seed=2)]
        if ref:
            clips.append(SyntheticClip(fmt, 5, seed=3, noise=0.01))
        planes = sorted({p for o in passes for p in o.planes})
        cuda = CudaBackend(passes, fmt, device_index=None)
        cpu = NumpyBackend(passes, fmt)
        worst = 0.0
        for n in (0, 2, 4):
            got = run(cuda, clips, n, passes[0].radius, planes)
            want = run(cpu, clips, n, passes[0].radius, planes)
            for p in planes:
                worst = max(
                    worst, float(np.abs(got[p].astype(float) - want[p].astype(float)).max())
                )
        limit = 1e-5 if fmt.bits == 32 else 1.0
        rows.append((name, worst, "ok" if worst <= limit else "FAIL"))
    return rows


def kernel_variants(fmt, passes, repeats: int = 30) -> list[tuple[str, float, int, int]]:
    """(tile, ms per launch, registers, local bytes) of one pass at each tile height."""
    from avdenoise_vs._cuda.kernels import get_nlm_main_kernel
    from avdenoise_vs._nlm.cuda.nlm_pass import NlmPass

    options_ = passes[0]
    h, w = fmt.plane_shape(options_.planes[0])
    pitch = -(-w * fmt.dtype.itemsize // 512) * 512
    offsets = {p: i * pitch * h for i, p in enumerate(options_.planes)}
    pitches = dict.fromkeys(options_.planes, pitch)
    nbytes = pitch * h * len(options_.planes)
    src = cupy.asarray(np.random.default_rng(0).integers(0, 255, nbytes, dtype=np.uint8))
    out = cupy.empty(nbytes, dtype=np.uint8)
    stream = cupy.cuda.Stream(non_blocking=True)
    rows = []
    for tile, centre in ((32, False), (32, True), (16, True)):
        npass = NlmPass(options_, fmt, offsets, offsets, pitches, tile, centre)
        args, view_ = npass.new_args(out.data.ptr)
        record = args.record
        view_[: 2 * npass.window] = src.data.ptr
        function = npass.function()
        function(npass.grid, npass.block, (record,), npass.shared_bytes, stream)
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)
        for _ in range(repeats):
            function(npass.grid, npass.block, (record,), npass.shared_bytes, stream)
        stop.record(stream)
        stop.synchronize()
        attributes = get_nlm_main_kernel(npass.spec).attributes
        rows.append(
            (
                f"th{tile}/cr{int(centre)}",
                cupy.cuda.get_elapsed_time(start, stop) / repeats,
                attributes["num_regs"],
                attributes["local_size_bytes"],
            )
        )
    return rows


def copy_bandwidth(nbytes: int = 1920 * 1080) -> dict[str, float]:
    """GB/s of one pageable plane copy: 2D vs 1D, host to device and back."""
    rt = cupy.cuda.runtime
    host = np.random.default_rng(0).integers(0, 255, nbytes + 64 * 1080, dtype=np.uint8)
    dev = cupy.cuda.alloc(2048 * 1080)
    stream = cupy.cuda.Stream(non_blocking=True)
    out = {}
    for name, fn in {
        "h2d_2d": lambda: rt.memcpy2DAsync(
            dev.ptr, 2048, host.ctypes.data, 1984, 1920, 1080, 1, stream.ptr
        ),
        "h2d_1d": lambda: rt.memcpyAsync(dev.ptr, host.ctypes.data, nbytes, 1, stream.ptr),
        "d2h_2d": lambda: rt.memcpy2DAsync(
            host.ctypes.data, 1984, dev.ptr, 2048, 1920, 1080, 2, stream.ptr
        ),
        "d2h_1d": lambda: rt.memcpyAsync(host.ctypes.data, dev.ptr, nbytes, 2, stream.ptr),
    }.items():
        fn()
        stream.synchronize()
        t0 = time.perf_counter()
        for _ in range(50):
            fn()
        stream.synchronize()
        out[name] = 50 * nbytes / (time.perf_counter() - t0) / 1e9
    return out


def time_config(name, fmt, passes, frames: int, transfer: str) -> dict:
    """Warm-up, kernel, GIL and throughput timings of one config."""
    backend = CudaBackend(passes, fmt, device_index=None, transfer=transfer)
    t0 = time.perf_counter()
    backend.warm_up()
    warm_s = time.perf_counter() - t0
    kernel_ms = gpu_ms(backend)
    throughput(backend, fmt, passes, 64, 16, start=100)  # thread states, cache slots
    wall_us, gil_us = gil_held_us(backend, fmt, passes, 60, start=5000)
    fps1 = throughput(backend, fmt, passes, max(frames // 4, 50), 1, start=200)
    fps16 = throughput(backend, fmt, passes, frames, 16, start=10_000)
    row = dict(
        config=name,
        transfer=transfer,
        fps16=fps16,
        fps1=fps1,
        gpu_ms=kernel_ms,
        wall_us=wall_us,
        gil_us=gil_us,
        # the 16 benchmark threads have ended: count their output buffers as VapourSynth's would
        mem_mb=(backend._cache.memory_bytes() + 16 * backend._slots.nbytes) / 2**20,
        warm_s=warm_s,
        uploads=backend._cache.uploads,
        staging_buffers=sum(len(st.staging) for st in list(backend._states)),
        threads=len(backend._states),
    )
    return row


def scaling(thread_counts: list[int], only: str) -> None:
    """Print the frames per second of each config at each thread count (backend alone)."""
    print(f"{'config':24s} {'transfer':15s} " + " ".join(f"{t:>6d}T" for t in thread_counts))
    for name, fmt, passes, frames, transfer in TIMING:
        if only not in name:
            continue
        backend = CudaBackend(passes, fmt, device_index=None, transfer=transfer)
        backend.warm_up()
        throughput(backend, fmt, passes, 64, max(thread_counts), start=100)  # thread states
        rates = [
            throughput(backend, fmt, passes, frames, threads, start=10_000 + 10_000 * i)
            for i, threads in enumerate(thread_counts)
        ]
        print(f"{name:24s} {transfer:15s} " + " ".join(f"{fps:7.0f}" for fps in rates))


def main() -> None:
    global cupy
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a third of the frames")
    parser.add_argument(
        "--json", default=os.path.join(os.environ.get("OUT", "."), "gpu_check.json")
    )
    parser.add_argument("--only", default="", help="substring of the timing configs to run")
    parser.add_argument("--scaling", default="", help="thread counts: fps at each, nothing else")
    args = parser.parse_args()
    cupy = load_cupy()
    if args.scaling:
        scaling([int(t) for t in args.scaling.split(",")], args.only)
        return
    props = cupy.cuda.runtime.getDeviceProperties(0)
    print(f"device {props['name'].decode()}  cupy {cupy.__version__}  numpy {np.__version__}")
    report = {"parity": [], "timing": [], "copies": {}, "variants": {}}

    t0 = time.perf_counter()
    report["parity"] = parity()
    print(f"parity checks: {time.perf_counter() - t0:.1f} s")
    try:
        report["copies"] = copy_bandwidth()
        for name, fmt, passes, *_ in (TIMING[0], TIMING[4]):
            report["variants"][name] = kernel_variants(fmt, passes)
    except Exception as error:  # keep going: the timings below matter more
        print(f"copies/variants failed: {error!r}")

    for name, fmt, passes, frames, transfer in TIMING:
        if args.only and args.only not in name:
            continue
        frames = frames // 3 if args.quick else frames
        try:
            row = time_config(name, fmt, passes, frames, transfer)
        except Exception as error:
            print(f"{name}: failed: {error!r}")
            continue
        report["timing"].append(row)
        print(f"{name} {transfer}: {row['fps16']:.0f} fps", flush=True)

    with open(args.json, "w") as fh:
        json.dump(report, fh, indent=1)
    print("\nparity (max abs diff vs NumPy oracle; codes, or float):")
    for name, worst, verdict in report["parity"]:
        print(f"  {name:26s} {worst:10.3g}  {verdict}")
    print(
        "copies GB/s (pageable, 1080p plane): "
        + "  ".join(f"{k} {v:.1f}" for k, v in report["copies"].items())
    )
    for name, rows in report["variants"].items():
        print(
            f"kernel {name}: "
            + "  ".join(f"{t} {ms:.3f} ms {r} regs {lb} B local" for t, ms, r, lb in rows)
        )
    print(
        f"\n{'config':24s} {'transfer':15s} {'fps16':>7s} {'fps1':>6s} {'gpu ms':>7s} {'wall us':>8s} {'gil us':>7s} {'MiB':>6s} {'warm s':>6s}"
    )
    for r in report["timing"]:
        print(
            f"{r['config']:24s} {r['transfer']:15s} {r['fps16']:7.0f} {r['fps1']:6.0f} {r['gpu_ms']:7.3f} {r['wall_us']:8.0f} {r['gil_us']:7.0f} {r['mem_mb']:6.0f} {r['warm_s']:6.2f}"
        )


if __name__ == "__main__":
    main()
