"""``python -m avdenoise_vs doctor`` on this CPU machine, on a fake CuPy, and its fixes."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import types
from pathlib import Path

import pytest

from avdenoise_vs._cli import _gpu, doctor, main
from avdenoise_vs._warmup import files as _warmup_files

__all__: list[str] = []

KEY = 0x0123456789ABCDEF0123456789ABCDEF
GIB = 2**30


def _no_cupy() -> None:
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed here; these tests are about a machine without it")


def test_without_cupy_it_names_the_extra_and_exits_1(run_cli) -> None:
    _no_cupy()
    done = run_cli("doctor")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "CuPy is not installed" in done.stdout
    assert "pip install 'cupy-cuda13x[ctk]>=14.1'" in done.stdout
    assert "What to fix" in done.stdout


def test_json_parses_and_lists_the_problems(run_cli) -> None:
    _no_cupy()
    done = run_cli("doctor", "--json")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is False
    assert report["cupy"]["installed"] is False
    fixes = [item["fix"] for item in report["problems"]]
    assert any("cupy-cuda13x[ctk]" in fix for fix in fixes)
    assert report["cache"]["directory"].endswith("cupy-cache")
    assert report["cache"]["origin"] == "CUPY_CACHE_DIR"


def _fake_cupy(
    *, gpus: int = 1, nvrtc_fails: bool = False, driver: int = 13000
) -> types.ModuleType:
    """A module that answers the doctor's questions as CuPy 14 on an H200 would (`driver` 0:
    as CuPy answers where no NVIDIA driver is installed)."""

    def nvrtc_version() -> tuple[int, int]:
        if nvrtc_fails:
            raise OSError("libnvrtc.so.13: cannot open shared object file")
        return (13, 0)

    def device_count() -> int:
        if not driver:
            raise RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient")
        return gpus

    runtime = types.SimpleNamespace(
        getDeviceCount=device_count,
        getDeviceProperties=lambda i: {
            "name": b"NVIDIA H200", "major": 9, "minor": 0, "totalGlobalMem": 140 * GIB,
        },
        driverGetVersion=lambda: driver,
        runtimeGetVersion=lambda: 13000,
    )  # fmt: skip
    cupy = types.ModuleType("cupy")
    cupy.__version__ = "14.1.0"
    cupy.cuda = types.SimpleNamespace(runtime=runtime, nvrtc=types.SimpleNamespace())
    cupy.cuda.nvrtc.getVersion = nvrtc_version
    return cupy


@pytest.fixture
def fake_cupy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Install a fake ``cupy``; the cache directory is a temporary one holding one stamp."""
    cache = tmp_path / "kernel_cache"
    cache.mkdir()
    monkeypatch.setenv("CUPY_CACHE_DIR", str(cache))
    monkeypatch.delenv("CUPY_CACHE_IN_MEMORY", raising=False)
    detail = (
        "env cupy=14.1.0;nvrtc=13.0;sm=90",
        "spec NlmSpec(radius=1, distance=<Distance.LUMA: 'luma'>)",
    )
    assert _warmup_files.write_stamp(cache / f"warm-{KEY:032x}.stamp", KEY, detail)
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy())
    return cache


def test_a_fake_cupy_gives_the_gpu_lines(fake_cupy: Path) -> None:
    report = doctor.collect()
    text = doctor.render(report)
    assert "GPU 0: NVIDIA H200, compute capability 9.0, 140.0 GiB" in text
    assert "CuPy 14.1.0" in text and "CUDA runtime 13.0" in text
    assert "NVRTC 13.0" in text
    assert "CUDA 13.0" in text  # the driver's, from CuPy when libcuda is not here
    assert f"cache directory: {fake_cupy}" in text
    assert "warm-up stamps: 1, newest" in text
    assert f"{KEY:032x}" in text
    assert "compiled for cupy=14.1.0;nvrtc=13.0;sm=90" in text
    assert "NlmSpec(radius=1, distance=LUMA)" in text
    problems = " ".join(p["problem"] for p in report["problems"])
    for word in ("CuPy", "GPU", "driver", "NVRTC"):
        assert word not in problems


