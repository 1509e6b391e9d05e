"""The foreign side of the GPU frames probe: what gpu_frames_probe.c hands over, and the two
APIs that can take it.

``Cuda`` imports the exported opaque fds with the CUDA driver API through the package's own
calls (``avdenoise_vs/_cuda/vkimport.py``: the device by UUID, cuImportExternalMemory and
cuExternalMemoryGetMappedBuffer), adds cuImportExternalSemaphore for the timelines, and reads
and writes the planes as CuPy arrays. ``Mapped`` is a test double for a CPU Vulkan device whose
opaque fds are memory files (Mesa's lavapipe): it maps them with mmap, so the probe's
VapourSynth side can be checked on a machine without a GPU.

Both cache imports by the allocation's ``memory_id``, import it whole, and address a plane at
base + offset: every export is a new fd for the same allocation.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
import threading
from ctypes import c_int, c_int64, c_uint32, c_uint64, c_void_p
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the package, installed or not

from avdenoise_vs._cuda.vkimport import Driver, cuda_device_for
from avdenoise_vs._errors import CudaError


class Plane(ctypes.Structure):
    """ProbePlane of gpu_frames_probe.c."""

    _fields_ = [
        ("fd", c_int64),
        ("memory_id", c_uint64),
        ("memory_size", c_uint64),
        ("offset", c_uint64),
        ("size", c_uint64),
        ("stride", c_int64),
        ("width", c_int64),
        ("height", c_int64),
        ("semaphore", c_uint64),
        ("semaphore_fd", c_int64),
        ("ready_value", c_uint64),
    ]


class Call(ctypes.Structure):
    """ProbeCall of gpu_frames_probe.c."""

    _fields_ = [
        ("n", c_int64),
        ("mode", c_int64),
        ("num_planes", c_int64),
        ("bytes_per_sample", c_int64),
        ("sample_type", c_int64),
        ("bits", c_int64),
        ("timeline_fd", c_int64),
        ("timeline", c_uint64),
        ("signal", c_uint64),
        ("inputs", Plane * 3),
        ("outputs", Plane * 3),
    ]


CALLBACK = ctypes.CFUNCTYPE(c_int, ctypes.POINTER(Call), ctypes.POINTER(ctypes.c_char), c_int64)


def take_fds(call: Call) -> dict[int, None]:
    """Every fd the call hands over; a backend pops the ones it consumes or closes."""
    fds = [call.timeline_fd]
    for p in range(call.num_planes):
        for plane in (call.inputs[p], call.outputs[p]):
            fds += [plane.fd, plane.semaphore_fd]
    return dict.fromkeys(fd for fd in fds if fd >= 0)


def close_left(fds: dict[int, None]) -> None:
    for fd in list(fds):
        os.close(fd)
    fds.clear()


# ---- CUDA through the driver API (cuda.h, 64-bit layouts) --------------------------------
# The semaphores' descriptors; the memory's are vkimport's. The handle is a union of
# {int fd; {void *, const void *} win32; const void *}: 16 bytes at 8.
class _SemaphoreHandleDesc(ctypes.Structure):
    _fields_ = [
        ("type", c_uint32),
        ("_pad", c_uint32),
        ("handle", c_uint64 * 2),
        ("flags", c_uint32),
        ("reserved", c_uint32 * 16),
    ]


class _SemaphoreParams(ctypes.Structure):
    """CUDA_EXTERNAL_SEMAPHORE_{WAIT,SIGNAL}_PARAMS: params.fence.value first, the rest zero."""

    _fields_ = [
        ("value", c_uint64),
        ("_params", ctypes.c_uint8 * 64),
        ("flags", c_uint32),
        ("reserved", c_uint32 * 16),
    ]


TIMELINE_SEMAPHORE_FD = 9  # CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD


class Cuda:
    """The CUDA device whose UUID is the Vulkan device's, through libcuda and CuPy."""

    def __init__(self, uuid_hex: str) -> None:
        import cupy

        self.cupy = cupy
        self.driver = Driver()
        self.ordinal = cuda_device_for(uuid_hex, None, self.driver)
        version = c_int()
        self.call("cuDriverGetVersion", ctypes.byref(version))
        self.driver_version = version.value
        self.device, self.context = c_int(), c_void_p()
        self.call("cuDeviceGet", ctypes.byref(self.device), c_int(self.ordinal))
        self.call("cuDevicePrimaryCtxRetain", ctypes.byref(self.context), self.device)
        self.memories: dict[int, tuple[c_void_p, int]] = {}  # memory_id -> (import, base)
        self.semaphores: dict[int, c_void_p] = {}  # VkSemaphore -> import
        self.local = threading.local()

    def call(self, name: str, *args) -> None:
        self.driver.call(name, *args)

    @property
    def dedicated_imports(self) -> int:
        """Imports that took CUDA_EXTERNAL_MEMORY_DEDICATED (the plain flags refused)."""
        return self.driver.dedicated_imports

    def enter(self):
        """The calling thread's stream, with this device's primary context current."""
        self.call("cuCtxSetCurrent", self.context)
        self.cupy.cuda.Device(self.ordinal).use()
        if not hasattr(self.local, "stream"):
            self.local.stream = self.cupy.cuda.Stream(non_blocking=True)
        return self.local.stream

    def _import_memory(self, plane: Plane, fds: dict[int, None]) -> int:
        if plane.memory_id in self.memories:
            return self.memories[plane.memory_id][1]
        memory = self.driver.import_handle(plane.fd, plane.memory_size)  # a failure: fd left
        fds.pop(plane.fd)  # consumed by the import
        base = self.driver.map_whole(memory, plane.memory_size)
        self.memories[plane.memory_id] = (memory, base)
        return base

    def array(self, plane: Plane, dtype, fds: dict[int, None]):
        """The plane as a (height, width) CuPy view of the imported memory."""
        base = self._import_memory(plane, fds)
        if plane.fd in fds:  # a cached allocation: this export's fd is surplus
            os.close(plane.fd)
            fds.pop(plane.fd)
        cp, itemsize = self.cupy, np.dtype(dtype).itemsize
        memory = cp.cuda.UnownedMemory(base + plane.offset, plane.size, self, self.ordinal)
        full = cp.ndarray(
            (plane.height, plane.stride // itemsize), dtype, cp.cuda.MemoryPointer(memory, 0)
        )
        return full[:, : plane.width]

    def _semaphore(self, key: int, fd: int, fds: dict[int, None]) -> c_void_p:
        if key not in self.semaphores:
            semaphore = c_void_p()
            desc = _SemaphoreHandleDesc(type=TIMELINE_SEMAPHORE_FD)
            desc.handle[0] = fd
            self.call("cuImportExternalSemaphore", ctypes.byref(semaphore), ctypes.byref(desc))
            fds.pop(fd)
            self.semaphores[key] = semaphore
        return self.semaphores[key]

    def forget_semaphores(self) -> None:
        """Drops the semaphore imports: their keys (VkSemaphore values) hold only for as long
        as the filters that handed them over live, so a new case starts afresh."""
        for semaphore in self.semaphores.values():
            self.call("cuDestroyExternalSemaphore", semaphore)
        self.semaphores.clear()

    def wait(self, plane: Plane, stream, fds: dict[int, None]) -> None:
        """Makes `stream` wait the plane's producer pair on the device."""
        if not plane.semaphore:
            return
        if plane.semaphore not in self.semaphores and plane.semaphore_fd < 0:
            raise CudaError("a producer semaphore came without its export")
        semaphore = self._semaphore(plane.semaphore, plane.semaphore_fd, fds)
        params = _SemaphoreParams(value=plane.ready_value)
        self.call(
            "cuWaitExternalSemaphoresAsync",
            ctypes.byref(semaphore),
            ctypes.byref(params),
            c_uint32(1),
            c_void_p(stream.ptr),
        )

    def signal(self, call: Call, stream, fds: dict[int, None]) -> None:
        """Signals the probe filter's own timeline with call.signal from `stream`."""
        semaphore = self._semaphore(call.timeline, call.timeline_fd, fds)
        params = _SemaphoreParams(value=call.signal)
        self.call(
            "cuSignalExternalSemaphoresAsync",
            ctypes.byref(semaphore),
            ctypes.byref(params),
            c_uint32(1),
            c_void_p(stream.ptr),
        )

    def to_host(self, array) -> np.ndarray:
        return self.cupy.asnumpy(array)


class Mapped:
    """Test double: the opaque fds of Mesa's lavapipe (a CPU Vulkan device) are memory files,
    mapped here. What an opaque fd is stays the driver's business: this reads Mesa's layout."""

    dedicated_imports = 0

    def __init__(self) -> None:
        self.memories: dict[int, mmap.mmap] = {}  # memory_id -> its mapping

    def enter(self):
        return None

    def array(self, plane: Plane, dtype, fds: dict[int, None]) -> np.ndarray:
        if plane.memory_id not in self.memories:
            self.memories[plane.memory_id] = mmap.mmap(plane.fd, 0)
        os.close(plane.fd)  # the mapping keeps the memory; every fd is surplus here
        fds.pop(plane.fd)
        mapped, itemsize = self.memories[plane.memory_id], np.dtype(dtype).itemsize
        # Mesa's memory files (util/os_memory_fd.c) start with a header: total size, then
        # where the allocation's bytes begin.
        start = int.from_bytes(mapped[8:16], "little") if len(mapped) > plane.memory_size else 0
        full = np.frombuffer(
            mapped, dtype, plane.height * (plane.stride // itemsize), start + plane.offset
        ).reshape(plane.height, plane.stride // itemsize)
        return full[:, : plane.width]

    def forget_semaphores(self) -> None:
        pass

    def wait(self, plane: Plane, stream, fds: dict[int, None]) -> None:
        raise RuntimeError("the mapped test double has no device side synchronization")

    signal = wait

    def to_host(self, array) -> np.ndarray:
        return np.array(array)
