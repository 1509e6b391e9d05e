"""scripts/bench/gpu_frames_probe.py: its C plugin builds against the installed headers, its
ctypes mirrors match C's layouts, the CUDA import owns the fds it is handed, and without a
Vulkan device it ends in a verdict naming the step that stopped it."""

from __future__ import annotations

import ctypes
import mmap
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "scripts" / "bench"
if str(BENCH) not in sys.path:  # the probe's modules import each other from their folder
    sys.path.insert(0, str(BENCH))

import _gpu_frames_build as build  # noqa: E402
import _gpu_frames_foreign as foreign  # noqa: E402

from avdenoise_vs._cuda.vkimport import DEDICATED, Driver  # noqa: E402

HEADER = build.vapoursynth_include() / "VSVulkan4.h"
needs_gpu_api = pytest.mark.skipif(
    not HEADER.is_file(), reason="this VapourSynth has no VSVulkan4.h (R80+ has)"
)
needs_compiler = pytest.mark.skipif(
    not any(shutil.which(c) for c in ("cc", "gcc", "clang")), reason="no C compiler"
)


def test_cuda_descriptors_have_cuda_h_sizes() -> None:
    # cuda.h on 64-bit Linux: the handle union is 16 bytes at offset 8, structs pad to 8 (the
    # memory's descriptors are vkimport's, tested with it).
    assert ctypes.sizeof(foreign._SemaphoreHandleDesc) == 96
    assert ctypes.sizeof(foreign._SemaphoreParams) == 144


def test_stand_in_declares_every_entry_point_and_type() -> None:
    header = """
    /* VkIgnoredInComment */
    #define VS_VK_FUNCTION_LIST(FN) \\
        FN(VS_VK_GLOBAL,   VS_VK_REQUIRED, CreateInstance) \\
        FN(VS_VK_DEVICE,   VS_VK_OPTIONAL, CmdEndDebugUtilsLabelEXT)
    typedef struct X { VkBuffer buffer; VkDeviceSize size; VkPipelineStageFlags2 stages;
        VkMemoryPropertyFlags flags; const VkMemoryRequirements *requirements; } X;
    """
    text = build.vulkan_stand_in(header)
    assert build.vulkan_entry_points(header) == ["CreateInstance", "CmdEndDebugUtilsLabelEXT"]
    for line in [
        "typedef void (*PFN_vkCreateInstance)(void);",
        "typedef void (*PFN_vkCmdEndDebugUtilsLabelEXT)(void);",
        "typedef struct VkBuffer_T *VkBuffer;",
        "typedef uint64_t VkDeviceSize;",
        "typedef uint64_t VkPipelineStageFlags2;",
        "typedef uint32_t VkMemoryPropertyFlags;",
        "typedef struct VkMemoryRequirements VkMemoryRequirements;",
    ]:
        assert line in text
    assert "VkIgnoredInComment" not in text


def test_stand_in_refuses_a_type_whose_size_it_cannot_know() -> None:
    """An enum or a struct by value typed as a handle would move every field after it."""
    with pytest.raises(ValueError, match="VkFormat is no Vulkan type the stand-in knows"):
        build.vulkan_stand_in("typedef struct X { VkFormat format; VkBuffer buffer; } X;")


@needs_gpu_api
@needs_compiler
def test_plugin_builds_and_its_call_matches_the_mirror(tmp_path: Path) -> None:
    library, _ = build.build(tmp_path)
    native = ctypes.CDLL(str(library))
    native.probe_call_size.restype = ctypes.c_int64
    assert native.probe_call_size() == ctypes.sizeof(foreign.Call)


