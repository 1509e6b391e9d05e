"""The CUDA backend's host side, run without a GPU: slots, uploads, launches and downloads.

A fake ``cupy`` keeps "device" memory in host buffers and copies with ``ctypes.memmove``, and
a fake NLM kernel writes, for every pixel of the pass's planes, the largest sample of its
temporal window. The real :class:`~avdenoise_vs._cuda.backend.CudaBackend` then runs the
bridge's frame protocol, so what CI checks here is the pointer arithmetic (plane offsets and
pitches, chroma planes, staging buffers), the window's slots in time order, and that each
source frame crosses the bus once. The kernels themselves are tests/cuda's job.
"""

from __future__ import annotations

import ctypes
import sys
import threading
import types

import numpy as np
import pytest

from avdenoise_vs._cuda import _cache as cuda_cache
from avdenoise_vs._cuda import backend as cuda_backend
from avdenoise_vs._cuda import nlm as cuda_nlm
from avdenoise_vs._cuda.nlm import args_dtype
from avdenoise_vs._options import (
    ColorFamily,
    Distance,
    FrameLayout,
    PlaneOptions,
    SampleType,
    WeightMode,
)

LENGTH = 8


class _DeviceMemory:
    """A fake device (or pinned) allocation: a host buffer and its address."""

    def __init__(self, nbytes: int) -> None:
        self.array = np.zeros(max(nbytes, 1), np.uint8)
        self.ptr = self.array.ctypes.data

    def __buffer__(self, flags):  # np.frombuffer on fake pinned memory
        return memoryview(self.array)


class _Handle:
    """A stream or an event: only its address matters."""

    _next = iter(range(1 << 20, 1 << 30, 16))

    def __init__(self, *args, **kwargs) -> None:
        self.ptr = next(self._next)


class _Runtime:
    """The runtime calls the backend makes, copies done at once, calls counted."""

    CUDARuntimeError = RuntimeError
    cudaDevAttrMaxSharedMemoryPerBlockOptin = 97

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.fail_uploads = 0  # this many host-to-device copies raise

    def _count(self, name: str) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1

    def getDeviceCount(self) -> int:  # noqa: N802 (CuPy's names)
        return 1

    def getDevice(self) -> int:  # noqa: N802
        return 0

    def setDevice(self, device: int) -> None:  # noqa: N802
        self._count("setDevice")

    def deviceGetAttribute(self, attribute: int, device: int) -> int:  # noqa: N802
        return 227 * 1024

    def memGetInfo(self) -> tuple[int, int]:  # noqa: N802
        return 64 << 30, 80 << 30

    def memcpy2DAsync(self, dst, dpitch, src, spitch, width, height, kind, stream):  # noqa: N802
        self._copy(kind)
        for row in range(height):
            ctypes.memmove(dst + row * dpitch, src + row * spitch, width)

    def memcpyAsync(self, dst, src, nbytes, kind, stream):  # noqa: N802
        self._copy(kind)
        ctypes.memmove(dst, src, nbytes)

    def _copy(self, kind: int) -> None:
        self._count(f"copy{kind}")
        if kind == 1 and self.fail_uploads:
            self.fail_uploads -= 1
            raise RuntimeError("fake upload failure")

    def streamSynchronize(self, stream) -> None:  # noqa: N802
        self._count("streamSynchronize")


_WAIT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)  # the bridge's wait function type


