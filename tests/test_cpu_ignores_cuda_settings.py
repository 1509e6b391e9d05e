"""Settings that only CUDA filters read (``AVDENOISE_DEBUG``, ``AVDENOISE_CUDA_SYNC``,
``AVDENOISE_WARMUP_WAIT``) never fail a call that runs on the CPU: device='auto' on a machine
without CUDA, or device='cpu'. With a device there, a bad one is the CUDA filter's error
(``tests/cuda/``)."""

from __future__ import annotations

import sys

import pytest
import vapoursynth as vs

from avdenoise_vs._plugin.filter import BACKEND_PROPERTY


@pytest.mark.parametrize(
    "name, value",
    [
        ("AVDENOISE_DEBUG", "bogus"),
        ("AVDENOISE_DEBUG", "transfer=pinned"),
        ("AVDENOISE_DEBUG", "transfer=maybe,bm3d_cache=no"),
        ("AVDENOISE_CUDA_SYNC", "sleep"),
        ("AVDENOISE_WARMUP_WAIT", "-5"),
    ],
)
def test_bad_cuda_settings_leave_cpu_runs_alone(core, monkeypatch, name, value):
    monkeypatch.setitem(sys.modules, "cupy", None)  # no CUDA here, whatever the machine
    monkeypatch.setenv(name, value)
    clip = core.std.BlankClip(width=32, height=32, format=vs.GRAY8, length=1)
    calls = [
        lambda: core.avdenoise.Denoise(clip, device="auto"),
        lambda: core.avdenoise.Denoise(clip, algorithm="bm3d", device="auto"),
        lambda: core.avdenoise.Denoise(clip, device="cpu"),
        lambda: core.avdenoise.NLMeans(clip),
        lambda: core.avdenoise.BM3D(clip),
    ]
    for call in calls:
        assert call().get_frame(0).props[BACKEND_PROPERTY] == "cpu"
