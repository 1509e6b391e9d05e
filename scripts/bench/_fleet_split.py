"""A fleet's fixed and per-frame costs, from rows of one case at several chunk sizes.

``bench_fleet.py --chunk 240,600`` runs each case with 240-frame and then 600-frame chunks.
The slowest worker's wall is fitted as ``fixed + chunk x per_frame`` (least squares over the
chunk sizes), and the CPU of all workers likewise, per worker. ``fixed`` is what a worker
pays whatever its chunk (start-up, first frames, exit); ``workers / per_frame`` is the rate
the fleet keeps up once started, the rate long chunks approach. A lead made of a short start
shrinks with the chunks; one made of a faster frame does not.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

__all__ = ["markdown", "split"]


def _fit(points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """``(intercept, slope)`` of the least-squares line through `points`, or None with fewer
    than two distinct x."""
    xs = [x for x, _ in points]
    if len(set(xs)) < 2:
        return None
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(y for _, y in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x in xs)
    return mean_y - slope * mean_x, slope


def split(rows: Sequence[dict]) -> list[dict[str, object]]:
    """One entry per (case, column) run at two or more chunk sizes with the same workers.

    Each has ``case``, ``column``, ``workers``, ``chunks``, ``fixed_s`` and ``frame_ms`` (the
    slowest worker's wall), ``steady_fps``, ``cpu_fixed_s`` and ``cpu_frame_ms`` (a worker's
    CPU; None where a cell has none) and ``gpu_busy_pct`` (the median over the cells).
    """
    groups: dict[tuple[str, str, int], list[tuple[int, dict]]] = {}
    for row in rows:
        for column, cell in row["cells"].items():
            if "error" not in cell and cell.get("slowest_worker_s") is not None:
                key = (row["case"], column, row["workers"])
                groups.setdefault(key, []).append((row["chunk"], cell))
    entries = []
    for (case, column, workers), cells in groups.items():
        wall = _fit([(chunk, cell["slowest_worker_s"]) for chunk, cell in cells])
        if wall is None or wall[1] <= 0:
            continue
        cpus = [(chunk, cell["cpu_s"] / workers) for chunk, cell in cells if cell.get("cpu_s")]
        cpu = _fit(cpus) if len(cpus) == len(cells) else None
        busy = [cell["gpu_busy_pct"] for _, cell in cells if cell.get("gpu_busy_pct") is not None]
        entries.append({
            "case": case,
            "column": column,
            "workers": workers,
            "chunks": sorted(chunk for chunk, _ in cells),
            "fixed_s": round(wall[0], 3),
            "frame_ms": round(wall[1] * 1000, 3),
            "steady_fps": round(workers / wall[1], 1),
            "cpu_fixed_s": None if cpu is None else round(cpu[0], 3),
            "cpu_frame_ms": None if cpu is None else round(cpu[1] * 1000, 3),
            "gpu_busy_pct": statistics.median(busy) if busy else None,
        })  # fmt: skip
    return entries


def _number(value: object, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def markdown(entries: Sequence[dict]) -> str:
    """The entries as a table under its own heading; empty without entries."""
    if not entries:
        return ""
    lines = [
        "### Fixed and per-frame costs (slowest worker's wall = fixed + chunk x per frame)",
        "",
        "| case | column | chunks | fixed s | ms a frame | steady fps | CPU fixed s a worker "
        "| CPU ms a frame | GPU busy % |",
        "|---" * 9 + "|",
    ]
    for e in entries:
        cells = [
            e["case"],
            e["column"],
            "/".join(map(str, e["chunks"])),
            _number(e["fixed_s"], ".2f"),
            _number(e["frame_ms"], ".1f"),
            _number(e["steady_fps"], ".0f"),
            _number(e["cpu_fixed_s"], ".2f"),
            _number(e["cpu_frame_ms"], ".1f"),
            _number(e["gpu_busy_pct"], ".0f"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
