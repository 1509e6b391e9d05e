"""Which GPU a process runs on when the user named none: spread a fleet over the devices.

Av1an starts its workers within milliseconds, each a process of its own with the same script.
On a host with several GPUs, each should land on a device by itself rather than all on device 0.
:func:`device_for_process` picks the visible device that the fewest live avdenoise processes
have claimed, ties broken by the most free memory (when NVML can say) and then by the lowest
index, and claims it under a lock so that processes starting together spread evenly.

A claim is an empty file ``<pid>-<device>.claim`` in the folder ``placement/`` inside CuPy's kernel
cache directory (``_warmup/cache.py``'s ``cache_dir``), the folder a fleet already shares for the
warm-up queue. It is removed at exit; one left behind by a killed process is stale once its pid is
dead, and is ignored and removed by the next process that looks. The folder, its lock and its claims
go through ``_safefiles``: a link planted there is never followed.

The choice is made in the early context's thread (``_cuda/context.py``), after its ``cuInit`` and
before its context, while the main thread imports CuPy; through the driver API by ctypes:
devices are the driver's ordinals, which follow ``CUDA_VISIBLE_DEVICES`` as CuPy's do. NVML
numbers devices physically, so free memory is matched to an ordinal by PCI bus id, never by
index.

Nothing here raises: a read-only cache directory, no driver, no NVML or a lock held too long
gives device 0, with a debug log: a render never fails for want of a placement.
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from avdenoise_vs._safefiles import discard, locked, remove_at_exit, subfolder, write_file

__all__ = [
    "Candidate", "choose", "claim_device", "count_claims", "device_for_process", "pid_alive",
]  # fmt: skip

logger = logging.getLogger(__name__)

#: Longest wait for the placement lock: a process starting behind 31 others should still be
#: on its way in well under a second; past this, device 0 is a better bet than waiting.
LOCK_TIMEOUT_S = 2.0
FOLDER = "placement"
_CLAIM = re.compile(r"(\d+)-(\d+)\.claim")
_NVML_SUCCESS = 0

# The device this process chose, and the pid it chose it in: a forked child has a pid of its
# own and no claim, so it chooses again.
_chosen: tuple[int, int] | None = None
_chosen_lock = threading.Lock()


@dataclass(frozen=True)
class Candidate:
    """One visible device as the choice sees it.

    Attributes
    ----------
    index : int
        The driver's ordinal (after ``CUDA_VISIBLE_DEVICES``).
    claims : int
        Live claims of other processes on it.
    free_bytes : int or None
        Free device memory, None when it could not be read.
    """

    index: int
    claims: int
    free_bytes: int | None = None


def choose(candidates: Sequence[Candidate]) -> int:
    """The device to claim: fewest claims, then most free memory, then lowest index.

    Free memory counts only when it is known for every candidate: comparing a known amount
    with an unknown one would favour whichever device NVML happened to answer for.

    Raises
    ------
    ValueError
        For no candidates.
    """
    if not candidates:
        raise ValueError("no device to choose from")
    by_memory = all(c.free_bytes is not None for c in candidates)
    return min(
        candidates,
        key=lambda c: (c.claims, -(c.free_bytes or 0) if by_memory else 0, c.index),
    ).index


def device_for_process(requested: int | None) -> int:
    """The device this process runs on: `requested` as given, else the one placement picks.

    The first call without an index chooses and claims; later calls return the same device for
    the life of the process. One visible device gives 0 without touching any file.
    """
    if requested is not None:
        return requested  # the backend checks it against the devices CuPy sees
    global _chosen
    with _chosen_lock:
        if _chosen is not None and _chosen[0] == os.getpid():
            return _chosen[1]
        try:
            device = _place()
        except Exception as error:  # nothing about placement may fail a render
            logger.debug("avdenoise: placement failed, using device 0: %s", error)
            device = 0
        _chosen = (os.getpid(), device)
        return device


def _place() -> int:
    """Choose and claim a device, or 0 when there is nothing to choose."""
    from avdenoise_vs._warmup.cache import cache_dir, cupy_installed

    # Without CuPy the backend cannot start: a claim would only skew the others' choice.
    if not cupy_installed():
        return 0
    count = visible_count()
    if count <= 1:
        return 0
    directory = cache_dir()
    if directory is None:
        logger.debug("avdenoise: placement off: CuPy's kernel cache is not a directory")
        return 0
    return claim_device(directory / FOLDER, count, free_memory(count))


def claim_device(
    folder: Path, count: int, free: Sequence[int | None] | None = None, pid: int | None = None
) -> int:
    """Choose among `count` devices under `folder`'s lock, claim the choice, return it.

    The claim is removed when the process exits. Raises what the folder or the lock raise
    (OSError, TimeoutError); :func:`device_for_process` turns that into device 0.
    """
    pid = os.getpid() if pid is None else pid
    free = list(free) if free is not None else [None] * count
    # Free memory was read before the lock: NVML calls under it would queue the whole fleet.
    with subfolder(folder) as fd, locked("placement.lock", LOCK_TIMEOUT_S, dir_fd=fd):
        claims = _count(fd, pid)
        candidates = [Candidate(i, claims.get(i, 0), free[i]) for i in range(count)]
        device = choose(candidates)
        claim = f"{pid}-{device}.claim"
        write_file(claim, b"", dir_fd=fd)
    remove_at_exit(folder, claim)
    logger.debug("avdenoise: placed on device %d of %d (claims %s)", device, count, claims)
    return device


def count_claims(folder: Path, own_pid: int) -> dict[int, int]:
    """Live claims by device in `folder`, other than `own_pid`'s; stale ones are removed."""
    with subfolder(folder, create=False) as fd:
        return _count(fd, own_pid)


