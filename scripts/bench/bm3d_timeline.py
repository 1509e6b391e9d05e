"""When each frame of one lone process is done: the start-up and ramp of a BM3D filter.

    python scripts/bench/bm3d_timeline.py PLUGIN CASE [FRAMES]    # e.g. avdenoise "radius 1, YUV444" 300

PLUGIN and CASE are bench_bm3d.py's (the Vulkan rivals vsfeel, bm3dvk and bm3dvk2 included).
The script builds the case's 1080p source and filter as bench_bm3d.vpy does, then iterates the
clip's frames in order (VapourSynth requests ahead on its threads, as vspipe does) and prints
one line: seconds from the script's start to the clip's creation (``script``), to frame k
(``fk``), to the last frame (``end``), and the rates over frames 2-20, 20-100 and 100-last.
A filter with no ramp has the same rate in all three. vspipe's own wall time (launch to
exit) adds the interpreter's start and the filters' teardown: time that with ``time vspipe``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

START = time.perf_counter()
sys.path[:0] = [os.path.dirname(os.path.abspath(__file__))]


MARKS = (1, 2, 5, 10, 20, 50, 100, 200, 300)


def rate(times: list[float], first: int, last: int) -> float:
    """Frames per second from frame `first` to frame `last` (1-based); NaN past the end."""
    if last > len(times) or last <= first:
        return float("nan")
    return (last - first) / (times[last - 1] - times[first - 1])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="bm3d_timeline.py", description=__doc__.split("\n\n")[0].strip()
    )
    parser.add_argument("plugin", help="a column of bench_bm3d.py, e.g. avdenoise or vsfeel")
    parser.add_argument("case", help='a case of bench_bm3d.py, e.g. "radius 1, YUV444"')
    parser.add_argument("frames", nargs="?", type=int, default=300, help="frames (300)")
    args = parser.parse_args(argv)
    plugin, case, frames = args.plugin, args.case, args.frames
    from _bench import render  # after the arguments: --help needs no VapourSynth
    from bench_bm3d import BENCH

    clip = render(BENCH, plugin, case)
    made = time.perf_counter() - START
    times = []
    # Trimmed rather than left early: a generator abandoned with requests in flight left
    # VapourSynth (R74) to crash at exit, 2 runs in 60.
    for frame in clip[:frames].frames():
        times.append(time.perf_counter() - START)
        del frame
    marks = " ".join(f"f{m}={times[m - 1]:.3f}" for m in MARKS if m <= len(times))
    rates = " ".join(
        f"fps[{a}-{b}]={rate(times, a, b):.0f}" for a, b in ((2, 20), (20, 100), (100, len(times)))
    )
    print(f"{plugin} | {case} | script={made:.3f} {marks} end={times[-1]:.3f} {rates}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
