"""A fake CUDA backend for the tests of backend choice (test_backends.py, test_pending.py):
its "compile" fails a set number of times, then works, and its frames are the NumPy backend's,
so that what a script gets can be compared with ``device='cpu'``. The root conftest makes its
fixtures, ``fake_cuda`` and ``vs_log``, every test's."""

from __future__ import annotations

import numpy as np
import pytest

from avdenoise_vs._backends.cuda import backend as cuda_backend
from avdenoise_vs._backends.reference import NumpyBackend
from avdenoise_vs._errors import BackendUnavailable
from avdenoise_vs._params.options import ColorFamily, Distance, FrameLayout, SampleType, WeightMode
from avdenoise_vs._params.settings import NlmSettings

__all__ = ["LAYOUT", "PASSES", "fake_cuda", "first_plane", "random_clip", "vs_log"]

LAYOUT = FrameLayout(32, 24, ColorFamily.GRAY, 0, 0, 8, SampleType.INTEGER)
PASSES = (
    NlmSettings(
        planes=(0,), distance=Distance.LUMA, strength=1.2, radius=1, has_ref=False,
        search_radius=2, patch_radius=1, wmode=WeightMode.WELSCH, wref=1.0,
    ),
)  # fmt: skip


class FakeCuda:
    """A CUDA backend whose kernels fail to compile `failures` times, then compile.

    Like the real one, it compiles in `warm_up` and, when that failed, on its first frame.
    """

    name = "cuda"
    gpu_frames = None
    failures = 0
    unavailable: str | None = None
    unavailable_detail = ""  # BackendUnavailable.detail: why the driver failed
    context_fails: str | None = None  # the warm-up, the first to need the context, raises
    built: list[FakeCuda] = []

    def __init__(self, passes, layout, device_index=None, vulkan_uuid=None) -> None:
        if self.unavailable:
            raise BackendUnavailable(self.unavailable, detail=self.unavailable_detail)
        self.passes, self.layout = passes, layout
        self.vulkan_uuid = vulkan_uuid  # a GPU clip's device (the real one's frame path)
        self.device_id = device_index or 0
        self.compiles = 0
        self.compiled = False
        self.ahead = 0
        self._frames = NumpyBackend(passes, layout)
        self.built.append(self)

    def kernel_specs(self) -> tuple:
        return tuple(("fake-spec", p.algorithm.value, p.radius) for p in self.passes)

    def _compile(self) -> None:
        self.compiles += 1
        if self.compiles <= self.failures:
            raise RuntimeError(f"fake NVRTC failure {self.compiles}\nthe compiler's log, line 2")
        self.compiled = True

    def compile_ahead(self) -> None:
        self.ahead += 1

    def warm_up(self) -> None:
        if self.context_fails:
            raise BackendUnavailable(self.context_fails)
        self._compile()

    def prepare_threads(self, threads: int) -> None:
        """The real backend makes the threads' states here; the fake has none to make."""

    def process(self, n, frame_numbers, windows, dst) -> None:
        if not self.compiled:
            self._compile()
        self._frames.process(n, frame_numbers, windows, dst)

    def bridge_process(self, n, frame_numbers, windows, dst) -> None:
        """Frames leave no host step to the bridge, as the NumPy backend's."""
        self.process(n, frame_numbers, windows, dst)


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> type[FakeCuda]:
    """Install a fresh subclass of `FakeCuda` as the CUDA backend (tests set its class
    attributes); the queue is off, so no file is touched."""
    monkeypatch.setenv("AVDENOISE_WARMUP", "0")
    fake = type("FakeCuda", (FakeCuda,), {"built": []})
    monkeypatch.setattr(cuda_backend, "CudaBackend", fake)
    return fake


@pytest.fixture
def vs_log():
    """Warnings (and worse) that reach VapourSynth's log while the test runs."""
    vs = pytest.importorskip("vapoursynth")
    messages: list[str] = []

    def handler(kind: int, text: str) -> None:
        if kind >= vs.MESSAGE_TYPE_WARNING:
            messages.append(text)

    handle = vs.core.add_log_handler(handler)
    yield messages
    vs.core.remove_log_handler(handle)


def random_clip(core):
    """Four frames of random 8-bit luma, 32 x 24."""
    import vapoursynth as vs

    from .vsclips import clip_from_planes, random_planes

    fmt = core.get_video_format(vs.GRAY8)
    frames = [random_planes(fmt, 32, 24, seed) for seed in range(4)]
    return clip_from_planes(core, fmt, frames)


def first_plane(frame) -> np.ndarray:
    """A frame's first plane, copied out."""
    return np.asarray(frame[0]).copy()
