"""Start the device's CUDA context in a thread while CuPy is imported.

A worker of an Av1an fleet pays, before its first frame, for importing CuPy (CPU work, with
the GIL) and for creating the CUDA context (driver work, mostly outside the process, slowest
when a whole fleet starts at once). Neither needs the other: the driver's calls, made through
ctypes, release the GIL, so a thread can create the device's primary context, the one CuPy's
runtime calls then use, while the main thread imports CuPy.

Everything here is best effort: a driver that cannot be loaded or refuses a call leaves the context
to CuPy, as without this module. Nothing here raises, and the thread logs nothing: a machine without
a driver runs ``device='auto'`` on the CPU, and says so once (``_backends.select``); why the driver
failed is kept in :attr:`EarlyContext.failure` for a filter that asked for CUDA by name
(``open_device``).
"""

from __future__ import annotations

import ctypes
import threading

from avdenoise_vs._cuda.placement import device_for_process
from avdenoise_vs._log import OWN_THREAD_PREFIX

__all__ = ["EarlyContext", "start_early_context"]

#: Stack a GPU thread of the context gets, bytes, until a kernel needs more: the driver then
#: grows it for that launch and keeps it grown (``cuCtxSetLimit``). The default, 1 KiB,
#: reserves local memory for every thread the device holds at once (2048 threads x 132 SMs on
#: an H100 or H200), where the BM3D kernels' largest stack frame is 112 bytes (ptxas: the
#: hard-thresholding kernel with 80 registers spills). A radius 0 luma fleet worker held 888
#: MiB at 1 KiB, 690 at 256 bytes and 656 at 128; 256 ran the fleet as fast as 1 KiB in the
#: same call (679 fps against 667, docs/BENCHMARKS.md "GPU memory").
STACK_BYTES = 256
_CU_LIMIT_STACK_SIZE = 0

#: The early contexts of this process, by device ordinal: one thread a device, however many
#: filters a script creates.
_STARTED: dict[int, EarlyContext] = {}
_STARTED_LOCK = threading.Lock()


def start_early_context(device_index: int | None, before_context) -> EarlyContext:
    """The device's :class:`EarlyContext`, started by the first call for that device (None:
    the device placement chooses, one thread however many filters ask)."""
    with _STARTED_LOCK:
        early = _STARTED.get(device_index)
        if early is None:
            early = _STARTED[device_index] = EarlyContext(device_index, before_context)
        return early


class EarlyContext:
    """The primary context of one device, being created in a daemon thread.

    Parameters
    ----------
    device_index : int or None
        The CUDA device; None: the one ``_placement.device_for_process`` chooses, in the
        thread, after ``cuInit`` (which it needs too), so that the choice costs the main
        thread nothing while CuPy is imported. Runtime and driver number devices alike, both
        after ``CUDA_VISIBLE_DEVICES``.
    before_context : callable
        Called in the thread with the device ordinal before the context is created: what
        must be set while no context exists (the primary context's wait flags, see
        ``_calls.set_sync_mode``).
    """

    def __init__(self, device_index: int | None, before_context) -> None:
        self._key = device_index
        self._ordinal = device_index
        self._before = before_context
        self._driver = None
        self._device = ctypes.c_int()
        self._retained = False
        #: Why the context was not made (one line), or None; read it after :meth:`release`.
        self.failure: str | None = None
        # An own thread's name: VapourSynth's logging bridge never sees its records (_log.py).
        name = f"{OWN_THREAD_PREFIX}context"
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            driver = ctypes.CDLL("libcuda.so.1")
            status = driver.cuInit(0)
            if status:
                self.failure = f"the NVIDIA driver's cuInit returned {status}"
                return
            if self._ordinal is None:
                self._ordinal = device_for_process(None)
            status = driver.cuDeviceGet(ctypes.byref(self._device), self._ordinal)
            if status:
                self.failure = f"cuDeviceGet of device {self._ordinal} returned {status}"
                return
            self._before(self._ordinal)
            context = ctypes.c_void_p()
            status = driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), self._device)
            if status:
                self.failure = f"cuDevicePrimaryCtxRetain returned {status}"
                return
            self._driver, self._retained = driver, True
            _trim_stack(driver, context)
        except OSError as error:  # libcuda cannot be loaded
            self.failure = f"no NVIDIA driver found ({error})"
        except Exception as error:  # nothing here may fail a render
            self.failure = f"{type(error).__name__}: {error}"

    def release(self) -> None:
        """Give the context back when no backend of this process will use it (CuPy missing,
        no such device), so that it does not hold device memory for nothing."""
        self._thread.join()
        if self._retained:
            self._retained = False
            self._driver.cuDevicePrimaryCtxRelease(self._device)
        with _STARTED_LOCK:  # a later filter may try again
            _STARTED.pop(self._key, None)


def _trim_stack(driver, context: ctypes.c_void_p) -> None:
    """Lower the context's per-thread stack to :data:`STACK_BYTES`. Best effort, and never a
    failure of the context: a driver that refuses (or lacks a call) keeps its default, which
    costs memory, not correctness."""
    try:
        if driver.cuCtxPushCurrent_v2(context):
            return
        driver.cuCtxSetLimit(_CU_LIMIT_STACK_SIZE, ctypes.c_size_t(STACK_BYTES))
        driver.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
    except Exception:  # e.g. an AttributeError from a driver without the _v2 calls
        pass
