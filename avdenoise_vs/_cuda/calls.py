"""The CUDA calls made for every frame that only queue work: launches, event bookkeeping,
copies between the device and page-locked staging buffers, and V-BM3D's zeroing of
accumulators.

CuPy releases the GIL around every CUDA call. With 16 VapourSynth threads in one process each
release costs a wait to get the GIL back, often longer than the call (docs/BENCHMARKS.md,
"Measurements behind design choices"), while a launch, an event record or a stream wait only
queues work and returns in microseconds. :class:`HeldCalls` makes them through ``ctypes.PyDLL``,
which keeps the GIL, straight into the driver (``libcuda``, which CuPy itself needs);
CuPy's handles are the driver's (``cudaStream_t`` is ``CUstream``, and so on). Copies from
pageable memory, which take the driver hundreds of microseconds, still go through CuPy and
release the GIL.

Measured on the H200 (16 threads, vspipe, docs/BENCHMARKS.md): NLM at 1080p 8-bit luma, spatial
BM3D and V-BM3D with three workspaces run faster with the GIL kept (V-BM3D radius 1, YUV444,
two stages: 146 fps against 110, with CuPy's calls).
"""

from __future__ import annotations

import ctypes
import functools
import logging

import numpy as np

from avdenoise_vs._errors import BackendUnavailable, CudaError

__all__ = ["KernelArgs", "cuda_calls", "set_sync_mode"]

logger = logging.getLogger(__name__)


class KernelArgs:
    """One argument record of a kernel that takes a single struct, and the pointer array that
    ``cuLaunchKernel`` wants (``kernelParams``: one pointer to each parameter)."""

    __slots__ = ("record", "pointers", "address")

    def __init__(self, record: np.ndarray) -> None:
        self.record = record  # kept alive: the pointer array points into it
        self.pointers = (ctypes.c_void_p * 1)(record.ctypes.data)
        self.address = ctypes.addressof(self.pointers)


