"""VapourSynth's GPU frames in CUDA: their exported Vulkan memory imported with the driver API.

The bridge hands each plane of a GPU frame over as ``(fd, memory_id, memory_size, offset,
stride)`` (``_native/gpu_frames.h``): the plane lies at ``offset`` in an allocation that the
opaque file descriptor ``fd`` exports, rows ``stride`` bytes apart. VapourSynth suballocates
planes from large blocks (128 MiB on the H200), so an allocation is imported whole, once
(``cuImportExternalMemory``, then ``cuExternalMemoryGetMappedBuffer`` over all of it), cached
by its ``memory_id``, which is never reused, and a plane is its base address plus the offset.
Every export is a new fd for the same allocation: the bridge owns and closes them, and an
import consumes a duplicate of its own (``os.dup``), which a failed import leaves to close; once
the driver has taken the duplicate, nothing here closes it again, even where the mapping that
follows fails (destroying the import closes it).

Every plane is checked against its allocation before its address is used: a plane that does not
fit would have the copies read or write past the allocation, an error that ends the process's
CUDA context rather than the frame.

An import outlives the frames and keeps its block alive after VapourSynth frees it, so an
:class:`Imports` holds at most :data:`MAX_IMPORTS`, dropping the least recently used one that
no frame in flight leases. Layouts are cuda.h's on 64-bit Linux (tests check the sizes).
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections import OrderedDict
from ctypes import c_int, c_uint32, c_uint64, c_void_p

from avdenoise_vs._errors import BackendUnavailable, CudaError

__all__ = ["MAX_IMPORTS", "Imports", "cuda_device_for", "device_uuids"]

#: Allocations kept imported per backend: each may hold a 128 MiB block that VapourSynth has
#: freed, while a frame's planes and its window's come from a few.
MAX_IMPORTS = 32
OPAQUE_FD = 1  # CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD (VK_..._OPAQUE_FD_BIT alike)
DEDICATED = 1  # CUDA_EXTERNAL_MEMORY_DEDICATED: the export does not say which an allocation is


class _MemoryHandleDesc(ctypes.Structure):
    """CUDA_EXTERNAL_MEMORY_HANDLE_DESC: the handle is a 16-byte union at offset 8."""

    _fields_ = [
        ("type", c_uint32),
        ("_pad", c_uint32),
        ("handle", c_uint64 * 2),
        ("size", c_uint64),
        ("flags", c_uint32),
        ("reserved", c_uint32 * 16),
    ]


class _BufferDesc(ctypes.Structure):
    """CUDA_EXTERNAL_MEMORY_BUFFER_DESC."""

    _fields_ = [
        ("offset", c_uint64),
        ("size", c_uint64),
        ("flags", c_uint32),
        ("reserved", c_uint32 * 16),
    ]


class Driver:
    """The driver calls of the imports, through ``libcuda`` (ctypes releases the GIL: they
    are made once per allocation, not per frame)."""

    def __init__(self, library=None) -> None:
        try:
            self.lib = library or ctypes.CDLL("libcuda.so.1")
        except OSError as error:
            raise BackendUnavailable(f"the CUDA driver cannot be loaded ({error})") from error
        self._contexts: dict[int, c_void_p] = {}
        self.dedicated_imports = 0  # imports that took CUDA_EXTERNAL_MEMORY_DEDICATED

    def call(self, name: str, *args) -> None:
        status = getattr(self.lib, name)(*args)
        if status != 0:
            text = ctypes.c_char_p()
            self.lib.cuGetErrorName(c_int(status), ctypes.byref(text))
            label = (text.value or b"?").decode()
            raise CudaError(f"avdenoise: {name} failed: {label}", name, status)

    def uuids(self) -> list[str]:
        """Every CUDA device's UUID, in CUDA's order, as 32 hex digits."""
        self.call("cuInit", c_uint32(0))
        count = c_int()
        self.call("cuDeviceGetCount", ctypes.byref(count))
        get = "cuDeviceGetUuid_v2" if hasattr(self.lib, "cuDeviceGetUuid_v2") else "cuDeviceGetUuid"
        found = []
        for ordinal in range(count.value):
            device, uuid = c_int(), (ctypes.c_ubyte * 16)()
            self.call("cuDeviceGet", ctypes.byref(device), c_int(ordinal))
            self.call(get, ctypes.byref(uuid), device)
            found.append(bytes(uuid).hex())
        return found

    def make_current(self, ordinal: int) -> None:
        """Make the device's primary context (CuPy's) current on the calling thread."""
        context = self._contexts.get(ordinal)
        if context is None:
            device, context = c_int(), c_void_p()
            self.call("cuDeviceGet", ctypes.byref(device), c_int(ordinal))
            self.call("cuDevicePrimaryCtxRetain", ctypes.byref(context), device)
            self._contexts[ordinal] = context
        self.call("cuCtxSetCurrent", context)

    def import_handle(self, fd: int, size: int) -> c_void_p:
        """Import the allocation of `size` bytes that `fd` exports. A success consumes `fd`;
        a failure leaves it to the caller."""
        memory, error = c_void_p(), None
        for flags in (0, DEDICATED):  # the export does not say which the allocation is
            desc = _MemoryHandleDesc(type=OPAQUE_FD, size=size, flags=flags)
            desc.handle[0] = fd
            try:
                self.call("cuImportExternalMemory", ctypes.byref(memory), ctypes.byref(desc))
            except CudaError as failed:  # the driver has not taken `fd`: try the other flags
                error = failed
                continue
            self.dedicated_imports += flags == DEDICATED
            return memory
        raise error

    def map_whole(self, memory: c_void_p, size: int) -> int:
        """The device address of all `size` bytes of an import; a failure destroys the import
        (and with it the fd it consumed)."""
        base = c_uint64()
        buffer = _BufferDesc(offset=0, size=size)
        try:
            self.call(
                "cuExternalMemoryGetMappedBuffer", ctypes.byref(base), memory, ctypes.byref(buffer)
            )
        except CudaError:
            self.call("cuDestroyExternalMemory", memory)
            raise
        return base.value

    def release(self, memory: c_void_p, base: int) -> None:
        """Unmap and destroy an import (nothing on the device may still use it)."""
        self.call("cuMemFree_v2", c_uint64(base))
        self.call("cuDestroyExternalMemory", memory)


def device_uuids(driver: Driver | None = None) -> list[str]:
    """The UUIDs of the CUDA devices (32 hex digits each), CUDA's device numbers in order."""
    return (driver or Driver()).uuids()


