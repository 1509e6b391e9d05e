"""The headline benchmark, run the way Av1an runs us: W vspipe workers x C-frame chunks, at once.

    python scripts/bench/bench_fleet.py [--workers 16] [--chunk 240] [--cases SUBSTR,...]
                                  [--plugins NAME,...] [--cache cold,warm] [--repeat N] [--mps]
                                  [--gpus N]
                                  [--json out.json] [--markdown out.md]

For each case (``--cases`` keeps those whose name contains any of the comma-separated
substrings, any case) and each plugin, W workers start together, each ``vspipe`` rendering its
own contiguous chunk of C frames of ``bench_fleet.vpy`` (the case's 1080p noisy source and the
plugin's filters; cases and rivals in scripts/bench/_fleet_cases.py). The workers share nothing but
the GPU and the CPU, as Av1an's do. A cell is the aggregate rate: the frames all workers wrote
over the wall time from the launch to the last exit (the median of ``--repeat`` runs). Ours
runs twice: on a cold kernel cache (an empty ``CUPY_CACHE_DIR`` in a temp folder, which also
holds the warm-up queue's stamps) and on the warm cache that run left. Every run also gives the
slowest worker's wall, the mean time to the first frame and each worker's peak GPU memory
(nvidia-smi, about every 100 ms; n/a without it) and how busy the GPU was (the median of the
samples of ``utilization.gpu`` above zero: over 90 % when the frames wait for the GPU, with the
SM clock and board power over those samples). A
plugin that is missing, fails, or runs past ``--timeout`` gets n/a, with the reason in the JSON
and under the table; a fleet that times out is killed, every worker's process group with it.

Integer cases pipe y4m, as Av1an does; float cases (BM3D: the rivals take float only) pipe raw
frames, y4m having no float formats. Workers write to a reader that discards the frames unless
``--encoder`` names one (y4m cases only). The ``source`` column (the noisy clip, no filter) is
the ceiling of this harness: the source and the pipes, which at 1080p float carry 8-25 MB a
frame.

Several GPUs: ``--gpus N`` (N > 1) shows every worker the first N GPUs (``CUDA_VISIBLE_DEVICES``).
Ours gets no device index and places itself (``avdenoise_vs/_cuda/placement.py``); the rivals,
which would all run on device 0, get ``device_id`` round-robin by worker. GPU memory is then
also summed per GPU, with the workers seen on each. ``--gpus 1`` (the default) passes no device
and leaves ``CUDA_VISIBLE_DEVICES`` alone.

Several chunk sizes (``--chunk 240,600``) give a row each, and a second table splits each
column into a worker's fixed cost and its cost a frame, with the rate the fleet keeps once
started (``_fleet_split.py``). One process: ``--workers 1 --chunk 600,6000`` gives plain vspipe
rates of a short and a long run. ``--device cpu --width 64 --height 48`` runs ours on the NumPy
backend, which the tests use on machines without a GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import _fleet
import _fleet_cases as cases_
import _fleet_gpu
import _fleet_report as report
import _fleet_split
from _fleet_cases import OURS, RIVALS, UNFILTERED

__all__ = ["main"]

VPY = Path(__file__).resolve().with_name("bench_fleet.vpy")
PREWARM_FRAMES = 8
"""Frames of the one-worker run that fills a warm cache when no cold run left one."""
MIN_FLEET_S = 10.0
"""No fleet starts with less of ``--budget`` left than this."""
PLUGINS = (OURS, *UNFILTERED, *RIVALS)


@dataclass
class Plan:
    """How every fleet of this invocation runs (the command line, resolved)."""

    vspipe: str
    encoder: list[str] | None
    width: int
    height: int
    device: str
    threads: int
    timeout: float
    work: Path
    env: dict[str, str]
    gpus: int = 1
    deadline: float | None = None  # monotonic end of --budget
    runs: int = 0  # fleets started so far, to name their folders

    def time_left(self) -> float:
        """Seconds a fleet may run now: --timeout, or less when --budget is nearly spent."""
        if self.deadline is None:
            return self.timeout
        return min(self.timeout, self.deadline - time.monotonic())


def rival_device(plugin: str, worker: int, gpus: int) -> int | None:
    """The GPU a worker of `plugin` is given: round-robin for rivals on several GPUs, else
    None (ours places itself, the source uses none, one GPU needs no index)."""
    if gpus <= 1 or plugin in (OURS, *UNFILTERED):
        return None
    return worker % gpus


def worker_args(plan: Plan, case: str, plugin: str, worker: int) -> list[str]:
    """The ``-a key=value`` arguments of one worker's vspipe (see bench_fleet.vpy)."""
    args = {
        "case": case,
        "plugin": plugin,
        "width": plan.width,
        "height": plan.height,
        "device": plan.device,
        "threads": plan.threads,
    }
    device_id = rival_device(plugin, worker, plan.gpus)
    if device_id is not None:
        args["device_id"] = device_id
    return [part for key, value in args.items() for part in ("-a", f"{key}={value}")]


