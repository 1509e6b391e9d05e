"""A script that stops iterating its frames and exits, with frames still in flight: the
interpreter's exit must not crash the process (the bridge's exit guard, bridge.c)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import faulthandler
    import sys
    import vapoursynth as vs
    faulthandler.enable()  # a crash at exit prints every thread's stack
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


GUARD_ORDER = textwrap.dedent(
    """
    import atexit
    import vapoursynth as vs
    from avdenoise_vs import _exit_guard
    vs.core.avdenoise  # the plugin is loaded: the bridge has handed over its guard
    assert len(_exit_guard._guard) == 1, _exit_guard._guard
    guard = _exit_guard._guard[0]
    _exit_guard._guard[:] = [lambda: print("guard", flush=True) or guard()]
    atexit.unregister(guard)
    atexit.register(_exit_guard._guard[0])
    atexit.register(print, "later", flush=True)  # as CuPy's callbacks, registered after
    _exit_guard.put_first()
    """
)


def test_the_bridge_hands_its_guard_over_and_it_runs_before_later_callbacks() -> None:
    done = subprocess.run(
        [sys.executable, "-c", GUARD_ORDER], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["guard", "later"]