class _Calls:
    """``cuda_calls()``: launches run the fake kernel registered under the function handle;
    ``synchronize_address`` is a C-callable function that counts the bridge's waits."""

    def __init__(self) -> None:
        self.kernels = {}
        self.waits = 0
        self.wait_status = 0  # what the bridge's wait returns (0: success)
        self._wait = _WAIT(self._bridge_wait)  # kept alive: the address points into it
        self.synchronize_address = ctypes.cast(self._wait, ctypes.c_void_p).value

    def _bridge_wait(self, stream) -> int:
        self.waits += 1
        return self.wait_status

    def stream_idle(self, stream) -> bool:
        return True

    def launch(self, function, grid, block, shared, stream, args) -> None:
        self.kernels[function](args.record)

    def eventRecord(self, event, stream) -> None:  # noqa: N802
        pass

    def streamWaitEvent(self, stream, event, flags=0) -> None:  # noqa: N802
        pass

    def copy_to_device(self, dst, src, nbytes, stream) -> None:
        self.runtime.memcpyAsync(dst, src, nbytes, 1, stream)

    def copy_to_host(self, dst, src, nbytes, stream) -> None:
        self.runtime.memcpyAsync(dst, src, nbytes, 2, stream)


def _window_max_kernel(npass, dtype: np.dtype):
    """A fake NLM kernel: each output sample is the largest of its window's samples (the
    frames from ``first`` on, as the real kernel reads)."""
    planes = len(npass.options.planes)
    height, width = int(npass._template["height"][0]), int(npass._template["width"][0])
    itemsize = dtype.itemsize

    def plane(address: int, offset: int, pitch: int) -> np.ndarray:
        size = (offset + (height - 1) * pitch + width) * itemsize
        raw = (ctypes.c_char * size).from_address(address)
        flat = np.frombuffer(raw, dtype=dtype)
        return np.lib.stride_tricks.as_strided(
            flat[offset:], (height, width), (pitch * itemsize, itemsize)
        )

    def run(record: np.ndarray) -> None:
        record = record.view(args_dtype(npass.window))[0]
        pitch, out_pitch = int(record["pitch"]), int(record["out_pitch"])
        first = int(record["first"])
        taking_part = record["value"][first : len(record["value"]) - first]
        for i in range(planes):
            frames = [plane(int(a), int(record["plane_off"][i]), pitch) for a in taking_part]
            out = plane(int(record["out"]), int(record["out_off"][i]), out_pitch)
            out[...] = np.max(frames, axis=0)

    return run


@pytest.fixture
def fake_cuda(monkeypatch):
    """Install the fakes; returns (runtime, calls)."""
    runtime, calls = _Runtime(), _Calls()
    calls.runtime = runtime  # copies to and from staging buffers count as the runtime's
    cuda = types.SimpleNamespace(
        runtime=runtime,
        alloc=_DeviceMemory,
        alloc_pinned_memory=_DeviceMemory,
        Stream=_Handle,
        Event=_Handle,
        Device=lambda device: _NullContext(),
    )
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))
    monkeypatch.setattr(cuda_cache, "WAIT_LIMIT_S", 5.0)  # a bug fails, not hangs
    monkeypatch.setattr(cuda_backend, "cuda_calls", lambda: calls)

    def load(self) -> int:
        self._calls = calls
        handle = id(self)
        calls.kernels[handle] = _window_max_kernel(self, np.dtype(self.spec.dtype))
        self._function_ptr = handle
        return handle

    monkeypatch.setattr(cuda_nlm.NlmPass, "_load", load)
    return runtime, calls


class _NullContext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _nlm(planes, distance, radius=1) -> PlaneOptions:
    return PlaneOptions(
        algorithm="nlm", planes=planes, distance=distance, strength=1.2, radius=radius,
        search_radius=2, patch_radius=1, wmode=WeightMode.WELSCH, wref=1.0, has_ref=False,
    )  # fmt: skip


def _frames(layout: FrameLayout) -> list[list[np.ndarray]]:
    """Frame n: every plane filled with n + 1 plus a pattern, so windows are told apart."""
    frames = []
    for n in range(LENGTH):
        planes = []
        for p in range(layout.num_planes):
            h, w = layout.plane_shape(p)
            pattern = (np.arange(h)[:, None] + 3 * np.arange(w)[None, :] + 7 * p) % 5
            planes.append((pattern * 10 + n + 1).astype(layout.dtype))
        frames.append(planes)
    return frames


