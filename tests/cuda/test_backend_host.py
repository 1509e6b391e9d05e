"""The CUDA backend's host side, run without a GPU: slots, uploads, launches and downloads.

A fake ``cupy`` keeps "device" memory in host buffers and copies with ``ctypes.memmove``, and
a fake NLM kernel writes, for every pixel of the pass's planes, the largest sample of its
temporal window (``_fake_cuda.py``). The real
:class:`~avdenoise_vs._backends.cuda.backend.CudaBackend`
then runs the bridge's frame protocol, so what CI checks here is the pointer arithmetic (plane
offsets and pitches, chroma planes, staging buffers), the window's slots in time order, that
each source frame crosses the bus once, and every transfer strategy (``_cuda/_transfer/``).
The kernels themselves are the GPU tests' job (``test_nlm_cuda.py`` and the like).
"""

from __future__ import annotations

import sys
import threading
import types

import numpy as np
import pytest

from avdenoise_vs._backends.cuda import backend as cuda_backend
from avdenoise_vs._backends.cuda.warm_frame import WARM_FRAME
from avdenoise_vs._nlm.cuda import nlm_pass as cuda_nlm
from avdenoise_vs._params.options import ColorFamily, Distance, FrameLayout, SampleType, WeightMode
from avdenoise_vs._params.settings import Bm3dSettings, NlmSettings, Stages

from ._fake_cuda import (
    LENGTH,
    Bridge,
    expected,
    install,
    make_frames,
    process,
    render_in_threads,
    window_max_kernel,
)


@pytest.fixture
def fake_cuda(monkeypatch):
    """Install the fakes; returns (runtime, calls)."""
    return install(monkeypatch)


def _nlm(planes, distance, radius=1) -> NlmSettings:
    return NlmSettings(
        planes=planes, distance=distance, strength=1.2, radius=radius, has_ref=False,
        search_radius=2, patch_radius=1, wmode=WeightMode.WELSCH, wref=1.0,
    )  # fmt: skip


@pytest.fixture(params=["python", "bridge"])
def caller(request):
    """Who finishes frames: Python (``process``) or the bridge (``bridge_process``)."""
    return Bridge() if request.param == "bridge" else None


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


def test_a_bad_warm_up_wait_fails_the_backend(fake_cuda, monkeypatch) -> None:
    monkeypatch.setenv("AVDENOISE_WARMUP_WAIT", "3 min")
    with pytest.raises(
        ValueError,
        match=r"AVDENOISE_WARMUP_WAIT must be a number of seconds, at least 0, got '3 min'",
    ):
        _backend("GRAY8", "direct")
    monkeypatch.setenv("AVDENOISE_WARMUP_WAIT", "30")
    assert _backend("GRAY8", "direct")[0] is not None


@pytest.mark.parametrize("transfer", ["direct", "staged"])
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_every_plane_gets_its_window_in_order(fake_cuda, caller, name, transfer):
    runtime, _ = fake_cuda
    backend, layout, written = _backend(name, transfer)
    backend.warm_up()
    frames = make_frames(layout)
    before = dict(runtime.counts)
    for n in range(LENGTH):
        out = process(backend, layout, frames, n, 1, written, caller)
        for p in written:
            np.testing.assert_array_equal(out[p], expected(frames, n, 1, p), err_msg=f"{n}/{p}")
    # Every source frame crossed the bus once, one copy per plane (direct) or per frame.
    copies = runtime.counts.get("copy1", 0) - before.get("copy1", 0)
    per_frame = 1 if transfer == "staged" else len(written)
    assert copies == LENGTH * per_frame


@pytest.mark.parametrize("transfer", ["direct", "staged", "staged-upload", "staged-download"])
@pytest.mark.parametrize("radius", [0, 1])
def test_gated_passes_render_through_every_transfer(
    fake_cuda, caller, monkeypatch, transfer, radius
):
    """Passes with ``frames_in_flight`` (BM3D's) run their GPU part on the gate's output
    buffers, at most that many, and wait for the GPU asleep; each transfer, with Python's or
    the bridge's host copies, still gives every frame its own window."""
    monkeypatch.setattr(cuda_nlm.NlmPass, "frames_in_flight", 2, raising=False)
    backend, layout, written = _backend("YUV420P16", transfer, radius=radius)
    backend.warm_up()
    warmed = backend._local.state  # the warm-up's thread's
    assert warmed.done is not None and warmed.pending is None
    frames = make_frames(layout)
    order = [n % LENGTH for n in range(3 * LENGTH)]
    results = render_in_threads(backend, layout, frames, order, radius, written, caller)
    for n in range(LENGTH):
        np.testing.assert_array_equal(results[n], expected(frames, n, radius, 0))
    assert 1 <= backend._gate.made <= 2


