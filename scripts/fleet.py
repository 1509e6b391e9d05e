"""Run a VapourSynth script the way Av1an does: N vspipe workers on contiguous chunks, at once.

Each worker runs ``vspipe SCRIPT -c y4m - -s A -e B`` (``-e`` inclusive, as vspipe wants) and
pipes into an encoder when one is installed, or into a reader that discards the frames. All
start within milliseconds, which is what makes a cold CuPy kernel cache expensive: without the
warm-up queue every worker compiles the same kernels.

Per worker it reports the time to the first frame (first y4m ``FRAME`` header on the pipe),
the wall time, the CPU seconds of the vspipe process and what the warm-up queue did for it
(read from the files ``avdenoise_vs.warmup`` writes into ``AVDENOISE_WARMUP_REPORT``, one
folder per worker): ``compiled`` (compiled under the queue's lock), ``self`` (gave up waiting
and compiled anyway), ``waited``, ``warm`` or ``unqueued``. A worker counts as compiling when
it reports ``compiled`` or ``self``. The same files say when each worker's GPU filter reached
the steps of its creation (``script``: the filter is being created, ``cuda``: CuPy imported and
the device up, ``warm``: kernels warm), which the table shows as seconds from the worker's start.

Examples
--------
::

    python scripts/fleet.py denoise.vpy --workers 8 --cold
    python scripts/fleet.py denoise.vpy --workers 8 --cold --queue off --json off.json

Workers inherit this environment; set ``PYTHONPATH`` if the package is not installed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO

__all__ = ["WorkerResult", "main", "parse_range", "split_frames"]

READ_BYTES = 1 << 20
FRAME_MARK = b"FRAME"
REPORT_ENV = "AVDENOISE_WARMUP_REPORT"
COMPILING_KINDS = ("compiled", "self")
PHASES_KIND = "phases"


def split_frames(start: int, end: int, workers: int) -> list[tuple[int, int]]:
    """Split the frames ``[start, end)`` into contiguous chunks, one per worker.

    Chunk sizes differ by at most one frame, the larger ones first; with fewer frames than
    workers, some workers get none and no empty chunk is returned.
    """
    if workers < 1:
        msg = f"fleet: workers must be at least 1, got {workers}"
        raise ValueError(msg)
    count = max(0, end - start)
    used = min(workers, count)
    if used == 0:
        return []
    base, extra = divmod(count, used)
    chunks, first = [], start
    for index in range(used):
        last = first + base + (index < extra)
        chunks.append((first, last))
        first = last
    return chunks


def parse_range(text: str) -> tuple[int, int]:
    """Parse ``A:B`` (B exclusive, like a slice) into ``(A, B)``."""
    match = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", text)
    if match is None or int(match[1]) >= int(match[2]):
        msg = f"--frames must be A:B with A < B, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return int(match[1]), int(match[2])


def find_vspipe(given: str | None) -> str:
    """Return the vspipe to run: the given one, else the real binary found from PATH or here.

    The pip wheel's ``vspipe`` is a Python script that runs the bundled binary as a child; its
    own start-up would count as the worker's, so the bundled binary is preferred.
    """
    if given:
        return given
    beside = Path(sys.executable).with_name("vspipe")
    found = shutil.which("vspipe") or (str(beside) if beside.exists() else "vspipe")
    return _bundled_vspipe(found) or found


def _bundled_vspipe(found: str) -> str | None:
    """Return the binary a pip ``vspipe`` wrapper script would run, or None."""
    try:
        with open(found, "rb") as file:
            head = file.read(512)
        spec = importlib.util.find_spec("vapoursynth")
    except (OSError, ImportError, ValueError):
        return None
    if not head.startswith(b"#!") or b"vapoursynth" not in head or spec is None:
        return None
    binary = Path(spec.origin or "").with_name("vspipe")
    return str(binary) if binary.is_file() and os.access(binary, os.X_OK) else None


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


_ENCODERS = {"x264": "x264", "svt": "SvtAv1EncApp"}


def encoder_command(choice: str) -> list[str] | None:
    """Return the encoder command line for `choice`, or None to discard the frames."""
    if choice == "auto":
        choice = next((c for c, exe in _ENCODERS.items() if shutil.which(exe)), "none")
    if choice == "x264":
        return ["x264", "--demuxer", "y4m", "-o", os.devnull, "-"]
    if choice == "svt":
        return ["SvtAv1EncApp", "-i", "stdin", "-b", os.devnull, "--preset", "12"]
    return None


def fleet_env(queue: str, cache_dir: str | None) -> dict[str, str]:
    """Return the workers' environment: this one plus the queue switch and the cache."""
    env = dict(os.environ, AVDENOISE_WARMUP="1" if queue == "on" else "0")
    env.pop(REPORT_ENV, None)
    if cache_dir is not None:
        env["CUPY_CACHE_DIR"] = cache_dir
    return env


@dataclass
class WorkerResult:
    """What one worker did; times in seconds from its own start."""

    index: int
    first: int
    last: int
    pid: int = 0
    first_frame_s: float | None = None
    wall_s: float = 0.0
    cpu_s: float = 0.0
    returncode: int | None = None
    queue: list[str] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    stderr_tail: str = ""

    @property
    def compiled(self) -> bool:
        """Whether this worker compiled kernels, under the queue's lock or after giving up."""
        return any(kind in COMPILING_KINDS for kind in self.queue)


