"""scripts/bench/fleet.py: the fleet runner's chunk split and how it reads the warm-up report."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import fleet
import pytest

from avdenoise_vs._warmup.queue import record_phase, warm_up

KEY = 0xF1EE7
"""Any warm-up key: the report, not the key, is under test."""


@pytest.mark.parametrize(
    ("start", "end", "workers", "expected"),
    [
        (0, 10, 3, [(0, 4), (4, 7), (7, 10)]),
        (5, 9, 4, [(5, 6), (6, 7), (7, 8), (8, 9)]),
        (0, 2, 8, [(0, 1), (1, 2)]),
        (3, 3, 2, []),
    ],
)
def test_fleet_splits_frames_into_contiguous_chunks(
    start: int, end: int, workers: int, expected: list[tuple[int, int]]
) -> None:
    assert fleet.split_frames(start, end, workers) == expected


def test_fleet_parses_frame_ranges() -> None:
    assert fleet.parse_range("10:250") == (10, 250)
    with pytest.raises(argparse.ArgumentTypeError, match="A < B"):
        fleet.parse_range("9:9")


def test_fleet_reads_phases_apart_from_queue_kinds(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = tmp_path / "report"
    monkeypatch.setenv("AVDENOISE_WARMUP_REPORT", str(report))
    started = time.time()
    record_phase("cuda")
    assert warm_up(KEY, lambda: None, cache_dir=cache).queued
    record_phase("warm")
    assert fleet.read_report(report) == ["compiled"]
    phases = fleet.read_phases(report, started)
    assert list(phases) == ["cuda", "warm"]
    assert 0 <= phases["cuda"] <= phases["warm"] < 60
