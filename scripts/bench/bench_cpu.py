"""Speed of the CPU (NumPy) backend through VapourSynth, as users call it with device='cpu'.

python scripts/bench/bench_cpu.py                       # every case at 640x360 and 1280x720
python scripts/bench/bench_cpu.py --sizes 640x360 --frames 4 --json out/bench_cpu.json

Each case renders ``--frames`` frames of a panning picture (YUV420P8, or YUV444P8) with Gaussian noise
(sigma 6 codes) through ``clip.frames()``, which requests ``core.num_threads`` frames at a
time as vspipe does; fps is frames over wall time, first frame included. Unset options are
the defaults of ``core.avdenoise.Denoise``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import Noise, make_source

#: Case name -> the source format and the Denoise arguments it adds to ``device='cpu'``.
#: Joint YUV (CBM3D) needs co-sited planes, hence 4:4:4 there.
CASES = {
    "BM3D r=0 luma": ("YUV420P8", dict(algorithm="bm3d", channels="luma")),
    "BM3D r=0 YUV": ("YUV444P8", dict(algorithm="bm3d", channels="yuv")),
    "V-BM3D r=1 luma": ("YUV420P8", dict(algorithm="bm3d", channels="luma", radius=1)),
    "NLM defaults": ("YUV420P8", dict(algorithm="nlm")),
}
NOISE = Noise("gaussian", 6.0)


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, or what the platform module knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def time_case(core, width: int, height: int, case: str, frames: int) -> float:
    """Frames per second of one Denoise call on the CPU backend."""
    fmt, args = CASES[case]
    noisy, _ = make_source(core, fmt, width, height, NOISE)
    clip = core.avdenoise.Denoise(noisy[:frames], device="cpu", **args)
    start = time.perf_counter()
    for frame in clip.frames(close=True):
        assert frame.props["AvdenoiseBackend"] == "cpu"
    return frames / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="640x360,1280x720", help="WxH,WxH,...")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    parser.add_argument("--frames", type=int, default=4, help="frames rendered per case")
    parser.add_argument("--threads", type=int, default=0, help="core.num_threads (0: default)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)

    import vapoursynth as vs

    core = vs.core
    if args.threads:
        core.num_threads = args.threads
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")]
    cases = args.cases.split(",")
    results = {}
    print(f"{cpu_model()}, {os.cpu_count()} CPUs, VapourSynth num_threads={core.num_threads}")
    print(f"{'case':<18}" + "".join(f"{w}x{h:<8}" for w, h in sizes))
    for case in cases:
        row = {f"{w}x{h}": time_case(core, w, h, case, args.frames) for w, h in sizes}
        results[case] = row
        print(f"{case:<18}" + "".join(f"{fps:<12.3g}" for fps in row.values()), flush=True)
    if args.json:
        info = dict(cpu=cpu_model(), cpus=os.cpu_count(), num_threads=core.num_threads)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(dict(machine=info, frames=args.frames, fps=results)))


if __name__ == "__main__":
    main()
