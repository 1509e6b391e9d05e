"""Where a fleet's workers spend their start, from ``bench_fleet.py --json`` files.

    python scripts/bench/fleet_phases.py fleet.json [more.json ...]

Prints one line per table cell (case, column) and file: the median over every worker of
every run of each start-up phase (seconds from the worker's launch; ``_phase_hooks/``),
of the first frame written and of the worker's wall time. Each file's label is its name, so
that runs with different ``AVDENOISE_DEBUG`` settings sit side by side.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

#: Phases in the order a worker reaches them; others follow, sorted.
ORDER = ("import", "script", "cupy", "context", "cuda", "warm", "thread-state", "first-frame")


def runs_of(cell: object):
    """Every run (a dict with ``per_worker``) inside a cell, however deep."""
    if isinstance(cell, dict):
        if "per_worker" in cell:
            yield cell
        for value in cell.values():
            yield from runs_of(value)
    elif isinstance(cell, list):
        for value in cell:
            yield from runs_of(value)


def summary(runs: list[dict]) -> dict[str, float]:
    """Median of each phase, of the first frame and of the wall, over every worker."""
    samples: dict[str, list[float]] = {}
    for run in runs:
        for worker in run["per_worker"]:
            for name, seconds in worker.get("phases", {}).items():
                samples.setdefault(name, []).append(seconds)
            for name in ("first_frame_s", "wall_s"):
                if worker.get(name) is not None:
                    samples.setdefault(name, []).append(worker[name])
    return {name: statistics.median(values) for name, values in samples.items()}


def main(paths: list[str]) -> int:
    for path in paths:
        document = json.loads(Path(path).read_text())
        for row in document["rows"]:
            for column, cell in row["cells"].items():
                runs = list(runs_of(cell))
                if not runs:
                    continue
                medians = summary(runs)
                names = [n for n in ORDER if n in medians]
                names += sorted(set(medians) - set(names) - {"first_frame_s", "wall_s"})
                phases = " ".join(f"{n}={medians[n]:.2f}" for n in names)
                fps = statistics.median(r["fps"] for r in runs)
                print(
                    f"{Path(path).stem[6:]:34} {row.get('case', row.get('label', '?'))[:22]:22} "
                    f"{column:14} fps={fps:.0f} {phases} first={medians.get('first_frame_s', 0):.2f} "
                    f"wall={medians.get('wall_s', 0):.2f}"
                )
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", help="bench_fleet.py --json files")
    sys.exit(main(parser.parse_args().paths))
