"""The harness shared by the speed benchmarks (``bench_nlm.py``, ``bench_bm3d.py``).

A benchmark script describes itself as a :class:`Bench` (its cases, plugins, source and how to
build each filter) and calls :func:`main`. The harness then runs every (plugin, case) in its own
worker process (``SCRIPT --worker PLUGIN CASE``: GPU memory is per filter and a crash stays
contained), which times the first frame, measures the luma PSNR against the clean clip and the
GPU memory taken, and has vspipe render a stretch of frames through ``SCRIPT.vpy`` for the fps,
as users run filters. The source is a real picture panning across the frame with noise added
by a native expression, so it costs no Python time per frame. A plugin that is missing or
refuses a case gets ``n/a`` in the table rather than stopping the run. The worker's part is
``_bench_worker.py``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

# The worker's half; the .vpy files and the fleet's cases import these names from here.
from _bench_types import Bench, Noise
from _bench_worker import gpu_memory_used, make_source, render, run_worker

__all__ = ["Bench", "Noise", "gpu_memory_used", "main", "make_source", "render"]

WORKER_TIMEOUT_S = 300


def run_all(bench: Bench, cases, plugins, seconds: float, repeat: int = 1) -> list[dict]:
    """One worker process per (plugin, case); print each row as it comes."""
    widths = (max([24, *map(len, cases)]), max([10, *map(len, plugins)]))
    rows = []
    for case in cases:
        for plugin in plugins:
            command = [sys.executable, str(bench.script), "--worker", plugin, case]
            command += ["--seconds", str(seconds), "--repeat", str(repeat)]
            try:
                done = subprocess.run(
                    command, capture_output=True, text=True, timeout=WORKER_TIMEOUT_S
                )
            except subprocess.TimeoutExpired:
                rows.append(dict(plugin=plugin, case=case, error="timed out"))
            else:
                lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
                if done.returncode == 0 and lines:
                    rows.append(json.loads(lines[-1]))
                else:
                    reason = (done.stderr.strip().splitlines() or ["failed"])[-1][:120]
                    rows.append(dict(plugin=plugin, case=case, error=reason))
            print(format_row(rows[-1], widths), flush=True)
    return rows


def format_row(row: dict, widths: tuple[int, int] = (24, 10)) -> str:
    """One console line: fps, time to the first frame, PSNR, GPU memory (or why n/a)."""
    head = f"{row['case']:<{widths[0]}} {row['plugin']:<{widths[1]}}"
    if "error" in row:
        return f"{head} n/a ({row['error']})"
    memory = "?" if row["gpu_mib"] is None else f"{row['gpu_mib']:.0f}"
    quality = "   n/a" if row["psnr"] is None else f"{row['psnr']:6.2f}"
    note = f"  ({row['note']})" if row.get("note") else ""
    runs = row.get("fps_runs", [])
    spread = f" [{min(runs):.0f}-{max(runs):.0f}]" if len(runs) > 1 else ""
    return (
        f"{head} {row['fps']:8.1f} fps{spread}  first {row['first_frame_s']:6.2f} s  "
        f"PSNR {quality}  GPU {memory} MiB{note}"
    )


def _cell(row: dict) -> str:
    """A table cell: ``fps (PSNR, memory; note)``, or n/a."""
    if "error" in row:
        return "n/a"
    details = ["PSNR n/a" if row["psnr"] is None else f"{row['psnr']:.2f} dB"]
    if row["gpu_mib"] is not None:
        details.append(f"{row['gpu_mib']:.0f} MiB")
    note = f"; {row['note']}" if row.get("note") else ""
    return f"{row['fps']:.0f} fps ({', '.join(details)}{note})"


def markdown(rows: list[dict], cases, plugins, header: str) -> str:
    """The results as a Markdown table under `header`, a row a case and a column a plugin."""
    lines = [header, "", "| config | " + " | ".join(plugins) + " |"]
    lines.append("|---|" + "---|" * len(plugins))
    for case in cases:
        cells = [
            _cell(next(r for r in rows if r["case"] == case and r["plugin"] == plugin))
            for plugin in plugins
        ]
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def split_names(text: str, known) -> list[str]:
    """Split a comma-separated list of names that may themselves contain commas.

    At each point the longest run of comma-separated pieces that is a known name wins, so
    ``"radius 0, luma,radius 0, luma, 8-bit input"`` gives both cases.
    """
    pieces = text.split(",")
    names, i = [], 0
    while i < len(pieces):
        if not pieces[i].strip():
            i += 1
            continue
        for j in range(len(pieces), i, -1):
            name = ",".join(pieces[i:j]).strip()
            if name in known:
                names.append(name)
                i = j
                break
        else:
            raise ValueError(f"unknown case at {','.join(pieces[i:]).strip()!r}")
    return names


def _gpu_name() -> str:
    """The GPU as nvidia-smi names it, or "no GPU"."""
    try:
        query = ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]
        return subprocess.run(query, capture_output=True, text=True).stdout.strip()
    except FileNotFoundError:
        return "no GPU"


def main(bench: Bench, description: str, argv: Sequence[str] | None = None) -> None:
    """The command line every benchmark script shares (see its docstring)."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--worker", nargs=2, metavar=("PLUGIN", "CASE"))
    parser.add_argument("--cases", default=",".join(bench.cases))
    parser.add_argument("--plugins", default=",".join(bench.plugins))
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeat", type=int, default=1, help="vspipe runs per cell (median)")
    parser.add_argument("--append", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(run_worker(bench, *args.worker, args.seconds, args.repeat)))
        return
    try:
        cases = split_names(args.cases, bench.cases)
    except ValueError as error:
        parser.error(f"{error}; known cases: {', '.join(map(repr, bench.cases))}")
    plugins = [p for p in args.plugins.split(",") if p]
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, got {args.repeat}")
    rows = run_all(bench, cases, plugins, args.seconds, args.repeat)
    header = (
        f"### {bench.title}, {datetime.date.today()}, {_gpu_name()}, "
        f"{os.environ.get('BENCH_THREADS', '16')} VapourSynth threads, {bench.settings}; "
        f"cells: {'steady ' if bench.steady_fps else ''}fps (luma PSNR vs clean, GPU memory)"
    )
    table = markdown(rows, cases, plugins, header)
    print(table)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if args.append:
        with args.append.open("a") as f:
            f.write("\n" + table)
