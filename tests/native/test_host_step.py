"""The host step (``_native/host_step.c``, its contract in ``host_step.h``): the part of a
frame a plan hands back to be done without the GIL (wait, copy out, copy the thread's next
frame in), run through VapourSynth with a plan whose backend returns host steps the way the
CUDA backend does."""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest
import vapoursynth as vs

from avdenoise_vs._backends.reference import NumpyBackend

from ..vsclips import clip_from_planes

WIDTH, HEIGHT, LENGTH = 40, 24, 48
_WAIT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)


class _InvertingPlan:
    """A backend's ``bridge_process``: writes 255 - frame through per-thread host buffers,
    hands the bridge a host step, and asks it to stage each thread's next frame."""

    def __init__(self, wait_status: int = 0, out_plane: int = 0) -> None:
        self.local = threading.local()
        self.lock = threading.Lock()
        self.staged = self.copied = self.waits = 0
        self.wait_status, self.out_plane = wait_status, out_plane
        self.wait = _WAIT(self._wait)  # kept alive: the bridge calls its address
        self.wait_address = ctypes.cast(self.wait, ctypes.c_void_p).value

    def _wait(self, argument) -> int:
        with self.lock:
            self.waits += 1
        return self.wait_status

    def process(self, backend, n, numbers, windows, dst):
        state = self.local.__dict__
        if not state:  # padded rows, unlike VapourSynth's, so that strides must be honoured
            state["staging"] = np.zeros((HEIGHT, WIDTH + 24), np.uint8)[:, :WIDTH]
            state["out"] = np.zeros((HEIGHT, WIDTH + 8), np.uint8)[:, :WIDTH]
        centre = windows[0][len(numbers) // 2]
        with self.lock:
            if centre is None:
                self.staged += 1
            else:
                self.copied += 1
        if centre is not None:
            _, stride, memory = centre[0]
            frame = np.ndarray((HEIGHT, WIDTH), np.uint8, buffer=memory, strides=(stride, 1))
            state["staging"][...] = frame
        state["out"][...] = 255 - state["staging"]
        out, staging = state["out"], state["staging"]
        return (
            self.wait_address,
            1234,
            ((self.out_plane, out.ctypes.data, out.strides[0]),),
            ((0, 0, staging.ctypes.data, staging.strides[0]),),
        )


def _clip(core):
    rng = np.random.default_rng(3)
    frames = [[rng.integers(0, 256, (HEIGHT, WIDTH), dtype=np.uint8)] for _ in range(LENGTH)]
    return clip_from_planes(core, core.get_video_format(vs.GRAY8), frames), frames


def _filtered(core, monkeypatch, plan: _InvertingPlan):
    monkeypatch.setattr(
        NumpyBackend, "bridge_process", lambda self, *args: plan.process(self, *args)
    )
    clip, frames = _clip(core)
    return core.avdenoise.Denoise(clip, radius=0, device="cpu"), frames


def test_host_steps_finish_frames_and_stage_the_next(core, monkeypatch):
    plan = _InvertingPlan()
    out, frames = _filtered(core, monkeypatch, plan)
    order = np.random.default_rng(0).permutation(2 * LENGTH) % LENGTH
    rendered = [(n, out.get_frame_async(int(n))) for n in order]
    for n, future in rendered:
        np.testing.assert_array_equal(np.asarray(future.result()[0]), 255 - frames[n][0])
    calls = plan.staged + plan.copied  # VapourSynth's cache serves some repeats
    assert LENGTH <= calls <= len(order)
    assert plan.waits == calls
    assert plan.copied <= core.num_threads  # each thread copies its first frame, only


def test_failed_wait_is_the_frames_error(core, monkeypatch):
    out, _ = _filtered(core, monkeypatch, _InvertingPlan(wait_status=7))
    with pytest.raises(vs.Error, match=r"waiting for the GPU failed \(CUDA error 7\)"):
        out.get_frame(0)


def test_bad_host_step_is_an_error(core, monkeypatch):
    out, _ = _filtered(core, monkeypatch, _InvertingPlan(out_plane=2))  # GRAY has plane 0 only
    with pytest.raises(vs.Error, match="bad host step"):
        out.get_frame(0)
