"""The worker launcher that ``fleet.py`` and ``bench_fleet.py`` share: N vspipe processes at once.

Each worker is one ``vspipe`` on a contiguous chunk of frames, in its own process group (with
its encoder, if any), so that a fleet that runs past its deadline is killed whole: a wrapper
``vspipe`` and the binary it starts, or an encoder, cannot outlive it. Per worker it records
the time to the first frame on the pipe, the wall time to its exit, the CPU seconds of vspipe
and the frames vspipe reports having written.

Each worker gets a report folder of its own (``worker_env``): the warm-up queue's report
(``AVDENOISE_WARMUP_REPORT``), read by ``read_report``, and the start-up phases that
``_phase_hooks/sitecustomize.py`` marks from outside the package, read by ``read_phases``.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

__all__ = [
    "COMPILING_KINDS",
    "REPORT_ENV",
    "Worker",
    "WorkerResult",
    "encoder_command",
    "find_vspipe",
    "launch",
    "attach_reports",
    "read_phases",
    "read_report",
    "split_frames",
    "worker_env",
]

READ_BYTES = 1 << 20
PIPE_BYTES = 1 << 20
"""Pipe capacity asked for (Linux's pipe-max-size for an unprivileged process by default)."""
FRAME_MARK = b"FRAME"
REPORT_ENV = "AVDENOISE_WARMUP_REPORT"
COMPILING_KINDS = ("compiled", "self")
PHASES_KIND = "phases"
PHASES_ENV = "AVDENOISE_BENCH_PHASES"
PHASE_HOOKS = Path(__file__).resolve().parent / "_phase_hooks"
"""The folder whose ``sitecustomize.py`` marks the phases (``PHASES_ENV`` names where)."""
KILL_GRACE_S = 5.0
"""How long a killed worker's threads get to notice that its pipes closed."""
_VSPIPE_DONE = re.compile(r"Output (\d+) frames in ([\d.]+) seconds")


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


@dataclass
class WorkerResult:
    """What one worker did; times in seconds from its own start.

    ``frames_out`` is the count vspipe prints when it finishes (None when it did not say);
    ``timed_out`` is set when the fleet's deadline passed before the worker ended.
    """

    index: int
    first: int
    last: int
    pid: int = 0
    first_frame_s: float | None = None
    wall_s: float = 0.0
    cpu_s: float = 0.0
    returncode: int | None = None
    frames_out: int | None = None
    bytes_out: int = 0
    timed_out: bool = False
    queue: list[str] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    stderr_tail: str = ""

    @property
    def compiled(self) -> bool:
        """Whether this worker compiled kernels, under the queue's lock or after giving up."""
        return any(kind in COMPILING_KINDS for kind in self.queue)


def _write(sink: IO[bytes] | None, chunk: bytes) -> IO[bytes] | None:
    """Write `chunk` to `sink`; None (drop the rest) once the encoder has gone."""
    if sink is not None:
        try:
            sink.write(chunk)
        except BrokenPipeError:  # encoder died: keep draining so vspipe can finish
            return None
    return sink


def _remaining(deadline: float | None) -> float | None:
    """Seconds left until `deadline` (monotonic), or None for no deadline."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


class Worker:
    """One vspipe process, its optional encoder, a relay thread and a reaper thread.

    `y4m` says how to spot the first frame: the first ``FRAME`` header, or (raw output, which
    has no header) the first byte.
    """

    def __init__(
        self,
        result: WorkerResult,
        command: list[str],
        encoder: list[str] | None,
        *,
        y4m: bool = True,
    ) -> None:
        self.result = result
        self._command = command
        self._encoder_command = encoder
        self._mark = FRAME_MARK if y4m else b""
        self._threads: list[threading.Thread] = []
        self._vspipe: subprocess.Popen[bytes] | None = None
        self._encoder: subprocess.Popen[bytes] | None = None
        self._started = 0.0
        self.started_epoch = 0.0  # time.time() at the start, to place the worker's phases
        self._ended = 0.0  # monotonic time of the last of vspipe's exit and its pipe's end

    def start(self, env: dict[str, str], stderr: IO[bytes]) -> None:
        """Start vspipe (and the encoder) and the threads that watch them."""
        self._started = time.monotonic()
        self.started_epoch = time.time()
        # A group of its own (the encoder joins it), so that kill() reaches whatever it runs.
        self._vspipe = vspipe = subprocess.Popen(
            self._command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            process_group=0,
        )
        self.result.pid = vspipe.pid
        if self._encoder_command is not None:
            self._encoder = subprocess.Popen(
                self._encoder_command,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                process_group=vspipe.pid,
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
        """Forward vspipe's output to the encoder (or nowhere), noting the first frame.

        Once the first frame is seen the rest is spliced in the kernel: read into Python, a
        fleet's pipes carry several GB/s (1080p float at BM3D's rates), which held two
        workers' source alone to a twentieth of vspipe's rate to /dev/null.
        """
        fd = source.fileno()
        with contextlib.suppress(OSError):  # fewer, larger writes; the default is 64 KiB
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        window = b""
        while self.result.first_frame_s is None and (chunk := os.read(fd, READ_BYTES)):
            self.result.bytes_out += len(chunk)
            window = window[-len(FRAME_MARK) :] + chunk
            if self._mark in window:
                self.result.first_frame_s = time.monotonic() - self._started
            sink = _write(sink, chunk)
        if self.result.first_frame_s is not None:
            sink = self._drain(fd, sink)
        self._ended = max(self._ended, time.monotonic())
        source.close()
        if sink is not None:
            with contextlib.suppress(BrokenPipeError):
                sink.close()

    def _drain(self, fd: int, sink: IO[bytes] | None) -> IO[bytes] | None:
        """Move the rest of the output into `sink` (or /dev/null) until vspipe closes it."""
        if sink is not None:
            try:
                sink.flush()  # what Python buffered goes first
            except BrokenPipeError:
                sink = None
        with open(os.devnull, "wb") as null:
            while True:
                target = null if sink is None else sink
                try:
                    moved = os.splice(fd, target.fileno(), PIPE_BYTES)
                except BrokenPipeError:  # encoder died: keep draining so vspipe can finish
                    sink = None
                    continue
                except OSError:  # no splice here: copy through Python
                    while chunk := os.read(fd, READ_BYTES):
                        self.result.bytes_out += len(chunk)
                        sink = _write(sink, chunk)
                    return sink
                if moved == 0:
                    return sink
                self.result.bytes_out += moved

    def _reap(self, vspipe: subprocess.Popen[bytes]) -> None:
        """Wait for vspipe with wait4 to get its own CPU time."""
        _, status, usage = os.wait4(vspipe.pid, 0)
        self._ended = max(self._ended, time.monotonic())
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
            self._ended = max(self._ended, time.monotonic())
        self.result.wall_s = self._ended - self._started
        return True

    def kill(self) -> None:
        """SIGKILL the worker's process group: vspipe, what it started and the encoder."""
        if self._vspipe is None:
            return
        # The group keeps vspipe's pid as its id while any member lives, so the id cannot
        # have been reused for another group; with no member left there is nothing to hit.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._vspipe.pid, signal.SIGKILL)


