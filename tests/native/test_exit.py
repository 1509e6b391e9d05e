"""A script that stops iterating its frames and exits, with frames still in flight: the
interpreter's exit must not crash the process (the bridge's exit guard, bridge.c)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import sys
    import vapoursynth as vs
    device, (radius, width, height) = sys.argv[1], map(int, sys.argv[2:5])
    core = vs.core
    core.num_threads = 16
    clip = core.std.BlankClip(width=width, height=height, format=vs.GRAYS, length=400)
    clip = core.std.Expr([clip], "x 0.5 +")
    out = core.avdenoise.BM3D(clip, sigma=3.0, radius=radius, device=device)
    for n, frame in enumerate(out.frames(prefetch=16)):
        if n == 2:
            break  # later frames are still being made
    print("stopped", flush=True)
    """
)


def run_script(device: str, radius: int, width: int = 96, height: int = 64) -> None:
    """Run SCRIPT in a fresh interpreter and check that it stopped and exited with status 0."""
    args = [sys.executable, "-c", SCRIPT, device, str(radius), str(width), str(height)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "stopped" in done.stdout


@pytest.mark.parametrize("run", range(3))
def test_leaving_clip_frames_early_exits_cleanly(run: int) -> None:
    run_script("cpu", 1)
