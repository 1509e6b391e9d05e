"""Run a VapourSynth script the way Av1an does: N vspipe workers on contiguous chunks, at once.

Each worker runs ``vspipe SCRIPT -c y4m - -s A -e B`` (``-e`` inclusive, as vspipe wants) and
pipes into an encoder when one is installed, or into a reader that discards the frames. All
start within milliseconds, which is what makes a cold CuPy kernel cache expensive: without the
warm-up queue every worker compiles the same kernels.

Per worker it reports the time to the first frame (first y4m ``FRAME`` header on the pipe),
the wall time, the CPU seconds of the vspipe process and what the warm-up queue did for it
(read from the files ``avdenoise_vs._warmup.queue`` writes into ``AVDENOISE_WARMUP_REPORT``, one
folder per worker): ``compiled`` (compiled under the queue's lock), ``self`` (gave up waiting
and compiled anyway), ``waited``, ``warm`` or ``unqueued``. A worker counts as compiling when
it reports ``compiled`` or ``self``. The phases that ``_phase_hooks/sitecustomize.py`` marks in
the same folder say when each worker's GPU filter reached the steps of its creation
(``script``: the filter is being created, ``cuda``: the backend made, ``warm``: kernels warm),
which the table shows as seconds from the worker's start.

Examples
--------
::

    python scripts/bench/fleet.py denoise.vpy --workers 8 --cold
    python scripts/bench/fleet.py denoise.vpy --workers 8 --cold --queue off --json off.json

Workers inherit this environment; set ``PYTHONPATH`` if the package is not installed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from _fleet import (
    REPORT_ENV,
    Worker,
    WorkerResult,
    attach_reports,
    encoder_command,
    find_vspipe,
    launch,
    read_phases,
    read_report,
    split_frames,
    worker_env,
)

__all__ = [
    "WorkerResult",
    "main",
    "parse_range",
    "read_phases",
    "read_report",
    "split_frames",
]


def parse_range(text: str) -> tuple[int, int]:
    """Parse ``A:B`` (B exclusive, like a slice) into ``(A, B)``."""
    match = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", text)
    if match is None or int(match[1]) >= int(match[2]):
        msg = f"--frames must be A:B with A < B, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return int(match[1]), int(match[2])


def script_args(pairs: list[str]) -> list[str]:
    """Turn ``key=value`` pairs into vspipe's ``-a key=value`` arguments."""
    return [part for pair in pairs for part in ("-a", pair)]


def frame_count(vspipe: str, script: str, args: list[str], env: dict[str, str]) -> int:
    """Ask ``vspipe --info`` how many frames the script's output has."""
    info = subprocess.run(
        [vspipe, "--info", script, *args], capture_output=True, text=True, env=env, check=False
    )
    match = re.search(r"^Frames:\s*(\d+)", info.stdout, re.MULTILINE)
    if info.returncode != 0 or match is None:
        msg = f"vspipe --info failed ({info.returncode}):\n{info.stderr.strip()}"
        raise SystemExit(msg)
    return int(match[1])


def fleet_env(queue: str, cache_dir: str | None) -> dict[str, str]:
    """Return the workers' environment: this one plus the queue switch and the cache."""
    env = dict(os.environ, AVDENOISE_WARMUP="1" if queue == "on" else "0")
    env.pop(REPORT_ENV, None)
    if cache_dir is not None:
        env["CUPY_CACHE_DIR"] = cache_dir
    return env


def _info_env(env: dict[str, str], work: Path, *, cold: bool) -> dict[str, str]:
    """Return the environment for ``vspipe --info``: with --cold, a throwaway kernel cache.

    Evaluating the script may compile kernels (and finish the warm-up); with --cold that
    must not warm the cache the fleet is meant to find cold.
    """
    if not cold:
        return env
    return env | {"CUPY_CACHE_DIR": tempfile.mkdtemp(prefix="cupy-info-", dir=work)}


def run_fleet(args: argparse.Namespace, work: Path) -> tuple[list[WorkerResult], float]:
    """Start every worker at once, wait for all; return their results and the fleet's wall."""
    vspipe = find_vspipe(args.vspipe)
    extra = script_args(args.arg)
    cache = tempfile.mkdtemp(prefix="cupy-", dir=work) if args.cold else None
    env = fleet_env(args.queue, cache)
    if args.frames is None:
        info_env = _info_env(env, work, cold=args.cold)
        first, end = 0, frame_count(vspipe, args.script, extra, info_env)
    else:
        first, end = args.frames
    encoder = encoder_command(args.encoder)
    workers = [
        Worker(
            WorkerResult(index, a, b - 1),
            [vspipe, args.script, "-c", "y4m", "-", "-s", str(a), "-e", str(b - 1), *extra],
            encoder,
        )
        for index, (a, b) in enumerate(split_frames(first, end, args.workers))
    ]
    # One report folder per worker, so that whatever process vspipe runs the script in (a
    # wrapper's child, say) its report is attributed to the right worker.
    envs = [worker_env(env, work / f"report-{w.result.index}") for w in workers]
    wall_s = launch(workers, envs, work, args.timeout)
    return attach_reports(workers, work), wall_s