@needs_gpu_api
@needs_compiler
def test_without_vulkan_the_verdict_names_the_vulkan_step(tmp_path: Path) -> None:
    env = dict(os.environ, VK_DRIVER_FILES=str(tmp_path / "none.json"), VK_ICD_FILENAMES="")
    done = subprocess.run(
        [sys.executable, str(BENCH / "gpu_frames_probe.py"), "--skip-ours"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    if "VERDICT: PASS" in done.stdout:
        pytest.skip("this machine has a usable Vulkan device")
    assert done.returncode == 1, done.stderr
    assert "[FAIL] vulkan device" in done.stdout
    assert done.stdout.strip().splitlines()[-1].startswith("VERDICT: FAIL at vulkan device: ")


class FakeDriver:
    """libcuda's import calls, failing for the flags in `refuse`; a success consumes the fd
    (closes it) as the real driver does."""

    def __init__(self, refuse: set[int] = frozenset()) -> None:
        self.refuse, self.imports = refuse, []

    def cuImportExternalMemory(self, out, desc) -> int:
        desc = desc._obj
        self.imports.append((desc.flags, int(desc.handle[0]), desc.size))
        if desc.flags in self.refuse:
            return 1
        os.close(int(desc.handle[0]))
        out._obj.value = 0xABC
        return 0

    def cuExternalMemoryGetMappedBuffer(self, out, memory, desc) -> int:
        out._obj.value = 0x10000
        return 0

    def cuGetErrorName(self, status, text) -> int:
        text._obj.value = b"CUDA_ERROR_INVALID_VALUE"
        return 0


def fake_cuda(driver: FakeDriver) -> tuple[foreign.Cuda, list[int]]:
    pointers: list[int] = []
    cupy = SimpleNamespace(
        cuda=SimpleNamespace(
            UnownedMemory=lambda ptr, size, owner, device: pointers.append(ptr) or ptr,
            MemoryPointer=lambda memory, offset: memory,
        ),
        ndarray=lambda shape, dtype, memptr: np.zeros(shape, dtype),
    )
    cuda = foreign.Cuda.__new__(foreign.Cuda)
    cuda.driver, cuda.cupy, cuda.ordinal = Driver(driver), cupy, 0
    cuda.memories = {}
    return cuda, pointers


def plane(fd: int, offset: int) -> foreign.Plane:
    return foreign.Plane(
        fd=fd, memory_id=7, memory_size=1 << 20, offset=offset, size=64 * 4, stride=64,
        width=60, height=4,
    )  # fmt: skip


def is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_one_import_per_allocation_and_every_fd_consumed_or_closed() -> None:
    cuda, pointers = fake_cuda(FakeDriver())
    first, second = os.open(os.devnull, os.O_RDONLY), os.open(os.devnull, os.O_RDONLY)
    fds = dict.fromkeys([first, second])
    a = cuda.array(plane(first, 4096), np.uint8, fds)
    b = cuda.array(plane(second, 8192), np.uint8, fds)
    assert [i[1] for i in cuda.driver.lib.imports] == [first]  # the whole allocation, once
    assert cuda.driver.lib.imports[0][2] == 1 << 20
    assert pointers == [0x10000 + 4096, 0x10000 + 8192]  # base + each plane's offset
    assert a.shape == b.shape == (4, 60)
    assert fds == {} and not is_open(first) and not is_open(second)


def test_an_import_refused_plainly_is_retried_as_dedicated() -> None:
    cuda, _ = fake_cuda(FakeDriver(refuse={0}))
    fd = os.open(os.devnull, os.O_RDONLY)
    cuda.array(plane(fd, 0), np.uint8, fds := {fd: None})
    assert [i[0] for i in cuda.driver.lib.imports] == [0, DEDICATED]
    assert cuda.dedicated_imports == 1 and fds == {}


def test_a_refused_import_leaves_the_fd_to_close() -> None:
    cuda, _ = fake_cuda(FakeDriver(refuse={0, DEDICATED}))
    fd = os.open(os.devnull, os.O_RDONLY)
    fds = {fd: None}
    with pytest.raises(foreign.CudaError, match=r"cuImportExternalMemory failed: CUDA_"):
        cuda.array(plane(fd, 0), np.uint8, fds)
    assert fds == {fd: None} and is_open(fd)
    foreign.close_left(fds)
    assert not is_open(fd)


def test_mapped_double_reads_and_writes_a_mesa_memory_file() -> None:
    size, start = 1 << 16, 4096
    fd = os.memfd_create("probe-test")
    os.ftruncate(fd, start + size + 40)
    with mmap.mmap(fd, 0) as view:  # Mesa's header: the file's size, then the data's start
        view[0:16] = (start + size + 40).to_bytes(8, "little") + start.to_bytes(8, "little")
        view[start + 256 : start + 256 + 64] = bytes(range(64))
    mapped = foreign.Mapped()
    exported = foreign.Plane(
        fd=os.dup(fd), memory_id=1, memory_size=size, offset=256, size=128, stride=64,
        width=60, height=2,
    )  # fmt: skip
    fds = {exported.fd: None}
    array = mapped.array(exported, np.uint8, fds)
    assert fds == {}
    assert array[0].tolist() == list(range(60))
    array[1, :4] = 9
    assert os.pread(fd, 4, start + 256 + 64) == b"\x09" * 4
    os.close(fd)
