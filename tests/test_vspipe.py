"""A real vspipe renders a script that never imports avdenoise_vs: the plugin autoloads."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from avdenoise_vs._plugin.devload import plugin_installed

SCRIPT = """
import vapoursynth as vs
core = vs.core
clip = core.std.BlankClip(width=64, height=48, format=vs.YUV420P8, length=6, color=[80, 128, 128])
clip = core.std.AddBorders(clip, left=8, color=[200, 128, 128])
core.avdenoise.Denoise(clip, strength=2.0, radius=1).set_output()
"""


@pytest.fixture(scope="module")
def vspipe():
    if not plugin_installed():
        pytest.skip("the plugin is not installed where VapourSynth autoloads (editable install?)")
    found = shutil.which("vspipe") or str(Path(sys.executable).with_name("vspipe"))
    if not Path(found).exists():
        pytest.skip("vspipe not found")
    return found


def test_vspipe_info(vspipe, tmp_path):
    script = tmp_path / "denoise.vpy"
    script.write_text(SCRIPT)
    done = subprocess.run([vspipe, "--info", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "Frames: 6" in done.stdout and "Width: 72" in done.stdout


def test_vspipe_renders_y4m(vspipe, tmp_path):
    script = tmp_path / "denoise.vpy"
    script.write_text(SCRIPT)
    assert "avdenoise_vs" not in SCRIPT
    done = subprocess.run([vspipe, "-c", "y4m", str(script), "-"], capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
    frame_size = 72 * 48 * 3 // 2
    assert done.stdout.count(b"FRAME\n") == 6
    assert len(done.stdout) > 6 * frame_size
    # Flat areas further than search + patch radius (2 + 4) from the step stay exactly flat.
    luma = done.stdout[-frame_size:][: 72 * 48]
    rows = [luma[y * 72 : (y + 1) * 72] for y in range(48)]
    assert all(row[14:] == bytes([80]) * 58 and row[:2] == bytes([200]) * 2 for row in rows)


def test_vspipe_reports_bad_arguments(vspipe, tmp_path):
    script = tmp_path / "bad.vpy"
    script.write_text(SCRIPT.replace("radius=1", "radius=99"))
    done = subprocess.run([vspipe, "--info", str(script)], capture_output=True, text=True)
    assert done.returncode != 0
    assert "avdenoise.Denoise: radius must be an integer from 0 to 8, got 99" in done.stderr


def _has_driver() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


@pytest.mark.parametrize("device", ["auto", "cpu"])
def test_without_a_driver_only_auto_says_once_that_it_runs_on_the_cpu(vspipe, tmp_path, device):
    """No line from the early context's thread: without a driver, 'auto' says one warning."""
    if _has_driver():
        pytest.skip("an NVIDIA driver is installed here")
    script = tmp_path / "denoise.vpy"
    script.write_text(SCRIPT.replace("radius=1)", f"radius=1, device={device!r})") * 2)
    done = subprocess.run([vspipe, str(script), "-p", "."], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    ours = [line for line in done.stderr.splitlines() if "avdenoise" in line]
    if device == "cpu":
        assert ours == []
    else:
        (warning,) = ours
        assert "device='auto' runs on the CPU" in warning and "libcuda" not in warning


def test_cuda_asked_for_without_a_driver_names_the_driver_once(vspipe, tmp_path):
    if _has_driver():
        pytest.skip("an NVIDIA driver is installed here")
    script = tmp_path / "denoise.vpy"
    script.write_text(SCRIPT.replace("radius=1)", "radius=1, device='cuda')"))
    done = subprocess.run([vspipe, "--info", str(script)], capture_output=True, text=True)
    assert done.returncode != 0
    # vspipe shows the error, then its traceback ending in it again: nothing comes before.
    first, error = done.stderr.splitlines()[:2]
    assert first == "Script evaluation failed:", done.stderr
    assert error.startswith("Python exception: avdenoise.Denoise: device='cuda' cannot run")
    assert error.count("no NVIDIA driver found (libcuda.so.1") == 1, error


def test_autoloading_the_plugin_imports_no_numpy():
    """VapourSynth loads the plugin in every process it starts; that must stay cheap."""
    if not plugin_installed():
        pytest.skip("the plugin is not installed where VapourSynth autoloads (editable install?)")
    probe = (
        "import sys, vapoursynth as vs; "
        "assert any(p.namespace == 'avdenoise' for p in vs.core.plugins()); "
        "print('numpy' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