def _count(fd: int, own_pid: int) -> dict[int, int]:
    """`count_claims` in the open folder `fd`."""
    counts: dict[int, int] = {}
    for entry in list(os.scandir(fd)):
        match = _CLAIM.fullmatch(entry.name)
        # Only regular files are claims: a link under such a name was planted.
        if match is None or not entry.is_file(follow_symlinks=False):
            continue
        pid, device = int(match.group(1)), int(match.group(2))
        if pid == own_pid:
            continue
        if not pid_alive(pid):
            discard(entry.name, dir_fd=fd)
            continue
        counts[device] = counts.get(device, 0) + 1
    return counts


def pid_alive(pid: int) -> bool:
    """Whether a process `pid` exists (another user's counts: it may be a fleet's too)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def visible_count() -> int:
    """Devices the driver shows this process (after ``CUDA_VISIBLE_DEVICES``).

    A variable naming at most one device answers without loading the driver: there is
    nothing to choose. Otherwise the driver counts them (in the early context's thread its
    ``cuInit`` has run already, and returns at once here).
    """
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        entries = [part for part in visible.split(",") if part.strip()]
        if len(entries) <= 1:
            return len(entries)
    return _driver_count()


def _driver_count() -> int:
    """``cuDeviceGetCount`` through ctypes; raises OSError or RuntimeError when it cannot."""
    driver = ctypes.CDLL("libcuda.so.1")
    count = ctypes.c_int()
    status = driver.cuInit(0) or driver.cuDeviceGetCount(ctypes.byref(count))
    if status:
        raise RuntimeError(f"CUDA driver error {status}")
    return count.value


class _NvmlMemory(ctypes.Structure):
    _fields_ = [
        ("total", ctypes.c_ulonglong),
        ("free", ctypes.c_ulonglong),
        ("used", ctypes.c_ulonglong),
    ]


def free_memory(count: int) -> list[int | None]:
    """Free memory of the driver's devices ``0..count-1``, None where it cannot be read."""
    try:
        driver = ctypes.CDLL("libcuda.so.1")
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        if nvml.nvmlInit_v2() != _NVML_SUCCESS:
            return [None] * count
    except (OSError, AttributeError) as error:
        logger.debug("avdenoise: placement without free memory: %s", error)
        return [None] * count
    try:
        return [_free_bytes(driver, nvml, ordinal) for ordinal in range(count)]
    finally:
        nvml.nvmlShutdown()


def _free_bytes(driver, nvml, ordinal: int) -> int | None:
    """One device's free memory: its PCI bus id from the driver, then NVML by that id."""
    device = ctypes.c_int()
    bus_id = ctypes.create_string_buffer(32)
    if driver.cuDeviceGet(ctypes.byref(device), ordinal) or driver.cuDeviceGetPCIBusId(
        bus_id, len(bus_id), device
    ):
        return None
    handle = ctypes.c_void_p()
    memory = _NvmlMemory()
    if nvml.nvmlDeviceGetHandleByPciBusId_v2(bus_id, ctypes.byref(handle)) != _NVML_SUCCESS:
        return None
    if nvml.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(memory)) != _NVML_SUCCESS:
        return None
    return int(memory.free)
