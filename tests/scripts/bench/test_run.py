"""scripts/bench/run.py: the benchmarks' one entry point finds every command of its folder and
runs it as if started directly; scripts/bench/README.md has a row for every command."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import run

BENCH = Path(__file__).resolve().parents[3] / "scripts" / "bench"


def run_py(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, str(BENCH / "run.py"), *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, timeout=120)


def test_commands_are_the_folder_s_scripts(tmp_path):
    for name in ("probe.py", "_shared.py", "setup.sh", "worker.vpy", "run.py", "notes.md"):
        (tmp_path / name).write_text('"""A probe."""\n')
    assert list(run.commands(tmp_path)) == ["probe", "setup"]
    found = run.commands()
    assert {"bench_nlm", "bench_fleet", "make_figures", "device_run"} <= set(found)
    assert not {"run", "_bench", "bench_nlm.vpy"} & set(found)


def test_listing_names_every_command_with_its_first_sentence(tmp_path):
    done = run_py(cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: run.py NAME")
    for name in run.commands():
        assert re.search(rf"^  {name} +\S", done.stdout, re.M), name
    assert re.search(r"^  bench_cpu +Speed of the CPU \(NumPy\) backend", done.stdout, re.M)
    # A first sentence over two lines of a docstring is one line of the listing.
    assert re.search(r"^  strength_table +.*the tables behind its defaults\.$", done.stdout, re.M)


def test_a_command_runs_as_if_started_directly(tmp_path):
    for name in ("bench_cpu", "bench_cpu.py"):
        done = run_py(name, "--help", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("usage: bench_cpu.py"), done.stdout


def test_a_shell_command_runs_with_bash_and_its_exit_status_comes_back(tmp_path):
    done = run_py("device_run", "nosuchstep", cwd=tmp_path)
    assert done.returncode == 2
    assert "unknown step nosuchstep" in done.stderr


def test_an_unknown_name_is_refused_with_the_names_there_are(tmp_path):
    done = run_py("bench_nml", cwd=tmp_path)
    assert done.returncode == 2
    assert "no command 'bench_nml'" in done.stderr
    assert "bench_nlm" in done.stderr
    assert run_py("bench_nlm.vpy", cwd=tmp_path).returncode == 2  # a vspipe script, no command


def test_the_readme_has_a_row_for_every_command():
    readme = (BENCH / "README.md").read_text()
    rows = re.findall(r"^\| `([\w.]+)` \|", readme, re.M)
    commands = [name for name in rows if not name.isupper()]  # the settings' table: OUT, ...
    assert sorted(commands) == sorted(run.commands()), "scripts/bench/README.md's table"