def visible_devices(env: dict[str, str], gpus: int) -> dict[str, str]:
    """`env` showing the first `gpus` GPUs (of its ``CUDA_VISIBLE_DEVICES`` if set); as is for 1."""
    if gpus <= 1:
        return env
    listed = env.get("CUDA_VISIBLE_DEVICES")
    entries = [e.strip() for e in listed.split(",")] if listed else [str(i) for i in range(gpus)]
    return env | {"CUDA_VISIBLE_DEVICES": ",".join(entries[:gpus])}


def run_fleet(
    plan: Plan, case: str, plugin: str, workers: int, chunk: int, cache: Path | None
) -> dict[str, object]:
    """One fleet: `workers` x `chunk` frames of `case` through `plugin`; its numbers."""
    timeout = plan.time_left()
    if timeout < MIN_FLEET_S:
        return {"error": "skipped: --budget spent"}
    chosen = cases_.CASES[case]
    plan.runs += 1
    run_dir = plan.work / f"run-{plan.runs}"
    run_dir.mkdir()
    output = ["-c", "y4m", "-"] if chosen.y4m else ["-"]
    # An encoder reads y4m, which float cases cannot write.
    encoder = plan.encoder if chosen.y4m else None
    workers_ = [
        _fleet.Worker(
            _fleet.WorkerResult(index, a, b - 1),
            [
                plan.vspipe,
                str(VPY),
                *output,
                "-s",
                str(a),
                "-e",
                str(b - 1),
                *worker_args(plan, case, plugin, index),
            ],  # fmt: skip
            encoder,
            y4m=chosen.y4m,
        )
        for index, (a, b) in enumerate(_fleet.split_frames(0, workers * chunk, workers))
    ]
    env = plan.env | ({"CUPY_CACHE_DIR": str(cache)} if cache is not None else {})
    envs = [_fleet.worker_env(env, run_dir / f"report-{w.result.index}") for w in workers_]
    with (
        _fleet_gpu.GpuSampler(per_gpu=plan.gpus > 1) as sampler,
        _fleet_gpu.BusySampler() as busy,
    ):
        wall_s = _fleet.launch(workers_, envs, run_dir, timeout)
    results = _fleet.attach_reports(workers_, run_dir)
    memory = sampler.summary([r.pid for r in results])
    return report.fleet_numbers(
        results, wall_s, workers * chunk, memory, timeout, busy=busy.summary()
    )


def _progress(label: str, column: str, run: dict[str, object]) -> None:
    """One line on stderr per fleet run, as it ends."""
    if "error" in run:
        text = f"n/a ({run['error']})"
    else:
        mib = "-" if run["gpu_mib"] is None else f"{run['gpu_mib']:.0f}"
        busy = "-" if run.get("gpu_busy_pct") is None else f"{run['gpu_busy_pct']:.0f}"
        first = run["mean_first_frame_s"]
        clock = "" if run.get("gpu_sm_mhz") is None else f" at {run['gpu_sm_mhz']:.0f} MHz"
        watts = "" if run.get("gpu_power_w") is None else f", {run['gpu_power_w']:.0f} W"
        text = (
            f"{run['fps']:.0f} fps, wall {run['wall_s']:.2f} s, slowest {run['slowest_worker_s']:.2f}"
            f" s, first {'-' if first is None else f'{first:.2f}'} s, {mib} MiB/worker, "
            f"GPU busy {busy} %{clock}{watts}, CPU {run['cpu_s']:.1f} s, {run['compiling']} compiling"
        )
    print(f"{label} | {column}: {text}", file=sys.stderr, flush=True)