def _padded(array: np.ndarray) -> np.ndarray:
    """A copy of `array` in rows padded past its width, as VapourSynth frames are."""
    h, w = array.shape
    store = np.zeros((h, w + 13), array.dtype)
    store[:, :w] = array
    return store[:, :w]


def _plane(array: np.ndarray):
    """What the bridge passes for a plane: address, stride, the rows' bytes (a memoryview)."""
    rows = np.ndarray((array.shape[0] * array.strides[0],), np.uint8, buffer=array.base)
    return array.ctypes.data, array.strides[0], memoryview(rows)


class _Bridge:
    """What ``bridge.c`` does around ``bridge_process``, in Python: each thread's staging
    requests are honoured on its next frame (whose centre then arrives as None), and the
    host step is done after the call (waited through its C address, rows copied out)."""

    def __init__(self) -> None:
        self.requests = threading.local()
        self.staged_frames = 0

    def process(self, backend, n, numbers, windows, dst):
        centre = len(numbers) // 2
        windows = [list(window) for window in windows]
        for i, plane, address, stride in getattr(self.requests, "copies", ()):
            src_address, src_stride, memory = windows[i][centre][plane]
            rows = backend.layout.plane_shape(plane)[0]
            row_bytes = backend.layout.plane_shape(plane)[1] * backend.layout.dtype.itemsize
            for row in range(rows):
                ctypes.memmove(address + row * stride, src_address + row * src_stride, row_bytes)
        for i in {copy[0] for copy in getattr(self.requests, "copies", ())}:
            windows[i][centre] = None
            self.staged_frames += 1
        self.requests.copies = ()
        step = backend.bridge_process(n, numbers, tuple(map(tuple, windows)), dst)
        if step is None:
            return
        wait_address, argument, outs, self.requests.copies = step
        if wait_address and _WAIT(wait_address)(argument):
            raise RuntimeError("avdenoise: waiting for the GPU failed")
        for plane, address, stride in outs:
            dst_address, dst_stride, _ = dst[plane]
            rows, width = backend.layout.plane_shape(plane)
            for row in range(rows):
                ctypes.memmove(
                    dst_address + row * dst_stride,
                    address + row * stride,
                    width * backend.layout.dtype.itemsize,
                )


@pytest.fixture(params=["python", "bridge"])
def caller(request, monkeypatch):
    """Who finishes frames: Python (``process``) or the bridge (``bridge_process``)."""
    monkeypatch.setenv("AVDENOISE_DEBUG", f"host_copies={request.param}")
    return _Bridge() if request.param == "bridge" else None


def _process(backend, layout, frames, n, radius, written, caller=None):
    """One call of the bridge's protocol for frame n; returns the output planes."""
    numbers = tuple(min(max(n + t, 0), LENGTH - 1) for t in range(-radius, radius + 1))
    keep = [[_padded(a) for a in frames[f]] for f in numbers]
    windows = (tuple(tuple(_plane(a) for a in planes) for planes in keep),)
    out = [_padded(np.zeros(layout.plane_shape(p), layout.dtype)) for p in range(3)]
    dst = tuple(_plane(out[p]) if p in written else None for p in range(layout.num_planes))
    if caller is None:
        backend.process(n, numbers, windows, dst)
    else:
        caller.process(backend, n, numbers, windows, dst)
    return out


def _render_in_threads(backend, layout, frames, order, radius, written, caller=None):
    """Plane 0 of the frames of `order`, rendered by 4 threads (every 4th frame each)."""
    results, errors = {}, []

    def render(ns):
        try:
            for n in ns:
                results[n] = _process(backend, layout, frames, n, radius, written, caller)[0]
        except Exception as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=render, args=(list(order)[i::4],)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors
    return results


def _expected(frames, n, radius, plane):
    radius = min(radius, n)  # KNLMeansCL's window at the clip's start
    numbers = [min(n + t, LENGTH - 1) for t in range(-radius, radius + 1)]
    return np.max([frames[f][plane] for f in numbers], axis=0)


