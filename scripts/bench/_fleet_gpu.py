"""GPU side of ``bench_fleet.py``: per-process memory and how busy the GPU is, sampled with
nvidia-smi, and CUDA MPS.

Memory is read from ``nvidia-smi --query-compute-apps`` about every 100 ms in a background
thread while a fleet runs, and the peak of each process is matched to the workers' pids. In
a container without the host's pid namespace nvidia-smi may list pids that match no worker;
the summary then falls back to the peak of all processes together divided by the workers.
Across several GPUs (``per_gpu``) each sample also carries the GPU's PCI bus id, and the summary
adds each GPU's peak total and the workers seen on it.

How busy the GPU is comes from one ``nvidia-smi --query-gpu=utilization.gpu,clocks.sm,power.draw
-lms 100`` that runs as long as the fleet (:class:`BusySampler`): the share of each sample
period in which a kernel ran, on every GPU. Its summary is the median of the samples above
zero: a fleet's workers start with the GPU idle, so the median of the busy samples tells a
fleet whose frames wait for the GPU (over 90 %) from one that waits for its CPU. The SM clock
and the board's power over the same busy samples tell a GPU that runs slower under a fleet's
load (at its power limit) from one whose kernels take longer at full clock.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

__all__ = [
    "BusySampler",
    "GpuSampler",
    "busy_summary",
    "parse_busy_line",
    "gpu_name",
    "memory_summary",
    "mps_daemon",
    "parse_compute_apps",
    "parse_compute_apps_by_gpu",
]

QUERY = ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]
QUERY_PER_GPU = [
    "nvidia-smi",
    "--query-compute-apps=pid,used_memory,gpu_bus_id",
    "--format=csv,noheader,nounits",
]
BUSY_QUERY = [
    "nvidia-smi",
    "--query-gpu=utilization.gpu,clocks.sm,power.draw",
    "--format=csv,noheader,nounits",
    "-lms",
    "100",
]
INTERVAL_S = 0.1
QUERY_TIMEOUT_S = 5.0
MPS_TIMEOUT_S = 30.0


def parse_compute_apps(text: str) -> dict[int, int]:
    """``{pid: MiB}`` from nvidia-smi's ``pid, used_memory`` CSV lines.

    Lines whose memory is not a number (``[N/A]``, ``[Not Supported]``: MIG, some drivers)
    are left out; a pid listed on several GPUs gets the sum.
    """
    usage: dict[int, int] = {}
    for line in text.splitlines():
        pid, _, memory = (part.strip() for part in line.partition(","))
        if pid.isdigit() and memory.isdigit():
            usage[int(pid)] = usage.get(int(pid), 0) + int(memory)
    return usage


def parse_compute_apps_by_gpu(text: str) -> dict[str, dict[int, int]]:
    """``{bus id: {pid: MiB}}`` from ``pid, used_memory, gpu_bus_id`` lines (as
    :func:`parse_compute_apps`, one mapping a GPU)."""
    usage: dict[str, dict[int, int]] = {}
    for line in text.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit() and parts[2]:
            on_gpu = usage.setdefault(parts[2], {})
            on_gpu[int(parts[0])] = on_gpu.get(int(parts[0]), 0) + int(parts[1])
    return usage


def memory_summary(
    peaks: dict[int, int], peak_total: int, samples: int, pids: Sequence[int], reason: str | None
) -> dict[str, object]:
    """Per-worker GPU memory from the sampled peaks.

    Returns ``method`` ``"pid"`` (each worker's own peak, ``per_worker_mib`` None where a
    worker was never seen), ``"total"`` (no pid matched: the peak of all processes over the
    workers, an estimate) or None with a ``reason``; ``max_mib`` and ``mean_mib`` summarise.
    """
    summary: dict[str, object] = {"samples": samples, "peak_total_mib": peak_total}
    own = [peaks.get(pid) for pid in pids]
    seen = [mib for mib in own if mib is not None]
    if seen:
        mean = sum(seen) / len(seen)
        return summary | {
            "method": "pid",
            "per_worker_mib": own,
            "max_mib": max(seen),
            "mean_mib": round(mean, 1),
        }
    if peak_total > 0 and pids:
        share = round(peak_total / len(pids), 1)
        return summary | {
            "method": "total",
            "per_worker_mib": None,
            "max_mib": share,
            "mean_mib": share,
        }
    if reason is None:
        reason = "no GPU process seen" if samples else "no sample taken"
    return summary | {"method": None, "max_mib": None, "mean_mib": None, "reason": reason}


class GpuSampler:
    """Peak GPU memory of every process nvidia-smi lists, sampled while in the ``with`` block."""

    def __init__(
        self,
        interval_s: float = INTERVAL_S,
        command: Sequence[str] | None = None,
        *,
        per_gpu: bool = False,
    ) -> None:
        self._interval_s = interval_s
        self._per_gpu = per_gpu
        self._command = list(command or (QUERY_PER_GPU if per_gpu else QUERY))
        self.gpu_peaks: dict[str, int] = {}  # per_gpu: bus id -> peak total MiB
        self.gpu_pids: dict[str, set[int]] = {}  # per_gpu: bus id -> pids seen there
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.peaks: dict[int, int] = {}
        self.peak_total = 0
        self.samples = 0
        self.reason = None if shutil.which(self._command[0]) else f"{self._command[0]} not found"

    def __enter__(self) -> GpuSampler:
        if self.reason is None:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(QUERY_TIMEOUT_S + 1)

    def _run(self) -> None:
        """Sample until stopped; a failing query stops sampling and says why."""
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                done = subprocess.run(
                    self._command, capture_output=True, text=True, timeout=QUERY_TIMEOUT_S
                )
            except (OSError, subprocess.TimeoutExpired) as error:
                self.reason = f"nvidia-smi: {error}"
                return
            if done.returncode != 0:
                self.reason = f"nvidia-smi exit {done.returncode}: {done.stdout.strip()[:120]}"
                return
            if self._per_gpu:
                self._note_gpus(parse_compute_apps_by_gpu(done.stdout))
            usage = (
                _pids_over_gpus(done.stdout) if self._per_gpu else parse_compute_apps(done.stdout)
            )
            for pid, mib in usage.items():
                self.peaks[pid] = max(self.peaks.get(pid, 0), mib)
            self.peak_total = max(self.peak_total, sum(usage.values()))
            self.samples += 1
            self._stop.wait(max(0.0, self._interval_s - (time.monotonic() - started)))

    def _note_gpus(self, by_gpu: dict[str, dict[int, int]]) -> None:
        for bus_id, usage in by_gpu.items():
            self.gpu_peaks[bus_id] = max(self.gpu_peaks.get(bus_id, 0), sum(usage.values()))
            self.gpu_pids.setdefault(bus_id, set()).update(usage)

    def summary(self, pids: Sequence[int]) -> dict[str, object]:
        """:func:`memory_summary` of what was sampled, for the workers `pids`; per GPU also
        ``per_gpu_peak_mib`` and ``per_gpu_workers`` (workers among `pids` seen on each)."""
        summary = memory_summary(self.peaks, self.peak_total, self.samples, pids, self.reason)
        if not self._per_gpu:
            return summary
        wanted = set(pids)
        return summary | {
            "per_gpu_peak_mib": dict(sorted(self.gpu_peaks.items())),
            "per_gpu_workers": {
                bus_id: len(seen & wanted) for bus_id, seen in sorted(self.gpu_pids.items())
            },
        }


def parse_busy_line(line: str) -> tuple[int, float | None, float | None] | None:
    """``(busy %, SM MHz, watts)`` from one line of :data:`BUSY_QUERY`'s output, None for a
    line without a busy share; a clock or power nvidia-smi does not report (``[N/A]``) is
    None."""
    parts = [part.strip() for part in line.split(",")]
    if not parts[0].isdigit():
        return None

    def number(index: int) -> float | None:
        try:
            return float(parts[index])
        except (IndexError, ValueError):
            return None

    return int(parts[0]), number(1), number(2)


def busy_summary(
    samples: Sequence[int],
    reason: str | None = None,
    clocks: Sequence[tuple[float | None, float | None]] = (),
) -> dict[str, object]:
    """How busy the GPU was: ``busy_pct`` the median of the `samples` (percent) above zero,
    ``samples`` and ``busy_samples`` their counts; ``busy_pct`` None, with a ``reason``, when
    no sample was above zero. `clocks`, when given, holds each sample's ``(SM MHz, watts)``:
    ``sm_mhz`` and ``power_w`` are their medians over the busy samples."""
    busy = sorted(value for value in samples if value > 0)
    summary: dict[str, object] = {"samples": len(samples), "busy_samples": len(busy)}
    if not busy:
        return summary | {"busy_pct": None, "reason": reason or "no busy sample"}
    summary["busy_pct"] = float(statistics.median(busy))
    if clocks:
        under_load = [pair for value, pair in zip(samples, clocks, strict=True) if value > 0]
        for key, index in (("sm_mhz", 0), ("power_w", 1)):
            values = [pair[index] for pair in under_load if pair[index] is not None]
            summary[key] = float(statistics.median(values)) if values else None
    return summary


class BusySampler:
    """GPU utilisation samples from one nvidia-smi that runs while in the ``with`` block."""

    def __init__(self, command: Sequence[str] | None = None) -> None:
        self._command = list(command or BUSY_QUERY)
        self.samples: list[int] = []
        self.clocks: list[tuple[float | None, float | None]] = []  # (SM MHz, W) a sample
        self._process: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None
        self.reason = None if shutil.which(self._command[0]) else f"{self._command[0]} not found"

    def __enter__(self) -> BusySampler:
        if self.reason is None:
            try:
                self._process = subprocess.Popen(
                    self._command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
                )
            except OSError as error:
                self.reason = f"nvidia-smi: {error}"
                return self
            self._thread = threading.Thread(target=self._read, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(QUERY_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._thread is not None:
            self._thread.join(QUERY_TIMEOUT_S)
        if self._process is not None:
            self._process.stdout.close()  # type: ignore[union-attr]

    def _read(self) -> None:
        for line in self._process.stdout:  # type: ignore[union-attr]
            sample = parse_busy_line(line)
            if sample is not None:
                self.clocks.append(sample[1:])
                self.samples.append(sample[0])

    def summary(self) -> dict[str, object]:
        """:func:`busy_summary` of what was sampled."""
        return busy_summary(self.samples, self.reason, self.clocks)


def _pids_over_gpus(text: str) -> dict[int, int]:
    """``{pid: MiB}`` summed over the GPUs of a per-GPU sample."""
    usage: dict[int, int] = {}
    for on_gpu in parse_compute_apps_by_gpu(text).values():
        for pid, mib in on_gpu.items():
            usage[pid] = usage.get(pid, 0) + mib
    return usage


def gpu_name() -> str:
    """The GPU as nvidia-smi names it, or ``"no GPU"``."""
    try:
        query = ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]
        done = subprocess.run(query, capture_output=True, text=True, timeout=QUERY_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return "no GPU"
    return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout else "no GPU"


@contextlib.contextmanager
def mps_daemon(work: Path) -> Iterator[dict[str, str]]:
    """Run a CUDA MPS control daemon for the block; yield the variables its clients need.

    Its pipe and log folders are under `work`, so that it neither needs root's default
    folders nor meets another daemon. It is told to quit on the way out, whatever happened.
    """
    control = shutil.which("nvidia-cuda-mps-control")
    if control is None:
        raise RuntimeError("--mps: nvidia-cuda-mps-control not found")
    env = {
        "CUDA_MPS_PIPE_DIRECTORY": str(work / "mps-pipe"),
        "CUDA_MPS_LOG_DIRECTORY": str(work / "mps-log"),
    }
    for folder in env.values():
        Path(folder).mkdir(parents=True, exist_ok=True)
    full = os.environ | env
    started = subprocess.run(
        [control, "-d"], env=full, capture_output=True, text=True, timeout=MPS_TIMEOUT_S
    )
    if started.returncode != 0:
        message = (started.stderr or started.stdout).strip()[:200]
        raise RuntimeError(f"--mps: nvidia-cuda-mps-control -d failed: {message}")
    try:
        yield env
    finally:
        try:
            subprocess.run(
                [control],
                input="quit\n",
                text=True,
                env=full,
                capture_output=True,
                timeout=MPS_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            print("bench_fleet: the MPS daemon did not answer 'quit'", file=sys.stderr)