def _parse_stderr(result: WorkerResult, text: str) -> None:
    """Take vspipe's frame count from its last line and keep the end of a failure's stderr."""
    found = _VSPIPE_DONE.findall(text)
    if found:
        result.frames_out = int(found[-1][0])
    if result.returncode != 0:
        result.stderr_tail = "\n".join(text.splitlines()[-10:])


def launch(
    workers: list[Worker],
    envs: list[dict[str, str]],
    work: Path,
    timeout: float | None,
) -> float:
    """Start every worker at once, wait for all; return the wall time to the last exit.

    Workers still running `timeout` seconds after the launch are killed with their process
    group and marked ``timed_out``; so is every worker when this is interrupted. Each worker's
    stderr goes to ``work/stderr-<index>.txt``, from which its frame count is read.
    """
    logs = [(work / f"stderr-{w.result.index}.txt").open("wb") for w in workers]
    started = time.monotonic()
    deadline = None if timeout is None else started + timeout
    try:
        for worker, env, log in zip(workers, envs, logs, strict=True):
            worker.start(env, log)
        for worker in workers:
            if not worker.join(deadline):
                worker.result.timed_out = True
                worker.kill()
                worker.join(time.monotonic() + KILL_GRACE_S)
    except BaseException:
        for worker in workers:
            worker.kill()
        raise
    finally:
        for log in logs:
            log.close()
    wall_s = time.monotonic() - started
    for worker in workers:
        text = (work / f"stderr-{worker.result.index}.txt").read_text(errors="replace")
        _parse_stderr(worker.result, text)
    return wall_s


def worker_env(env: dict[str, str], report_dir: Path) -> dict[str, str]:
    """`env` for a worker whose queue report and phase marks go to `report_dir`."""
    path = os.pathsep.join(filter(None, [str(PHASE_HOOKS), env.get("PYTHONPATH")]))
    return env | {REPORT_ENV: str(report_dir), PHASES_ENV: str(report_dir), "PYTHONPATH": path}


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


def attach_reports(workers: list[Worker], work: Path) -> list[WorkerResult]:
    """Attach what the warm-up queue did for each worker and when its filter reached its
    start-up steps (the folders ``work/report-<index>``); returns the results."""
    for worker in workers:
        report = work / f"report-{worker.result.index}"
        worker.result.queue = read_report(report)
        worker.result.phases = read_phases(report, worker.started_epoch)
    return [w.result for w in workers]


def read_phases(report_dir: Path, started_epoch: float) -> dict[str, float]:
    """Return ``{phase: seconds from the worker's start}``, the latest mark of each phase.

    ``phases-<pid>`` files hold ``<phase> <time.time()>`` lines (``_phase_hooks/``).
    """
    phases: dict[str, float] = {}
    for path in sorted(report_dir.glob(f"{PHASES_KIND}-*")) if report_dir.is_dir() else []:
        for line in path.read_text().splitlines():
            name, _, stamp = line.partition(" ")
            with contextlib.suppress(ValueError):
                phases[name] = max(phases.get(name, 0.0), float(stamp) - started_epoch)
    return phases
