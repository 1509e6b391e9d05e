"""The CUDA backend's frames of GPU clips, run without a GPU (``_backends/cuda/gpu_frames.py``).

The fakes of ``test_backend_host.py`` (``_fake_cuda.py``: "device" memory in host buffers, the
window-maximum NLM kernel) and a fake driver whose exported allocations are NumPy buffers
(``_fake_vulkan.py``) run the real backend on the bridge's protocol for GPU clips: what CI
checks is that every plane is read and written where its allocation and offset say, with its
stride, that passed-through planes are copied on the device, that nothing crosses the bus,
and that imports, leases and fds end as ``vkimport`` promises.
"""

from __future__ import annotations

import numpy as np
import pytest

from avdenoise_vs._backends.cuda import backend as cuda_backend
from avdenoise_vs._cuda import vkimport
from avdenoise_vs._nlm.cuda import nlm_pass as cuda_nlm
from avdenoise_vs._params.options import ColorFamily, Distance, FrameLayout, SampleType, WeightMode
from avdenoise_vs._params.settings import NlmSettings

from ._fake_cuda import LENGTH, expected, install, make_frames
from ._fake_vulkan import UUID, FakeDriver, GpuFrameStore, is_open

H2D, D2H, D2D = "copy1", "copy2", "copy3"


@pytest.fixture
def fakes(monkeypatch):
    """(runtime, driver): the fake CUDA and the fake driver of the imports."""
    runtime, _ = install(monkeypatch)
    driver = FakeDriver()
    monkeypatch.setattr(vkimport, "Driver", lambda: driver)
    return runtime, driver


LAYOUT = FrameLayout(40, 12, ColorFamily.YUV, 1, 1, 16, SampleType.INTEGER)


def _backend(planes=(0,), radius=1):
    """A luma NLM pass (chroma passed through) on a GPU clip of the fake device."""
    options = NlmSettings(
        planes=planes, distance=Distance.LUMA if planes == (0,) else Distance.CHROMA,
        strength=1.2, radius=radius, has_ref=False, search_radius=2, patch_radius=1,
        wmode=WeightMode.WELSCH, wref=1.0,
    )  # fmt: skip
    return cuda_backend.CudaBackend((options,), LAYOUT, vulkan_uuid=UUID)


def _frame(backend, store, n, radius, out_key):
    """One call of the bridge's protocol for GPU clips; the exported fds, as the bridge keeps
    them."""
    numbers = tuple(min(max(n + t, 0), LENGTH - 1) for t in range(-radius, radius + 1))
    exported = {f: store.planes(("in", f)) for f in dict.fromkeys(numbers)}
    windows = (tuple(exported[f] for f in numbers),)
    dst = store.planes(out_key)
    backend.gpu_frames.process(n, numbers, windows, dst)
    return [fd for planes in (*exported.values(), dst) for fd, *_ in planes]


@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize("radius", [0, 1])
def test_planes_are_read_and_written_in_the_exported_memory(fakes, monkeypatch, radius, gated):
    """Gated passes (BM3D's) too: their output buffer is the gate's, and they wait asleep."""
    runtime, driver = fakes
    if gated:
        monkeypatch.setattr(cuda_nlm.NlmPass, "frames_in_flight", 2, raising=False)
    backend = _backend(radius=radius)
    assert (backend._gate is not None) == gated
    assert backend.transfer == "device"
    backend.warm_up()  # its synthetic frame on the "device" too
    store = GpuFrameStore(driver, LAYOUT)
    frames = make_frames(LAYOUT)
    for n in range(LENGTH):
        store.put(("in", n), frames[n])
    before = dict(runtime.counts)
    for n in range(LENGTH):
        fds = _frame(backend, store, n, radius, ("out", n))
        assert all(is_open(fd) for fd in fds)  # the bridge's to close
        np.testing.assert_array_equal(store.array(("out", n), 0), expected(frames, n, radius, 0))
        for p in (1, 2):  # passed through from the centre frame, on the device
            np.testing.assert_array_equal(store.array(("out", n), p), frames[n][p])
    counts = {k: runtime.counts.get(k, 0) - before.get(k, 0) for k in (H2D, D2H, D2D)}
    # Nothing crossed the bus: each source frame's luma into its slot once, and per output
    # frame its luma out of the output buffer and the two chroma planes through.
    assert counts == {H2D: 0, D2H: 0, D2D: LENGTH + 3 * LENGTH}
    assert sorted(driver.imports) == sorted(a.memory_id for a in store.allocations)
    assert all(entry.leases == 0 for entry in backend.gpu_frames.imports._imports.values())
    store.close()


def test_a_failed_import_fails_the_frame_and_the_next_frame_runs(fakes):
    _, driver = fakes
    backend = _backend(radius=0)
    store = GpuFrameStore(driver, LAYOUT, frames_per_allocation=1)
    frames = make_frames(LAYOUT)
    store.put(("in", 0), frames[0])
    driver.refuse = 1
    with pytest.raises(RuntimeError, match="cuImportExternalMemory failed"):
        _frame(backend, store, 0, 0, ("out", 0))
    _frame(backend, store, 0, 0, ("out", 1))
    np.testing.assert_array_equal(store.array(("out", 1), 0), expected(frames, 0, 0, 0))
    backend.gpu_frames.close()
    assert sorted(driver.released) == sorted(driver.imports)
    store.close()


def test_a_gpu_clip_backend_runs_on_the_device_with_the_clip_s_uuid(fakes, monkeypatch):
    _, driver = fakes
    driver._uuids = ["ff" * 16]
    with pytest.raises(Exception, match="no CUDA device is the GPU clip's Vulkan device"):
        _backend()


def test_a_failed_frame_waits_for_its_stream_before_giving_its_imports_back(fakes):
    runtime, driver = fakes
    backend = _backend(radius=0)
    store = GpuFrameStore(driver, LAYOUT)
    store.put(("in", 0), make_frames(LAYOUT)[0])
    imports = backend.gpu_frames.imports
    seen = []

    def failing(*args):
        seen.append([entry.leases for entry in imports._imports.values()])
        raise RuntimeError("avdenoise: a kernel failed")

    backend.gpu_frames._frame = failing
    synchronized = runtime.counts.get("streamSynchronize", 0)
    with pytest.raises(RuntimeError, match="a kernel failed"):
        _frame(backend, store, 0, 0, ("out", 0))
    assert seen == [[1]]  # leased while the frame ran
    assert runtime.counts["streamSynchronize"] == synchronized + 1
    assert all(entry.leases == 0 for entry in imports._imports.values())
    store.close()


def test_a_plane_that_does_not_fit_its_allocation_fails_the_frame(fakes):
    _, driver = fakes
    backend = _backend(radius=0)
    store = GpuFrameStore(driver, LAYOUT)
    store.put(("in", 0), make_frames(LAYOUT)[0])
    numbers = (0,)
    planes = list(store.planes(("in", 0)))
    fd, memory_id, memory_size, offset, stride = planes[1]
    planes[1] = (fd, memory_id, memory_size, memory_size - stride, stride)  # rows past the end
    with pytest.raises(ValueError, match="plane 1 of a GPU frame must lie within its allocation"):
        backend.gpu_frames.process(0, numbers, ((tuple(planes),),), store.planes(("out", 0)))
    assert all(entry.leases == 0 for entry in backend.gpu_frames.imports._imports.values())
    store.close()