def _remaining(deadline: float | None) -> float | None:
    """Seconds left until `deadline` (monotonic), or None for no deadline."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


class Worker:
    """One vspipe process, its optional encoder, a relay thread and a reaper thread."""

    def __init__(self, result: WorkerResult, command: list[str], encoder: list[str] | None) -> None:
        self.result = result
        self._command = command
        self._encoder_command = encoder
        self._threads: list[threading.Thread] = []
        self._vspipe: subprocess.Popen[bytes] | None = None
        self._encoder: subprocess.Popen[bytes] | None = None
        self._started = 0.0
        self.started_epoch = 0.0  # time.time() at the start, to place the worker's phases
        self._vspipe_done = 0.0

    def start(self, env: dict[str, str], stderr: IO[bytes]) -> None:
        """Start vspipe (and the encoder) and the threads that watch them."""
        self._started = time.monotonic()
        self.started_epoch = time.time()
        self._vspipe = vspipe = subprocess.Popen(
            self._command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr, env=env
        )
        self.result.pid = vspipe.pid
        if self._encoder_command is not None:
            self._encoder = subprocess.Popen(
                self._encoder_command,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        sink = None if self._encoder is None else self._encoder.stdin
        self._spawn(self._relay, vspipe.stdout, sink)
        self._spawn(self._reap, vspipe)

    def _spawn(self, target: object, *args: object) -> None:
        """Start a daemon thread running `target`."""
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _relay(self, source: IO[bytes], sink: IO[bytes] | None) -> None:
        """Forward vspipe's output to the encoder (or nowhere), noting the first FRAME."""
        window = b""
        while chunk := os.read(source.fileno(), READ_BYTES):
            if self.result.first_frame_s is None:
                window = window[-len(FRAME_MARK) :] + chunk
                if FRAME_MARK in window:
                    self.result.first_frame_s = time.monotonic() - self._started
            if sink is not None:
                try:
                    sink.write(chunk)
                except BrokenPipeError:  # encoder died: keep draining so vspipe can finish
                    sink = None
        source.close()
        if sink is not None:
            with contextlib.suppress(BrokenPipeError):
                sink.close()

    def _reap(self, vspipe: subprocess.Popen[bytes]) -> None:
        """Wait for vspipe with wait4 to get its own CPU time."""
        _, status, usage = os.wait4(vspipe.pid, 0)
        self._vspipe_done = time.monotonic()
        # Tell Popen the child is reaped, or it would try to wait for it again.
        vspipe.returncode = self.result.returncode = os.waitstatus_to_exitcode(status)
        self.result.cpu_s = usage.ru_utime + usage.ru_stime

    def join(self, deadline: float | None) -> bool:
        """Wait until everything finished or `deadline` (monotonic); False when it did not."""
        for thread in self._threads:
            thread.join(_remaining(deadline))
        if any(thread.is_alive() for thread in self._threads):
            return False
        if self._encoder is not None:
            try:
                self._encoder.wait(_remaining(deadline))
            except subprocess.TimeoutExpired:
                return False
        self.result.wall_s = time.monotonic() - self._started
        return True

    def kill(self) -> None:
        """Kill vspipe and the encoder (used on timeout)."""
        # Popen.kill signals only a child not yet reaped, so a reused pid is never hit.
        for process in (self._vspipe, self._encoder):
            if process is not None:
                process.kill()


def read_report(report_dir: Path) -> list[str]:
    """Return the kinds of warm-up report in `report_dir` (``compiled``, ``waited``, ...).

    One per ``warm_up``/``begin`` call: a file ``<kind>-<pid>`` holds one key per line.
    """
    if not report_dir.is_dir():
        return []
    kinds = []
    for path in sorted(report_dir.iterdir()):
        kind, _, pid = path.name.rpartition("-")
        if pid.isdigit() and kind != PHASES_KIND:
            kinds.extend([kind] * len(path.read_text().splitlines()))
    return kinds


def read_phases(report_dir: Path, started_epoch: float) -> dict[str, float]:
    """Return ``{phase: seconds from the worker's start}``, the latest mark of each phase.

    ``phases-<pid>`` files hold ``<phase> <time.time()>`` lines (``warmup.record_phase``).
    """
    phases: dict[str, float] = {}
    for path in sorted(report_dir.glob(f"{PHASES_KIND}-*")) if report_dir.is_dir() else []:
        for line in path.read_text().splitlines():
            name, _, stamp = line.partition(" ")
            with contextlib.suppress(ValueError):
                phases[name] = max(phases.get(name, 0.0), float(stamp) - started_epoch)
    return phases


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
    logs = [(work / f"stderr-{w.result.index}.txt").open("wb") for w in workers]
    started = time.monotonic()
    # One report folder per worker, so that whatever process vspipe runs the script in (a
    # wrapper's child, say) its report is attributed to the right worker.
    envs = [env | {REPORT_ENV: str(work / f"report-{w.result.index}")} for w in workers]
    for worker, worker_env, log in zip(workers, envs, logs, strict=True):
        worker.start(worker_env, log)
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    for worker in workers:
        if not worker.join(deadline):
            worker.kill()
            worker.join(time.monotonic() + 5)
    wall_s = time.monotonic() - started
    for log in logs:
        log.close()
    return _finish_results(workers, work), wall_s


def _finish_results(workers: list[Worker], work: Path) -> list[WorkerResult]:
    """Attach the queue reports and, for failed workers, the end of their stderr."""
    results = [w.result for w in workers]
    for worker, result in zip(workers, results, strict=True):
        result.queue = read_report(work / f"report-{result.index}")
        result.phases = read_phases(work / f"report-{result.index}", worker.started_epoch)
        if result.returncode != 0:
            text = (work / f"stderr-{result.index}.txt").read_text(errors="replace")
            result.stderr_tail = "\n".join(text.splitlines()[-10:])
    return results


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
