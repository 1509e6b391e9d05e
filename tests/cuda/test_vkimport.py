"""``_cuda/vkimport.py`` without a GPU: cuda.h's descriptor layouts, the device match by UUID,
and the import cache over a fake driver (one import per allocation, the bridge's fds left
open, every fd closed once, planes checked against their allocations, a bounded count that
spares leased imports, also with frames in flight on several threads)."""

from __future__ import annotations

import ctypes
import os
import random
import threading
import time

import pytest

from avdenoise_vs._cuda import vkimport
from avdenoise_vs._errors import BackendUnavailable, CudaError

from ._fake_vulkan import UUID, Allocation, FakeDriver, is_open

#: (row bytes, rows) of the test frames' planes: 60 bytes of 4 rows, in rows of 64 bytes.
EXTENTS = ((60, 4), (60, 4), (60, 4))


def _imports(device_id: int = 0, driver=None, **kwargs) -> vkimport.Imports:
    return vkimport.Imports(device_id, EXTENTS, driver=driver or FakeDriver(), **kwargs)


def test_descriptors_have_cuda_h_layouts() -> None:
    # cuda.h on 64-bit Linux: the handle union is 16 bytes at offset 8, structs pad to 8.
    assert ctypes.sizeof(vkimport._MemoryHandleDesc) == 104
    assert vkimport._MemoryHandleDesc.handle.offset == 8
    assert vkimport._MemoryHandleDesc.size.offset == 24
    assert vkimport._MemoryHandleDesc.flags.offset == 32
    assert ctypes.sizeof(vkimport._BufferDesc) == 88
    assert vkimport._BufferDesc.flags.offset == 16


def test_the_device_is_the_one_with_the_clip_s_uuid() -> None:
    driver = FakeDriver(uuids=["ff" * 16, UUID])
    assert vkimport.cuda_device_for(UUID, None, driver) == 1
    dashed = f"{UUID[:8]}-{UUID[8:12]}-{UUID[12:16]}-{UUID[16:20]}-{UUID[20:]}".upper()
    assert vkimport.cuda_device_for(dashed, 1, driver) == 1
    with pytest.raises(BackendUnavailable, match="CUDA device 0 is not the GPU clip's Vulkan "
                       "device, CUDA device 1 is"):  # fmt: skip
        vkimport.cuda_device_for(UUID, 0, driver)
    with pytest.raises(BackendUnavailable, match=f"no CUDA device is the GPU clip's Vulkan "
                       f"device \\(UUID {'ee' * 16}; CUDA's: {'ff' * 16}, {UUID}\\)"):  # fmt: skip
        vkimport.cuda_device_for("ee" * 16, None, driver)


def _plane(allocation: Allocation, driver: FakeDriver, offset: int, stride: int = 64) -> tuple:
    fd = allocation.export()
    driver.register(allocation, fd)
    return fd, allocation.memory_id, allocation.memory.nbytes, offset, stride


def _window(*planes: tuple) -> tuple:
    """windows[0][0] = the frame of `planes`."""
    return ((tuple(planes),),)


def test_an_allocation_is_imported_once_and_planes_lie_at_their_offsets() -> None:
    driver = FakeDriver()
    imports = _imports(3, driver)
    block = Allocation(1 << 16)
    base = block.memory.ctypes.data
    first, second = _plane(block, driver, 4096), _plane(block, driver, 8192, stride=128)
    frame = (first, second)
    windows = ((frame, frame),)  # a window that repeats its frame (the clip's ends)
    out = _plane(block, driver, 12288)
    converted, dst, leases = imports.frame(windows, (out,))
    assert driver.imports == [block.memory_id] and imports.imported == 1
    assert converted[0][0] == ((base + 4096, 64, None), (base + 8192, 128, None))
    assert converted[0][1] is converted[0][0]  # the repeated frame converted once
    assert dst == ((base + 12288, 64, None),)
    assert driver.current == [3]  # the device's context made current for the import
    # The bridge's fds stay open (it closes them); the import consumed a duplicate.
    assert all(is_open(fd) for fd in block.fds)
    assert [entry.leases for entry in leases] == [1]
    imports.release(leases)
    again = _plane(block, driver, 0)
    imports.release(imports.frame(_window(again), ())[2])
    assert driver.imports == [block.memory_id]  # cached by memory id, whatever the fd
    block.close()


def test_a_failed_import_closes_its_duplicate_and_leases_nothing() -> None:
    driver = FakeDriver()
    imports = _imports(0, driver)
    cached, failing = Allocation(4096), Allocation(4096)
    imports.release(imports.frame(_window(_plane(cached, driver, 0)), ())[2])
    driver.refuse = 1
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(CudaError, match="cuImportExternalMemory failed"):
        imports.frame(_window(_plane(cached, driver, 0), _plane(failing, driver, 0)), ())
    assert len(os.listdir("/proc/self/fd")) == before + 2  # the two exports, no duplicate
    assert imports._imports[cached.memory_id].leases == 0  # the frame's lease given back
    assert failing.memory_id not in imports._imports
    cached.close(), failing.close()