def test_the_doctor_lists_the_newest_stamps_and_points_to_cache_list(fake_cupy: Path) -> None:
    keys = [KEY + offset for offset in range(1, 9)]
    for age, key in enumerate(keys):
        path = fake_cupy / f"warm-{key:032x}.stamp"
        assert _warmup_files.write_stamp(path, key, ("env cupy=14.1.0;nvrtc=13.0;sm=90",))
        os.utime(path, (2_000_000_000 - age, 2_000_000_000 - age))  # keys[0] is the newest
    text = doctor.render(doctor.collect())
    assert "warm-up stamps: 9, newest" in text
    shown = [key for key in keys if f"{key:032x}" in text]
    assert shown == keys[: doctor._STAMPS_SHOWN]
    assert f"... and {9 - doctor._STAMPS_SHOWN} older: python -m avdenoise_vs cache list" in text


def test_a_fake_cupy_without_nvrtc_asks_for_the_ctk_wheels(
    fake_cupy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(nvrtc_fails=True))
    report = doctor.collect()
    assert "NVRTC: cannot be loaded" in doctor.render(report)
    (nvrtc,) = [p for p in report["problems"] if "NVRTC" in p["problem"]]
    assert "cupy-cuda13x[ctk]" in nvrtc["fix"]


def test_cupy_without_a_driver_says_no_driver_was_found(
    fake_cupy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(driver=0))
    missing = {"version": None, "cuda": None, "library": False, "error": "libcuda.so.1: no file"}
    monkeypatch.setattr(_gpu, "probe_driver", lambda: missing)
    monkeypatch.setattr(_gpu, "probe_nvidia_smi", lambda: {"found": False, "gpus": []})
    report = doctor.collect()
    assert report["cupy"]["driver_cuda"] is None
    text = doctor.render(report)
    assert "CUDA 0.0" not in text
    assert "driver: not found (libcuda.so.1: no file)" in text
    problems = [p["problem"] for p in report["problems"]]
    assert problems[0].startswith("no NVIDIA driver found")
    assert not any("update" in p["fix"] for p in report["problems"]), report["problems"]


def test_a_fake_cupy_without_gpus_says_so(fake_cupy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(gpus=0))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    report = doctor.collect()
    (gpu,) = [p for p in report["problems"] if "sees no GPU" in p["problem"]]
    assert "CUDA_VISIBLE_DEVICES=''" in gpu["fix"]


