"""The doctor's probes catch what they expect and say why they fell back (CPU, fake modules)."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import logging
import subprocess
import sys
import types
from pathlib import Path

import pytest

from avdenoise_vs._cli import _gpu, _python, doctor
from avdenoise_vs._plugin import devload as _devload

__all__: list[str] = []


def test_a_driver_library_without_the_call_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_gpu.ctypes, "CDLL", lambda name: types.SimpleNamespace())
    info = _gpu.probe_driver()
    assert info["library"] is False
    assert info["error"].startswith("AttributeError: ")


class _Distribution:
    def __init__(self, name: str, version: str = "1.0", broken: Exception | None = None):
        self._name, self.version, self._broken = name, version, broken

    @property
    def metadata(self):
        if self._broken is not None:
            raise self._broken
        return {"Name": self._name}


def test_one_broken_distribution_hides_no_other(monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    dists = [
        _Distribution("x", broken=UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid")),
        _Distribution("cupy-cuda13x", "14.1.0"),
        _Distribution("y", broken=PermissionError("METADATA")),
    ]
    monkeypatch.setattr(importlib.metadata, "distributions", lambda: iter(dists))
    with caplog.at_level(logging.DEBUG, logger=_gpu.__name__):
        assert _gpu.cupy_packages() == ["cupy-cuda13x 14.1.0"]
    assert "UnicodeDecodeError" in caplog.text and "PermissionError: METADATA" in caplog.text


def test_a_cupy_without_a_version_call_says_why(monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    runtime = types.SimpleNamespace(getDeviceCount=lambda: 0, driverGetVersion=lambda: 13000)
    cupy = types.ModuleType("cupy")
    cupy.__version__ = "14.1.0"
    cupy.cuda = types.SimpleNamespace(
        runtime=runtime, nvrtc=types.SimpleNamespace(getVersion=lambda: (13, 0))
    )
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    with caplog.at_level(logging.DEBUG, logger=_gpu.__name__):
        info = _gpu.probe_cupy()
    assert (info["runtime"], info["driver_cuda"], info["nvrtc"]) == (None, "13.0", "13.0")
    assert "CuPy's runtimeGetVersion failed: AttributeError" in caplog.text
    # The fake is no package: cupy.cuda.compiler cannot be imported, and that is said too.
    assert "cupy.cuda.compiler cannot be imported" in caplog.text


def test_a_report_that_cannot_be_shown_as_text_comes_as_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], caplog
) -> None:
    report = {"ok": True, "problems": [], "driver": {"odd": object()}}
    monkeypatch.setattr(doctor, "collect", lambda: report)

    def render(report):
        raise KeyError("version")

    monkeypatch.setattr(doctor, "render", render)
    with caplog.at_level(logging.WARNING, logger=doctor.__name__):
        assert doctor.run(argparse.Namespace(json=False)) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
    assert "cannot be shown as text (KeyError: 'version'); here it is as JSON" in caplog.text


def test_bad_toml_is_the_config_files_message(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    vapoursynth = pytest.importorskip("vapoursynth")
    if sys.platform == "win32" or not hasattr(vapoursynth, "get_vsscript"):
        pytest.skip("no configuration file on Windows, nor before VapourSynth's get_vsscript")
    (tmp_path / "vapoursynth").mkdir()
    (tmp_path / "vapoursynth" / "vapoursynth.toml").write_text("not = [toml")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    info = _python._config_file({})
    assert info["message"].startswith("TOMLDecodeError: ")


def test_an_unreadable_plugin_folder_leaves_editable_unknown(
    monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    def unreadable() -> bool:
        raise PermissionError(13, "Permission denied", str(Path("/plugins")))

    def no_subprocess(*args, **kwargs):
        raise subprocess.SubprocessError("not in this test")

    monkeypatch.setattr(_devload, "plugin_installed", unreadable)
    monkeypatch.setattr(_devload, "_DEV_LIBRARY", Path(__file__))  # a file that is there
    monkeypatch.setattr(_python.subprocess, "run", no_subprocess)
    with caplog.at_level(logging.DEBUG, logger=_python.__name__):
        info = _python.probe_vapoursynth()
    assert info["editable"] is None
    assert "cannot tell an editable install: PermissionError" in caplog.text