def cuda_device_for(uuid: str, index: int | None, driver: Driver | None = None) -> int:
    """The CUDA device that is the Vulkan device `uuid` (a GPU clip's, 32 hex digits).

    Raises
    ------
    BackendUnavailable
        When no CUDA device has that UUID, or `index` (``device='cuda:N'``) is another one.
    """
    try:
        uuids = device_uuids(driver)
    except CudaError as error:
        raise BackendUnavailable(f"no usable CUDA driver ({error})") from error
    want = uuid.replace("-", "").lower()
    matching = [ordinal for ordinal, found in enumerate(uuids) if found == want]
    if not matching:
        seen = ", ".join(uuids) or "none"
        raise BackendUnavailable(
            f"no CUDA device is the GPU clip's Vulkan device (UUID {want}; CUDA's: {seen})"
        )
    if index is not None and index not in matching:
        raise BackendUnavailable(
            f"CUDA device {index} is not the GPU clip's Vulkan device, CUDA device {matching[0]} is"
        )
    return matching[0] if index is None else index


class _Import:
    __slots__ = ("memory", "base", "size", "leases")

    def __init__(self, memory, base: int, size: int) -> None:
        self.memory, self.base, self.size, self.leases = memory, base, size, 0


class Imports:
    """The imported allocations of one backend's device, shared by its threads.

    Parameters
    ----------
    device_id : int
        The CUDA device (the GPU clip's Vulkan device).
    extents : sequence of (int, int)
        ``(row bytes, rows)`` of each plane of the clip's frames (inputs and output alike),
        which every exported plane must fit in its allocation.
    limit : int, optional
        Imports kept at most while some are not leased (:data:`MAX_IMPORTS`).
    driver : Driver, optional
        The driver calls (a stand-in in tests).
    """

    def __init__(self, device_id: int, extents, limit: int | None = None, driver=None) -> None:
        self.device_id = device_id
        self.extents = tuple(extents)
        self.limit = MAX_IMPORTS if limit is None else limit
        self._driver = driver or Driver()
        self._imports: OrderedDict[int, _Import] = OrderedDict()  # memory_id, oldest first
        self._lock = threading.Lock()
        self.imported = 0  # statistics for tests and benchmarks

    def frame(self, windows: tuple, dst: tuple) -> tuple[tuple, tuple, list]:
        """A frame's planes as the host protocol's ``(address, stride, None)`` on the device:
        ``(windows, dst, leases)``, with every allocation they lie in leased until
        :meth:`release` (after the frame's stream has synchronized).

        Raises
        ------
        ValueError
            For a plane that does not lie within its allocation, or an allocation whose size
            differs from its import's; nothing is then leased.
        CudaError
            When an import fails.
        """
        leases: dict[int, _Import] = {}
        converted: dict[int, tuple] = {}  # id of a frame's tuple: the window repeats frames
        with self._lock:
            try:
                windows = tuple(
                    tuple(self._frame(planes, leases, converted) for planes in clip)
                    for clip in windows
                )
                dst = tuple(self._plane(p, plane, leases) for p, plane in enumerate(dst))
            except BaseException:
                self._unlease(leases.values())
                raise
        return windows, dst, list(leases.values())

    def release(self, leases: list) -> None:
        """Give back the leases of :meth:`frame`, dropping the imports over the limit that
        frames in flight kept (the count comes back to the limit once they are done)."""
        with self._lock:
            self._unlease(leases)
            self._evict(self.limit)

    def close(self) -> None:
        """Drop every import (the filter is gone: no frame is in flight). A driver already
        shut down at exit has dropped them itself."""
        with self._lock:
            imports, self._imports = list(self._imports.values()), OrderedDict()
            if not imports:
                return
            try:
                self._driver.make_current(self.device_id)
                for entry in imports:
                    self._driver.release(entry.memory, entry.base)
            except CudaError:
                pass

    def __len__(self) -> int:
        return len(self._imports)

    def _frame(self, planes: tuple, leases: dict, converted: dict) -> tuple:
        done = converted.get(id(planes))
        if done is None:
            done = tuple(self._plane(p, plane, leases) for p, plane in enumerate(planes))
            converted[id(planes)] = done
        return done

    def _plane(self, p: int, plane: tuple, leases: dict) -> tuple:
        """Plane `p`'s ``(address, stride, None)``, its allocation leased (lock held)."""
        fd, memory_id, memory_size, offset, stride = plane
        self._check_fits(p, memory_size, offset, stride)
        entry = leases.get(memory_id)
        if entry is None:
            entry = self._imports.get(memory_id)
            if entry is None:
                entry = self._import(fd, memory_id, memory_size)
            else:
                self._imports.move_to_end(memory_id)
            entry.leases += 1
            leases[memory_id] = entry
        if entry.size != memory_size:  # memory ids are never reused: VapourSynth's promise
            raise ValueError(
                f"avdenoise: allocation {memory_id} of a GPU frame is {memory_size} bytes, and "
                f"its import {entry.size}"
            )
        return entry.base + offset, stride, None

    def _check_fits(self, p: int, memory_size: int, offset: int, stride: int) -> None:
        """Raise unless plane `p`, at `offset` with rows `stride` bytes apart, lies within
        its allocation of `memory_size` bytes."""
        row_bytes, rows = self.extents[p]
        end = offset + stride * (rows - 1) + row_bytes
        if offset < 0 or stride < row_bytes or end > memory_size:
            raise ValueError(
                f"avdenoise: plane {p} of a GPU frame must lie within its allocation of "
                f"{memory_size} bytes with rows of {row_bytes} bytes at least, got offset "
                f"{offset}, stride {stride} and {rows} rows"
            )

    def _import(self, fd: int, memory_id: int, memory_size: int) -> _Import:
        """Import an allocation, after dropping the oldest unleased imports over the limit."""
        self._evict(self.limit - 1)
        self._driver.make_current(self.device_id)
        own = os.dup(fd)  # the bridge closes `fd`; a successful import consumes `own`
        try:
            memory = self._driver.import_handle(own, memory_size)
        except BaseException:
            os.close(own)  # not taken by the driver
            raise
        base = self._driver.map_whole(memory, memory_size)  # from here `own` is the driver's
        entry = self._imports[memory_id] = _Import(memory, base, memory_size)
        self.imported += 1
        return entry

    def _evict(self, keep: int) -> None:
        """Release the least recently used unleased imports while more than `keep` remain."""
        idle = [m for m, e in self._imports.items() if e.leases == 0]
        surplus = idle[: max(0, len(self._imports) - keep)]
        if surplus:
            self._driver.make_current(self.device_id)  # the releasing thread's context
        for memory_id in surplus:
            entry = self._imports.pop(memory_id)
            self._driver.release(entry.memory, entry.base)

    def _unlease(self, leases) -> None:
        for entry in leases:
            entry.leases -= 1