@pytest.mark.parametrize("radius", [0, 1])
def test_auto_stages_gated_frames_and_ungated_ones_by_size_and_window(
    fake_cuda, monkeypatch, radius
):
    """ "auto" stages a gated pass's frames, and an ungated pass's by frame size and window:
    from what the process knows, never from other processes (``_transfer/__init__.py``)."""
    ungated, _, _ = _backend("YUV420P16", "auto", radius=radius)
    monkeypatch.setattr(cuda_nlm.NlmPass, "frames_in_flight", 2, raising=False)
    gated, _, _ = _backend("YUV420P16", "auto", radius=radius)
    assert ungated.transfer == ("staged" if radius == 0 else "direct")
    assert gated.transfer == "staged"


@pytest.mark.parametrize("radius", [0, 1, 2])
def test_gated_frames_take_few_page_locked_buffers(fake_cuda, caller, monkeypatch, radius):
    """Gated frames lend their upload and download buffers back to the backend's pools as
    soon as their copies are done: 8 threads page-lock no more than the pools' limits (a
    window and two for uploads, the frames on the GPU and two for downloads), none of them
    a thread's own, and every buffer is back once the frames are done."""
    monkeypatch.setattr(cuda_nlm.NlmPass, "frames_in_flight", 2, raising=False)
    backend, layout, written = _backend("YUV420P16", "staged", radius=radius)
    backend.warm_up()
    frames = make_frames(layout)
    order = [n % LENGTH for n in range(4 * LENGTH)]
    results = render_in_threads(backend, layout, frames, order, radius, written, caller, 8)
    for n in range(LENGTH):
        np.testing.assert_array_equal(results[n], expected(frames, n, radius, 0))
    up, down = backend.uploader.pool, backend.downloader.pool
    assert 1 <= up.made <= 2 * radius + 1 + 2
    assert 1 <= down.made <= 2 + 2
    assert all(not state.staging for state in backend._states)
    for pool in (up, down):
        assert pool.take() is not None and pool.made <= pool._limit  # a lent one came back


@pytest.mark.parametrize("radius", [0, 1])
def test_gated_frames_under_threads_are_right_and_bounded(fake_cuda, caller, monkeypatch, radius):
    """Gated frames rendered by 8 threads out of order are all right, every gate buffer comes
    back, and the frame cache keeps no more than its soft limit or a window per thread (each
    thread holds its frame's window until the frame is done)."""
    monkeypatch.setattr(cuda_nlm.NlmPass, "frames_in_flight", 1, raising=False)
    backend, layout, written = _backend("GRAY8", "staged", radius=radius)
    backend.warm_up()
    frames = make_frames(layout)
    order = [n % LENGTH for n in range(3 * LENGTH)]
    results = render_in_threads(backend, layout, frames, order, radius, written, caller, 8)
    for n in range(LENGTH):
        np.testing.assert_array_equal(results[n], expected(frames, n, radius, 0))
    window = 2 * radius + 1
    assert len(backend._cache._slots) <= max(backend._cache.soft_limit, window * 8)
    gate = backend._gate
    assert gate.made == 1 and len(gate._buffers) == gate.made  # one place, its buffer back
    assert gate._inside == 0


def test_render_threads_take_the_warm_up_state_first(fake_cuda, monkeypatch):
    """The warm-up's state, and those made up to the core's threads, go to the first render
    threads: a thread whose frame finds one makes none of its own."""
    backend, layout, written = _backend("GRAY8", "direct")
    backend.warm_up()
    warmed = backend._local.state
    backend.prepare_threads(3)
    spares = list(backend._spare_states)
    assert warmed in spares
    assert len(spares) == 3 and getattr(backend._local, "state", None) is None
    frames = make_frames(layout)
    results = {}

    def render(n: int) -> None:
        results[n] = (process(backend, layout, frames, n, 1, written), backend._local.state)

    for n in range(2):  # one thread after the other: each takes a spare
        thread = threading.Thread(target=render, args=(n,))
        thread.start()
        thread.join()
    for n in range(2):
        np.testing.assert_array_equal(results[n][0][0], expected(frames, n, 1, 0))
    assert {id(results[n][1]) for n in range(2)} <= {id(state) for state in spares}
    assert len(backend._spare_states) == 1 and len(backend._states) == 3