LAYOUTS = {
    "GRAY8": (
        FrameLayout(40, 12, ColorFamily.GRAY, 0, 0, 8, SampleType.INTEGER),
        [((0,), Distance.LUMA)],
    ),
    "YUV420P16": (
        FrameLayout(40, 12, ColorFamily.YUV, 1, 1, 16, SampleType.INTEGER),
        [((0,), Distance.LUMA), ((1, 2), Distance.CHROMA)],
    ),
    "YUV444PS": (
        FrameLayout(24, 10, ColorFamily.YUV, 0, 0, 32, SampleType.FLOAT),
        [((0, 1, 2), Distance.YUV)],
    ),
}


def _backend(name: str, transfer: str, radius: int = 1, **kwargs):
    layout, groups = LAYOUTS[name]
    passes = tuple(_nlm(planes, distance, radius) for planes, distance in groups)
    backend = cuda_backend.CudaBackend(passes, layout, transfer=transfer, **kwargs)
    written = {p for options in passes for p in options.planes}
    return backend, layout, written


@pytest.mark.parametrize("transfer", ["direct", "staged"])
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_every_plane_gets_its_window_in_order(fake_cuda, caller, name, transfer):
    runtime, _ = fake_cuda
    backend, layout, written = _backend(name, transfer)
    backend.warm_up()
    frames = _frames(layout)
    before = dict(runtime.counts)
    for n in range(LENGTH):
        out = _process(backend, layout, frames, n, 1, written, caller)
        for p in written:
            np.testing.assert_array_equal(out[p], _expected(frames, n, 1, p), err_msg=f"{n}/{p}")
    # Every source frame crossed the bus once, one copy per plane (direct) or per frame.
    copies = runtime.counts.get("copy1", 0) - before.get("copy1", 0)
    per_frame = 1 if transfer == "staged" else len(written)
    assert copies == LENGTH * per_frame


def test_threads_share_uploads(fake_cuda):
    runtime, _ = fake_cuda
    backend, layout, written = _backend("GRAY8", "direct")
    frames = _frames(layout)
    results = _render_in_threads(backend, layout, frames, range(LENGTH), 1, written)
    for n in range(LENGTH):
        np.testing.assert_array_equal(results[n], _expected(frames, n, 1, 0))
    assert runtime.counts["copy1"] == LENGTH


def test_failed_upload_fails_the_frame_and_the_next_call_uploads_again(fake_cuda):
    runtime, _ = fake_cuda
    backend, layout, written = _backend("GRAY8", "direct")
    frames = _frames(layout)
    runtime.fail_uploads = 1
    with pytest.raises(RuntimeError, match="fake upload failure"):
        _process(backend, layout, frames, 3, 1, written)
    out = _process(backend, layout, frames, 3, 1, written)
    np.testing.assert_array_equal(out[0], _expected(frames, 3, 1, 0))


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_bridge_stages_one_frame_windows_and_finishes_them(fake_cuda, name, monkeypatch):
    """Radius 0, staged: after a thread's first frame the bridge copies each frame into the
    staging buffer before the call, Python copies nothing, and the bridge waits and copies out."""
    monkeypatch.setenv("AVDENOISE_DEBUG", "host_copies=bridge")
    runtime, calls = fake_cuda
    bridge = _Bridge()
    backend, layout, written = _backend(name, "staged", radius=0)
    python_copies = []

    def copy(dst, src):
        python_copies.append(dst.shape)
        np.copyto(dst, src)

    backend._copy = copy
    frames = _frames(layout)
    for n in range(LENGTH):
        out = _process(backend, layout, frames, n, 0, written, bridge)
        for p in written:
            np.testing.assert_array_equal(out[p], frames[n][p], err_msg=f"{n}/{p}")
    assert bridge.staged_frames == LENGTH - 1  # all but the thread's first
    assert len(python_copies) == layout.num_planes  # the first frame's upload only
    assert calls.waits == LENGTH
    assert runtime.counts.get("streamSynchronize", 0) == 0


