"""Numbers and tables of ``bench_fleet.py``: one fleet run's summary, a cell's median, the table.

A fleet run is W workers started at once; its rate is the frames all of them wrote over the
wall time from the launch to the last exit. A cell is the median of `repeat` runs, or n/a
with the reason of the first run that failed (a missing plugin, an error, a timeout).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict

from _fleet import WorkerResult

__all__ = [
    "OURS_COLD",
    "OURS_WARM",
    "cell",
    "failure_reason",
    "fleet_numbers",
    "markdown",
]

OURS_COLD = "avdenoise cold"
OURS_WARM = "avdenoise warm"
#: Columns that are not rivals: ours, the unfiltered source and the source through the bus.
NOT_RIVALS = (OURS_COLD, OURS_WARM, "source", "bus")
#: What a cell's median is taken of (each None-safe).
MEDIAN_KEYS = (
    "fps", "wall_s", "slowest_worker_s", "mean_first_frame_s", "gpu_mib", "gpu_busy_pct", "cpu_s",
    "gpu_sm_mhz", "gpu_power_w",
)  # fmt: skip
REASON_CHARS = 200


def failure_reason(stderr: str) -> str:
    """The line of a failed vspipe's stderr that says why: its last, bar the frame count."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith("Output ")]
    return (lines[-1] if lines else "no message")[:REASON_CHARS]


def _run_error(
    results: Sequence[WorkerResult], frames: int, expected: int, timeout: float | None
) -> str | None:
    """Why a fleet run does not count, or None when every worker wrote its whole chunk."""
    late = sum(r.timed_out for r in results)
    if late:
        return f"timed out after {timeout:.0f} s ({late} of {len(results)} workers running)"
    failed = [r for r in results if r.returncode != 0]
    if failed:
        reason = failure_reason(failed[0].stderr_tail)
        return f"{len(failed)} of {len(results)} workers failed: {reason}"
    if frames != expected:
        return f"{frames} frames written, {expected} expected"
    return None


def fleet_numbers(
    results: Sequence[WorkerResult],
    wall_s: float,
    expected_frames: int,
    memory: dict[str, object],
    timeout: float | None = None,
    busy: dict[str, object] | None = None,
) -> dict[str, object]:
    """One fleet run: aggregate fps, slowest worker, mean first frame, GPU MiB a worker, how
    busy the GPU was.

    `memory` is :func:`_fleet_gpu.memory_summary`'s; its ``max_mib`` (the largest worker's
    peak) is the run's ``gpu_mib``. `busy` is :func:`_fleet_gpu.busy_summary`'s; its
    ``busy_pct``, ``sm_mhz`` and ``power_w`` are the run's ``gpu_busy_pct``, ``gpu_sm_mhz``
    and ``gpu_power_w``. ``error`` is set when the run does not count.
    """
    frames = sum(r.frames_out or 0 for r in results)
    firsts = [r.first_frame_s for r in results if r.first_frame_s is not None]
    run: dict[str, object] = {
        "workers": len(results),
        "frames": frames,
        "expected_frames": expected_frames,
        "wall_s": round(wall_s, 3),
        "fps": round(frames / wall_s, 2) if wall_s > 0 else 0.0,
        "slowest_worker_s": round(max((r.wall_s for r in results), default=0.0), 3),
        "mean_first_frame_s": round(statistics.fmean(firsts), 3) if firsts else None,
        "max_first_frame_s": round(max(firsts), 3) if firsts else None,
        "cpu_s": round(sum(r.cpu_s for r in results), 3),
        "compiling": sum(r.compiled for r in results),
        "gpu_mib": memory.get("max_mib"),
        "gpu": memory,
        "gpu_busy_pct": (busy or {}).get("busy_pct"),
        "gpu_sm_mhz": (busy or {}).get("sm_mhz"),
        "gpu_power_w": (busy or {}).get("power_w"),
        "gpu_busy": busy,
        "per_worker": [asdict(r) | {"compiled": r.compiled} for r in results],
    }
    error = _run_error(results, frames, expected_frames, timeout)
    if error is not None:
        run["error"] = error
    return run


