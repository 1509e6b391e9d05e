"""A fake CuPy, the bridge's side of the frame protocol and small NLM backends on them, for the
CUDA backend's host-side tests (``test_backend_host.py``, ``test_backend_warmup_host.py``; the
fixtures are in ``conftest.py``).

"Device" memory is host memory, copies are ``ctypes.memmove``, and the fake NLM kernel writes,
for every pixel of the pass's planes, the largest sample of its temporal window.
"""

from __future__ import annotations

import ctypes
import sys
import threading
import types

import numpy as np

from avdenoise_vs._backends.cuda import backend as cuda_backend
from avdenoise_vs._cuda import frame_cache as cuda_cache
from avdenoise_vs._nlm.cuda import nlm_pass as cuda_nlm
from avdenoise_vs._nlm.cuda.nlm_pass import args_dtype
from avdenoise_vs._params.options import ColorFamily, Distance, FrameLayout, SampleType, WeightMode
from avdenoise_vs._params.settings import NlmSettings

__all__ = ["LAYOUTS", "LENGTH", "Bridge", "expected", "install", "make_frames", "nlm_backend",
           "nlm_settings", "process", "render_in_threads", "window_max_kernel"]  # fmt: skip

LENGTH = 8  # frames of the test clips


class DeviceMemory:
    """A fake device (or pinned) allocation: a host buffer and its address."""

    def __init__(self, nbytes: int) -> None:
        self.array = np.zeros(max(nbytes, 1), np.uint8)
        self.ptr = self.array.ctypes.data

    def __buffer__(self, flags):  # np.frombuffer on fake pinned memory
        return memoryview(self.array)


class DeviceArray:
    """``cupy.zeros``: a fake device array, its address at ``data.ptr``."""

    def __init__(self, shape, dtype) -> None:
        self.host = np.zeros(shape, dtype)
        self.data = types.SimpleNamespace(ptr=self.host.ctypes.data)
        self.strides = self.host.strides


class Handle:
    """A stream or an event: only its address matters."""

    _next = iter(range(1 << 20, 1 << 30, 16))

    def __init__(self, *args, **kwargs) -> None:
        self.ptr = next(self._next)

    def synchronize(self) -> None:
        """An event's wait: the fake GPU is always done."""


class Runtime:
    """The runtime calls the backend makes, copies done at once, calls counted."""

    CUDARuntimeError = RuntimeError
    cudaDevAttrMaxSharedMemoryPerBlockOptin = 97

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.fail_uploads = 0  # this many host-to-device copies raise

    def _count(self, name: str) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1

    def getDeviceCount(self) -> int:
        return 1

    def getDevice(self) -> int:
        return 0

    def setDevice(self, device: int) -> None:
        self._count("setDevice")

    def deviceGetAttribute(self, attribute: int, device: int) -> int:
        return 227 * 1024

    def memGetInfo(self) -> tuple[int, int]:
        return 64 << 30, 80 << 30

    def memcpy2DAsync(self, dst, dpitch, src, spitch, width, height, kind, stream):
        self._copy(kind)
        for row in range(height):
            ctypes.memmove(dst + row * dpitch, src + row * spitch, width)

    def memcpyAsync(self, dst, src, nbytes, kind, stream):
        self._copy(kind)
        ctypes.memmove(dst, src, nbytes)

    def _copy(self, kind: int) -> None:
        self._count(f"copy{kind}")
        if kind == 1 and self.fail_uploads:
            self.fail_uploads -= 1
            raise RuntimeError("fake upload failure")

    def streamSynchronize(self, stream) -> None:
        self._count("streamSynchronize")

    def deviceSynchronize(self) -> None:
        self._count("deviceSynchronize")


WAIT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)  # the bridge's wait function type


class Calls:
    """``cuda_calls()``: launches run the fake kernel registered under the function handle;
    ``synchronize_address`` is a C-callable function that counts the bridge's waits."""

    def __init__(self) -> None:
        self.kernels = {}
        self.waits = 0
        self.wait_status = 0  # what the bridge's wait returns (0: success)
        self._wait = WAIT(self._bridge_wait)  # kept alive: the address points into it
        self.synchronize_address = ctypes.cast(self._wait, ctypes.c_void_p).value

    def _bridge_wait(self, stream) -> int:
        self.waits += 1
        return self.wait_status

    def stream_idle(self, stream) -> bool:
        return True

    def event_done(self, event) -> bool:
        return True  # the fake copies are done when queued

    def event(self) -> int:
        return 1

    def launch(self, function, grid, block, shared, stream, args) -> None:
        self.kernels[function](args.record)

    def eventRecord(self, event, stream) -> None:
        pass

    def streamWaitEvent(self, stream, event, flags=0) -> None:
        pass

    def copy_to_device(self, dst, src, nbytes, stream) -> None:
        self.runtime.memcpyAsync(dst, src, nbytes, 1, stream)

    def copy_to_host(self, dst, src, nbytes, stream) -> None:
        self.runtime.memcpyAsync(dst, src, nbytes, 2, stream)


