"""Every pip command the package advises installs as written: it names the checkout (``.``,
``.[extra]`` with an extra of pyproject.toml) or packages on the index with pyproject.toml's
floors, never ``avdenoise-vs``, which is not on the index."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from avdenoise_vs import _install
from avdenoise_vs._backends import select as _backends
from avdenoise_vs._cli import doctor

from .cli.test_doctor import _report

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
#: The extras each index package offers, where advice may name one (cupy-cuda*x's METADATA:
#: Provides-Extra: all, test, ctk).
INDEX_EXTRAS = {"cupy-cuda12x": {"ctk"}, "cupy-cuda13x": {"ctk"}}
#: "pip install", its options, then its specs: quoted, or the checkout as a bare ".".
COMMAND = re.compile(r"pip install((?: --[\w-]+)*)((?: (?:'[^']*'|\"[^\"]*\"|\.(?=[\s,)]|$)))*)")


def _declared() -> dict[str, Requirement]:
    """pyproject.toml's requirements, dependencies and extras, by package name."""
    lines = PYPROJECT["dependencies"] + sum(PYPROJECT["optional-dependencies"].values(), [])
    return {(r := Requirement(line)).name: r for line in lines}


def _specs(advice: str) -> list[str]:
    """The specs of every pip install command in `advice`; fails on a command without one."""
    specs = []
    for match in COMMAND.finditer(advice):
        found = re.findall(r"'([^']*)'|\"([^\"]*)\"|(\.)", match.group(2))
        assert found, f"a pip install without a quoted spec or '.': {advice!r}"
        specs += ["".join(groups) for groups in found]
    return specs


def _check_spec(spec: str) -> None:
    extras = PYPROJECT["optional-dependencies"]
    if spec.startswith("."):
        assert re.fullmatch(r"\.(\[\w+\])?", spec), spec
        assert spec == "." or spec[2:-1] in extras, f"{spec}: no such extra in pyproject.toml"
        return
    requirement = Requirement(spec)
    declared = _declared()
    assert requirement.name != PYPROJECT["name"], f"{spec}: avdenoise-vs is not on the index"
    assert requirement.name in declared, f"{spec}: not a requirement of pyproject.toml"
    assert requirement.extras <= INDEX_EXTRAS.get(requirement.name, set()), spec
    assert requirement.specifier == declared[requirement.name].specifier, spec


def _doctor_reports() -> list[dict]:
    """Reports that reach every fix of the doctor that names a pip command."""
    good = _report()
    cupy, floor = good["cupy"], PYPROJECT["dependencies"]
    filelock = str(next(Requirement(r) for r in floor if r.startswith("filelock")).specifier)
    changes = [
        {"cupy": {"installed": False}},
        {"cupy": {"installed": False}, "driver": {"library": True, "cuda": "12.4"}},
        {"cupy": {"installed": False}, "driver": {"library": False}, "gpus": []},
        {"cupy": cupy | {"packages": ["cupy-cuda12x 14.1.0", "cupy-cuda13x 14.1.0"]}},
        {"cupy": cupy | {"import_error": "ImportError: libcudart.so.13"}},
        {"cupy": cupy | {"driver_cuda": "12.8"}, "driver": {"library": True, "cuda": "12.8"}},
        {"cupy": cupy | {"nvrtc_error": "OSError: libnvrtc.so.13"}},
        {"cupy": cupy | {"nvrtc_error": "OSError", "packages": ["cupy-cuda12x 14.1.0"]}},
        {"vapoursynth": {"installed": False, "error": "No module named 'vapoursynth'"}},
        {"vapoursynth": {"installed": True, "version": "R81.0", "editable": True}},
        {"vapoursynth": {"installed": True, "version": "R81.0"}},
        {"filelock": {"version": "3.20.0", "floor": filelock.lstrip(">="), "ok": False}},
    ]
    return [_report(**change) for change in changes]


def _doctor_fixes() -> list[str]:
    return [p["fix"] for report in _doctor_reports() for p in doctor.find_problems(report)]


def test_the_cuda_extras_are_the_cupy_the_advice_names() -> None:
    extras = PYPROJECT["optional-dependencies"]
    assert {name: extras[name] for name in _install.CUPY} == {
        name: [spec] for name, spec in _install.CUPY.items()
    }
    for spec in _install.CUPY.values():
        assert Requirement(spec).extras == {"ctk"}  # NVRTC comes with it
    assert _install.VAPOURSYNTH in PYPROJECT["dependencies"]


def test_every_doctor_fix_installs_as_written() -> None:
    fixes = [fix for fix in _doctor_fixes() if "pip install" in fix]
    specs = [spec for fix in fixes for spec in _specs(fix)]
    assert {"cupy-cuda13x[ctk]>=14.1", "cupy-cuda12x[ctk]>=14.1", "."} <= set(specs)
    assert any(spec.startswith(("vapoursynth", "filelock")) for spec in specs)
    for spec in specs:
        _check_spec(spec)


def test_the_cpu_fallback_warning_installs_as_written(vs_log, monkeypatch) -> None:
    monkeypatch.setattr(_backends, "_fallback_told", False)
    _backends._tell_fallback("Denoise", ["cuda: CuPy cannot be imported (No module named 'cupy')"])
    (notice,) = [message for message in vs_log if message.startswith("avdenoise.")]
    specs = _specs(notice)
    assert specs == [_install.CUPY["cuda13"], _install.CUPY["cuda12"]]
    for spec in specs:
        _check_spec(spec)


@pytest.mark.parametrize("bad", ["pip install 'avdenoise-vs[cuda13]'", "pip install cupy-cuda13x"])
def test_the_check_rejects_what_the_index_cannot_install(bad: str) -> None:
    with pytest.raises(AssertionError):
        for spec in _specs(bad):
            _check_spec(spec)


def test_no_source_file_names_the_package_as_an_index_spec() -> None:
    for path in sorted((ROOT / "avdenoise_vs").rglob("*.py")):
        text = path.read_text()
        assert "avdenoise-vs[" not in text, path
        assert not re.search(r"pip install[^\n]*avdenoise-vs", text), path
