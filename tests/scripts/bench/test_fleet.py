"""scripts/bench/fleet.py: the fleet runner's chunk split and frame ranges (how it reads the
reports: test_phase_hooks.py)."""

from __future__ import annotations

import argparse

import fleet
import pytest


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