def window_max_kernel(npass, dtype: np.dtype):
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


def install(monkeypatch):
    """Install the fakes (CuPy, the driver calls, the NLM kernel); returns (runtime, calls)."""
    runtime, calls = Runtime(), Calls()
    calls.runtime = runtime  # copies to and from staging buffers count as the runtime's
    cuda = types.SimpleNamespace(
        runtime=runtime,
        alloc=DeviceMemory,
        alloc_pinned_memory=DeviceMemory,
        Stream=Handle,
        Event=Handle,
        Device=lambda device: NullContext(),
    )
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda, zeros=DeviceArray))
    monkeypatch.setattr(cuda_cache, "WAIT_LIMIT_S", 5.0)  # a bug fails, not hangs
    monkeypatch.setattr(cuda_backend, "cuda_calls", lambda: calls)

    def load(self) -> int:
        self._calls = calls
        handle = id(self)
        calls.kernels[handle] = window_max_kernel(self, np.dtype(self.spec.dtype))
        self._function_ptr = handle
        return handle

    monkeypatch.setattr(cuda_nlm.NlmPass, "_load", load)
    return runtime, calls


class NullContext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def make_frames(layout: FrameLayout) -> list[list[np.ndarray]]:
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


def padded(array: np.ndarray) -> np.ndarray:
    """A copy of `array` in rows padded past its width, as VapourSynth frames are."""
    h, w = array.shape
    store = np.zeros((h, w + 13), array.dtype)
    store[:, :w] = array
    return store[:, :w]


def plane_tuple(array: np.ndarray):
    """What the bridge passes for a plane: address, stride, the rows' bytes (a memoryview)."""
    rows = np.ndarray((array.shape[0] * array.strides[0],), np.uint8, buffer=array.base)
    return array.ctypes.data, array.strides[0], memoryview(rows)


class Bridge:
    """What ``bridge.c`` and ``host_step.c`` do around ``bridge_process``, in Python: each
    thread's staging requests are honoured on its next frame (whose centre then arrives as
    None), and the host step is done after the call (waited through its C address, rows
    copied out)."""

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
        wait_address, argument, outs, self.requests.copies, *done = step
        if wait_address and WAIT(wait_address)(argument):
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
        if done and done[0]:  # host_step.c: a release store of 1 once the copies are done
            ctypes.c_int.from_address(done[0]).value = 1


def process(backend, layout, frames, n, radius, written, caller=None):
    """One call of the bridge's protocol for frame n; returns the output planes."""
    numbers = tuple(min(max(n + t, 0), LENGTH - 1) for t in range(-radius, radius + 1))
    keep = [[padded(a) for a in frames[f]] for f in numbers]
    windows = (tuple(tuple(plane_tuple(a) for a in planes) for planes in keep),)
    out = [padded(np.zeros(layout.plane_shape(p), layout.dtype)) for p in range(3)]
    dst = tuple(plane_tuple(out[p]) if p in written else None for p in range(layout.num_planes))
    if caller is None:
        backend.process(n, numbers, windows, dst)
    else:
        caller.process(backend, n, numbers, windows, dst)
    return out


def render_in_threads(backend, layout, frames, order, radius, written, caller=None, threads=4):
    """Plane 0 of the frames of `order`, rendered by `threads` threads (every 4th frame each,
    with 4)."""
    results, errors = {}, []

    def render(ns):
        try:
            for n in ns:
                results[n] = process(backend, layout, frames, n, radius, written, caller)[0]
        except Exception as error:  # reported below
            errors.append(error)

    count = threads
    threads = [threading.Thread(target=render, args=(list(order)[i::count],)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors
    return results


def expected(frames, n, radius, plane):
    radius = min(radius, n)  # KNLMeansCL's window at the clip's start
    numbers = [min(n + t, LENGTH - 1) for t in range(-radius, radius + 1)]
    return np.max([frames[f][plane] for f in numbers], axis=0)


# --- small NLM backends on the fakes ------------------------------------------------------------

#: Frame layouts the host tests render, each with its passes' (planes, distance).
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


def nlm_settings(planes, distance, radius=1) -> NlmSettings:
    """A small NLM pass (the fake kernel ignores everything but its planes and radius)."""
    return NlmSettings(
        planes=planes, distance=distance, strength=1.2, radius=radius, has_ref=False,
        search_radius=2, patch_radius=1, wmode=WeightMode.WELSCH, wref=1.0,
    )  # fmt: skip


def nlm_backend(name: str, transfer: str, radius: int = 1, **kwargs):
    """``(backend, layout, planes written)``: a CudaBackend of one NLM pass per plane group of
    ``LAYOUTS[name]``."""
    layout, groups = LAYOUTS[name]
    passes = tuple(nlm_settings(planes, distance, radius) for planes, distance in groups)
    backend = cuda_backend.CudaBackend(passes, layout, transfer=transfer, **kwargs)
    written = {p for options in passes for p in options.planes}
    return backend, layout, written