class HeldCalls:
    """Launch, event record and stream wait through the driver, the GIL kept."""

    def __init__(self) -> None:
        driver = ctypes.PyDLL("libcuda.so.1")  # PyDLL: the GIL is not released
        u32, ptr = ctypes.c_uint, ctypes.c_void_p
        self._launch = _bind(driver.cuLaunchKernel, [ptr, *[u32] * 7, ptr, ptr, ptr])
        self._record = _bind(driver.cuEventRecord, [ptr, ptr])
        self._wait = _bind(driver.cuStreamWaitEvent, [ptr, ptr, u32])
        self._memset = _bind(driver.cuMemsetD8Async, [ptr, ctypes.c_ubyte, ctypes.c_size_t, ptr])
        self._event_create = _bind(driver.cuEventCreate, [ctypes.POINTER(ptr), u32])
        size = ctypes.c_size_t
        # _v2: the entry points with 64-bit device pointers (cuda.h maps the plain names there)
        self._to_device = _bind(driver.cuMemcpyHtoDAsync_v2, [ptr, ptr, size, ptr])
        self._to_host = _bind(driver.cuMemcpyDtoHAsync_v2, [ptr, ptr, size, ptr])
        self._query = _bind(driver.cuStreamQuery, [ptr])
        self._event_query = _bind(driver.cuEventQuery, [ptr])
        self._error_name = driver.cuGetErrorName
        self._error_name.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        #: ``cuStreamSynchronize``'s address, for the bridge to wait without the GIL
        #: (``CUresult (*)(CUstream)``, the bridge's ``int (*)(void *)``).
        self.synchronize_address = ctypes.cast(driver.cuStreamSynchronize, ctypes.c_void_p).value

    def launch(self, function: int, grid, block, shared: int, stream: int, args) -> None:
        """Queue `function` (a ``CUfunction``) with `args` (:class:`KernelArgs`)."""
        gx, gy, gz = grid
        bx, by, bz = block
        status = self._launch(function, gx, gy, gz, bx, by, bz, shared, stream, args.address, None)
        if status:
            self._fail("cuLaunchKernel", status)

    def eventRecord(self, event: int, stream: int) -> None:
        """Record `event` on `stream`."""
        status = self._record(event, stream)
        if status:
            self._fail("cuEventRecord", status)

    def streamWaitEvent(self, stream: int, event: int, flags: int = 0) -> None:
        """Make `stream` wait for `event`."""
        status = self._wait(stream, event, flags)
        if status:
            self._fail("cuStreamWaitEvent", status)

    def memset(self, address: int, nbytes: int, stream: int) -> None:
        """Queue zeroing `nbytes` of device memory at `address` on `stream`."""
        status = self._memset(address, 0, nbytes, stream)
        if status:
            self._fail("cuMemsetD8Async", status)

    def copy_to_device(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        """Queue a copy from page-locked host memory (only: from pageable memory the driver
        would copy synchronously, the GIL held) to the device."""
        status = self._to_device(dst, src, nbytes, stream)
        if status:
            self._fail("cuMemcpyHtoDAsync", status)

    def copy_to_host(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        """Queue a copy from the device to page-locked host memory (only)."""
        status = self._to_host(dst, src, nbytes, stream)
        if status:
            self._fail("cuMemcpyDtoHAsync", status)

    def stream_idle(self, stream: int) -> bool:
        """Whether `stream` has finished all its work (raises on a failed stream)."""
        status = self._query(stream)
        if status and status != _NOT_READY:
            self._fail("cuStreamQuery", status)
        return not status

    def event_done(self, event: int) -> bool:
        """Whether the work before `event`'s last record has finished (raises on a failure)."""
        status = self._event_query(event)
        if status and status != _NOT_READY:
            self._fail("cuEventQuery", status)
        return not status

    def event(self) -> int:
        """A new event without timing (a raw ``CUevent``; never destroyed: callers pool them)."""
        handle = ctypes.c_void_p()
        status = self._event_create(ctypes.byref(handle), _EVENT_DISABLE_TIMING)
        if status:
            self._fail("cuEventCreate", status)
        return handle.value

    def _fail(self, call: str, status: int) -> None:
        name = ctypes.c_char_p()
        self._error_name(status, ctypes.byref(name))
        text = name.value.decode() if name.value else f"error {status}"
        raise CudaError(f"avdenoise: {call} failed: {text}", call, status)


#: ``CUDA_ERROR_NOT_READY``: what ``cuStreamQuery`` returns while work is pending.
_NOT_READY = 600
#: ``CU_EVENT_DISABLE_TIMING`` (``cudaEventDisableTiming``): events only for ordering.
_EVENT_DISABLE_TIMING = 2
#: ``CU_CTX_SCHED_*`` flag of each ``AVDENOISE_CUDA_SYNC`` value ("auto" leaves the driver's).
SYNC_FLAGS = {"spin": 1, "yield": 2, "block": 4}


def set_sync_mode(device_id: int, mode: str) -> None:
    """Make the threads that wait on device `device_id` spin, yield or block (`mode`, a key of
    :data:`SYNC_FLAGS`), through the flags of its primary context, which CuPy uses.

    Set before the context starts, it applies from the first wait; drivers since CUDA 11.7
    also accept it on a running context. A driver that refuses keeps its own choice, which is
    logged: how a thread waits never decides whether a render works.
    """
    flags = SYNC_FLAGS.get(mode)
    if flags is None:
        return
    try:
        driver = ctypes.CDLL("libcuda.so.1")
        device = ctypes.c_int()
        status = driver.cuInit(0) or driver.cuDeviceGet(ctypes.byref(device), device_id)
        status = status or driver.cuDevicePrimaryCtxSetFlags(device, ctypes.c_uint(flags))
    except (OSError, AttributeError) as error:
        status = error
    if status:
        logger.debug("avdenoise: the driver kept its wait mode (asked %s: %s)", mode, status)


def _bind(function, argtypes):
    function.argtypes = argtypes
    function.restype = ctypes.c_int
    return function


@functools.cache
def cuda_calls() -> HeldCalls:
    """The process's calls.

    Raises
    ------
    BackendUnavailable
        When the driver library cannot be bound (CuPy, which needs it too, would fail).
    """
    try:
        return HeldCalls()
    except (OSError, AttributeError) as error:  # no libcuda.so.1 by that name, old driver
        raise BackendUnavailable(f"the CUDA driver cannot be called ({error})") from error