def test_threads_share_uploads(fake_cuda):
    runtime, _ = fake_cuda
    backend, layout, written = _backend("GRAY8", "direct")
    frames = make_frames(layout)
    results = render_in_threads(backend, layout, frames, range(LENGTH), 1, written)
    for n in range(LENGTH):
        np.testing.assert_array_equal(results[n], expected(frames, n, 1, 0))
    assert runtime.counts["copy1"] == LENGTH


@pytest.mark.parametrize("radius", [1, 2])
def test_wide_windows_share_a_pool_of_upload_buffers(fake_cuda, caller, radius):
    """Staged windows of several frames take page-locked buffers from one pool and give
    them back with the frame: 4 threads page-lock about as many buffers as frames are
    uploaded at once, not a window's worth each, and no thread keeps buffers of its own."""
    backend, layout, written = _backend("YUV420P16", "staged", radius=radius)
    backend.warm_up()
    frames = make_frames(layout)
    order = [n % LENGTH for n in range(3 * LENGTH)]
    results = render_in_threads(backend, layout, frames, order, radius, written, caller)
    for n in range(LENGTH):
        np.testing.assert_array_equal(results[n], expected(frames, n, radius, 0))
    pool = backend.uploader.pool
    window = 2 * radius + 1
    assert 1 <= pool.made < 4 * window  # 4 threads with their own: 4 windows' worth
    assert len(pool._free) + len(pool._lent) == pool.made  # no frame kept a buffer
    assert all(not state.staging for state in backend._states)


def test_failed_upload_fails_the_frame_and_the_next_call_uploads_again(fake_cuda):
    runtime, _ = fake_cuda
    backend, layout, written = _backend("GRAY8", "direct")
    frames = make_frames(layout)
    runtime.fail_uploads = 1
    with pytest.raises(RuntimeError, match="fake upload failure"):
        process(backend, layout, frames, 3, 1, written)
    out = process(backend, layout, frames, 3, 1, written)
    np.testing.assert_array_equal(out[0], expected(frames, 3, 1, 0))


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_bridge_stages_one_frame_windows_and_finishes_them(fake_cuda, name, monkeypatch):
    """Radius 0, staged: after a thread's first frame the bridge copies each frame into the
    staging buffer before the call, Python copies nothing, and the bridge waits and copies out."""
    runtime, calls = fake_cuda
    bridge = Bridge()
    backend, layout, written = _backend(name, "staged", radius=0)
    python_copies = []

    def copy(dst, src):
        python_copies.append(dst.shape)
        np.copyto(dst, src)

    backend.uploader._copy = backend.downloader._copy = copy
    frames = make_frames(layout)
    for n in range(LENGTH):
        out = process(backend, layout, frames, n, 0, written, bridge)
        for p in written:
            np.testing.assert_array_equal(out[p], frames[n][p], err_msg=f"{n}/{p}")
    assert bridge.staged_frames == LENGTH - 1  # all but the thread's first
    assert len(python_copies) == layout.num_planes  # the first frame's upload only
    assert calls.waits == LENGTH
    assert runtime.counts.get("streamSynchronize", 0) == 0


def test_bridge_threads_evict_and_reuse_slots(fake_cuda, monkeypatch):
    """Slots of frames the bridge finishes are released by the thread's next frame: with a
    cache smaller than the frames in flight, every frame still gets its own samples."""
    bridge = Bridge()
    backend, layout, written = _backend("GRAY8", "staged", radius=0, cache_slots=2)
    frames = make_frames(layout)
    order = [n % LENGTH for n in range(4 * LENGTH)]
    results = render_in_threads(backend, layout, frames, order, 0, written, bridge)
    for n in range(LENGTH):
        np.testing.assert_array_equal(results[n], frames[n][0])
    assert bridge.staged_frames > 0


