"""The bridge's exit guard on the GPU: a script leaving ``clip.frames()`` with CUDA frames in
flight exits cleanly (tests/native/test_exit.py has the CPU side)."""

from __future__ import annotations

import pytest

from ..native.test_exit import run_script
from ._gpu import require_cuda

require_cuda()


# Without the guard ahead of CuPy's atexit callbacks (avdenoise_vs/_exit_guard.py), 6 of 8
# such runs segfaulted at exit on the H200.
@pytest.mark.parametrize("run", range(4))
@pytest.mark.parametrize("radius", [0, 1])
def test_leaving_clip_frames_early_exits_cleanly_on_the_gpu(run: int, radius: int) -> None:
    run_script("cuda", radius, width=1920, height=1080)