def test_bridge_threads_evict_and_reuse_slots(fake_cuda, monkeypatch):
    """Slots of frames the bridge finishes are released by the thread's next frame: with a
    cache smaller than the frames in flight, every frame still gets its own samples."""
    monkeypatch.setenv("AVDENOISE_DEBUG", "host_copies=bridge")
    bridge = _Bridge()
    backend, layout, written = _backend("GRAY8", "staged", radius=0, cache_slots=2)
    frames = _frames(layout)
    order = [n % LENGTH for n in range(4 * LENGTH)]
    results = _render_in_threads(backend, layout, frames, order, 0, written, bridge)
    for n in range(LENGTH):
        np.testing.assert_array_equal(results[n], frames[n][0])
    assert bridge.staged_frames > 0


def test_failed_bridge_wait_fails_the_frame_and_the_next_one_synchronizes(fake_cuda, monkeypatch):
    monkeypatch.setenv("AVDENOISE_DEBUG", "host_copies=bridge")
    runtime, calls = fake_cuda
    bridge = _Bridge()
    backend, layout, written = _backend("GRAY8", "staged", radius=0)
    frames = _frames(layout)
    calls.wait_status = 7
    with pytest.raises(RuntimeError, match="waiting for the GPU failed"):
        _process(backend, layout, frames, 2, 0, written, bridge)
    calls.wait_status = 0
    monkeypatch.setattr(calls, "stream_idle", lambda stream: False)  # still busy, say
    out = _process(backend, layout, frames, 3, 0, written, bridge)
    np.testing.assert_array_equal(out[0], frames[3][0])
    assert runtime.counts["streamSynchronize"] == 1  # the failed frame's, before reuse


# --- a failed warm-up: the passes stay retryable ----------------------------------------------

_REAL_NLM_LOAD = cuda_nlm.NlmPass._load


class _FlakyKernel:
    """A ``cupy.RawKernel`` whose compile (``.kernel``) fails the first `failures` times."""

    def __init__(self, handle: int, failures: int, attempts: list) -> None:
        self._handle, self._failures, self._attempts = handle, failures, attempts

    @property
    def kernel(self):
        self._attempts.append(self._handle)
        if len(self._attempts) <= self._failures:
            raise RuntimeError("fake NVRTC failure")
        return types.SimpleNamespace(ptr=self._handle)


def _flaky_kernels(monkeypatch, calls, npass, failures: int) -> list:
    """Make `npass` compile through its real ``_load`` with a factory that fails at first;
    returns the list of compile attempts."""
    attempts: list = []
    handle = id(npass)
    calls.kernels[handle] = _window_max_kernel(npass, np.dtype(npass.spec.dtype))
    factory = types.ModuleType("avdenoise_vs._cuda._kernels")
    factory.get_nlm_main_kernel = lambda spec: _FlakyKernel(handle, failures, attempts)
    monkeypatch.setitem(sys.modules, factory.__name__, factory)
    monkeypatch.setattr(cuda_nlm.NlmPass, "_load", _REAL_NLM_LOAD)
    monkeypatch.setattr(cuda_nlm, "cuda_calls", lambda: calls)
    return attempts


def test_failed_warm_up_compiles_again_on_the_first_frame(fake_cuda, monkeypatch):
    _, calls = fake_cuda
    backend, layout, written = _backend("GRAY8", "direct")
    attempts = _flaky_kernels(monkeypatch, calls, backend._passes[0], failures=1)
    with pytest.raises(RuntimeError, match="fake NVRTC failure"):
        backend.warm_up()
    frames = _frames(layout)
    for n in range(LENGTH):
        out = _process(backend, layout, frames, n, 1, written)
        np.testing.assert_array_equal(out[0], _expected(frames, n, 1, 0))
    assert len(attempts) == 2, "one failed compile in the warm-up, one on the first frame"


