"""Exported Vulkan memory without a GPU, for the tests of ``_cuda/vkimport.py`` and of the
CUDA backend's GPU frames: an allocation is a memory file (``memfd``) standing for the export,
and a NumPy buffer standing for its memory, which the fake driver "imports" by the file's
inode, as the real driver imports the allocation an fd exports. Planes and frames are laid out
in allocations as VapourSynth lays them out: at offsets, with padded strides."""

from __future__ import annotations

import os

import numpy as np

from avdenoise_vs._errors import CudaError

__all__ = ["UUID", "Allocation", "FakeDriver", "FakeImport", "GpuFrameStore", "is_open"]

UUID = "0123456789abcdef0123456789abcdef"


def is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


class Allocation:
    """One exportable allocation: its memory, its id and an fd that exports it (the
    bridge's, which the bridge closes: tests close them in :meth:`close`)."""

    _next_id = iter(range(100, 1 << 30))

    def __init__(self, nbytes: int) -> None:
        self.memory = np.zeros(nbytes, np.uint8)
        self.memory_id = next(self._next_id)
        self.fds: list[int] = []

    def export(self) -> int:
        """A new fd for the allocation, as every exportGPUPlane call returns."""
        fd = os.memfd_create(f"allocation-{self.memory_id}")
        self.fds.append(fd)
        return fd

    def close(self) -> None:
        for fd in self.fds:
            if is_open(fd):
                os.close(fd)


class FakeDriver:
    """``vkimport.Driver``'s calls over :class:`Allocation` s: an import consumes its fd (closes
    it) and maps the allocation's NumPy memory; `refuse` makes that many imports fail, and
    `refuse_map` that many mappings after a successful import (the driver then destroys the
    import, which owned the fd: the test opens :attr:`bystander`, which takes the fd's number,
    as another thread's open would)."""

    def __init__(self, uuids=(UUID,)) -> None:
        self._uuids = list(uuids)
        self.allocations: dict[int, Allocation] = {}  # inode of an export -> allocation
        self.imports: list[int] = []  # memory ids, in import order
        self.released: list[int] = []
        self.current: list[int] = []
        self.refuse = self.refuse_map = 0
        self.bystander: int | None = None

    def uuids(self) -> list[str]:
        return list(self._uuids)

    def make_current(self, ordinal: int) -> None:
        self.current.append(ordinal)

    def register(self, allocation: Allocation, fd: int) -> None:
        self.allocations[os.fstat(fd).st_ino] = allocation

    def import_handle(self, fd: int, size: int) -> FakeImport:
        allocation = self.allocations[os.fstat(fd).st_ino]
        if self.refuse:
            self.refuse -= 1
            raise CudaError("avdenoise: cuImportExternalMemory failed: CUDA_ERROR_INVALID_VALUE")
        assert size == allocation.memory.nbytes
        os.close(fd)  # consumed
        return FakeImport(allocation)

    def map_whole(self, memory: FakeImport, size: int) -> int:
        if self.refuse_map:
            self.refuse_map -= 1
            memory.alive = False  # the driver destroys the import, and with it the fd
            self.bystander = os.open(os.devnull, os.O_RDONLY)  # the freed number, reused
            raise CudaError("avdenoise: cuExternalMemoryGetMappedBuffer failed: CUDA_ERROR_X")
        self.imports.append(memory.allocation.memory_id)
        return memory.allocation.memory.ctypes.data

    def release(self, memory: FakeImport, base: int) -> None:
        assert memory.alive, "an import released twice"
        memory.alive = False
        self.released.append(memory.allocation.memory_id)


class FakeImport:
    """One import of an allocation: alive until the driver releases it."""

    def __init__(self, allocation: Allocation) -> None:
        self.allocation, self.alive = allocation, True


class GpuFrameStore:
    """Frames of a layout laid out in allocations as VapourSynth's GPU frames are: each plane
    at its offset, rows padded; :meth:`planes` gives the bridge's exported tuples."""

    PAD = 64  # bytes past each row

    def __init__(self, driver: FakeDriver, layout, frames_per_allocation: int = 4) -> None:
        self.driver, self.layout = driver, layout
        itemsize = layout.dtype.itemsize
        self.geometry = []  # per plane: (offset in a frame, stride)
        offset = 0
        for p in range(layout.num_planes):
            height, width = layout.plane_shape(p)
            stride = width * itemsize + self.PAD
            self.geometry.append((offset, stride))
            offset += stride * height
        self.frame_bytes = offset
        self.per_allocation = frames_per_allocation
        self.allocations: list[Allocation] = []
        self.slots: dict[object, tuple[Allocation, int]] = {}  # key -> (allocation, offset)

    def _slot(self, key) -> tuple[Allocation, int]:
        if key not in self.slots:
            used = len(self.slots)
            if used % self.per_allocation == 0:
                self.allocations.append(Allocation(self.frame_bytes * self.per_allocation))
            allocation = self.allocations[-1]
            self.slots[key] = (allocation, (used % self.per_allocation) * self.frame_bytes)
        return self.slots[key]

    def array(self, key, plane: int) -> np.ndarray:
        """Plane `plane` of the frame stored under `key`, as a writable view."""
        allocation, base = self._slot(key)
        offset, stride = self.geometry[plane]
        height, width = self.layout.plane_shape(plane)
        itemsize = self.layout.dtype.itemsize
        return np.ndarray(
            (height, width), self.layout.dtype, buffer=allocation.memory,
            offset=base + offset, strides=(stride, itemsize),
        )  # fmt: skip

    def put(self, key, planes) -> None:
        for p, values in enumerate(planes):
            self.array(key, p)[...] = values

    def planes(self, key) -> tuple:
        """The bridge's ``(fd, memory_id, memory_size, offset, stride)`` of every plane."""
        allocation, base = self._slot(key)
        exported = []
        for offset, stride in self.geometry:
            fd = allocation.export()
            self.driver.register(allocation, fd)
            exported.append(
                (fd, allocation.memory_id, allocation.memory.nbytes, base + offset, stride)
            )
        return tuple(exported)

    def close(self) -> None:
        for allocation in self.allocations:
            allocation.close()