def test_failed_bridge_wait_fails_the_frame_and_the_next_one_synchronizes(fake_cuda, monkeypatch):
    runtime, calls = fake_cuda
    bridge = Bridge()
    backend, layout, written = _backend("GRAY8", "staged", radius=0)
    frames = make_frames(layout)
    calls.wait_status = 7
    with pytest.raises(RuntimeError, match="waiting for the GPU failed"):
        process(backend, layout, frames, 2, 0, written, bridge)
    calls.wait_status = 0
    monkeypatch.setattr(calls, "stream_idle", lambda stream: False)  # still busy, say
    out = process(backend, layout, frames, 3, 0, written, bridge)
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
    calls.kernels[handle] = window_max_kernel(npass, np.dtype(npass.spec.dtype))
    factory = types.ModuleType("avdenoise_vs._cuda.kernels")
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
    frames = make_frames(layout)
    for n in range(LENGTH):
        out = process(backend, layout, frames, n, 1, written)
        np.testing.assert_array_equal(out[0], expected(frames, n, 1, 0))
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
    warm_keys = [(cuda_backend._WARM_BASE, WARM_FRAME + t) for t in range(3)]
    assert not any(key in backend._cache for key in warm_keys)
    frames = make_frames(layout)
    out = process(backend, layout, frames, 2, 1, written)
    np.testing.assert_array_equal(out[0], expected(frames, 2, 1, 0))


def test_second_compile_failure_is_a_frame_error(fake_cuda, monkeypatch):
    _, calls = fake_cuda
    backend, layout, written = _backend("GRAY8", "direct")
    _flaky_kernels(monkeypatch, calls, backend._passes[0], failures=2)
    with pytest.raises(RuntimeError, match="fake NVRTC failure"):
        backend.warm_up()
    frames = make_frames(layout)
    with pytest.raises(RuntimeError, match="fake NVRTC failure"):
        process(backend, layout, frames, 0, 1, written)
    out = process(backend, layout, frames, 1, 1, written)  # the frame after compiles
    np.testing.assert_array_equal(out[0], expected(frames, 1, 1, 0))


def test_failed_bm3d_compile_leaves_the_pass_retryable(monkeypatch):
    from avdenoise_vs._bm3d.cuda import bm3d_pass as cuda_bm3d
    from avdenoise_vs._bm3d.cuda.source import BM3D_KERNELS

    layout = FrameLayout(32, 24, ColorFamily.GRAY, 0, 0, 8, SampleType.INTEGER)
    options = Bm3dSettings(
        planes=(0,), distance=Distance.LUMA, plane_strengths=(3.0,), radius=0,
        stages=Stages.BOTH, lambda_ht=2.7, mismatch_scale=1.0, block_step=3, bm_range=4,
        ps_num=2, ps_range=4,
    )  # fmt: skip
    npass = cuda_bm3d.Bm3dPass(options, layout, {0: 0}, {0: 512})
    attempts = []

    def get_bm3d_kernels(spec):
        attempts.append(spec)
        if len(attempts) == 1:
            raise RuntimeError("fake NVRTC failure")
        return {name: _FlakyKernel(i, 0, []) for i, name in enumerate(BM3D_KERNELS)}

    factory = types.ModuleType("avdenoise_vs._cuda.kernels")
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


def test_the_context_waits_for_the_warm_up_or_the_first_frame(fake_cuda, monkeypatch):
    """Making a backend never makes its device current (that creates the context, which a
    compiling worker's NVRTC runs ahead of); the warm-up, or a thread's first frame, does,
    and sizes the frame cache from the free memory then."""
    runtime, _ = fake_cuda
    for first_use in ("warm_up", "frame"):
        backend, layout, written = _backend("GRAY8", "direct")
        before = runtime.counts.get("setDevice", 0)
        assert backend._cache.soft_limit == 0
        if first_use == "warm_up":
            backend.warm_up()
        else:
            process(backend, layout, make_frames(layout), 0, 1, written, None)
        assert runtime.counts.get("setDevice", 0) > before
        assert backend._cache.soft_limit > 0


def test_a_given_cache_size_is_kept(fake_cuda):
    backend, _, _ = _backend("GRAY8", "direct", cache_slots=6)
    backend.warm_up()
    assert backend._cache.soft_limit == 6


def test_a_failed_staged_upload_gives_its_pool_buffer_back(fake_cuda):
    """A copy that was never queued leaves its page-locked buffer free for the next frame."""
    runtime, _ = fake_cuda
    backend, layout, written = _backend("YUV420P16", "staged", radius=1)
    frames = make_frames(layout)
    runtime.fail_uploads = 1
    with pytest.raises(RuntimeError, match="fake upload failure"):
        process(backend, layout, frames, 3, 1, written)
    pool = backend.uploader.pool
    assert pool.made == 1 and len(pool._free) == 1
    out = process(backend, layout, frames, 3, 1, written)
    np.testing.assert_array_equal(out[0], expected(frames, 3, 1, 0))