def _repeat(label: str, column: str, repeat: int, one_run) -> dict[str, object]:
    """A cell: `one_run()` up to `repeat` times, stopping at the first failure."""
    runs = []
    for _ in range(repeat):
        runs.append(one_run())
        _progress(label, column, runs[-1])
        if "error" in runs[-1]:
            break
    return report.cell(runs)


def run_row(
    plan: Plan,
    case: str,
    plugins: list[str],
    caches: list[str],
    workers: int,
    chunk: int,
    repeat: int,
    label: str,
) -> dict[str, object]:
    """Every column of one case: ours cold and warm, the source, the case's rivals."""
    cells: dict[str, dict] = {}
    if OURS in plugins:
        # Each cold run gets an empty cache; the warm runs take the cache the last good cold
        # run filled, or one a short lone run fills.
        warm: list[Path] = []

        def cold() -> dict[str, object]:
            cache = Path(tempfile.mkdtemp(prefix="cupy-cold-", dir=plan.work))
            run = run_fleet(plan, case, OURS, workers, chunk, cache)
            if "error" not in run:
                warm[:] = [cache]
            return run

        def warmed() -> dict[str, object]:
            if not warm:
                warm.append(Path(tempfile.mkdtemp(prefix="cupy-warm-", dir=plan.work)))
                run_fleet(plan, case, OURS, 1, PREWARM_FRAMES, warm[0])
            return run_fleet(plan, case, OURS, workers, chunk, warm[0])

        if "cold" in caches:
            cells[report.OURS_COLD] = _repeat(label, report.OURS_COLD, repeat, cold)
        if "warm" in caches:
            cells[report.OURS_WARM] = _repeat(label, report.OURS_WARM, repeat, warmed)
    others = [p for p in UNFILTERED if p in plugins]
    others += [p for p in RIVALS if p in plugins and p in cases_.CASES[case].rivals]
    for plugin in others:
        cells[plugin] = _repeat(
            label,
            plugin,
            repeat,
            lambda p=plugin: run_fleet(plan, case, p, workers, chunk, None),
        )
    return {"case": case, "label": label, "workers": workers, "chunk": chunk, "cells": cells}


def _names(
    text: str, known: tuple[str, ...], what: str, parser: argparse.ArgumentParser
) -> list[str]:
    """Comma-separated names, each checked against `known`."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown:
        parser.error(f"unknown {what} {', '.join(unknown)}; known: {', '.join(known)}")
    return names


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, argparse.ArgumentParser]:
    """Parse the command line."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workers", type=int, default=16, help="vspipe workers (default 16)")
    parser.add_argument("--chunk", default="240", help="frames a worker, or a list: 600,6000")
    parser.add_argument("--cases", help="substrings of case names, comma-separated (default all)")
    parser.add_argument(
        "--plugins",
        default=",".join(PLUGINS),
        help=f"columns, from {', '.join(PLUGINS)} (default all)",
    )
    parser.add_argument("--cache", default="cold,warm", help="ours: cold, warm or both")
    parser.add_argument("--repeat", type=int, default=1, help="fleet runs a cell (median)")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds a fleet (kill)")
    parser.add_argument("--budget", type=float, help="start no fleet after this many seconds")
    parser.add_argument("--mps", action="store_true", help="run a CUDA MPS daemon meanwhile")
    parser.add_argument("--gpus", type=int, default=1, help="GPUs the fleet spreads over")
    parser.add_argument("--width", type=int, default=1920)
    parser.add_argument("--height", type=int, default=1080)
    parser.add_argument("--device", default="auto", help="ours: auto, cpu, cuda, cuda:N")
    parser.add_argument("--threads", type=int, default=0, help="VapourSynth threads (0: its own)")
    parser.add_argument("--encoder", choices=["auto", "x264", "svt", "none"], default="none")
    parser.add_argument("--vspipe", help="vspipe executable (default: PATH, then beside python)")
    parser.add_argument("--json", type=Path, help="write every number here")
    parser.add_argument("--markdown", type=Path, help="write the table here")
    return parser.parse_args(argv), parser


