"""The CUDA backend's warm-up and first use, run without a GPU (the fakes of ``_fake_cuda.py``).

The warm-up compiles the passes' kernels and builds a render thread's state before the first
frame asks. It must never make a render fail: a failed compile or launch leaves every pass
retryable, so the first frame compiles again; making a backend never creates the CUDA context
(a compiling worker's NVRTC runs ahead of it), the warm-up or a thread's first frame does.
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
from avdenoise_vs._params.options import ColorFamily, Distance, FrameLayout, SampleType
from avdenoise_vs._params.settings import Bm3dSettings, Stages

from ._fake_cuda import LENGTH, expected, make_frames, nlm_backend, process, window_max_kernel


def test_a_bad_warm_up_wait_fails_the_backend(fake_cupy, monkeypatch) -> None:
    monkeypatch.setenv("AVDENOISE_WARMUP_WAIT", "3 min")
    with pytest.raises(
        ValueError,
        match=r"AVDENOISE_WARMUP_WAIT must be a number of seconds, at least 0, got '3 min'",
    ):
        nlm_backend("GRAY8", "direct")
    monkeypatch.setenv("AVDENOISE_WARMUP_WAIT", "30")
    assert nlm_backend("GRAY8", "direct")[0] is not None


def test_render_threads_take_the_warm_up_state_first(fake_cupy, monkeypatch):
    """The warm-up's state, and those made up to the core's threads, go to the first render
    threads: a thread whose frame finds one makes none of its own."""
    backend, layout, written = nlm_backend("GRAY8", "direct")
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


def test_failed_warm_up_compiles_again_on_the_first_frame(fake_cupy, monkeypatch):
    _, calls = fake_cupy
    backend, layout, written = nlm_backend("GRAY8", "direct")
    attempts = _flaky_kernels(monkeypatch, calls, backend._passes[0], failures=1)
    with pytest.raises(RuntimeError, match="fake NVRTC failure"):
        backend.warm_up()
    frames = make_frames(layout)
    for n in range(LENGTH):
        out = process(backend, layout, frames, n, 1, written)
        np.testing.assert_array_equal(out[0], expected(frames, n, 1, 0))
    assert len(attempts) == 2, "one failed compile in the warm-up, one on the first frame"


def test_warm_up_failing_after_its_uploads_leaves_no_synthetic_frame(fake_cupy, monkeypatch):
    _, calls = fake_cupy
    backend, layout, written = nlm_backend("GRAY8", "direct")
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


def test_second_compile_failure_is_a_frame_error(fake_cupy, monkeypatch):
    _, calls = fake_cupy
    backend, layout, written = nlm_backend("GRAY8", "direct")
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


def test_kernel_specs_are_the_passes_specs_without_repeats(fake_cupy):
    backend, _, _ = nlm_backend("YUV420P16", "direct")
    specs = backend.kernel_specs()
    assert specs == tuple(npass.spec for npass in backend._passes)
    assert len(specs) == 2  # luma and chroma: two distances, two kernels
    backend._passes.append(backend._passes[0])
    assert backend.kernel_specs() == specs


def test_the_context_waits_for_the_warm_up_or_the_first_frame(fake_cupy, monkeypatch):
    """Making a backend never makes its device current (that creates the context, which a
    compiling worker's NVRTC runs ahead of); the warm-up, or a thread's first frame, does,
    and sizes the frame cache from the free memory then."""
    runtime, _ = fake_cupy
    for first_use in ("warm_up", "frame"):
        backend, layout, written = nlm_backend("GRAY8", "direct")
        before = runtime.counts.get("setDevice", 0)
        assert backend._cache.soft_limit == 0
        if first_use == "warm_up":
            backend.warm_up()
        else:
            process(backend, layout, make_frames(layout), 0, 1, written, None)
        assert runtime.counts.get("setDevice", 0) > before
        assert backend._cache.soft_limit > 0


def test_a_given_cache_size_is_kept(fake_cupy):
    backend, _, _ = nlm_backend("GRAY8", "direct", cache_slots=6)
    backend.warm_up()
    assert backend._cache.soft_limit == 6
