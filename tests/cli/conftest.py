"""Shared fixtures of the command-line tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CLI_TIMEOUT_S = 120
"""Longest a ``python -m avdenoise_vs`` run may take (the doctor starts two interpreters and
a vspipe, each autoloading every VapourSynth plugin, on a 2-core CI machine)."""


@pytest.fixture
def run_cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Run ``python -m avdenoise_vs ARGS`` in a fresh interpreter; return the finished process.

    CuPy's cache goes to a temporary folder, so that nothing reads or writes ``~/.cupy``.
    With ``text=False`` its output comes back as bytes, undecoded.
    """
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path / "cupy-cache"))

    def run(*args: str, cwd: Path | None = None, text: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "avdenoise_vs", *args],
            capture_output=True,
            text=text,
            timeout=CLI_TIMEOUT_S,
            cwd=cwd,
            check=False,
        )

    return run