def test_a_probe_that_raises_does_not_stop_the_doctor(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken() -> dict:
        raise RuntimeError("probe exploded")

    monkeypatch.setattr(_gpu, "probe_mps", broken)
    monkeypatch.setattr(_gpu, "probe_driver", broken)
    code = main(["doctor"])
    out = capsys.readouterr().out
    assert "CUDA MPS: unknown (RuntimeError: probe exploded)" in out
    assert "driver: not found (RuntimeError: probe exploded)" in out
    assert code in (0, 1)


def test_exit_status_follows_the_problems(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    report = {"problems": [], "ok": True}
    monkeypatch.setattr(doctor, "collect", lambda: report)
    assert main(["doctor", "--json"]) == 0
    report.update(problems=[{"problem": "p", "fix": "f"}], ok=False)
    assert main(["doctor", "--json"]) == 1
    first, second = capsys.readouterr().out.strip().split("\n}\n")
    assert json.loads(first + "}")["ok"] is True
    assert json.loads(second)["problems"] == [{"problem": "p", "fix": "f"}]


def _report(**sections: dict) -> dict:
    """A doctor report of a machine with nothing wrong, with `sections` replacing parts."""
    base = {
        "driver": {"library": True, "version": "580.95.05", "cuda": "13.0"},
        "cupy": {"installed": True, "version": "14.1.0", "packages": ["cupy-cuda13x 14.1.0"],
                 "nvrtc": "13.0", "driver_cuda": "13.0", "gpus": [{"index": 0}]},
        "gpus": [{"index": 0}],
        "cache": {"directory": "/c", "writable": True},
        "vapoursynth": {"installed": True, "version": "R81.0", "registered": True},
        "vsscript": {"configured": True},
        "filelock": {"version": "3.30.0", "floor": "3.30.0", "ok": True},
    }  # fmt: skip
    return base | sections


def _fixes(report: dict) -> list[str]:
    return [f"{p['problem']} -> {p['fix']}" for p in doctor.find_problems(report)]


def test_nothing_to_fix_on_a_good_machine() -> None:
    assert _fixes(_report()) == []


def test_the_extra_matches_the_drivers_cuda_version() -> None:
    no_cupy = {"installed": False, "packages": []}
    cuda12 = _report(cupy=no_cupy, driver={"library": True, "cuda": "12.4"})
    (fix,) = _fixes(cuda12)
    assert "pip install 'cupy-cuda12x[ctk]>=14.1' (the driver supports CUDA 12.4)" in fix
    (fix,) = _fixes(_report(cupy=no_cupy))
    assert "cupy-cuda13x[ctk]>=14.1'" in fix


def test_no_driver_and_no_cupy_are_two_problems() -> None:
    report = _report(cupy={"installed": False}, driver={"library": False}, gpus=[])
    fixes = _fixes(report)
    assert len(fixes) == 2
    assert "no NVIDIA driver found" in fixes[0]
    assert "'cupy-cuda13x[ctk]>=14.1' for a CUDA 13 driver, or " in fixes[1]
    assert "'cupy-cuda12x[ctk]>=14.1' for CUDA 12" in fixes[1]


def test_cupy_built_for_a_newer_cuda_than_the_driver() -> None:
    report = _report(driver={"library": True, "cuda": "12.8"})
    report["cupy"] = report["cupy"] | {"driver_cuda": "12.8"}
    (fix,) = _fixes(report)
    assert "cupy-cuda13x is built for CUDA 13" in fix and "cupy-cuda12x[ctk]" in fix


def test_an_old_driver_is_a_problem() -> None:
    report = _report(cupy={"installed": False}, driver={"library": True, "cuda": "11.8"})
    fixes = _fixes(report)
    assert "update the NVIDIA driver" in fixes[0]


def test_cache_vapoursynth_and_filelock_problems() -> None:
    report = _report(
        cache={"directory": "/root/.cupy", "writable": False, "error": "/root is not writable"},
        vsscript={"configured": False, "message": "Failed to initialize VSScript"},
        filelock={"version": "3.20.0", "floor": "3.30.0", "ok": False},
    )
    fixes = _fixes(report)
    assert len(fixes) == 3
    assert "CUPY_CACHE_DIR" in fixes[0]
    assert fixes[1].endswith("-> vapoursynth config")
    assert fixes[2].endswith("-> pip install 'filelock>=3.30.0'")


def test_an_empty_cupy_cache_dir_is_the_problem_not_cupy(monkeypatch: pytest.MonkeyPatch) -> None:
    """CuPy 14 fails at import with it; reinstalling CuPy would not help."""
    from avdenoise_vs._warmup.cache import EMPTY_ORIGIN

    monkeypatch.setenv("CUPY_CACHE_DIR", "")
    error = "FileNotFoundError: [Errno 2] No such file or directory: ''"
    cupy = {"installed": True, "packages": ["cupy-cuda13x 14.2.0"], "import_error": error}
    report = _report(cupy=cupy, cache={"directory": None, "origin": EMPTY_ORIGIN})
    (fix,) = _fixes(report)
    assert "CUPY_CACHE_DIR is set but empty, which names no folder" in fix
    assert fix.endswith("-> unset CUPY_CACHE_DIR (CuPy then uses ~/.cupy/kernel_cache), or set "
                        "it to a folder")  # fmt: skip


def test_an_editable_install_without_autoload() -> None:
    report = _report(vapoursynth={"installed": True, "version": "R81.0", "registered": False,
                                  "editable": True})  # fmt: skip
    (fix,) = _fixes(report)
    assert "pip install . (not -e)" in fix


def test_cuda_version_numbers() -> None:
    assert _gpu.cuda_version(12040) == "12.4"
    assert _gpu.cuda_version(13000) == "13.0"


def test_mps_is_running_when_its_control_socket_is_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path))
    assert _gpu.probe_mps()["running"] is False
    (tmp_path / "control").touch()
    mps = _gpu.probe_mps()
    assert mps["running"] is True and mps["pipe_directory"] == str(tmp_path)
    assert "running (control socket in" in doctor._mps_words(mps)


def test_nvidia_smi_lists_the_gpus_when_cupy_cannot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho '0, NVIDIA H200, 9.0, 143771, 580.95.05'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    info = _gpu.probe_nvidia_smi()
    assert info["driver_version"] == "580.95.05"
    assert info["gpus"] == [{"index": 0, "name": "NVIDIA H200", "compute_capability": "9.0",
                             "memory_bytes": 143771 * 2**20}]  # fmt: skip
