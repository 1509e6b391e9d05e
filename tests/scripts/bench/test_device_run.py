"""scripts/bench/device_run.sh names no machine: its set-up, interpreter, output folder, GPUs
and workers come from the environment, it runs from any folder, and every script it calls
exists. A fake interpreter records the calls; nothing is installed or measured."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "bench" / "device_run.sh"
EVERY_STEP = (
    "tests doctor bench bm3d quality bm3dcache ab benchfleet headline startab fleet floor gpuchain"
)
#: A stand-in for python: one line a call, its folder then its arguments.
FAKE_PYTHON = """#!/bin/sh
{ printf '%s' "$PWD"; for a in "$@"; do printf ' %s' "$a"; done; echo; } >> "$CALLS"
"""


@pytest.fixture
def fake_python(tmp_path):
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    return python


def device_run(tmp_path: Path, python: Path, *steps: str, **env: str):
    """Run device_run.sh from `tmp_path` with `python`; (the completed process, its calls)."""
    calls = tmp_path / "calls.log"
    calls.unlink(missing_ok=True)
    environ = {**os.environ, "PYTHON": str(python), "CALLS": str(calls), **env}
    done = subprocess.run(
        ["bash", str(SCRIPT), *steps], cwd=tmp_path, env=environ, capture_output=True, text=True
    )
    lines = calls.read_text().splitlines() if calls.exists() else []
    return done, [line.split(" ", 1) for line in lines]


def test_every_step_calls_scripts_that_exist_from_the_checkout(tmp_path, fake_python):
    done, calls = device_run(
        tmp_path, fake_python, *EVERY_STEP.split(), DEVICE_SETUP="", OUT="out", FLEET_REPEAT="1"
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out").is_dir()  # $OUT is the caller's, the steps run from the checkout
    assert {folder for folder, _ in calls} == {str(ROOT)}
    scripts = [args.split()[0] for _, args in calls if args.split()[0].endswith(".py")]
    assert scripts, calls
    for script in scripts:
        assert (ROOT / script).is_file(), script
    assert {Path(s).name for s in scripts} >= {
        "bench_nlm.py", "bench_bm3d.py", "bm3d_quality.py", "gpu_bm3d_check.py",
        "bench_fleet.py", "fleet_phases.py", "fleet.py", "gpu_chain_bench.py",
    }  # fmt: skip
    fleet_vpy = [args for _, args in calls if args.split()[0] == "scripts/bench/fleet.py"]
    assert fleet_vpy and all("scripts/bench/fleet_nlm.vpy" in args for args in fleet_vpy)
    assert (ROOT / "scripts" / "bench" / "fleet_nlm.vpy").is_file()


def test_gpus_workers_and_the_warm_cache_come_from_the_environment(tmp_path, fake_python):
    cache = tmp_path / "cache"
    env = dict(DEVICE_SETUP="", OUT=str(tmp_path / "o"), FLEET_GPUS="4", FLEET_WORKERS="3")
    done, calls = device_run(tmp_path, fake_python, "benchfleet", "headline", **env)
    assert done.returncode == 0, done.stderr
    fleets = [args for _, args in calls if "bench_fleet.py" in args]
    assert len(fleets) == 1 + 3 * 2  # benchfleet, then 3 parts x FLEET_REPEAT's default 2
    assert all("--gpus 4" in args and "--workers 3" in args for args in fleets)
    assert "--gpus" not in " ".join(a for _, a in calls if "bench_fleet.py" not in a)
    done, calls = device_run(tmp_path, fake_python, "floor", **env, WARM_CACHE=str(cache))
    assert done.returncode == 0, done.stderr
    assert [a for _, a in calls if "--workers 3 --frames 0:144" in a]


def test_the_set_up_script_and_its_rivals_come_from_the_environment(tmp_path, fake_python):
    setup = tmp_path / "setup.sh"
    setup.write_text('echo "set up with $1" > "$CALLS.setup"\n')
    env = dict(DEVICE_SETUP=str(setup), RIVALS="/wheels", OUT=str(tmp_path / "o"))
    done, _ = device_run(tmp_path, fake_python, "doctor", **env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "calls.log.setup").read_text() == "set up with /wheels\n"
    done, calls = device_run(tmp_path, fake_python, "doctor", **{**env, "DEVICE_SETUP": "/none"})
    assert done.returncode == 1
    assert "install failed: /none" in done.stderr
    assert calls == []


def test_an_unknown_step_stops_before_anything_runs(tmp_path, fake_python):
    done, calls = device_run(tmp_path, fake_python, "bench", "bnech", DEVICE_SETUP="")
    assert done.returncode == 2
    assert "unknown step bnech" in done.stderr
    assert calls == []


def test_help_lists_the_steps_and_the_settings(tmp_path, fake_python):
    done, calls = device_run(tmp_path, fake_python, "--help")
    assert done.returncode == 0
    for word in (*EVERY_STEP.split(), "DEVICE_SETUP", "FLEET_GPUS", "WARM_CACHE", "PYTHON"):
        assert word in done.stdout
    assert not done.stdout.startswith("#") and calls == []
