"""Set-up scripts: the demo names its backend; _venv.sh installs only when the source changed;
demo.sh hands its arguments to demo.py."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from avdenoise_vs._plugin.devload import plugin_installed

ROOT = Path(__file__).resolve().parents[2]

#: A stand-in for .venv/bin/python and .venv/bin/vapoursynth: each records its arguments.
FAKE_TOOL = '#!/bin/sh\necho "$(basename "$0") $*" >> "$(dirname "$0")/calls.log"\n'


def test_demo_names_the_backend(tmp_path):
    if not plugin_installed():
        pytest.skip("the plugin is not installed where VapourSynth autoloads (editable install?)")
    vspipe = shutil.which("vspipe") or str(Path(sys.executable).with_name("vspipe"))
    if not Path(vspipe).exists():
        pytest.skip("vspipe not found")
    command = [sys.executable, str(ROOT / "scripts" / "demo.py"), "--vspipe", vspipe]
    command += ["--length", "2", "--device", "cpu", "--out", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "backend: cpu (device=cpu)\n" in done.stdout
    assert "fps (vspipe, cpu)" in done.stdout
    assert (tmp_path / "sample-denoised.y4m").stat().st_size > 0


def test_demo_scores_only_clips_of_the_same_length():
    spec = importlib.util.spec_from_file_location("demo", ROOT / "scripts" / "demo.py")
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    clean = [[np.full((4, 4), 100, np.uint8)] for _ in range(3)]
    noisy = [[np.full((4, 4), 110, np.uint8)] for _ in range(3)]
    assert demo.mean_psnr(noisy, clean) == pytest.approx(20 * np.log10(255 / 10))
    with pytest.raises(ValueError):
        demo.mean_psnr(noisy[:2], clean)


@pytest.fixture
def fake_checkout(tmp_path):
    """A copy of _venv.sh beside a tiny source tree, with a fake .venv that logs its calls."""
    (tmp_path / "scripts").mkdir()
    for script in ("_venv.sh", "demo.sh"):
        shutil.copy(ROOT / "scripts" / script, tmp_path / "scripts")
    (tmp_path / "avdenoise_vs").mkdir()
    (tmp_path / "avdenoise_vs" / "module.py").write_text("x = 1\n")
    for name in ("setup.py", "pyproject.toml", "README.md"):
        (tmp_path / name).write_text(name)
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for tool in ("python", "vapoursynth"):
        (bin_dir / tool).write_text(FAKE_TOOL)
        (bin_dir / tool).chmod(0o755)
    return tmp_path


def run_calls(checkout: Path, script: str) -> list[str]:
    """Run a bash script in the fake checkout; return the calls its fake tools logged."""
    log = checkout / ".venv" / "bin" / "calls.log"
    log.unlink(missing_ok=True)
    env = {**os.environ, "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    done = subprocess.run(["bash", "-c", script], cwd=checkout, env=env, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
    calls = log.read_text().splitlines()
    assert "vapoursynth config" in calls  # always: it is cheap and once per Python
    return calls


def project_installs(calls: list[str]) -> list[str]:
    return [c for c in calls if c.startswith("python -m pip install -q .")]


def pip_installs(checkout: Path, extra: str = "") -> list[str]:
    """Source _venv.sh once; return the pip installs of the project it ran."""
    return project_installs(run_calls(checkout, f'venv_extra="{extra}"; source scripts/_venv.sh'))


def test_demo_passes_its_arguments_to_demo_py(fake_checkout):
    calls = run_calls(fake_checkout, "scripts/demo.sh --length 2 --device cpu")
    assert project_installs(calls) == ["python -m pip install -q ."]
    demo = "python scripts/demo.py --vspipe .venv/bin/vspipe --length 2 --device cpu"
    assert calls[-1] == demo
    assert project_installs(run_calls(fake_checkout, "scripts/demo.sh --help")) == []


def test_venv_installs_only_when_the_source_changed(fake_checkout):
    assert pip_installs(fake_checkout, "[test]") == ["python -m pip install -q .[test]"]
    assert pip_installs(fake_checkout, "[test]") == []
    assert pip_installs(fake_checkout) == []  # the plain install is part of [test]
    (fake_checkout / "avdenoise_vs" / "module.py").write_text("x = 2\n")
    assert pip_installs(fake_checkout) == ["python -m pip install -q ."]
    assert pip_installs(fake_checkout) == []
    assert pip_installs(fake_checkout, "[test]") == ["python -m pip install -q .[test]"]
    assert pip_installs(fake_checkout, "[test]") == []


def test_venv_ignores_build_outputs(fake_checkout):
    assert len(pip_installs(fake_checkout)) == 1
    cache = fake_checkout / "avdenoise_vs" / "__pycache__"
    cache.mkdir()
    (cache / "module.cpython-312.pyc").write_bytes(b"\0")
    (fake_checkout / "avdenoise_vs" / "libavdenoise.so").write_bytes(b"\0")
    assert pip_installs(fake_checkout) == []