def test_the_count_is_bounded_and_leased_imports_are_kept() -> None:
    driver = FakeDriver()
    imports = _imports(0, driver, limit=2)
    blocks = [Allocation(4096) for _ in range(4)]
    held = imports.frame(_window(_plane(blocks[0], driver, 0)), ())[2]  # a frame in flight
    imports.release(imports.frame(_window(_plane(blocks[1], driver, 0)), ())[2])
    imports.release(imports.frame(_window(_plane(blocks[2], driver, 0)), ())[2])
    assert driver.released == [blocks[1].memory_id]  # the oldest unleased went, not block 0
    assert len(imports) == 2
    imports.release(held)
    imports.release(imports.frame(_window(_plane(blocks[3], driver, 0)), ())[2])
    assert driver.released == [blocks[1].memory_id, blocks[0].memory_id]
    imports.close()
    assert sorted(driver.released) == sorted(b.memory_id for b in blocks)
    assert len(imports) == 0
    for block in blocks:
        block.close()


def test_a_frame_over_the_limit_keeps_its_imports_until_it_is_done() -> None:
    driver = FakeDriver()
    imports = _imports(0, driver, limit=1)
    blocks = [Allocation(4096) for _ in range(3)]
    planes = tuple(_plane(block, driver, 0) for block in blocks)
    _, _, leases = imports.frame(_window(*planes), ())
    assert driver.released == [] and len(imports) == 3  # over the limit: all leased
    imports.release(leases)  # the frame is done: back to the limit, the newest kept
    assert driver.released == [blocks[0].memory_id, blocks[1].memory_id]
    imports.release(imports.frame(_window(_plane(blocks[2], driver, 0)), ())[2])
    assert len(driver.imports) == 3  # still cached
    for block in blocks:
        block.close()


def test_a_mapping_failed_after_the_import_leaves_the_fd_to_the_driver() -> None:
    """The driver took the duplicate and closed it with the import it destroyed: closing it
    again would close whatever fd took its number since (here the fake's bystander)."""
    driver = FakeDriver()
    imports = _imports(0, driver)
    block = Allocation(4096)
    driver.refuse_map = 1
    with pytest.raises(CudaError, match="cuExternalMemoryGetMappedBuffer failed"):
        imports.frame(_window(_plane(block, driver, 0)), ())
    assert driver.bystander is not None and is_open(driver.bystander)
    assert len(imports) == 0
    imports.release(imports.frame(_window(_plane(block, driver, 0)), ())[2])  # imports anew
    assert driver.imports == [block.memory_id]
    os.close(driver.bystander)
    block.close()


@pytest.mark.parametrize(
    "offset, stride, why",
    [(4096 - 3 * 64 - 59, 64, "past the end"), (0, 59, "rows overlap"), (-1, 64, "before")],
)
def test_a_plane_outside_its_allocation_is_refused(offset, stride, why) -> None:
    driver = FakeDriver()
    imports = _imports(0, driver)
    cached, block = Allocation(4096), Allocation(4096)
    imports.release(imports.frame(_window(_plane(cached, driver, 0)), ())[2])
    with pytest.raises(ValueError, match=r"avdenoise: plane 1 of a GPU frame must lie within "
                       r"its allocation of 4096 bytes with rows of 60 bytes at least, got "
                       f"offset {offset}, stride {stride} and 4 rows"):  # fmt: skip
        imports.frame(_window(_plane(cached, driver, 0), _plane(block, driver, offset, stride)), ())
    assert driver.imports == [cached.memory_id], why  # nothing imported for it
    assert imports._imports[cached.memory_id].leases == 0
    cached.close(), block.close()


def test_the_last_byte_of_an_allocation_is_a_plane_s() -> None:
    driver = FakeDriver()
    block = Allocation(4096)
    _, _, leases = _imports(0, driver).frame(_window(_plane(block, driver, 4096 - 3 * 64 - 60)), ())
    assert len(leases) == 1
    block.close()


def test_an_allocation_whose_size_changes_is_refused() -> None:
    driver = FakeDriver()
    imports = _imports(0, driver)
    block = Allocation(4096)
    imports.release(imports.frame(_window(_plane(block, driver, 0)), ())[2])
    fd, memory_id, _, offset, stride = _plane(block, driver, 0)
    with pytest.raises(ValueError, match=f"allocation {memory_id} of a GPU frame is 8192 bytes, "
                       "and its import 4096"):  # fmt: skip
        imports.frame(_window((fd, memory_id, 8192, offset, stride)), ())
    assert imports._imports[memory_id].leases == 0
    block.close()


def test_the_limit_is_the_module_s_when_the_imports_are_made(monkeypatch) -> None:
    monkeypatch.setattr(vkimport, "MAX_IMPORTS", 3)
    assert _imports().limit == 3


def test_frames_in_flight_on_several_threads_keep_their_imports() -> None:
    """Threads lease and release frames over more allocations than the limit: no import is
    released while a frame leases it, each once, and the count comes back to the limit."""
    driver = FakeDriver()
    imports = _imports(0, driver, limit=2)
    blocks = [Allocation(4096) for _ in range(6)]
    failures: list[str] = []

    def render(seed: int) -> None:
        chooser = random.Random(seed)
        for _ in range(150):
            planes = [_plane(chooser.choice(blocks), driver, 0) for _ in range(3)]
            _, _, leases = imports.frame(_window(*planes), ())
            for _ in range(2):  # the frame's device work, while other threads import
                if not all(entry.memory.alive for entry in leases):
                    failures.append("a leased import was released")
                time.sleep(0)
            imports.release(leases)
            for fd, *_ in planes:  # the bridge closes its exports
                os.close(fd)

    threads = [threading.Thread(target=render, args=(seed,)) for seed in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert imports.imported > len(blocks)  # evicted and imported again
    assert len(imports) <= 2
    imports.close()
    assert sorted(driver.released) == sorted(driver.imports)  # each import released once