def test_warm_up_failing_after_its_uploads_leaves_no_synthetic_frame(fake_cuda, monkeypatch):
    _, calls = fake_cuda
    backend, layout, written = _backend("GRAY8", "direct")
    launch = calls.launch
    failures = [RuntimeError("fake launch failure")]

    def launch_once_failing(*args):
        if failures:
            raise failures.pop()
        launch(*args)

    monkeypatch.setattr(calls, "launch", launch_once_failing)
    with pytest.raises(RuntimeError, match="fake launch failure"):
        backend.warm_up()
    warm_keys = [(cuda_backend._WARM_BASE, cuda_backend._WARM_FRAME + t) for t in range(3)]
    assert not any(key in backend._cache for key in warm_keys)
    frames = _frames(layout)
    out = _process(backend, layout, frames, 2, 1, written)
    np.testing.assert_array_equal(out[0], _expected(frames, 2, 1, 0))


def test_second_compile_failure_is_a_frame_error(fake_cuda, monkeypatch):
    _, calls = fake_cuda
    backend, layout, written = _backend("GRAY8", "direct")
    _flaky_kernels(monkeypatch, calls, backend._passes[0], failures=2)
    with pytest.raises(RuntimeError, match="fake NVRTC failure"):
        backend.warm_up()
    frames = _frames(layout)
    with pytest.raises(RuntimeError, match="fake NVRTC failure"):
        _process(backend, layout, frames, 0, 1, written)
    out = _process(backend, layout, frames, 1, 1, written)  # the frame after compiles
    np.testing.assert_array_equal(out[0], _expected(frames, 1, 1, 0))


def test_failed_bm3d_compile_leaves_the_pass_retryable(monkeypatch):
    from avdenoise_vs._cuda import bm3d as cuda_bm3d
    from avdenoise_vs._cuda._bm3d_source import BM3D_KERNELS

    layout = FrameLayout(32, 24, ColorFamily.GRAY, 0, 0, 8, SampleType.INTEGER)
    options = PlaneOptions(
        algorithm="bm3d", planes=(0,), distance=Distance.LUMA, strength=3.0, radius=0,
        search_radius=None, patch_radius=None, wmode=None, wref=None, has_ref=False,
        stages=2, lambda_ht=2.7, mismatch_scale=1.0, block_step=3, bm_range=4, ps_num=2,
        ps_range=4,
    )  # fmt: skip
    npass = cuda_bm3d.Bm3dPass(options, layout, {0: 0}, {0: 512})
    attempts = []

    def get_bm3d_kernels(spec):
        attempts.append(spec)
        if len(attempts) == 1:
            raise RuntimeError("fake NVRTC failure")
        return {name: _FlakyKernel(i, 0, []) for i, name in enumerate(BM3D_KERNELS)}

    factory = types.ModuleType("avdenoise_vs._cuda._kernels")
    factory.get_bm3d_kernels = get_bm3d_kernels
    monkeypatch.setitem(sys.modules, factory.__name__, factory)
    monkeypatch.setattr(cuda_bm3d, "cuda_calls", lambda: None)
    with pytest.raises(RuntimeError, match="fake NVRTC failure"):
        npass.prepare()
    assert npass._kernels is None
    npass.prepare()
    assert npass._kernels == {name: i for i, name in enumerate(BM3D_KERNELS)}


def test_kernel_specs_are_the_passes_specs_without_repeats(fake_cuda):
    backend, _, _ = _backend("YUV420P16", "direct")
    specs = backend.kernel_specs()
    assert specs == tuple(npass.spec for npass in backend._passes)
    assert len(specs) == 2  # luma and chroma: two distances, two kernels
    backend._passes.append(backend._passes[0])
    assert backend.kernel_specs() == specs