def _median(values: Iterable[object]) -> float | None:
    """Median of the numbers among `values`, or None when there is none."""
    numbers = [v for v in values if isinstance(v, int | float)]
    return round(statistics.median(numbers), 3) if numbers else None


def cell(runs: Sequence[dict[str, object]]) -> dict[str, object]:
    """A table cell from its fleet runs: the median of each number, or the first error."""
    errors = [run["error"] for run in runs if "error" in run]
    if errors or not runs:
        return {"error": errors[0] if errors else "not run", "runs": list(runs)}
    summary: dict[str, object] = {key: _median(run.get(key) for run in runs) for key in MEDIAN_KEYS}
    summary["gpu_method"] = runs[0]["gpu"].get("method")
    summary["runs"] = list(runs)
    return summary


def _fps(cells: dict[str, dict], column: str) -> str:
    """A fps cell: ``-`` when the column does not apply to the case, n/a when it failed."""
    if column not in cells:
        return "-"
    found = cells[column]
    return "n/a" if "error" in found else f"{found['fps']:.0f}"


def _best_rival(cells: dict[str, dict]) -> dict | None:
    """The rival cell with the highest fps, or None when no rival ran."""
    rivals = [c for name, c in cells.items() if name not in NOT_RIVALS and "error" not in c]
    return max(rivals, key=lambda c: c["fps"] or 0.0, default=None)


def _pair(found: Sequence[dict | None], key: str, spec: str) -> str:
    """`key` of each cell joined by ``/``: ``-`` where there is no cell, n/a where no value."""
    return "/".join(
        "-" if c is None else "n/a" if c.get(key) is None else format(c[key], spec) for c in found
    )


def _extras(cells: dict[str, dict]) -> list[str]:
    """The ratio, slowest worker, first frame and GPU memory columns of one row."""
    ours = {k: c for k, c in cells.items() if k in (OURS_COLD, OURS_WARM) and "error" not in c}
    warm = ours.get(OURS_WARM) or ours.get(OURS_COLD)
    cold = ours.get(OURS_COLD)
    best = _best_rival(cells)
    ratio = "-"
    if warm and best and warm["fps"] and best["fps"]:
        ratio = f"{warm['fps'] / best['fps']:.2f}x"
    mib = _pair([warm, best], "gpu_mib", ".0f")
    # An estimate from the GPU's total, not each worker's own peak: marked with ~.
    if "total" in (c.get("gpu_method") for c in (warm, best) if c):
        mib = "~" + mib
    return [
        ratio,
        _pair([warm, best], "slowest_worker_s", ".2f"),
        _pair([cold, warm, best], "mean_first_frame_s", ".2f"),
        mib,
    ]


def markdown(rows: Sequence[dict], columns: Sequence[str], header: str) -> str:
    """The table under `header`: a line a row, fps cells, then ours against the best rival.

    Each row is ``{"label": ..., "cells": {column: cell}}``. The last columns compare ours
    (warm cache; cold where only cold ran) with the fastest rival of the row: their fps
    ratio, slowest worker's wall, mean time to the first frame (ours cold/warm/rival) and the
    largest worker's peak GPU memory. The reasons of the n/a cells follow the table.
    """
    names = [*columns, "warm/best", "slowest s", "first s c/w/r", "MiB/worker"]
    lines = [header, "", "| case | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for row in rows:
        cells = [_fps(row["cells"], column) for column in columns] + _extras(row["cells"])
        lines.append(f"| {row['label']} | " + " | ".join(cells) + " |")
    reasons = [
        f"- n/a {row['label']} / {column}: {found['error']}"
        for row in rows
        for column, found in row["cells"].items()
        if "error" in found
    ]
    if reasons:
        lines += ["", *reasons]
    return "\n".join(lines) + "\n"
