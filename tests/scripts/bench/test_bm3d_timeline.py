"""scripts/bench/bm3d_timeline.py: its rates, and a run of the unfiltered source on the CPU."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import bm3d_timeline

BENCH = Path(__file__).resolve().parents[3] / "scripts" / "bench"


def test_rate_counts_frames_between_two_marks() -> None:
    times = [0.5, 0.6, 0.7, 0.9]
    assert math.isclose(bm3d_timeline.rate(times, 2, 4), 2 / 0.3)
    assert math.isnan(bm3d_timeline.rate(times, 2, 5))  # past the end


def test_the_source_alone_prints_one_line_of_marks() -> None:
    command = [sys.executable, str(BENCH / "bm3d_timeline.py"), "source", "radius 0, luma", "25"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip().splitlines()[-1]
    assert line.startswith("source | radius 0, luma | script=")
    assert "f20=" in line and "f50=" not in line and "end=" in line