def _exit_on_term(signum: int, frame: object) -> None:
    """SIGTERM as SystemExit, so that workers get killed and MPS told to quit on the way out."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    """Run every (case, chunk) row; print the table; 0 unless one of ours failed."""
    args, parser = parse_args(argv)
    names = cases_.select(args.cases)
    if not names:
        parser.error(f"no case matches {args.cases!r}; cases: {', '.join(cases_.CASES)}")
    plugins = _names(args.plugins, PLUGINS, "plugin", parser)
    caches = _names(args.cache, ("cold", "warm"), "cache", parser)
    try:
        chunks = [int(c) for c in args.chunk.split(",") if c.strip()]
    except ValueError:
        parser.error(f"--chunk must be integers, got {args.chunk!r}")
    if args.workers < 1 or not chunks or min(chunks) < 1 or args.repeat < 1 or args.gpus < 1:
        parser.error("--workers, --chunk, --repeat and --gpus must be at least 1")
    if args.workers * max(chunks) > cases_.SOURCE_FRAMES:
        parser.error(f"workers x chunk must be at most {cases_.SOURCE_FRAMES} (the source)")
    signal.signal(signal.SIGTERM, _exit_on_term)
    started = time.monotonic()
    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-fleet-") as work,
        contextlib.ExitStack() as stack,
    ):
        env = visible_devices(dict(os.environ), args.gpus)
        env.pop(_fleet.REPORT_ENV, None)
        if args.mps:
            try:
                env |= stack.enter_context(_fleet_gpu.mps_daemon(Path(work)))
            except RuntimeError as error:
                parser.exit(2, f"bench_fleet: {error}\n")
        plan = Plan(
            vspipe=_fleet.find_vspipe(args.vspipe),
            encoder=_fleet.encoder_command(args.encoder),
            width=args.width,
            height=args.height,
            device=args.device,
            threads=args.threads,
            timeout=args.timeout,
            work=Path(work),
            env=env,
            gpus=args.gpus,
            deadline=None if args.budget is None else started + args.budget,
        )
        for case in names:
            for chunk in chunks:
                label = case if len(chunks) == 1 else f"{case} ({args.workers}x{chunk})"
                rows.append(
                    run_row(plan, case, plugins, caches, args.workers, chunk, args.repeat, label)
                )
    columns = [
        c
        for c in (report.OURS_COLD, report.OURS_WARM, *UNFILTERED, *RIVALS)
        if any(c in row["cells"] for row in rows)
    ]
    gpu = _fleet_gpu.gpu_name()
    gpu = gpu if args.gpus == 1 else f"{args.gpus} x {gpu}"
    chunk_text = "/".join(map(str, chunks))
    header = (
        f"### Fleet, {datetime.date.today()}, {gpu}: {args.workers} worker{'s' * (args.workers > 1)} x {chunk_text} frames"
        f" at once, {args.width}x{args.height}, VapourSynth threads "
        f"{args.threads or 'default'}, MPS {'on' if args.mps else 'off'}; cells: aggregate fps "
        f"(all frames / wall from launch to last exit), median of {args.repeat}"
    )
    costs = _fleet_split.split(rows)  # rows of one case at several chunk sizes
    table = report.markdown(rows, columns, header)
    if costs:
        table += "\n" + _fleet_split.markdown(costs)
    print(table, end="")
    document = {
        "date": str(datetime.date.today()),
        "gpu": gpu,
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "vspipe": plan.vspipe,
        "elapsed_s": round(time.monotonic() - started, 1),
        "rows": rows,
        "costs": costs,
    }
    if args.json is not None:
        args.json.write_text(json.dumps(document, indent=1) + "\n")
    if args.markdown is not None:
        args.markdown.write_text(table)
    ours = [c for row in rows for k, c in row["cells"].items() if k.startswith(OURS)]
    return 1 if any("error" in c for c in ours) else 0


if __name__ == "__main__":
    sys.exit(main())
