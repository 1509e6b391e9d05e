"""Every command-line script in scripts/ and scripts/bench/ runs: ``--help`` prints its usage
and exits 0; every name a ``.vpy`` script imports exists.

No GPU, rival plugin or input file is needed for that: a script imports what only its work
needs (CuPy, a rival's namespace) once its arguments are parsed.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
#: The command-line scripts of scripts/ and scripts/bench/, as paths below scripts/; ``_name.py``
#: modules are their shared parts.
COMMANDS = sorted(
    str(p.relative_to(SCRIPTS))
    for folder in (SCRIPTS, SCRIPTS / "bench")
    for p in folder.glob("*.py")
    if not p.name.startswith("_")
)
VPY = sorted(str(p.relative_to(SCRIPTS)) for p in SCRIPTS.glob("*.vpy") if p.is_file())
VPY += sorted(str(p.relative_to(SCRIPTS)) for p in SCRIPTS.glob("bench/*.vpy"))


def test_every_script_is_listed() -> None:
    assert {"bench/bench_nlm.py", "gen_readme.py", "bench/gpu_check.py", "bench/run.py"} <= set(
        COMMANDS
    )
    assert {"sample.vpy", "bench/bench_fleet.vpy"} <= set(VPY)


@pytest.mark.parametrize("name", COMMANDS)
def test_help(name: str) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / name), "--help"],
        capture_output=True,
        text=True,
        cwd=SCRIPTS.parent,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: {Path(name).name}"), done.stdout


@pytest.mark.parametrize("name", VPY)
def test_vpy_imports_exist(name: str) -> None:
    tree = ast.parse((SCRIPTS / name).read_text())
    imports = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    for node in imports:
        module = importlib.import_module(node.module)
        for alias in node.names:
            assert hasattr(module, alias.name), f"{name}: {node.module} has no {alias.name}"