def totals(results: list[WorkerResult], fleet_wall_s: float) -> dict[str, object]:
    """Fleet totals: compiling processes, CPU seconds, wall time, slowest first frame."""
    firsts = [r.first_frame_s for r in results if r.first_frame_s is not None]
    return {
        "workers": len(results),
        "compiling": sum(r.compiled for r in results),
        # The queue did not run for these (switched off, no cache): whether they compiled
        # is not reported, though on a cold cache each did.
        "unqueued": sum("unqueued" in r.queue for r in results),
        "cpu_s": round(sum(r.cpu_s for r in results), 3),
        "wall_s": round(fleet_wall_s, 3),
        "slowest_first_frame_s": round(max(firsts), 3) if firsts else None,
        # Slowest worker to reach each step of the filter's creation, to read where time goes.
        "slowest_phase_s": {
            name: round(max(r.phases[name] for r in results if name in r.phases), 3)
            for name in sorted({n for r in results for n in r.phases})
        },
        "failed": sum(r.returncode != 0 for r in results),
        "timed_out": sum(r.timed_out for r in results),
    }


def _seconds(value: float | None) -> str:
    """Format seconds for the table."""
    return "-" if value is None else f"{value:.2f}"


def print_table(results: list[WorkerResult], summary: dict[str, object]) -> None:
    """Print one line per worker and the fleet totals."""
    print(f"{'worker':>6} {'frames':>13} {'first s':>8} {'wall s':>8} {'cpu s':>8}  queue  phases")
    for r in results:
        queue = "+".join(r.queue) or "-"
        rc = "" if r.returncode == 0 else f"  (exit {r.returncode})"
        frames = f"{r.first}-{r.last}"
        phases = " ".join(f"{name}@{at:.2f}" for name, at in r.phases.items())
        print(
            f"{r.index:>6} {frames:>13} {_seconds(r.first_frame_s):>8} {_seconds(r.wall_s):>8} "
            f"{_seconds(r.cpu_s):>8}  {queue}{rc}  {phases}"
        )
    unqueued = f" ({summary['unqueued']} unqueued)" if summary["unqueued"] else ""
    print(
        f"fleet: {summary['workers']} workers, {summary['compiling']} compiling{unqueued}, "
        f"cpu {summary['cpu_s']} s, wall {summary['wall_s']} s, "
        f"slowest first frame {_seconds(summary['slowest_first_frame_s'])} s"
    )
    if summary["slowest_phase_s"]:
        marks = ", ".join(f"{k} {v:.2f} s" for k, v in summary["slowest_phase_s"].items())
        print(f"fleet: slowest to reach {marks}")
    for r in results:
        if r.stderr_tail:
            print(f"--- worker {r.index} stderr (last lines) ---\n{r.stderr_tail}", file=sys.stderr)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("script", help="the .vpy script")
    parser.add_argument("--workers", type=int, default=8, help="number of workers (default 8)")
    parser.add_argument("--frames", type=parse_range, help="A:B, B exclusive (default: all)")
    parser.add_argument("--encoder", choices=["auto", "x264", "svt", "none"], default="auto")
    parser.add_argument("--vspipe", help="vspipe executable (default: PATH, then beside python)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--arg", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--cold", action="store_true", help="use a fresh CUPY_CACHE_DIR")
    parser.add_argument("--queue", choices=["on", "off"], default="on", help="AVDENOISE_WARMUP")
    parser.add_argument("--timeout", type=float, help="kill workers after this many seconds")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the fleet; return 0 when every worker succeeded."""
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="fleet-") as work:
        results, wall_s = run_fleet(args, Path(work))
        summary = totals(results, wall_s)
    print_table(results, summary)
    if args.json is not None:
        document = {
            "script": args.script,
            "settings": {k: v for k, v in vars(args).items() if k not in {"script", "json"}},
            "workers": [asdict(r) | {"compiled": r.compiled} for r in results],
            "totals": summary,
        }
        args.json.write_text(json.dumps(document, indent=2, default=str) + "\n")
    return 0 if summary["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
